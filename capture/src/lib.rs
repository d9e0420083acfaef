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
mod at_exit;
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

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use cudarc::cupti::result as cupti;
use cudarc::cupti::sys::{CUpti_CallbackDomain, CUpti_SubscriberHandle};

use control::{say_once, DISCARD, ENABLED, GPU_TIMES, NOOP};
use origin::{now_ns, thread_id};
use record::Call;
use state::{state_for_this_process, STATE};

/// The CUPTI library, kept loaded for the life of the process.
static CUPTI_LIBRARY: OnceLock<Option<libloading::Library>> = OnceLock::new();

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

fn initialize() -> Result<(), String> {
    origin::note_pid();
    load_cupti()?;
    let mut subscriber: CUpti_SubscriberHandle = std::ptr::null_mut();
    // Safety: registers a callback with the signature CUPTI expects; no user data.
    unsafe { cupti::subscribe(&mut subscriber, Some(callback::on_driver_call), std::ptr::null_mut()) }.map_err(|e| {
        format!("cuptiSubscribe failed ({e:?}): another CUPTI client (nsys, ncu, a profiler) may already be attached")
    })?;
    for &id in cbid::ENABLED {
        // Safety: a subscriber handle just returned by CUPTI; ids from cupti_driver_cbid.h.
        let _ = unsafe { cupti::enable_callback(1, subscriber, CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API, id) };
    }
    // Safety: registers a plain extern "C" function with no arguments.
    unsafe { libc::atexit(at_exit::flush_at_exit) };
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
