//! The streamtrace capture library, injected into a CUDA program through `CUDA_INJECTION64_PATH`.
//!
//! The CUDA driver calls [`InitializeInjection`] while it initializes. The library subscribes to CUPTI's
//! driver-API callbacks for the calls that order or touch memory (cbid.rs), turns each into a record of the
//! streamtrace JSON trace format (record.rs) and hands it to a writer thread (writer.rs).
//!
//! Capture must never change what the program does: nothing panics or unwinds across the FFI boundary (every
//! entry point catches), and any setup failure (no CUPTI, another CUPTI client such as nsys or ncu already
//! subscribed) is said once on standard error while the program runs on untouched.

mod activity;
pub mod args;
mod callback;
pub mod cbid;
mod control;
mod fork;
mod functions;
mod origin;
pub mod params;
pub mod record;
pub mod signature;
mod state;
pub mod writer;

use std::cell::Cell;
use rustc_hash::FxHashMap as HashMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use cudarc::cupti::result as cupti;
use cudarc::cupti::sys::{CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain, CUpti_SubscriberHandle};

use control::{disable, say_once, DISCARD, ENABLED, GPU_TIMES, NOOP};
use origin::{current_pid, now_ns, thread_id};
use record::Call;
use state::{drain_into, state_for_this_process, STATE};

/// What capture cost the program: recorded calls, and the time spent in the callback for them (written into
/// the trace at exit, so that every capture says what it cost).
static RECORDED_CALLS: AtomicU64 = AtomicU64::new(0);
static CALLBACK_NS: AtomicU64 = AtomicU64::new(0);
/// The CUPTI library, kept loaded for the life of the process.
static CUPTI_LIBRARY: OnceLock<Option<libloading::Library>> = OnceLock::new();

thread_local! {
    /// Set while this thread runs the callback: driver calls the capture makes itself must not be recorded.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Where libcupti may be: the path the `streamtrace capture` command found, then the usual CUDA locations.
fn cupti_candidates() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(path) = std::env::var_os("STREAMTRACE_CUPTI") {
        paths.push(PathBuf::from(path));
    }
    for root in ["/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64"] {
        for name in ["libcupti.so.13", "libcupti.so.12", "libcupti.so"] {
            paths.push(PathBuf::from(root).join(name));
        }
    }
    paths
}

/// Loads libcupti by path so that cudarc, which looks it up by name, finds the loaded copy.
fn load_cupti() -> Result<(), String> {
    let loaded = CUPTI_LIBRARY.get_or_init(|| {
        for path in cupti_candidates() {
            if path.exists() {
                // Safety: loading CUPTI runs its initializers, which expect to be loaded into a CUDA process.
                if let Ok(lib) = unsafe { libloading::os::unix::Library::open(Some(&path), libc::RTLD_NOW | libc::RTLD_GLOBAL) } {
                    return Some(lib.into());
                }
            }
        }
        None
    });
    // Safety: probing for the library has no side effect beyond loading it.
    if loaded.is_some() || unsafe { cudarc::cupti::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("libcupti not found (set STREAMTRACE_CUPTI to its path)".into())
    }
}

/// The device of the call's context, looked up once per context (under the state lock).
fn device_of(devices: &mut HashMap<u32, Option<u32>>, data: &CUpti_CallbackData) -> Option<u32> {
    *devices.entry(data.contextUid).or_insert_with(|| {
        if data.context.is_null() {
            return None;
        }
        let mut device = 0u32;
        // Safety: the context of the call being traced; out-pointer to a local.
        unsafe { cupti::get_device_id(data.context, &mut device) }.ok().map(|()| device)
    })
}

/// CUPTI's callback for every enabled driver call.
unsafe extern "C" fn on_driver_call(_user: *mut c_void, domain: CUpti_CallbackDomain, cbid: u32, data: *const c_void) {
    if !ENABLED.load(Ordering::Relaxed)
        || NOOP.load(Ordering::Relaxed)
        || data.is_null()
        || domain != CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
    {
        return;
    }
    // CUPTI calls at entry and at exit; each call is recorded at one of them. The other returns here, before
    // the clock, the thread id or the lock.
    // Safety: CUPTI passes driver-API callback data for the driver domain.
    let at_exit = unsafe { (*(data as *const CUpti_CallbackData)).callbackSite } == CUpti_ApiCallbackSite::CUPTI_API_EXIT;
    if at_exit != cbid::recorded_at_exit(cbid) {
        return;
    }
    if IN_CALLBACK.with(|flag| flag.replace(true)) {
        return;
    }
    let outcome = std::panic::catch_unwind(|| {
        // Safety: CUPTI passes driver-API callback data for the driver domain.
        let data = unsafe { &*(data as *const CUpti_CallbackData) };
        let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: data.correlationId };
        let flush = {
            let Ok(mut slot) = STATE.lock() else { return };
            let Some(state) = state_for_this_process(&mut slot) else { return };
            let device = device_of(&mut state.devices, data);
            // Safety: `data` belongs to the call `cbid`.
            unsafe { callback::on_call(state, cbid, data, call, device) };
            // The program is about to wait anyway: write what is pending, so that a process ending in _exit
            // (multiprocessing workers do) loses nothing recorded before its last synchronization.
            cbid::is_synchronization(cbid).then(|| state.writer.handle())
        };
        if let Some(writer) = flush {
            drain_into(&writer);
        }
        RECORDED_CALLS.fetch_add(1, Ordering::Relaxed);
        CALLBACK_NS.fetch_add(now_ns().saturating_sub(call.time_ns), Ordering::Relaxed);
    });
    IN_CALLBACK.with(|flag| flag.set(false));
    if outcome.is_err() {
        disable("an internal error in the capture library");
    }
}

