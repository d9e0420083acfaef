//! Host accesses of managed memory, from CUPTI's unified-memory counter activity: the driver migrates a managed
//! page to the host when host code touches it while it is elsewhere, and CUPTI reports each such CPU page
//! fault (`CPU_PAGE_FAULT_COUNT`) with the page, the time the driver began handling it and the program counter
//! of the faulting instruction. Each becomes a `host_access` read of that page (tier T1 of the host: the page,
//! not the bytes), whose site is that instruction, placed at its time among the calls (hold.rs).
//!
//! What it cannot see: a page already on the host does not fault, so only the first touch after the GPU had
//! the page is seen, and none at all where the driver keeps managed memory on the host or maps it for both
//! (systems with hardware coherence). The record names no thread: the fault is given to the thread that last
//! issued work before it (exact when one thread issues work), and no read or write: it is taken as a read.
//! Driver's own accesses (a program counter in the CUDA stack's code) are left out.
//! Touches CUPTI's activity configuration, this file's queues and the state's call sites and memory kinds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use cudarc::cupti::sys::CUpti_ActivityUnifiedMemoryCounterKind;
use rustc_hash::FxHashMap as HashMap;
use streamtrace_format::{AllocKind, FaultKind, MemoryKind, WatchState};

use super::hold;
use crate::origin::now_ns;
use crate::process_state::ProcessState;
use crate::record::{Batch, Call, Entry, Record};
use crate::watch_state::WatchCell;

/// The watch's state: off until it is asked for.
static STATE: WatchCell = WatchCell::off();
/// Our clock minus CUPTI's, measured once.
static CLOCK_OFFSET: AtomicI64 = AtomicI64::new(0);
/// Faults CUPTI delivered, not yet made records (its thread may be inside a callback that holds the state lock).
static DELIVERED: Mutex<Vec<Delivered>> = Mutex::new(Vec::new());
static WAITING: AtomicBool = AtomicBool::new(false);
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static RECORDED: AtomicU64 = AtomicU64::new(0);
static IGNORED: AtomicU64 = AtomicU64::new(0);
static HAS_MANAGED: AtomicBool = AtomicBool::new(false);
/// The longest a fault took from its time to its delivery, for `STREAMTRACE_HOST_WATCH_STATS`.
static LATEST_NS: AtomicU64 = AtomicU64::new(0);
/// Each thread's latest operation times, for naming a fault's thread.
static LAST_OPS: Mutex<Option<HashMap<u64, VecDeque<u64>>>> = Mutex::new(None);
/// Operation times kept per thread.
const KEPT_OPS: usize = 64;
const PAGE: u64 = 4096;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Delivered {
    pc: u64,
    time: u64,
    page: u64,
}

pub fn state() -> WatchState {
    STATE.get()
}

fn set_state(state: WatchState) {
    STATE.set(state);
}

pub fn watching() -> bool {
    state() == WatchState::On
}

/// Whether faults may come: the watch is on and the program has managed memory.
pub fn expecting() -> bool {
    watching() && HAS_MANAGED.load(Ordering::Relaxed)
}

pub fn recorded_faults() -> u64 {
    RECORDED.load(Ordering::Relaxed)
}

pub fn ignored_faults() -> u64 {
    IGNORED.load(Ordering::Relaxed)
}

/// Whether the host watch was asked for in this process: CUPTI is asked for the faults at its first managed
/// allocation (activity tracing is not switched on for programs that never have managed memory).
static ASKED: AtomicBool = AtomicBool::new(false);

/// The host watch is asked for: the faults are asked of CUPTI once the program allocates managed memory.
pub fn ask() {
    ASKED.store(true, Ordering::Relaxed);
}

pub fn asked() -> bool {
    ASKED.load(Ordering::Relaxed)
}

