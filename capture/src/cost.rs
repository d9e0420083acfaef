//! What capture costs the program, for the `capture_stats` record it writes at exit: the driver calls recorded
//! and the time the callback spent on them, on the program's threads, with the one-time set-up apart (loading
//! CUPTI and subscribing, creating the trace file and starting its writer thread). Set-up happens inside the
//! first calls; counted into them, it would make a short program's few calls look as if each cost tens of
//! microseconds. On demand (`STREAMTRACE_COST_DETAIL`), the same time split by driver call, lock wait and walk.
//! Touches only atomics and a thread-local.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// `STREAMTRACE_COST_DETAIL=1`: the callback's time split by driver call, with what of it went to waiting for
/// the state lock, to the call-site walk and to kernel arguments and layouts, said on standard error at exit.
/// For finding where a program's capture cost goes (docs/performance.md); each part timed then reads the clock
/// twice more.
pub static DETAIL: AtomicBool = AtomicBool::new(false);

/// Callback ids are below this (cupti_driver_cbid.h ends under 900); a larger one is counted in the last slot.
const CALL_SLOTS: usize = 1024;
static CALLS_BY_ID: [AtomicU64; CALL_SLOTS] = [const { AtomicU64::new(0) }; CALL_SLOTS];
static NS_BY_ID: [AtomicU64; CALL_SLOTS] = [const { AtomicU64::new(0) }; CALL_SLOTS];
static LOCK_WAIT_NS: AtomicU64 = AtomicU64::new(0);
static WALK_NS: AtomicU64 = AtomicU64::new(0);
static KERNEL_ARGS_NS: AtomicU64 = AtomicU64::new(0);
static KERNEL_LAYOUTS: AtomicU64 = AtomicU64::new(0);
static KERNEL_LAYOUT_NS: AtomicU64 = AtomicU64::new(0);
static KERNEL_LAYOUT_DRIVER_NS: AtomicU64 = AtomicU64::new(0);
static HOST_SYNC_NS: AtomicU64 = AtomicU64::new(0);

/// What the host-synchronization interposers did (host_sync/), counted with the split kept: where their share
/// of the capture's cost goes in a program whose threads lock thousands of times a step.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HostSyncEvent {
    /// An interposed call that did bookkeeping.
    Call,
    /// A release or acquire passed on without bookkeeping (host_sync's fast paths): it would change nothing, or
    /// its caller is known not to be the program.
    Unchanged,
    /// A return address not seen before (or pushed out of the table): placed among the mappings.
    CallerPlaced,
    /// A release that put marks into an object's shard.
    Put,
    /// An acquire that read an object's marks under its shard's lock.
    Read,
    /// A snapshot written to the trace (a `host_release` record).
    Snapshot,
}

const HOST_SYNC_EVENTS: usize = 6;
static HOST_SYNC: [AtomicU64; HOST_SYNC_EVENTS] = [const { AtomicU64::new(0) }; HOST_SYNC_EVENTS];

