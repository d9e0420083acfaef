//! What capture costs the program, for the `capture_stats` record it writes at exit: the driver calls recorded
//! and the time the callback spent on them, on the program's threads, with the one-time set-up apart (loading
//! CUPTI and subscribing, creating the trace file and starting its writer thread). Set-up happens inside the
//! first calls; counted into them, it would make a short program's few calls look as if each cost tens of
//! microseconds. Touches only atomics and a thread-local.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::origin::now_ns;
use crate::record::Record;

static RECORDED_CALLS: AtomicU64 = AtomicU64::new(0);
/// Time in the callback for recorded calls, set-up made inside them excluded.
static CALLBACK_NS: AtomicU64 = AtomicU64::new(0);
static SETUP_NS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set-up time spent on this thread so far, so that a callback can leave out what it spent on set-up.
    static THREAD_SETUP_NS: Cell<u64> = const { Cell::new(0) };
}

/// Runs `setup`, counting its time as one-time set-up.
pub fn setup<T>(setup: impl FnOnce() -> T) -> T {
    let started = now_ns();
    let result = setup();
    let spent = now_ns().saturating_sub(started);
    SETUP_NS.fetch_add(spent, Ordering::Relaxed);
    THREAD_SETUP_NS.with(|ns| ns.set(ns.get().saturating_add(spent)));
    result
}

/// A mark taken as a callback starts, for [`call_recorded`].
#[derive(Copy, Clone)]
pub struct CallStart {
    at_ns: u64,
    thread_setup_ns: u64,
}

pub fn call_started(at_ns: u64) -> CallStart {
    CallStart { at_ns, thread_setup_ns: THREAD_SETUP_NS.with(Cell::get) }
}

/// Counts one recorded call begun at `start`, less the set-up it ran.
pub fn call_recorded(start: CallStart) {
    let setup_inside = THREAD_SETUP_NS.with(Cell::get).saturating_sub(start.thread_setup_ns);
    let spent = now_ns().saturating_sub(start.at_ns).saturating_sub(setup_inside);
    RECORDED_CALLS.fetch_add(1, Ordering::Relaxed);
    CALLBACK_NS.fetch_add(spent, Ordering::Relaxed);
}

/// The `capture_stats` record: what capture has cost so far.
pub fn capture_stats() -> Record {
    Record::CaptureStats {
        calls: RECORDED_CALLS.load(Ordering::Relaxed),
        callback_ns: CALLBACK_NS.load(Ordering::Relaxed),
        setup_ns: SETUP_NS.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_up_inside_a_call_is_left_out_of_the_call() {
        let start = call_started(now_ns());
        setup(|| std::thread::sleep(std::time::Duration::from_millis(20)));
        let before = CALLBACK_NS.load(Ordering::Relaxed);
        call_recorded(start);
        let call_ns = CALLBACK_NS.load(Ordering::Relaxed) - before;
        assert!(call_ns < 10_000_000, "the 20 ms of set-up were counted into the call: {call_ns} ns");
        assert!(SETUP_NS.load(Ordering::Relaxed) >= 20_000_000);
    }
}
