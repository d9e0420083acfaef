//! Turning capture on, once, when the driver initializes the injection: subscribing the chosen backend (CUPTI
//! by default, the Compute Sanitizer API for `--exact`), registering the at-exit flush and the fork handlers,
//! reading the measurement switches, and activity tracing when GPU times are asked for. Touches the backends'
//! subscriptions, libc's registration functions and the switches.

use std::sync::atomic::Ordering;

use streamtrace_format::launch;

use crate::control::{CALL_SITES, DISCARD, ENABLED, EXACT, GPU_TIMES, HOST_SYNC, NOOP};
use crate::{activity, at_exit, cupti, fork, origin, sanitizer};

/// Turns capture on: subscribes the backend (calls.rs's calls), registers the at-exit flush and the fork
/// handlers, and reads the measurement switches. An error says why capture cannot run; the caller says it once.
pub fn initialize() -> Result<(), String> {
    origin::note_pid();
    crate::ranges::configure();
    let exact = std::env::var_os(launch::ENV_EXACT).is_some();
    if exact {
        sanitizer::subscribe()?;
        EXACT.store(true, Ordering::SeqCst);
    } else {
        cupti::subscribe()?;
    }
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