/// Asks CUPTI for CPU page faults on managed memory; says once, plainly, when it will not give them.
fn enable() {
    let outcome = crate::activity::enable_cpu_page_faults(delivered);
    match outcome {
        Ok(()) => {
            let mut cupti_now = 0u64;
            // Safety: writes CUPTI's current timestamp into a local.
            if unsafe { cudarc::cupti::sys::cuptiGetTimestamp(&mut cupti_now) }
                == cudarc::cupti::sys::CUptiResult::CUPTI_SUCCESS
            {
                CLOCK_OFFSET.store(now_ns() as i64 - cupti_now as i64, Ordering::Relaxed);
            }
            set_state(WatchState::On);
        }
        Err(e) => {
            set_state(WatchState::Unsupported);
            eprintln!(
                "streamtrace: host accesses of managed memory are not seen: CUPTI gives no CPU page faults here ({e})"
            );
        }
    }
}

/// At exit: says once when the program had managed memory and no fault of it was ever delivered; with
/// `STREAMTRACE_HOST_WATCH_STATS`, how many were delivered and how late.
pub fn say_if_silent() {
    if std::env::var_os("STREAMTRACE_HOST_WATCH_STATS").is_some() {
        eprintln!(
            "streamtrace: managed faults: {} delivered, {} recorded, {} the driver's; the latest arrived {:.1} ms after its fault",
            RECEIVED.load(Ordering::Relaxed),
            RECORDED.load(Ordering::Relaxed),
            IGNORED.load(Ordering::Relaxed),
            LATEST_NS.load(Ordering::Relaxed) as f64 / 1e6
        );
    }
    if watching() && HAS_MANAGED.load(Ordering::Relaxed) && RECEIVED.load(Ordering::Relaxed) == 0 {
        eprintln!(
            "streamtrace: the program allocated managed memory and CUPTI reported no CPU page fault on it: if its host code touched that memory, this driver does not deliver the faults and those accesses were not seen"
        );
    }
}

/// A unified-memory counter record from an activity buffer (activity.rs). Offsets in
/// CUpti_ActivityUnifiedMemoryCounter3: counterKind 4, value (the faulting program counter) 8, start 16,
/// address 32, processId 52.
///
/// # Safety
/// `record` points to a whole CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER record.
pub unsafe fn delivered(record: *const u8) {
    // Safety: the record's fields at these offsets (above); reads need no alignment.
    let (kind, pc, start, address, pid) = unsafe {
        (
            record.add(4).cast::<u32>().read_unaligned(),
            record.add(8).cast::<u64>().read_unaligned(),
            record.add(16).cast::<u64>().read_unaligned(),
            record.add(32).cast::<u64>().read_unaligned(),
            record.add(52).cast::<u32>().read_unaligned(),
        )
    };
    let cpu_fault =
        CUpti_ActivityUnifiedMemoryCounterKind::CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT as u32;
    if kind != cpu_fault || pid != std::process::id() {
        return;
    }
    RECEIVED.fetch_add(1, Ordering::Relaxed);
    let time = (start as i64).wrapping_add(CLOCK_OFFSET.load(Ordering::Relaxed)) as u64;
    LATEST_NS.fetch_max(now_ns().saturating_sub(time), Ordering::Relaxed);
    if let Ok(mut queue) = DELIVERED.lock() {
        queue.push(Delivered { pc, time, page: address & !(PAGE - 1) });
        WAITING.store(true, Ordering::Release);
    }
}

/// Notes what a call's records say that matters here: managed memory appearing (the first asks CUPTI for the
/// faults), and when each thread issued work.
pub fn recorded(batch: &Batch, first: usize) {
    let Some(entries) = batch.entries.get(first..) else { return };
    if state() == WatchState::Off
        && entries.iter().any(|e| matches!(e.record, Record::Alloc { kind: AllocKind::Managed, .. }))
    {
        enable();
    }
    if !watching() {
        return;
    }
    let relevant = |record: &Record| {
        matches!(
            record,
            Record::Alloc { kind: AllocKind::Managed, .. }
                | Record::Kernel { .. }
                | Record::Memcpy { .. }
                | Record::PitchedMemcpy { .. }
                | Record::Memset { .. }
        )
    };
    if !entries.iter().any(|e| relevant(&e.record)) {
        return;
    }
    let mut ops = LAST_OPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for entry in entries {
        match entry.record {
            Record::Alloc { kind: AllocKind::Managed, .. } => {
                HAS_MANAGED.store(true, Ordering::Relaxed);
                hold::expect_managed_faults();
            }
            Record::Kernel { .. } | Record::Memcpy { .. } | Record::PitchedMemcpy { .. } | Record::Memset { .. } => {
                let times = ops.get_or_insert_with(HashMap::default).entry(entry.call.tid).or_default();
                if times.len() == KEPT_OPS {
                    times.pop_front();
                }
                times.push_back(entry.call.time_ns);
            }
            _ => {}
        }
    }
}

