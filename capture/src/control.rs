//! The capture's switches: whether it records at all (cleared for good after a failure), and the measurement
//! and GPU-time modes set once at start-up. Every other module reads them; this file touches nothing but
//! standard error, where it says, once, why capture stopped or never started.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether callbacks record anything. Cleared for good after a failure.
pub static ENABLED: AtomicBool = AtomicBool::new(false);
/// `STREAMTRACE_CALLBACK_NOOP=1`: subscribe and take every callback but record nothing, to measure what CUPTI's
/// callbacks cost by themselves (docs/performance.md).
pub static NOOP: AtomicBool = AtomicBool::new(false);
/// `STREAMTRACE_DISCARD=1`: record everything but drop each batch instead of writing it, to measure what the
/// writer thread costs the program (docs/performance.md). The trace keeps only its header.
pub static DISCARD: AtomicBool = AtomicBool::new(false);
/// Whether CUPTI activity records (GPU start and end times) are collected.
pub static GPU_TIMES: AtomicBool = AtomicBool::new(false);
/// Whether the exact-access backend (the Compute Sanitizer API, `--exact`) records instead of CUPTI: launches
/// then wait for their accesses before they are written.
pub static EXACT: AtomicBool = AtomicBool::new(false);
/// Whether recorded calls get their native call sites (cleared by `STREAMTRACE_NO_CALL_SITES`).
pub static CALL_SITES: AtomicBool = AtomicBool::new(true);
/// Whether the program's pthread calls reach the host-sync interposers (`host_sync::interposing`: the library
/// was preloaded in front of the C library), asked once at start-up: the trace's header says it (writer.rs),
/// and only then is each thread's order exact. A switch here because the writer sits below host_sync/, whose
/// interposers write through the state.
pub static HOST_SYNC: AtomicBool = AtomicBool::new(false);

/// Says why capture stopped, once, and stops it.
pub fn disable(reason: &str) {
    if ENABLED.swap(false, Ordering::SeqCst) {
        eprintln!("streamtrace: capture stopped: {reason}; the program runs on without it");
    }
}

/// Says why capture never started, once (the driver may initialize the injection more than once).
pub fn say_once(reason: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::SeqCst) {
        eprintln!("streamtrace: capture disabled: {reason}; the program runs on without it");
    }
}
