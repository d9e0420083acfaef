//! CUPTI takes one subscriber a process, and the capture subscribes when the driver loads it (cuInit). A
//! program that subscribes before that (PyTorch's profiler library, Kineto, when the program profiles before
//! its first CUDA call; a monitoring library) left the whole capture off. Preloaded (host_sync/mod.rs says why
//! the library is), this library's `cuptiSubscribe` and `cuptiSubscribe_v2` stand in front of libcupti's for
//! the program's callers that the dynamic linker binds, and refuse them while the capture holds or will hold
//! the process's one subscription, with CUPTI's own answer to a second subscriber: the program's profiler then
//! gets no callbacks (its activity records are another API), as under nsys. The capture's own subscription goes
//! through libcupti's handle (cupti.rs; the `--exact` backend subscribes to the Sanitizer API, which cannot
//! share a process with a CUPTI subscriber either) and never reaches these.
//!
//! A call is passed on to the program's libcupti, found among the loaded objects by name and asked through its
//! own handle (a libcupti loaded without RTLD_GLOBAL, as Python's extension modules load theirs, is not in the
//! global scope that RTLD_NEXT searches), wherever the capture does not hold CUPTI: a process whose injection
//! is not this library, capture switched off (STREAMTRACE_DISABLE), or its own subscription failed. Nothing
//! here panics into the program; it touches an atomic, the loader's object list and standard error.

use std::ffi::{c_void, CStr, CString};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use streamtrace_format::launch;

/// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (cupti_result.h): what CUPTI answers a second subscriber.
const MULTIPLE_SUBSCRIBERS: i32 = 39;

/// Set when the capture does not subscribe after all (its subscription failed, or setting it up did): the
/// program's calls then pass on.
static CAPTURE_FAILED: AtomicBool = AtomicBool::new(false);

/// The capture did not subscribe (another client came first, or its set-up failed): CUPTI is the program's.
pub fn capture_could_not_subscribe() {
    CAPTURE_FAILED.store(true, Ordering::SeqCst);
}

/// Whether a subscription of the program's is refused now: this process's CUDA injection is this library, not
/// switched off, and its subscription has not failed.
fn refused() -> bool {
    refused_in(injection_is_this_library() && std::env::var_os(launch::ENV_DISABLE).is_none())
}

/// [`refused`], whether the capture is this process's injection said.
fn refused_in(capture_injected: bool) -> bool {
    capture_injected && !CAPTURE_FAILED.load(Ordering::SeqCst)
}

/// Set when the driver initialized this library as the process's CUDA injection (lib.rs): from then on that is
/// known, not worked out.
static INJECTED: AtomicBool = AtomicBool::new(false);

/// The driver initialized this library as the process's CUDA injection.
pub fn injected() {
    INJECTED.store(true, Ordering::SeqCst);
}

/// Whether this library is (or will be, at cuInit) the process's CUDA injection: the driver said so, or
/// CUDA_INJECTION64_PATH names this very object as the loader finds it (a path, a link, or a bare name looked
/// up as the driver's dlopen looks it up); another tool's injection keeps CUPTI for itself.
fn injection_is_this_library() -> bool {
    use std::os::unix::ffi::OsStrExt;
    if INJECTED.load(Ordering::SeqCst) {
        return true;
    }
    let Some(injection) = std::env::var_os("CUDA_INJECTION64_PATH") else { return false };
    let Ok(injection) = CString::new(injection.as_bytes()) else { return false };
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // Safety: asks the loader which object holds this function; `info` is written when it answers nonzero.
    let found = unsafe { libc::dladdr(cuptiSubscribe as *const c_void, info.as_mut_ptr()) };
    // Safety: written by dladdr, which answered.
    let this = unsafe { info.assume_init() }.dli_fname;
    if found == 0 || this.is_null() {
        return false;
    }
    // An injection not loaded yet is not this library, which is; the loader matches a name to a loaded object as
    // the driver's dlopen will.
    match (LoadedObject::named(this), LoadedObject::named(injection.as_ptr())) {
        (Some(ours), Some(named)) => ours.0 == named.0,
        _ => false,
    }
}

