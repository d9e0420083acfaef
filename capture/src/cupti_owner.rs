//! CUPTI takes one subscriber a process, and the capture subscribes when the driver loads it (cuInit). A
//! program that subscribes before that (PyTorch's profiler library, Kineto, when the program profiles before
//! its first CUDA call; a monitoring library) left the whole capture off. Preloaded
//! (host_sync/mod.rs says why the library is), this library's `cuptiSubscribe` stands in front of libcupti's for
//! the program's callers, and refuses them while the capture holds or will hold CUPTI, as CUPTI refuses a second
//! subscriber: the program's profiler then sees no CUDA activity, as under nsys. The capture's own subscription
//! goes through libcupti's handle (cupti.rs, sanitizer/) and never reaches this one. Where the capture could
//! not subscribe after all, the program's calls pass on to libcupti. Touches an atomic and standard error.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use streamtrace_format::launch;

/// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (cupti_result.h): what CUPTI answers a second subscriber.
const MULTIPLE_SUBSCRIBERS: i32 = 39;

/// Set when the capture's own subscription failed: the program's calls then pass on.
static CAPTURE_FAILED: AtomicBool = AtomicBool::new(false);

/// The capture's backend could not subscribe (another client came first): CUPTI is the program's from here on.
pub fn capture_could_not_subscribe() {
    CAPTURE_FAILED.store(true, Ordering::SeqCst);
}

/// Whether a subscription of the program's is refused now: in a process under capture (its environment names
/// the trace) whose own subscription has not failed.
fn refused() -> bool {
    refused_in(std::env::var_os(launch::ENV_OUTPUT).is_some())
}

/// [`refused`], `under_capture` said.
fn refused_in(under_capture: bool) -> bool {
    under_capture && !CAPTURE_FAILED.load(Ordering::SeqCst)
}

/// `cuptiSubscribe`, in front of libcupti's (see the top of the file).
///
/// # Safety
/// As libcupti's: `subscriber` must be writable; the other arguments are passed on untouched.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(subscriber: *mut c_void, callback: *mut c_void, userdata: *mut c_void) -> i32 {
    let refuse = std::panic::catch_unwind(refused).unwrap_or(true);
    if refuse {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::SeqCst) {
            eprintln!(
                "streamtrace: the program's own CUPTI subscription (a profiler, such as PyTorch's) is refused: the \
                 capture holds CUPTI's one subscriber, so that profiler sees no CUDA activity"
            );
        }
        return MULTIPLE_SUBSCRIBERS;
    }
    type Subscribe = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> i32;
    // Safety: a lookup by a NUL-terminated name past this library.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, c"cuptiSubscribe".as_ptr()) };
    if next.is_null() {
        return MULTIPLE_SUBSCRIBERS;
    }
    // Safety: libcupti's cuptiSubscribe, which has this signature; the caller's arguments as they came.
    unsafe { std::mem::transmute::<*mut c_void, Subscribe>(next)(subscriber, callback, userdata) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_subscription_is_refused_under_capture_and_passed_on_once_the_capture_failed() {
        assert!(refused_in(true), "under capture");
        assert!(!refused_in(false), "a process not under capture");
        capture_could_not_subscribe();
        assert!(!refused_in(true), "the program may have CUPTI once the capture could not");
        CAPTURE_FAILED.store(false, Ordering::SeqCst);
    }
}
