//! Host functions in streams (`cuLaunchHostFunc`, `cuStreamAddCallback`; DESIGN.md, host functions): each gets an id,
//! which its `host_func` record carries, and while the host watch runs, its function is wrapped: at the call's
//! entry the capture puts a trampoline of its own and a box with the program's function and data into the
//! call's parameter block. The driver later runs the trampoline on its thread; the trampoline notes which host
//! function runs there (a fault it raises is that function's access, faults.rs), runs the program's function
//! with the program's data, and notes that it finished (hold.rs waits for that before it writes the record).
//! CUPTI passes the parameter block as `const`; that the driver runs what the block holds after the callback is
//! what the GPU probe checks (`benches/gpu_host_watch.sh`): a driver that does not leaves the program's own
//! function to run, unwrapped, and the box unused. Touches the parameter block, this file's counters and the
//! thread-local mark, and keeps which wrapped functions have not finished (hold.rs asks).

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::params::{Handle, LaunchHostFunc, StreamAddCallback};

thread_local! {
    /// The id of the wrapped host function this thread is running (0: none). Read by the signal handler.
    static RUNNING: Cell<u64> = const { Cell::new(0) };
}

/// The id of the host function the calling thread runs, 0 when none (async-signal-safe).
pub fn running() -> u64 {
    RUNNING.with(Cell::get)
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh host-function id.
pub(super) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What a trampoline tells before the program's function runs (host_sync's `host_function_started`, set at
/// setup: host_sync writes through the state, which sits above this file).
static ON_START: std::sync::OnceLock<fn(u64)> = std::sync::OnceLock::new();

/// Sets what a trampoline calls with the host function's id before running it.
pub fn on_start(hook: fn(u64)) {
    let _ = ON_START.set(hook);
}

fn started(id: u64) {
    if let Some(hook) = ON_START.get() {
        hook(id);
    }
}

/// Whether a trampoline ever ran: the driver runs what the parameter block holds after the callback.
static TRAMPOLINE_RAN: AtomicBool = AtomicBool::new(false);

/// Whether a wrapped function was ever run through its trampoline.
pub fn trampolines_run() -> bool {
    TRAMPOLINE_RAN.load(Ordering::Relaxed)
}

/// Wrapped host functions that have not finished (hold.rs holds the batch of each until it has).
static UNFINISHED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
static ANY_WRAPPED: AtomicBool = AtomicBool::new(false);
/// Set once a wrapped function waited its whole time and no trampoline ever ran: the driver does not run what
/// the parameter block holds after the callback, so nothing is wrapped any more.
static WRAPPING_IGNORED: AtomicBool = AtomicBool::new(false);

fn unfinished_set() -> std::sync::MutexGuard<'static, Option<HashSet<u64>>> {
    UNFINISHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether host functions are to be wrapped: not once the driver showed that it ignores the change.
pub fn wrapping_works() -> bool {
    !WRAPPING_IGNORED.load(Ordering::Relaxed)
}

/// The driver ignores the trampoline (hold.rs saw a wrapped function wait its whole time with none run):
/// nothing is wrapped from now on.
pub fn stop_wrapping() {
    WRAPPING_IGNORED.store(true, Ordering::Relaxed);
}

/// Whether any host function was ever wrapped (until then the hold waits for none).
pub fn any_wrapped() -> bool {
    ANY_WRAPPED.load(Ordering::Acquire)
}

/// The wrapped host functions that have not finished yet.
pub fn unfinished() -> HashSet<u64> {
    unfinished_set().clone().unwrap_or_default()
}

pub(super) fn host_func_wrapped(id: u64) {
    unfinished_set().get_or_insert_with(HashSet::default).insert(id);
    ANY_WRAPPED.store(true, Ordering::Release);
}

/// Called by the trampoline on the driver's thread once the program's function returned, and for a run that
/// never comes (its graph launch failed).
pub(super) fn host_func_finished(id: u64) {
    if let Some(set) = unfinished_set().as_mut() {
        set.remove(&id);
    }
}

pub(super) type HostFn = unsafe extern "C" fn(*mut c_void);
type StreamCallback = unsafe extern "C" fn(Handle, i32, *mut c_void);

/// What a trampoline runs: the program's function and data, and the host function's id.
struct Wrapped<F> {
    function: F,
    user_data: *mut c_void,
    id: u64,
}

/// Runs a wrapped `cuLaunchHostFunc` function.
///
/// # Safety
/// `boxed` is a `Wrapped<HostFn>` boxed by [`wrap_launch`], run once (the driver runs a launched host function
/// once).
unsafe extern "C" fn run_host_func(boxed: *mut c_void) {
    // Safety: the box `wrap_launch` leaked for this launch, taken back once.
    let wrapped = unsafe { Box::from_raw(boxed as *mut Wrapped<HostFn>) };
    // Safety: the program's function with the program's data, as it enqueued them.
    run_as(wrapped.id, || unsafe { (wrapped.function)(wrapped.user_data) });
}

/// Runs a trampoline's program function as the host function `id`: known as it while it runs (its faults are
/// its accesses), told started and finished. Id 0 (a run no record announced) runs it unmarked.
pub(super) fn run_as(id: u64, run: impl FnOnce()) {
    if id == 0 {
        return run();
    }
    let outer = RUNNING.with(|running| running.replace(id));
    TRAMPOLINE_RAN.store(true, Ordering::Relaxed);
    started(id);
    super::inflight::host_function_starts(id);
    run();
    super::inflight::host_function_returned(id);
    RUNNING.with(|running| running.set(outer));
    host_func_finished(id);
}

/// Runs a wrapped `cuStreamAddCallback` callback.
///
/// # Safety
/// As [`run_host_func`], for a box made by [`wrap_callback`].
unsafe extern "C" fn run_stream_callback(stream: Handle, status: i32, boxed: *mut c_void) {
    // Safety: the box `wrap_callback` leaked for this call, taken back once.
    let wrapped = unsafe { Box::from_raw(boxed as *mut Wrapped<StreamCallback>) };
    // Safety: the program's callback with the driver's arguments and the program's data.
    run_as(wrapped.id, || unsafe { (wrapped.function)(stream, status, wrapped.user_data) });
}

/// Symbols already looked up, by function address (None: none found): a program enqueues the same few
/// functions again and again.
static SYMBOLS: Mutex<Option<HashMap<usize, Option<Arc<str>>>>> = Mutex::new(None);

/// A host function's name: its symbol, else its address.
pub(super) fn name_of(function: usize) -> Arc<str> {
    symbol_of(function).unwrap_or_else(|| Arc::from(format!("host function at {function:#x}").as_str()))
}

/// A function's symbol, demangled: from the loader's dynamic symbols, else from its module's symbol table (a
/// `static` callback, the usual kind, is only there; the module is read once per function, at most
/// `MAX_MODULE_BYTES` of it).
fn symbol_of(function: usize) -> Option<Arc<str>> {
    let mut symbols = SYMBOLS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let symbols = symbols.get_or_insert_with(HashMap::default);
    symbols.entry(function).or_insert_with(|| dynamic_symbol(function).or_else(|| symbol_table_name(function))).clone()
}

fn dynamic_symbol(function: usize) -> Option<Arc<str>> {
    // Safety: a zeroed Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // Safety: asks the loader about an address; writes `info`.
    let found = unsafe { libc::dladdr(function as *const c_void, &mut info) } != 0;
    // The loader names the nearest exported symbol below the address: only the function's own is its name.
    if !found || info.dli_sname.is_null() || info.dli_saddr as usize != function {
        return None;
    }
    // Safety: the loader's NUL-terminated symbol name.
    let mangled = unsafe { std::ffi::CStr::from_ptr(info.dli_sname) }.to_string_lossy();
    Some(Arc::from(crate::functions::demangle(&mangled).as_str()))
}

/// A `cuStreamAddCallback` function's name, from its symbol. `cudaStreamAddCallback` hands the driver a function
/// of the runtime's own (a static of the statically linked runtime, named after its build, or one inside
/// libcudart.so, whose symbol table is stripped), which runs the program's callback: its name would say nothing
/// to the program's author.
fn callback_name(symbol: Option<Arc<str>>) -> Arc<str> {
    match symbol {
        Some(name) if !name.starts_with("libcudart_static_") => name,
        _ => Arc::from("stream callback"),
    }
}

fn symbol_table_name(function: usize) -> Option<Arc<str>> {
    let module = crate::unwind::module_at(function as u64)?;
    let path = std::path::Path::new(&*module.path);
    if std::fs::metadata(path).ok()?.len() > crate::frame_lines::MAX_MODULE_BYTES {
        return None;
    }
    let binary = streamtrace_symbols::Binary::open(path, module.build_id.as_deref()).ok()?;
    // `symbolize` takes a return address: one past the function's first byte is inside it.
    let file_address = (function as u64).wrapping_sub(module.bias).wrapping_add(1);
    binary.symbolize(file_address).pop()?.function
}

/// Whether `stream` is capturing into a graph: a host function launched there becomes a node that runs at
/// every launch of the graph, and a trampoline's box is good for one run only, so it is not wrapped. Unknown
/// counts as capturing.
pub(super) fn capturing(stream: Handle, per_thread: bool) -> bool {
    // The per-thread default stream's handle, for a `_ptsz` call's null stream.
    const PER_THREAD: usize = 2;
    let handle = if stream.is_null() && per_thread { PER_THREAD as Handle } else { stream };
    let mut status = cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // Safety: asks the driver about the stream the call being traced names; writes a local. The capture's
    // re-entry guard keeps this call unrecorded.
    let asked = unsafe { cudarc::driver::sys::cuStreamIsCapturing(handle as _, &mut status) };
    asked != cudarc::driver::sys::CUresult::CUDA_SUCCESS
        || status != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

/// A new host function's id and name; with `wrap`, its function and data in `block` are swapped for the
/// trampoline's (the hold then waits for it to run before its record is written), unless its stream is
/// capturing. `per_thread`: a `_ptsz` call, whose null stream is the thread's default stream.
///
/// # Safety
/// `block` is the parameter block of the cuLaunchHostFunc call being traced, at its entry.
pub unsafe fn launch(block: *mut LaunchHostFunc, wrap: bool, per_thread: bool) -> (u64, Arc<str>) {
    let id = next_id();
    // Safety: the caller's block, writable during the entry callback.
    let Some(block) = (unsafe { block.as_mut() }) else { return (id, Arc::from("host function")) };
    let Some(function) = block.fn_ else { return (id, Arc::from("host function")) };
    let name = name_of(function as usize);
    if wrap && !capturing(block.hStream, per_thread) {
        wrap_function(block, function, id);
    }
    (id, name)
}

/// Puts the trampoline and its box into a cuLaunchHostFunc block.
fn wrap_function(block: &mut LaunchHostFunc, function: HostFn, id: u64) {
    let boxed = Box::new(Wrapped::<HostFn> { function, user_data: block.userData, id });
    block.userData = Box::into_raw(boxed).cast();
    block.fn_ = Some(run_host_func);
    host_func_wrapped(id);
}

/// As [`launch`], for cuStreamAddCallback (which a capturing stream refuses).
///
/// # Safety
/// `block` is the parameter block of the cuStreamAddCallback call being traced, at its entry.
pub unsafe fn add_callback(block: *mut StreamAddCallback, wrap: bool, per_thread: bool) -> (u64, Arc<str>) {
    let id = next_id();
    // Safety: the caller's block, writable during the entry callback.
    let Some(block) = (unsafe { block.as_mut() }) else { return (id, Arc::from("stream callback")) };
    let Some(function) = block.callback else { return (id, Arc::from("stream callback")) };
    let name = callback_name(symbol_of(function as usize));
    if wrap && !capturing(block.hStream, per_thread) {
        let boxed = Box::new(Wrapped::<StreamCallback> { function, user_data: block.userData, id });
        block.userData = Box::into_raw(boxed).cast();
        block.callback = Some(run_stream_callback);
        host_func_wrapped(id);
    }
    (id, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    static SEEN: AtomicU64 = AtomicU64::new(0);

    /// What `launch` does once it knows the stream is not capturing (there is no driver here to ask).
    unsafe fn wrapped_here(block: &mut LaunchHostFunc) -> (u64, Arc<str>) {
        let id = next_id();
        let function = block.fn_.expect("a function");
        wrap_function(block, function, id);
        (id, name_of(function as usize))
    }

    unsafe extern "C" fn program_function(data: *mut c_void) {
        SEEN.store(data as u64 + 100 * running(), Ordering::SeqCst);
    }

    #[test]
    fn a_wrapped_function_runs_with_its_data_and_is_known_while_it_runs() {
        let mut block =
            LaunchHostFunc { hStream: std::ptr::null_mut(), fn_: Some(program_function), userData: 7 as *mut c_void };
        // Safety: a block of the right shape.
        let (id, name) = unsafe { wrapped_here(&mut block) };
        // The test binary exports no symbols: the name comes from its symbol table.
        assert!(name.contains("program_function"), "{name}");
        assert_ne!(block.userData as u64, 7, "the data is the trampoline's box now");
        // The driver's part: run what the block holds.
        // Safety: the trampoline with its own box, once.
        unsafe { (block.fn_.unwrap())(block.userData) };
        assert_eq!(SEEN.load(Ordering::SeqCst), 7 + 100 * id);
        assert_eq!(running(), 0, "not after it returned");
        assert!(trampolines_run());
    }

    #[test]
    fn a_stream_callback_through_the_runtime_is_named_as_one() {
        let runtime = Arc::from("libcudart_static_955d0e854921d49ef397edbaffbaf12e1afbf272");
        assert_eq!(&*callback_name(Some(runtime)), "stream callback");
        assert_eq!(&*callback_name(None), "stream callback", "no symbol: libcudart.so's stripped thunk");
        assert_eq!(
            &*callback_name(Some(Arc::from("on_done(CUstream_st*, cudaError_enum, void*)"))),
            "on_done(CUstream_st*, cudaError_enum, void*)"
        );
    }

    #[test]
    fn an_unwrapped_function_is_left_alone() {
        let mut block =
            LaunchHostFunc { hStream: std::ptr::null_mut(), fn_: Some(program_function), userData: 9 as *mut c_void };
        // Safety: a block of the right shape.
        let (id, _) = unsafe { launch(&mut block, false, false) };
        assert!(id > 0);
        assert_eq!(block.userData as u64, 9);
    }
}
