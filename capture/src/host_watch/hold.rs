//! Batches held back between the state and the file, so that records the capture learns late take their
//! place in host order (the trace is in the order the host issued its calls, and the analyzer reads it as it
//! comes): the accesses a host function made, known once it has run on a driver thread, go right after its
//! `host_func` record; a CPU page fault on managed memory, which CUPTI delivers in its own time, goes among
//! the records made around its time.
//!
//! A batch is held while a wrapped host function it holds has not finished (at most `HOST_FUNC_WAIT`), and,
//! once the process has managed memory and the managed-fault watch is on, for `MANAGED_DELAY` (CUPTI hands
//! over what it has every drain). Nothing is held otherwise, and everything is written at exit. What a
//! SIGKILL loses grows by as much. Touches the held batches and the late records; asks host_funcs.rs which
//! wrapped host functions have finished.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::{counters, faults, host_funcs};
use crate::origin::{current_pid, now_ns};
use crate::record::{Batch, Entry, Record};

/// How long a batch waits for its host functions to run: they run once the stream's earlier work is done.
const HOST_FUNC_WAIT_NS: u64 = 2_000_000_000;
/// How long a batch waits for managed faults by default (`STREAMTRACE_HOST_WATCH_DELAY_MS` changes it).
const MANAGED_DELAY_NS: u64 = 1_000_000_000;

/// A record learned late, with the declarations its call site needs before it.
pub enum Late {
    /// Made by the host function `id`: goes right after its record.
    InHostFunc { id: u64, entries: Vec<Entry> },
    /// Made at `time`: goes after the last record made before it.
    AtTime { time: u64, entries: Vec<Entry> },
}

struct Held {
    batch: Batch,
    taken_ns: u64,
    /// Wrapped host functions this batch declares.
    host_funcs: Vec<u64>,
}

struct Hold {
    pid: u32,
    batches: VecDeque<Held>,
}

static HOLD: Mutex<Option<Hold>> = Mutex::new(None);
static LATE: Mutex<Vec<Late>> = Mutex::new(Vec::new());
/// Whether managed faults may come (the watch is on and the process has managed memory).
static MANAGED: AtomicBool = AtomicBool::new(false);
static MANAGED_DELAY: AtomicU64 = AtomicU64::new(MANAGED_DELAY_NS);
/// At exit: everything is written.
static FINAL: AtomicBool = AtomicBool::new(false);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Managed faults may come from now on: batches wait for them.
pub fn expect_managed_faults() {
    if !MANAGED.swap(true, Ordering::AcqRel) {
        let delay = std::env::var("STREAMTRACE_HOST_WATCH_DELAY_MS").ok().and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(ms) = delay {
            MANAGED_DELAY.store(ms.saturating_mul(1_000_000), Ordering::Relaxed);
        }
    }
}

pub fn late_in_host_func(id: u64, entries: Vec<Entry>) {
    lock(&LATE).push(Late::InHostFunc { id, entries });
}

pub fn late_at_time(time: u64, entries: Vec<Entry>) {
    lock(&LATE).push(Late::AtTime { time, entries });
}

/// At exit: the next pass writes everything.
pub fn release_all() {
    FINAL.store(true, Ordering::Release);
}