/// Writes out everything recorded, at exit.
extern "C" fn flush_at_exit() {
    if GPU_TIMES.load(Ordering::Relaxed) {
        // Outside the state lock: CUPTI delivers the last buffers through `emit_records`, which takes it.
        let _ = std::panic::catch_unwind(activity::flush);
    }
    let _ = std::panic::catch_unwind(|| {
        let writer = {
            let Ok(mut slot) = STATE.lock() else { return };
            match slot.as_mut() {
                Some(state) if state.pid == current_pid() => {
                    let stats = record::Record::CaptureStats {
                        calls: RECORDED_CALLS.load(Ordering::Relaxed),
                        callback_ns: CALLBACK_NS.load(Ordering::Relaxed),
                    };
                    state.emit(Call { tid: thread_id(), time_ns: now_ns(), correlation: 0 }, stats);
                    state.writer.handle()
                }
                _ => return,
            }
        };
        drain_into(&writer);
    });
}

fn initialize() -> Result<(), String> {
    origin::note_pid();
    load_cupti()?;
    let mut subscriber: CUpti_SubscriberHandle = std::ptr::null_mut();
    // Safety: registers a callback with the signature CUPTI expects; no user data.
    unsafe { cupti::subscribe(&mut subscriber, Some(on_driver_call), std::ptr::null_mut()) }.map_err(|e| {
        format!("cuptiSubscribe failed ({e:?}): another CUPTI client (nsys, ncu, a profiler) may already be attached")
    })?;
    for &id in cbid::ENABLED {
        // Safety: a subscriber handle just returned by CUPTI; ids from cupti_driver_cbid.h.
        let _ = unsafe { cupti::enable_callback(1, subscriber, CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API, id) };
    }
    // Safety: registers a plain extern "C" function with no arguments.
    unsafe { libc::atexit(flush_at_exit) };
    NOOP.store(std::env::var_os("STREAMTRACE_CALLBACK_NOOP").is_some(), Ordering::SeqCst);
    DISCARD.store(std::env::var_os("STREAMTRACE_DISCARD").is_some(), Ordering::SeqCst);
    if std::env::var_os("STREAMTRACE_GPU_TIMES").is_some() {
        match activity::enable() {
            Ok(()) => GPU_TIMES.store(true, Ordering::SeqCst),
            Err(e) => eprintln!("streamtrace: no GPU times ({e}); capture goes on without them"),
        }
    }
    fork::register_handlers();
    ENABLED.store(true, Ordering::SeqCst);
    Ok(())
}

/// Entry point the CUDA driver calls for a library named in `CUDA_INJECTION64_PATH`. Returns 1 (success) in every
/// case: a failed capture must not fail the program's CUDA initialization.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> i32 {
    if std::env::var_os("STREAMTRACE_DISABLE").is_some() {
        return 1;
    }
    match std::panic::catch_unwind(initialize) {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => say_once(&reason),
        Err(_) => say_once("an internal error while setting up CUPTI"),
    }
    1
}

/// Records one framework record (a JSON object such as a PyTorch op's `op_end`, without a `thread` field: the
/// calling thread's is added) in order with the CUDA calls around it. Called by the Python bootstrap through
/// ctypes. Returns 0 when recorded, -1 otherwise.
///
/// # Safety
/// `text` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn streamtrace_framework_record(text: *const u8, len: usize) -> i32 {
    if !ENABLED.load(Ordering::Relaxed) || text.is_null() {
        return -1;
    }
    // Safety: the caller passes `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(text, len) };
    match std::str::from_utf8(bytes) {
        Ok(line) if line.trim_start().starts_with('{') => framework_record(|| record::Record::Raw(line.to_string())),
        _ => -1,
    }
}

/// Marks the start of a framework operation on the calling thread: its CUDA calls follow, then its `op_end`.
/// A separate entry point with no argument, because it is made once per PyTorch op. Returns 0 when recorded.
#[no_mangle]
pub extern "C" fn streamtrace_framework_op_begin() -> i32 {
    if !ENABLED.load(Ordering::Relaxed) {
        return -1;
    }
    framework_record(|| record::Record::OpBegin)
}

fn framework_record(make: impl FnOnce() -> record::Record + std::panic::UnwindSafe) -> i32 {
    let outcome = std::panic::catch_unwind(|| {
        let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: 0 };
        let Ok(mut slot) = STATE.lock() else { return -1 };
        let Some(state) = state_for_this_process(&mut slot) else { return -1 };
        state.emit(call, make());
        0
    });
    outcome.unwrap_or(-1)
}