/// A handle to an object already loaded, closed when dropped (the object stays, held by whoever loaded it).
struct LoadedObject(*mut c_void);

impl LoadedObject {
    /// The loaded object `name` names as dlopen would find it, without loading anything (RTLD_NOLOAD).
    fn named(name: *const std::ffi::c_char) -> Option<LoadedObject> {
        // Safety: a NUL-terminated name; RTLD_NOLOAD only looks among the loaded objects.
        let handle = unsafe { libc::dlopen(name, libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        (!handle.is_null()).then_some(LoadedObject(handle))
    }
}

impl Drop for LoadedObject {
    fn drop(&mut self) {
        // Safety: a handle dlopen returned, closed once.
        unsafe { libc::dlclose(self.0) };
    }
}

/// Says once that the program's subscription was refused; a failed write is ignored.
fn say_refused() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::SeqCst) {
        let _ = writeln!(
            std::io::stderr(),
            "streamtrace: the program's own CUPTI subscription (a profiler, such as PyTorch's) is refused: the \
             capture's must be the process's only one, so that profiler gets no CUPTI callbacks"
        );
    }
}

/// libcupti's own `symbol`, from the first loaded object named libcupti that has it, or null.
fn libcuptis_own(symbol: &CStr) -> *mut c_void {
    let libcupti = |path: &CStr| {
        let file = path.to_bytes().rsplit(|&b| b == b'/').next().unwrap_or_default();
        file.starts_with(b"libcupti.so")
    };
    crate::next_symbol::in_loaded_objects(symbol, libcupti) as *mut c_void
}

/// The answer to a program's subscription: refused (see the top of the file), or libcupti's own `symbol`
/// called by `pass_on`.
fn subscribe(symbol: &CStr, pass_on: impl FnOnce(*mut c_void) -> i32) -> i32 {
    // Safety: the calling thread's errno, read here and written back before anything is answered or passed on.
    let errno = unsafe { *libc::__errno_location() };
    // Safety: as above.
    let restore_errno = || unsafe { *libc::__errno_location() = errno };
    let refuse = std::panic::catch_unwind(|| {
        let refuse = refused();
        if refuse {
            say_refused();
        }
        refuse
    });
    if refuse.unwrap_or(true) {
        restore_errno();
        return MULTIPLE_SUBSCRIBERS;
    }
    let real = std::panic::catch_unwind(|| libcuptis_own(symbol));
    restore_errno();
    match real {
        Ok(real) if !real.is_null() => pass_on(real),
        _ => MULTIPLE_SUBSCRIBERS,
    }
}

/// `cuptiSubscribe`, in front of libcupti's (see the top of the file).
///
/// # Safety
/// As libcupti's; the arguments are passed on untouched, or not used.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(subscriber: *mut c_void, callback: *mut c_void, userdata: *mut c_void) -> i32 {
    type Subscribe = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> i32;
    subscribe(c"cuptiSubscribe", |real| {
        // Safety: libcupti's cuptiSubscribe, which has this signature; the caller's arguments as they came.
        unsafe { std::mem::transmute::<*mut c_void, Subscribe>(real)(subscriber, callback, userdata) }
    })
}

/// `cuptiSubscribe_v2` (its subscriber parameters added), in front of libcupti's (see the top of the file).
///
/// # Safety
/// As libcupti's; the arguments are passed on untouched, or not used.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut c_void,
    callback: *mut c_void,
    userdata: *mut c_void,
    params: *mut c_void,
) -> i32 {
    type Subscribe = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> i32;
    subscribe(c"cuptiSubscribe_v2", |real| {
        // Safety: libcupti's cuptiSubscribe_v2, which has this signature; the caller's arguments as they came.
        unsafe { std::mem::transmute::<*mut c_void, Subscribe>(real)(subscriber, callback, userdata, params) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_subscription_is_refused_only_while_the_capture_holds_cupti() {
        assert!(refused_in(true), "the capture is this process's injection");
        assert!(!refused_in(false), "another injection, none, or capture switched off");
        capture_could_not_subscribe();
        assert!(!refused_in(true), "the program may have CUPTI once the capture could not");
        CAPTURE_FAILED.store(false, Ordering::SeqCst);
    }
}