/// The batches to write now, in order, given the batch just taken from the state: it joins the held ones, the
/// late records join their places, and the oldest batches that wait for nothing more come out.
pub fn pass(batch: Batch) -> Vec<Batch> {
    let holding = host_funcs::any_wrapped() || MANAGED.load(Ordering::Acquire);
    let mut slot = lock(&HOLD);
    let pid = current_pid();
    if slot.as_ref().is_some_and(|hold| hold.pid != pid) {
        // A forked child: what is held is the parent's to write.
        *slot = None;
        lock(&LATE).clear();
    }
    if !holding && slot.as_ref().is_none_or(|hold| hold.batches.is_empty()) && lock(&LATE).is_empty() {
        return vec![batch];
    }
    // What has finished is read before the faults waiting for the state lock are looked at, and those before
    // the late records are taken: a function's fault is queued before it returns, so a function seen finished
    // has its faults either still queued (then its batch waits) or already among the late records.
    let unfinished = host_funcs::unfinished();
    let faults_queued = faults::queued() > 0;
    let hold = slot.get_or_insert_with(|| Hold { pid, batches: VecDeque::new() });
    let host_funcs = batch
        .entries
        .iter()
        .filter_map(|e| match e.record {
            Record::HostFunc { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    let now = now_ns();
    hold.batches.push_back(Held { batch, taken_ns: now, host_funcs });
    for late in std::mem::take(&mut *lock(&LATE)) {
        place(&mut hold.batches, late);
    }
    let everything = FINAL.load(Ordering::Acquire);
    let delay = if MANAGED.load(Ordering::Acquire) { MANAGED_DELAY.load(Ordering::Relaxed) } else { 0 };
    let mut out = Vec::new();
    while let Some(front) = hold.batches.front() {
        let age = now.saturating_sub(front.taken_ns);
        let waiting = !front.host_funcs.is_empty()
            && (faults_queued || front.host_funcs.iter().any(|id| unfinished.contains(id)));
        if waiting && age >= HOST_FUNC_WAIT_NS && !host_funcs::trampolines_run() {
            host_funcs::stop_wrapping();
        }
        let ready = everything || ((!waiting || age >= HOST_FUNC_WAIT_NS) && age >= delay);
        if !ready {
            break;
        }
        if let Some(held) = hold.batches.pop_front() {
            out.push(held.batch);
        }
    }
    out
}

/// Puts a late record into the held batches: after its host function's record, or at its time (in the oldest
/// batch when it is older than everything held).
fn place(batches: &mut VecDeque<Held>, late: Late) {
    match late {
        Late::InHostFunc { id, entries } => {
            for held in batches.iter_mut() {
                let found = held
                    .batch
                    .entries
                    .iter()
                    .position(|e| matches!(e.record, Record::HostFunc { id: i, .. } if i == id));
                if let Some(at) = found {
                    held.batch.entries.splice(at + 1..at + 1, entries);
                    return;
                }
            }
            // Its record was written already (it waited past its time): the access is lost.
            counters::DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Late::AtTime { time, entries } => {
            let target = batches
                .iter()
                .position(|held| held.batch.entries.iter().any(|e| e.call.time_ns > time))
                .unwrap_or(batches.len().saturating_sub(1));
            // The declarations of the batches after it come up with the record (faults.rs says why).
            let mut placed: Vec<Entry> = batches
                .iter_mut()
                .skip(target + 1)
                .flat_map(|held| faults::take_declarations(&mut held.batch, 0))
                .collect();
            placed.extend(entries);
            if let Some(held) = batches.get_mut(target) {
                faults::insert_at_time(&mut held.batch, time, placed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Call;

    fn entry(time: u64, record: Record) -> Entry {
        Entry { call: Call { tid: 1, time_ns: time, correlation: 0, site: 0 }, record }
    }

    fn held(batches: [Batch; 2]) -> VecDeque<Held> {
        batches.into_iter().map(|batch| Held { batch, taken_ns: 0, host_funcs: Vec::new() }).collect()
    }

    /// Each held batch's event handles in order (0 for a record of another kind).
    fn event_handles(batches: &VecDeque<Held>) -> Vec<Vec<u64>> {
        let handle = |e: &Entry| match e.record {
            Record::Event { handle } => handle,
            _ => 0,
        };
        batches.iter().map(|h| h.batch.entries.iter().map(handle).collect()).collect()
    }

    #[test]
    fn late_records_find_their_host_function_or_their_time() {
        let mut first = Batch::default();
        first.entries.push(entry(10, Record::Event { handle: 1 }));
        let func = Record::HostFunc { stream: 5, id: 42, name: "f".into(), node: 0, api: "cuLaunchHostFunc" };
        first.entries.push(entry(20, func));
        first.entries.push(entry(30, Record::Event { handle: 2 }));
        let mut second = Batch::default();
        second.entries.push(entry(40, Record::Event { handle: 3 }));
        let mut batches = held([first, second]);
        place(&mut batches, Late::InHostFunc { id: 42, entries: vec![entry(99, Record::Event { handle: 7 })] });
        place(&mut batches, Late::AtTime { time: 35, entries: vec![entry(35, Record::Event { handle: 8 })] });
        let handles = event_handles(&batches);
        assert_eq!(handles, vec![vec![1, 0, 7, 2, 8], vec![3]]);
        let dropped = counters::DROPPED.load(Ordering::Relaxed);
        place(&mut batches, Late::InHostFunc { id: 43, entries: Vec::new() });
        assert_eq!(counters::DROPPED.load(Ordering::Relaxed), dropped + 1, "a function no longer held");
    }

    #[test]
    fn a_late_record_goes_at_its_time_and_the_held_declarations_come_up_to_it() {
        let mut first = Batch::default();
        first.entries.push(entry(10, Record::Event { handle: 1 }));
        let mut second = Batch::default();
        let declaration = Record::Callsite { id: 6, frames: std::sync::Arc::from(&[0x5123u64][..]), python_line: None };
        second.entries.push(Entry { call: Call { site: 6, ..entry(40, Record::OpBegin).call }, record: declaration });
        second.entries.push(entry(40, Record::Event { handle: 2 }));
        let mut batches = held([first, second]);
        let sited =
            Entry { call: Call { site: 6, ..entry(5, Record::OpBegin).call }, record: Record::Event { handle: 3 } };
        place(&mut batches, Late::AtTime { time: 5, entries: vec![sited] });
        let handles = event_handles(&batches);
        // The declaration (0) moved up from the second batch; the record is first, as its time says.
        assert_eq!(handles, vec![vec![0, 3, 1], vec![2]]);
    }
}
