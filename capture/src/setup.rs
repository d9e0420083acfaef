//! Turning capture on, once, when the driver initializes the injection: loading libcupti, subscribing to its
//! driver-API callbacks, enabling the ids capture records, and registering the at-exit flush and the fork
//! handlers, and activity tracing when GPU times are asked for. Touches CUPTI, libc's registration functions
//! and the switches.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use cudarc::cupti::result as cupti;
use cudarc::cupti::sys::{CUpti_CallbackDomain, CUpti_SubscriberHandle};
use streamtrace_format::launch;

use crate::control::{CALL_SITES, DISCARD, ENABLED, GPU_TIMES, NOOP};
use crate::{activity, at_exit, callback, cbid, fork, origin};

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

/// Turns capture on: loads libcupti, subscribes, enables the driver-API callbacks capture records (cbid.rs),
/// registers the at-exit flush and the fork handlers, and reads the measurement switches. An error says why
/// capture cannot run; the caller says it once.
pub fn initialize() -> Result<(), String> {
    origin::note_pid();
    load_cupti()?;
    let mut subscriber: CUpti_SubscriberHandle = std::ptr::null_mut();
    // Safety: registers a callback with the signature CUPTI expects; no user data.
    unsafe { cupti::subscribe(&mut subscriber, Some(callback::on_driver_call), std::ptr::null_mut()) }.map_err(
        |e| {
            format!(
                "cuptiSubscribe failed ({e:?}): another CUPTI client (nsys, ncu, a profiler) may already be attached"
            )
        },
    )?;
    for &id in cbid::ENABLED.iter().chain(cbid::GRAPH_CALLS) {
        // Safety: a subscriber handle just returned by CUPTI; ids from cupti_driver_cbid.h.
        let _ = unsafe { cupti::enable_callback(1, subscriber, CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API, id) };
    }
    // Safety: registers a plain extern "C" function with no arguments.
    unsafe { libc::atexit(at_exit::flush_at_exit) };
    NOOP.store(std::env::var_os("STREAMTRACE_CALLBACK_NOOP").is_some(), Ordering::SeqCst);
    DISCARD.store(std::env::var_os("STREAMTRACE_DISCARD").is_some(), Ordering::SeqCst);
    crate::cost::DETAIL.store(std::env::var_os("STREAMTRACE_COST_DETAIL").is_some(), Ordering::SeqCst);
    CALL_SITES.store(std::env::var_os(launch::ENV_NO_CALL_SITES).is_none(), Ordering::SeqCst);
    if std::env::var_os(launch::ENV_GPU_TIMES).is_some() {
        match activity::enable() {
            Ok(()) => GPU_TIMES.store(true, Ordering::SeqCst),
            Err(e) => eprintln!("streamtrace: no GPU times ({e}); capture goes on without them"),
        }
    }
    fork::register_handlers();
    ENABLED.store(true, Ordering::SeqCst);
    Ok(())
}
