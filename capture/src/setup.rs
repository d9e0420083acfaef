//! Turning capture on, once, when the driver initializes the injection: subscribing the chosen backend (CUPTI
//! by default, the Compute Sanitizer API for `--exact`), registering the at-exit flush and the fork handlers,
//! reading the measurement switches, and activity tracing when GPU times are asked for. Touches the backends'
//! subscriptions, libc's registration functions and the switches.

use std::sync::atomic::{AtomicBool, Ordering};

use streamtrace_format::launch;

use crate::control::{CALL_SITES, DISCARD, ENABLED, EXACT, GPU_TIMES, HOST_SYNC, NOOP};
use crate::{activity, at_exit, cupti, cupti_owner, fork, origin, sanitizer};

/// Turns capture on: subscribes the backend (calls.rs's calls), registers the at-exit flush and the fork
/// handlers, and reads the measurement switches. An error says why capture cannot run; the caller says it once.
pub fn initialize() -> Result<(), String> {
    if !first_initialization() {
        return Ok(());
    }
    origin::note_pid();
    crate::ranges::configure();
    let exact = std::env::var_os(launch::ENV_EXACT).is_some();
    let subscribed = if exact { sanitizer::subscribe() } else { cupti::subscribe() };
    if subscribed.is_err() {
        cupti_owner::capture_could_not_subscribe(); // CUPTI is the program's, then
    }
    subscribed?;
    EXACT.store(exact, Ordering::SeqCst);
    // Safety: registers a plain extern "C" function with no arguments.
    unsafe { libc::atexit(at_exit::flush_at_exit) };
    NOOP.store(std::env::var_os("STREAMTRACE_CALLBACK_NOOP").is_some(), Ordering::SeqCst);
    DISCARD.store(std::env::var_os("STREAMTRACE_DISCARD").is_some(), Ordering::SeqCst);
    crate::cost::DETAIL.store(std::env::var_os("STREAMTRACE_COST_DETAIL").is_some(), Ordering::SeqCst);
    CALL_SITES.store(std::env::var_os(launch::ENV_NO_CALL_SITES).is_none(), Ordering::SeqCst);
    // Before any trace starts (nothing records until ENABLED below): its header says it.
    HOST_SYNC.store(crate::host_sync::interposing(), Ordering::SeqCst);
    // A host function's trampoline tells host_sync that the function starts on the driver's thread.
    crate::host_watch::host_funcs::on_start(crate::host_sync::host_function_started);
    if std::env::var_os(launch::ENV_GPU_TIMES).is_some() && !exact {
        match activity::enable() {
            Ok(()) => GPU_TIMES.store(true, Ordering::SeqCst),
            Err(e) => eprintln!("streamtrace: no GPU times ({e}); capture goes on without them"),
        }
    }
    fork::register_handlers();
    crate::host_watch::start();
    ENABLED.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether this is the process's first initialization. The driver may initialize the injection again in one
/// process (it did under a Lightning `Trainer.fit`): subscribing again failed against the capture's own
/// subscription and said "capture disabled" while the capture went on. A later call changes nothing; the first
/// one said why, if it failed.
fn first_initialization() -> bool {
    static STARTED: AtomicBool = AtomicBool::new(false);
    !STARTED.swap(true, Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_injection_is_initialized_once() {
        // This test binary never initializes the injection otherwise.
        assert!(super::first_initialization());
        assert!(!super::first_initialization(), "a second call from the driver");
    }
}