/// Calls that did bookkeeping, by interposed function, with the split kept: which of the program's calls the
/// fast paths miss.
static HOST_SYNC_CALLS: std::sync::Mutex<Vec<(&'static str, u64)>> = std::sync::Mutex::new(Vec::new());

/// An interposed call of `api` that does bookkeeping (a [`HostSyncEvent::Call`]), counted with the split kept.
pub fn host_sync_call(api: &'static str) {
    if !detail() {
        return;
    }
    HOST_SYNC[HostSyncEvent::Call as usize].fetch_add(1, Ordering::Relaxed);
    let mut calls = HOST_SYNC_CALLS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match calls.iter_mut().find(|(name, _)| *name == api) {
        Some((_, count)) => *count += 1,
        None => calls.push((api, 1)),
    }
}

/// Counts one `event` of the interposers with the split kept.
pub fn host_sync_event(event: HostSyncEvent) {
    if detail() {
        HOST_SYNC[event as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether the split is kept (`DETAIL`).
pub fn detail() -> bool {
    DETAIL.load(Ordering::Relaxed)
}

/// Runs `part` and, with the split kept, adds its time to `total`.
fn timed_part<T>(total: &AtomicU64, part: impl FnOnce() -> T) -> T {
    if !detail() {
        return part();
    }
    let started = now_ns();
    let result = part();
    total.fetch_add(now_ns().saturating_sub(started), Ordering::Relaxed);
    result
}

/// Takes the state lock through `lock`, counting the wait with the split kept.
pub fn lock_wait<T>(lock: impl FnOnce() -> T) -> T {
    timed_part(&LOCK_WAIT_NS, lock)
}

/// Walks a call site through `walk`, counting its time with the split kept.
pub fn walk<T>(walk: impl FnOnce() -> T) -> T {
    timed_part(&WALK_NS, walk)
}

/// Looks a new kernel's layout up through `describe` (once per kernel), counting it with the split kept.
pub fn kernel_layout<T>(describe: impl FnOnce() -> T) -> T {
    if detail() {
        KERNEL_LAYOUTS.fetch_add(1, Ordering::Relaxed);
    }
    timed_part(&KERNEL_LAYOUT_NS, describe)
}

/// One of a layout lookup's driver queries (its name, a parameter's place), timed with the split kept: what the
/// driver takes (loading a lazily loaded kernel) against the name's demangling and parsing.
pub fn kernel_layout_query<T>(query: impl FnOnce() -> T) -> T {
    timed_part(&KERNEL_LAYOUT_DRIVER_NS, query)
}

/// An interposer's bookkeeping, timed with the split kept (the real call it wraps is not in it).
pub fn host_sync_bookkeeping<T>(work: impl FnOnce() -> T) -> T {
    timed_part(&HOST_SYNC_NS, work)
}

/// Reads a kernel's name and pointer arguments through `read`, counting its time with the split kept.
pub fn kernel_args<T>(read: impl FnOnce() -> T) -> T {
    timed_part(&KERNEL_ARGS_NS, read)
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

/// Counts one recorded call `cbid` begun at `start`, less the set-up it ran.
pub fn call_recorded(start: CallStart, cbid: u32) {
    let setup_inside = THREAD_SETUP_NS.with(Cell::get).saturating_sub(start.thread_setup_ns);
    let spent = now_ns().saturating_sub(start.at_ns).saturating_sub(setup_inside);
    RECORDED_CALLS.fetch_add(1, Ordering::Relaxed);
    CALLBACK_NS.fetch_add(spent, Ordering::Relaxed);
    if detail() {
        let slot = (cbid as usize).min(CALL_SLOTS - 1);
        CALLS_BY_ID[slot].fetch_add(1, Ordering::Relaxed);
        NS_BY_ID[slot].fetch_add(spent, Ordering::Relaxed);
    }
}

/// The split kept with `DETAIL`, as lines for standard error: each driver call's count and time (named by
/// `name_of`), the most costly first, then the lock waits and walks inside them. None without the split.
pub fn detail_lines(name_of: impl Fn(u32) -> String) -> Option<String> {
    if !detail() {
        return None;
    }
    let mut by_call: Vec<(u64, u64, u32)> = (0..CALL_SLOTS)
        .map(|slot| (NS_BY_ID[slot].load(Ordering::Relaxed), CALLS_BY_ID[slot].load(Ordering::Relaxed), slot as u32))
        .filter(|&(_, calls, _)| calls > 0)
        .collect();
    by_call.sort_unstable_by(|a, b| b.cmp(a));
    let us = |ns: u64| ns as f64 / 1e3;
    let mut text = String::from("streamtrace: capture cost by driver call (calls, total us, us a call):\n");
    for (ns, calls, cbid) in by_call {
        text += &format!(
            "streamtrace:   {:<36} {calls:>9} {:>12.1} {:>8.2}\n",
            name_of(cbid),
            us(ns),
            us(ns) / calls as f64
        );
    }
    let total = CALLBACK_NS.load(Ordering::Relaxed);
    text += &format!(
        "streamtrace:   of {:.1} us in all: {:.1} us waiting for the state lock (the framework's records' waits included), {:.1} us walking call sites, {:.1} us reading kernel arguments\n",
        us(total),
        us(LOCK_WAIT_NS.load(Ordering::Relaxed)),
        us(WALK_NS.load(Ordering::Relaxed)),
        us(KERNEL_ARGS_NS.load(Ordering::Relaxed))
    );
    let layouts = KERNEL_LAYOUTS.load(Ordering::Relaxed);
    text += &format!(
        "streamtrace:   of those, {:.1} us looking up the layouts of {layouts} kernels (once each; {:.1} us in the driver's queries)\n",
        us(KERNEL_LAYOUT_NS.load(Ordering::Relaxed)),
        us(KERNEL_LAYOUT_DRIVER_NS.load(Ordering::Relaxed))
    );
    let host_sync = |event: HostSyncEvent| HOST_SYNC[event as usize].load(Ordering::Relaxed);
    text += &format!(
        "streamtrace: host synchronization interposers: {} calls with bookkeeping ({:.1} us in it), {} releases and acquires passed on without it (nothing to change, or not the program's), {} return addresses placed, {} releases put into objects, {} acquires read objects, {} snapshots written\n",
        host_sync(HostSyncEvent::Call),
        us(HOST_SYNC_NS.load(Ordering::Relaxed)),
        host_sync(HostSyncEvent::Unchanged),
        host_sync(HostSyncEvent::CallerPlaced),
        host_sync(HostSyncEvent::Put),
        host_sync(HostSyncEvent::Read),
        host_sync(HostSyncEvent::Snapshot),
    );
    let mut calls = HOST_SYNC_CALLS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    calls.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if !calls.is_empty() {
        let by_api: Vec<String> = calls.iter().map(|(api, count)| format!("{api} {count}")).collect();
        text += &format!("streamtrace:   calls with bookkeeping by function: {}\n", by_api.join(", "));
    }
    Some(text)
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
    fn the_split_counts_each_call_kind_and_says_the_parts() {
        DETAIL.store(true, Ordering::SeqCst);
        for _ in 0..3 {
            let start = call_started(now_ns());
            walk(|| std::thread::sleep(std::time::Duration::from_millis(1)));
            call_recorded(start, 1000);
        }
        call_recorded(call_started(now_ns()), 5000); // past the last slot: counted in it
        let lines = detail_lines(|cbid| format!("call{cbid}")).expect("the split is kept");
        let line = lines.lines().find(|l| l.contains("call1000")).expect("the kind called three times");
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[2], "3", "{line}");
        assert!(fields[3].parse::<f64>().expect("total us") >= 3000.0, "{line}");
        assert!(lines.contains("call1023"), "an id past the table goes to its last slot: {lines}");
        let parts = lines.lines().find(|l| l.contains("waiting for the state lock")).expect("the parts");
        assert!(parts.contains("us walking call sites") && parts.contains("us reading kernel arguments"), "{lines}");
        assert!(WALK_NS.load(Ordering::Relaxed) >= 3_000_000);
        host_sync_event(HostSyncEvent::Put);
        let lines = detail_lines(|cbid| format!("call{cbid}")).expect("the split is kept");
        let interposers = lines.lines().find(|l| l.contains("host synchronization interposers")).expect("their line");
        assert!(!interposers.contains(" 0 releases put"), "{interposers}");
    }

    #[test]
    fn set_up_inside_a_call_is_left_out_of_the_call() {
        let start = call_started(now_ns());
        setup(|| std::thread::sleep(std::time::Duration::from_millis(20)));
        let before = CALLBACK_NS.load(Ordering::Relaxed);
        call_recorded(start, 0);
        let call_ns = CALLBACK_NS.load(Ordering::Relaxed) - before;
        assert!(call_ns < 10_000_000, "the 20 ms of set-up were counted into the call: {call_ns} ns");
        assert!(SETUP_NS.load(Ordering::Relaxed) >= 20_000_000);
    }
}
