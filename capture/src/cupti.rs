//! The CUPTI backend (the default, tier T1): loads libcupti, subscribes to its driver-API callbacks for the
//! calls of calls.rs, and hands each to recording.rs. Touches CUPTI and its callback data.

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use cudarc::cupti::result as cupti;
use cudarc::cupti::sys::{CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain, CUpti_SubscriberHandle};
use streamtrace_format::launch;

use crate::calls::{self, spec_of, CALLS};
use crate::control::{ENABLED, NOOP};
use crate::driver_call::ContextKey;
use crate::driver_call::DriverCall;
use crate::recording::{self, CallOrigin, ReentryGuard};
use crate::unwind::Start;

/// The CUPTI library, kept loaded for the life of the process.
static CUPTI_LIBRARY: OnceLock<Option<libloading::Library>> = OnceLock::new();

/// Where libcupti may be: the path the `streamtrace capture` command found, then the usual CUDA locations.
fn cupti_candidates() -> Vec<PathBuf> {
    let named = std::env::var_os(launch::ENV_CUPTI).map(PathBuf::from);
    named.into_iter().chain(launch::cupti_candidates(launch::toolkit_roots_from_env())).collect()
}

/// Loads libcupti by path so that cudarc, which looks it up by name, finds the loaded copy.
fn load_cupti() -> Result<(), String> {
    let loaded = CUPTI_LIBRARY.get_or_init(|| {
        for path in cupti_candidates() {
            if path.exists() {
                // Safety: loading CUPTI runs its initializers, which expect to be loaded into a CUDA process.
                if let Ok(lib) =
                    unsafe { libloading::os::unix::Library::open(Some(&path), libc::RTLD_NOW | libc::RTLD_GLOBAL) }
                {
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
        Err(format!("libcupti not found (set {} to its path)", launch::ENV_CUPTI))
    }
}

/// Loads libcupti, subscribes, and enables the callbacks of every recorded call. An error says why capture
/// cannot run.
pub fn subscribe() -> Result<(), String> {
    load_cupti()?;
    let mut subscriber: CUpti_SubscriberHandle = std::ptr::null_mut();
    // Safety: registers a callback with the signature CUPTI expects; no user data.
    unsafe { cupti::subscribe(&mut subscriber, Some(on_driver_call), std::ptr::null_mut()) }.map_err(|e| {
        format!("cuptiSubscribe failed ({e:?}): another CUPTI client (nsys, ncu, a profiler) may already be attached")
    })?;
    for spec in CALLS {
        // Safety: a subscriber handle just returned by CUPTI; ids from cupti_driver_cbid.h.
        let _ =
            unsafe { cupti::enable_callback(1, subscriber, CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API, spec.id) };
    }
    Ok(())
}

/// The device of a context, as CUPTI says.
fn device_of(context: *mut c_void) -> Option<u32> {
    if context.is_null() {
        return None;
    }
    let mut device = 0u32;
    // Safety: the context of a call being traced; out-pointer to a local.
    unsafe { cupti::get_device_id(context as _, &mut device) }.ok().map(|()| device)
}

/// CUPTI's callback for every enabled driver call.
///
/// # Safety
/// Called by CUPTI only: `data`, for the driver-API domain, is the callback data of the call `cbid`.
pub unsafe extern "C" fn on_driver_call(
    _user: *mut c_void,
    domain: CUpti_CallbackDomain,
    cbid: u32,
    data: *const c_void,
) {
    if !ENABLED.load(Ordering::Relaxed)
        || NOOP.load(Ordering::Relaxed)
        || data.is_null()
        || domain != CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
    {
        return;
    }
    let Some(spec) = spec_of(cbid) else { return };
    // Safety: CUPTI passes driver-API callback data for the driver domain; `data` is not null.
    let data = unsafe { &*(data as *const CUpti_CallbackData) };
    // CUPTI calls at entry and at exit; each call is recorded at one of them. The other returns here, before
    // the clock, the thread id or the lock.
    let at_exit = data.callbackSite == CUpti_ApiCallbackSite::CUPTI_API_EXIT;
    // The host watch follows every call in and out (the driver's own accesses, guards armed at exit). Outside
    // `recording::record`'s own catch, so caught here: nothing may unwind into the driver and the program.
    if std::panic::catch_unwind(|| crate::host_watch::passing(at_exit)).is_err() {
        return;
    }
    if at_exit && calls::is_graph_launch(cbid) {
        // Safety: CUPTI's result of the call, valid at exit.
        unsafe { crate::host_watch::graph_host_nodes::launch_exited(data.functionReturnValue as *const i32) };
    }
    if at_exit != spec.at_exit() {
        return;
    }
    let Some(_inside) = ReentryGuard::enter() else { return };
    // The call site's walk starts here: the capture's frames below this one are never walked.
    let walk_from = Start::here();
    // Safety: CUPTI's parameter block and result of the call `cbid`, valid until this callback returns.
    let call =
        unsafe { DriverCall::new(spec.detail, data.functionParams, at_exit, data.functionReturnValue as *const i32) };
    let origin = CallOrigin {
        correlation: data.correlationId,
        context: ContextKey::Uid { uid: data.contextUid, handle: data.context as *mut c_void },
        device_of,
    };
    recording::record(spec, &call, origin, walk_from);
}