/// The thread a fault at `time` is given to: the one that issued work last before it; else the one with the
/// earliest work kept; else the process's main thread.
fn thread_at(time: u64) -> u64 {
    let ops = LAST_OPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(ops) = ops.as_ref() else { return std::process::id() as u64 };
    let before =
        ops.iter().filter_map(|(tid, times)| times.iter().rev().find(|&&t| t <= time).map(|&t| (t, *tid))).max();
    let earliest = || ops.iter().filter_map(|(tid, times)| times.front().map(|&t| (t, *tid))).min();
    before.or_else(earliest).map_or(std::process::id() as u64, |(_, tid)| tid)
}

/// Faults in a row from one instruction over adjacent pages: one access over them all.
fn coalesce(mut faults: Vec<Delivered>) -> Vec<(Delivered, u64)> {
    faults.sort_by_key(|f| f.time);
    let mut out: Vec<(Delivered, u64)> = Vec::new();
    for fault in faults {
        match out.last_mut() {
            Some((first, bytes)) if first.pc == fault.pc && first.page.saturating_add(*bytes) == fault.page => {
                *bytes += PAGE;
            }
            _ => out.push((fault, PAGE)),
        }
    }
    out
}

/// Under the state lock: the faults delivered since become late records.
pub fn take(state: &mut ProcessState) {
    if !WAITING.load(Ordering::Acquire) || !WAITING.swap(false, Ordering::AcqRel) {
        return;
    }
    let delivered = std::mem::take(&mut *DELIVERED.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    for (fault, bytes) in coalesce(delivered) {
        if state.memory_at(fault.page) != MemoryKind::Managed {
            continue;
        }
        let mut declared = Vec::new();
        let Some(site) = state.sites.site_of_instruction(fault.pc, |record| declared.push(record)) else {
            IGNORED.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        RECORDED.fetch_add(1, Ordering::Relaxed);
        let call = Call { tid: thread_at(fault.time), time_ns: fault.time, correlation: 0, site };
        let mut entries: Vec<Entry> = declared.into_iter().map(|record| Entry { call, record }).collect();
        let access =
            Record::HostAccess { address: fault.page, bytes, write: false, fault: FaultKind::Managed, host_func: 0 };
        entries.push(Entry { call, record: access });
        hold::late_at_time(fault.time, entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_of_one_instruction_on_adjacent_pages_are_one_access() {
        let f = |pc, time, page| Delivered { pc, time, page };
        let out =
            coalesce(vec![f(1, 30, 0x3000), f(1, 10, 0x1000), f(1, 20, 0x2000), f(2, 40, 0x4000), f(2, 50, 0x9000)]);
        let spans: Vec<(u64, u64)> = out.iter().map(|(d, bytes)| (d.page, *bytes)).collect();
        assert_eq!(spans, [(0x1000, 3 * PAGE), (0x4000, PAGE), (0x9000, PAGE)]);
    }

    #[test]
    fn a_fault_goes_to_the_thread_that_issued_work_last_before_it() {
        set_state(WatchState::On);
        *LAST_OPS.lock().unwrap() = None;
        let mut batch = Batch::default();
        let launch = |tid, time| Entry {
            call: Call { tid, time_ns: time, correlation: 0, site: 0 },
            record: Record::Kernel {
                stream: 1,
                function: 0,
                first_pointer: 0,
                pointer_count: 0,
                api: "cuLaunchKernel",
                known: None,
            },
        };
        batch.entries.extend([launch(7, 100), launch(8, 200), launch(7, 300)]);
        recorded(&batch, 0);
        assert_eq!(thread_at(250), 8);
        assert_eq!(thread_at(350), 7);
        assert_eq!(thread_at(50), 7, "before any work: the thread with the earliest");
    }
}
