//! Which pinned buffers the GPU may be using, from the records the capture has just made: an asynchronous copy
//! from or into pinned memory, or a kernel given a pointer into it, puts the pages entirely inside that range
//! under guard when its call returns (the driver's own accesses during the call are over); the host learning
//! that the work is done (DESIGN.md, host synchronization: a stream, event or device synchronization, a query that returned
//! success) lifts the guard. A D2H destination (and a kernel's written block) is guarded against reads and
//! writes, an H2D source (a kernel's `const` block) against writes only.
//!
//! What is in flight is worked out as the capture sees it, not as the analyzer will: a guard lifted too late
//! costs a fault that records an access the analyzer then finds ordered; one lifted too early misses an access.
//! Touches the guard table (guards.rs) and this file's bookkeeping, under its own lock, which the signal
//! handler never takes.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rustc_hash::FxHashMap as HashMap;
use streamtrace_format::{AllocKind, FreeKind, MemoryKind};

use super::graph_touches::{GraphTouches, Touch};
use super::{counters, guards};
use crate::args::PointerArg;
use crate::graph_record::{GraphRecord, NodeBody};
use crate::record::{Batch, Record, SyncTarget};

thread_local! {
    /// How deep this thread is in driver calls the capture sees (enter minus exit callbacks): a fault then is
    /// the driver's access. Read by the signal handler: a plain cell.
    static IN_DRIVER: Cell<u32> = const { Cell::new(0) };
    /// Guards to arm when this thread's current driver call returns.
    static PLANNED: RefCell<Vec<Plan>> = const { RefCell::new(Vec::new()) };
    /// What this thread's current synchronization will have made known complete when it returns: (stream,
    /// its guarded operations up to then), taken at the call's entry.
    static LEARNING: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Whether the calling thread is inside a driver call (async-signal-safe).
pub fn in_driver_call() -> bool {
    IN_DRIVER.with(Cell::get) > 0
}

/// A driver call's enter or exit callback passes: at the exit of the outermost one, the guards its records
/// asked for are armed.
pub fn passing(at_exit: bool) {
    let depth = IN_DRIVER.with(|depth| {
        let now = if at_exit { depth.get().saturating_sub(1) } else { depth.get() + 1 };
        depth.set(now);
        now
    });
    if at_exit && depth == 0 {
        // `try_with`: a thread's driver calls go on while it exits (a library's static destructor freeing its
        // memory during `exit`), after these lists are gone; then nothing was planned or learned into them.
        let plans = PLANNED.try_with(|planned| std::mem::take(&mut *planned.borrow_mut())).unwrap_or_default();
        if !plans.is_empty() {
            with_watch(|watch| plans.into_iter().for_each(|plan| watch.arm(plan)));
        }
        let learned = LEARNING.try_with(|learning| std::mem::take(&mut *learning.borrow_mut())).unwrap_or_default();
        if !learned.is_empty() {
            with_watch(|watch| watch.learned(&learned));
        }
    }
}

/// A range to guard once the call returns, and the stream work it waits for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Plan {
    start: u64,
    end: u64,
    prot: i32,
    stream: u64,
    seq: u64,
}

/// A pinned block the capture saw allocated (`cuMemHostAlloc`, `cuMemAllocHost`) or registered.
#[derive(Copy, Clone, Debug)]
struct Block {
    start: u64,
    end: u64,
    registered: bool,
}

/// A guarded range: its slot in the guard table, and the work (stream, its guarded operations so far) that
/// must be known done before it is lifted.
#[derive(Debug)]
struct Guarded {
    slot: usize,
    start: u64,
    end: u64,
    prot: i32,
    waits: Vec<(u64, u64)>,
}

#[derive(Default)]
struct Watch {
    /// Operations put under guard on each stream so far: the position of the latest one.
    issued: HashMap<u64, u64>,
    /// What each event's last record covers: its stream, and that stream's guarded operations before it.
    events: HashMap<u64, (u64, u64)>,
    guarded: Vec<Guarded>,
    blocks: HashMap<u64, Block>,
    /// Block ids by start address.
    by_start: BTreeMap<u64, u64>,
    /// Whether registered memory may be guarded (the kernel keeps a pinned page's identity on a write fault).
    registered_ok: bool,
    /// What graphs touch of the blocks, for their launches; work captured into them runs only then.
    graphs: GraphTouches,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);
/// Whether the capture saw a pinned block allocated (it stays set: a cheap test on every recorded call).
static HAS_BLOCKS: AtomicBool = AtomicBool::new(false);

fn with_watch<R>(f: impl FnOnce(&mut Watch) -> R) -> R {
    let mut slot = WATCH.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(slot.get_or_insert_with(Watch::default))
}

/// Says whether registered (not driver-allocated) pinned memory may be guarded.
pub fn allow_registered(allowed: bool) {
    with_watch(|watch| watch.registered_ok = allowed);
}

const PAGE: u64 = 4096;

/// The page-aligned part of `[start, end)`: whole pages only, so that no byte outside the range is guarded.
fn whole_pages(start: u64, end: u64) -> Option<(u64, u64)> {
    let first = start.checked_add(PAGE - 1)? & !(PAGE - 1);
    let last = end & !(PAGE - 1);
    (first < last).then_some((first, last))
}

impl Watch {
    /// The pinned block holding `[address, address + bytes)`, if the capture saw it and may guard it.
    fn block_of(&self, address: u64, bytes: u64) -> Option<Block> {
        let (_, id) = self.by_start.range(..=address).next_back()?;
        let block = *self.blocks.get(id)?;
        let inside = address.checked_add(bytes).is_some_and(|end| end <= block.end) && address >= block.start;
        (inside && (!block.registered || self.registered_ok)).then_some(block)
    }

    /// The blocks a kernel's pointer words reach, each with the strictest protection its pointers ask for.
    fn kernel_touches(&self, pointers: &[PointerArg]) -> Vec<Touch> {
        let mut touched: Vec<Touch> = Vec::new();
        for pointer in pointers {
            let Some(block) = self.block_of(pointer.address, 1) else { continue };
            let prot = if pointer.writes { libc::PROT_NONE } else { libc::PROT_READ };
            match touched.iter_mut().find(|t| t.address == block.start) {
                Some(touch) => touch.prot = touch.prot.min(prot),
                None => touched.push(Touch { address: block.start, bytes: block.end - block.start, prot }),
            }
        }
        touched
    }

    /// What a copy reaches of the blocks: its source is read, its destination written.
    fn copy_touches(&self, from: Option<(u64, u64)>, to: Option<(u64, u64)>) -> Vec<Touch> {
        let side = |range: Option<(u64, u64)>, prot| {
            let (address, bytes) = range?;
            self.block_of(address, bytes).map(|_| Touch { address, bytes, prot })
        };
        side(from, libc::PROT_READ).into_iter().chain(side(to, libc::PROT_NONE)).collect()
    }

    /// Work on `stream` touches `touches`: guarded when the call returns, or, on a capturing stream, kept for the
    /// captured graph's launches.
    fn issue(&mut self, stream: u64, touches: Vec<Touch>, planned: &mut Vec<Plan>) {
        match self.graphs.capture_of(stream) {
            Some(origin) => touches.into_iter().for_each(|touch| self.graphs.captured(origin, touch)),
            None => {
                for touch in touches {
                    self.plan(stream, touch.address, touch.address.saturating_add(touch.bytes), touch.prot, planned);
                }
            }
        }
    }

    fn plan(&mut self, stream: u64, start: u64, end: u64, prot: i32, planned: &mut Vec<Plan>) {
        let Some((start, end)) = whole_pages(start, end) else { return };
        let seq = self.issued.entry(stream).or_insert(0);
        *seq += 1;
        planned.push(Plan { start, end, prot, stream, seq: *seq });
    }

    /// Guards a planned range; an overlapping guard is merged into it (the wider range, the stricter
    /// protection, the waits of both).
    fn arm(&mut self, plan: Plan) {
        if let Some(same) = self
            .guarded
            .iter_mut()
            .find(|g| g.start <= plan.start && plan.end <= g.end && g.prot <= plan.prot && !guards::lifted(g.slot))
        {
            same.waits.push((plan.stream, plan.seq));
            return;
        }
        let (mut start, mut end, mut prot) = (plan.start, plan.end, plan.prot);
        let mut waits = vec![(plan.stream, plan.seq)];
        let (overlapping, rest): (Vec<Guarded>, Vec<Guarded>) =
            std::mem::take(&mut self.guarded).into_iter().partition(|g| g.start < end && start < g.end);
        self.guarded = rest;
        for g in &overlapping {
            start = start.min(g.start);
            end = end.max(g.end);
            prot = prot.min(g.prot);
            waits.extend_from_slice(&g.waits);
        }
        match guards::arm(start, end, prot) {
            Some(slot) => {
                overlapping.iter().for_each(|g| guards::forget(g.slot));
                counters::WINDOWS.fetch_add(1, Ordering::Relaxed);
                self.guarded.push(Guarded { slot, start, end, prot, waits });
            }
            None => {
                counters::UNWATCHED.fetch_add(1, Ordering::Relaxed);
                self.guarded.extend(overlapping);
            }
        }
    }

    /// The host knows the work `done` says is complete: guards that wait for nothing else are lifted.
    fn completed(&mut self, done: impl Fn(u64, u64) -> bool) {
        self.guarded.retain_mut(|g| {
            g.waits.retain(|&(stream, seq)| !done(stream, seq));
            let keep = !g.waits.is_empty();
            if !keep {
                guards::lift(g.slot);
            }
            keep
        });
    }

    /// A block is about to be freed: its guards are lifted first.
    fn freed(&mut self, block: Block) {
        self.guarded.retain(|g| {
            let overlaps = g.start < block.end && block.start < g.end;
            if overlaps {
                guards::lift(g.slot);
            }
            !overlaps
        });
    }

    /// The guarded work a synchronization with `target` waits for, as it stands now: (stream, its guarded
    /// operations up to now).
    fn covered_by(&self, target: &SyncTarget) -> Vec<(u64, u64)> {
        match *target {
            SyncTarget::Stream(stream) => vec![(stream, self.issued.get(&stream).copied().unwrap_or(0))],
            SyncTarget::Event(event) => self.events.get(&event).map(|&covered| vec![covered]).unwrap_or_default(),
            SyncTarget::Context(_) => self.issued.iter().map(|(&stream, &upto)| (stream, upto)).collect(),
        }
    }

    /// The host now knows the `covered` work complete.
    fn learned(&mut self, covered: &[(u64, u64)]) {
        self.completed(|s, seq| covered.iter().any(|&(stream, upto)| stream == s && seq <= upto));
    }
}

/// Host memory the GPU reaches directly, whose host accesses the guards see: pinned and registered buffers, and
/// managed memory (where the driver delivers no CPU page faults for it, as on the H200 machine, the guards are
/// what sees the host's touches at all; where it does, a guard's fault comes first, with the thread and the
/// direction the page fault lacks).
fn watched(memory: MemoryKind) -> bool {
    matches!(memory, MemoryKind::Pinned | MemoryKind::Managed)
}

/// A kernel record's pointer words in the batch.
fn pointer_words(batch: &Batch, first: u32, count: u32) -> &[PointerArg] {
    let first = first as usize;
    batch.pointers.get(first..first.saturating_add(count as usize)).unwrap_or(&[])
}

/// Blocks guarded at most for one host function's run (each costs two `mprotect` calls a run): a quarter of the
/// guard table, so that work issued meanwhile still finds slots.
const MAX_HOST_FUNCTION_BLOCKS: usize = 64;

/// The guard waits of host function `id`'s run, kept apart from every stream's (handles are addresses far
/// below; the window is never in `issued`, so no synchronization covers it).
fn host_function_window(id: u64) -> u64 {
    u64::MAX - id
}

/// A wrapped host function starts on the calling (driver's) thread: every block the capture may guard and that
/// no guard covers now is under guard until it returns, so that its own loads and stores fault and become its
/// accesses (DESIGN.md, host functions). Blocks are otherwise guarded only while GPU work touches them: a host
/// function that fills a buffer no work touches yet would go unseen. A block GPU work guards (or guarded, in a
/// window already lifted by a fault) keeps its guard as the work set it: merged, the window would widen it,
/// make it stricter and arm it again past the run. Other threads' accesses in the window fault too, and are
/// theirs, as in any window.
pub fn host_function_starts(id: u64) {
    if !HAS_BLOCKS.load(Ordering::Relaxed) {
        return;
    }
    with_watch(|watch| {
        let window = host_function_window(id);
        let under_work = |b: &Block| watch.guarded.iter().any(|g| g.start < b.end && b.start < g.end);
        let mut blocks: Vec<Block> = (watch.blocks.values())
            .filter(|b| (!b.registered || watch.registered_ok) && !under_work(b))
            .copied()
            .collect();
        blocks.sort_unstable_by_key(|b| b.start);
        let plans: Vec<Plan> = (blocks.into_iter().take(MAX_HOST_FUNCTION_BLOCKS))
            .filter_map(|b| whole_pages(b.start, b.end))
            .map(|(start, end)| Plan { start, end, prot: libc::PROT_NONE, stream: window, seq: 1 })
            .collect();
        plans.into_iter().for_each(|plan| watch.arm(plan));
    });
}

/// The host function `id` returned: its window's guards are lifted.
pub fn host_function_returned(id: u64) {
    if !HAS_BLOCKS.load(Ordering::Relaxed) {
        return;
    }
    let window = host_function_window(id);
    with_watch(|watch| watch.completed(|stream, _| stream == window));
}

/// Reads the records a call has just made (`batch.entries[first..]`): pinned blocks coming and going, work that
/// touches them, events recorded and what the host learned complete. Guards are planned for the call's exit;
/// lifts happen now (a free must lift before the driver frees).
pub fn recorded(batch: &Batch, first: usize) {
    let Some(entries) = batch.entries.get(first..) else { return };
    // A program with no pinned block the capture saw has nothing to guard: its launches, events and
    // synchronizations need no look (a launch-bound program pays nothing).
    let blocks = HAS_BLOCKS.load(Ordering::Relaxed);
    let relevant = |record: &Record| match record {
        Record::Alloc { kind, .. } => matches!(kind, AllocKind::Host | AllocKind::Managed),
        Record::Free { kind: FreeKind::Host, .. } => true,
        // Managed memory is freed by cuMemFree, as device memory is.
        Record::Free { kind: FreeKind::Synchronous, .. } => blocks,
        Record::Memcpy { synchronous: false, memory: (from, to), .. } => watched(*from) || watched(*to),
        Record::Kernel { .. } | Record::EventRecord { .. } | Record::Sync { .. } => blocks,
        // Graph nodes and launches, and the waits that join streams into a capture.
        Record::Graph { .. } | Record::Wait { .. } => blocks,
        Record::Query { ready, .. } => *ready && blocks,
        _ => false,
    };
    // Most calls touch no pinned memory and learn nothing: no lock for them.
    if !entries.iter().any(|e| relevant(&e.record)) {
        return;
    }
    let mut planned = Vec::new();
    with_watch(|watch| {
        for entry in entries {
            match &entry.record {
                Record::Alloc { id, address, bytes, kind: AllocKind::Host | AllocKind::Managed, api, .. } => {
                    let block = Block {
                        start: *address,
                        end: address.saturating_add(*bytes),
                        registered: api.contains("Register"),
                    };
                    watch.blocks.insert(*id, block);
                    watch.by_start.insert(*address, *id);
                    HAS_BLOCKS.store(true, Ordering::Relaxed);
                }
                Record::Free { id, kind: FreeKind::Host | FreeKind::Synchronous, .. } => {
                    if let Some(block) = watch.blocks.remove(id) {
                        watch.by_start.remove(&block.start);
                        watch.freed(block);
                    }
                }
                Record::Memcpy { stream, src, dst, bytes, synchronous: false, memory: (from, to), .. } => {
                    let from = watched(*from).then_some((*src, *bytes));
                    let to = watched(*to).then_some((*dst, *bytes));
                    let touches = watch.copy_touches(from, to);
                    watch.issue(*stream, touches, &mut planned);
                }
                Record::Kernel { stream, first_pointer, pointer_count, .. } => {
                    let touches = watch.kernel_touches(pointer_words(batch, *first_pointer, *pointer_count));
                    watch.issue(*stream, touches, &mut planned);
                }
                Record::Graph { graph: GraphRecord::Launch { exec, stream }, .. } => {
                    // A launch's touches are checked against the blocks again: one may have been freed since.
                    let touches: Vec<Touch> = (watch.graphs.launched(*exec).iter())
                        .filter(|t| watch.block_of(t.address, t.bytes).is_some())
                        .copied()
                        .collect();
                    watch.issue(*stream, touches, &mut planned);
                }
                Record::Graph { graph, .. } => {
                    let node = match graph {
                        GraphRecord::Node { body, .. } | GraphRecord::NodeUpdate { body, .. } => match body {
                            NodeBody::Kernel { first_pointer, pointer_count, .. } => {
                                watch.kernel_touches(pointer_words(batch, *first_pointer, *pointer_count))
                            }
                            NodeBody::Copy { from, to } => watch.copy_touches(*from, *to),
                            _ => Vec::new(),
                        },
                        _ => Vec::new(),
                    };
                    watch.graphs.apply(graph, node);
                }
                Record::EventRecord { event, stream, .. } => {
                    // Recorded inside a capture, the event is a node of the graph: the event itself is not
                    // recorded now, and a synchronization with it learns nothing of the stream.
                    if watch.graphs.capture_of(*stream).is_none() {
                        let upto = watch.issued.get(stream).copied().unwrap_or(0);
                        watch.events.insert(*event, (*stream, upto));
                    }
                    watch.graphs.event_recorded(*event, *stream);
                }
                Record::Wait { stream, event, .. } => watch.graphs.waited(*stream, *event),
                // A synchronization is recorded as it starts: the work it waits for is complete only when it
                // returns, and a guard lifted at its start would miss what another thread (a host function on a
                // driver thread) touches meanwhile. Lifted at the call's exit; a query, recorded at exit, now.
                Record::Sync { target, .. } | Record::Query { target, ready: true, .. } => {
                    let covered = watch.covered_by(target);
                    // A thread that is exiting has no list to keep it in until the call returns: learned now.
                    let kept = in_driver_call()
                        && LEARNING.try_with(|learning| learning.borrow_mut().extend(covered.iter().copied())).is_ok();
                    if !kept {
                        watch.learned(&covered);
                    }
                }
                _ => {}
            }
        }
    });
    if !planned.is_empty() {
        // A thread that is exiting arms no guard: what it would catch comes after the program's last word.
        let _ = PLANNED.try_with(|p| p.borrow_mut().extend(planned));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::PointerArg;
    use crate::record::{Call, Entry};

    /// The watch is one per process: tests that reset it take turns.
    static WATCH_TESTS: Mutex<()> = Mutex::new(());

    /// A library's static destructor that frees its memory during `exit` makes driver calls after the thread's
    /// thread-locals are gone (cuFFT's plans do): the callbacks pass them without a panic, which would abort
    /// the program.
    #[test]
    fn a_driver_call_made_while_its_thread_exits_passes_without_its_thread_locals() {
        struct CallAtExit;
        impl Drop for CallAtExit {
            fn drop(&mut self) {
                passing(false);
                passing(true);
            }
        }
        thread_local! {
            static AT_EXIT: RefCell<Option<CallAtExit>> = const { RefCell::new(None) };
        }
        let exited = std::thread::spawn(|| {
            // Registered before this file's lists, so destroyed after them (in reverse order).
            AT_EXIT.with(|slot| *slot.borrow_mut() = Some(CallAtExit));
            passing(false);
            PLANNED.with(|planned| planned.borrow_mut().push(Plan { start: 0, end: 0, prot: 0, stream: 0, seq: 0 }));
            LEARNING.with(|learning| learning.borrow_mut().clear());
            PLANNED.with(|planned| planned.borrow_mut().clear());
            passing(true);
        })
        .join();
        assert!(exited.is_ok(), "the thread exits");
    }

    /// This test's turn with an empty watch, held until the guard drops.
    fn fresh_watch() -> std::sync::MutexGuard<'static, ()> {
        let turn = WATCH_TESTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *WATCH.lock().unwrap() = None;
        turn
    }

    #[test]
    fn only_whole_pages_inside_the_range_are_guarded() {
        assert_eq!(whole_pages(0x1000, 0x3000), Some((0x1000, 0x3000)));
        assert_eq!(whole_pages(0x1001, 0x3fff), Some((0x2000, 0x3000)));
        assert_eq!(whole_pages(0x1001, 0x2fff), None, "no whole page");
    }

    fn call() -> Call {
        Call { tid: 1, time_ns: 1, correlation: 0, site: 0 }
    }

    /// A pinned block of three pages, mapped for the test, and the batch that allocated it.
    fn pinned(batch: &mut Batch) -> u64 {
        // Safety: a fresh anonymous mapping, left to the process's end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                3 * 4096,
                guards::UNGUARDED,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as u64;
        let alloc = Record::Alloc {
            id: 1,
            address: base,
            bytes: 3 * 4096,
            kind: AllocKind::Host,
            stream: None,
            label: None,
            api: "cuMemHostAlloc",
        };
        batch.push(call(), alloc);
        base
    }

    fn copy_to(dst: u64, stream: u64) -> Record {
        Record::Memcpy {
            stream,
            copy: streamtrace_format::CopyKind::DtoH,
            src: 0xd000_0000,
            dst,
            bytes: 3 * 4096,
            synchronous: false,
            memory: (MemoryKind::Device, MemoryKind::Pinned),
            api: "cuMemcpyDtoHAsync",
        }
    }

    #[test]
    fn a_copy_is_guarded_from_its_return_until_its_stream_is_synchronized() {
        let _turn = fresh_watch();
        let mut batch = Batch::default();
        let base = pinned(&mut batch);
        recorded(&batch, 0);
        let first = batch.entries.len();
        batch.push(call(), copy_to(base, 7));
        passing(false);
        recorded(&batch, first);
        assert_eq!(guards::claim(base), guards::Claim::NotOurs, "not before the call returns");
        passing(true);
        let slot = with_watch(|w| w.guarded.iter().map(|g| g.slot).collect::<Vec<_>>());
        assert_eq!(slot.len(), 1);
        let first = batch.entries.len();
        batch.push(call(), Record::Sync { target: SyncTarget::Stream(8), api: "cuStreamSynchronize" });
        recorded(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 1, "another stream's synchronization lifts nothing");
        let first = batch.entries.len();
        batch.push(call(), Record::EventRecord { event: 3, stream: 7, api: "cuEventRecord" });
        batch.push(call(), Record::Query { target: SyncTarget::Event(3), ready: false, api: "cuEventQuery" });
        recorded(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 1, "a query that found the event not ready lifts nothing");
        let first = batch.entries.len();
        batch.push(call(), Record::Sync { target: SyncTarget::Event(3), api: "cuEventSynchronize" });
        recorded(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 0);
        // Safety: lifted: the page is the program's again.
        unsafe { *(base as *mut u8) = 1 };
    }

    #[test]
    fn a_host_function_runs_with_every_block_guarded_and_work_keeps_its_own_guards() {
        let _turn = fresh_watch();
        let mut batch = Batch::default();
        let base = pinned(&mut batch);
        recorded(&batch, 0);
        assert_eq!(guards::claim(base), guards::Claim::NotOurs, "no work touches the block");
        host_function_starts(41);
        let guarded = with_watch(|w| w.guarded.iter().map(|g| (g.start, g.end, g.prot)).collect::<Vec<_>>());
        assert_eq!(guarded, vec![(base, base + 3 * 4096, libc::PROT_NONE)], "guarded while the function runs");
        host_function_returned(41);
        assert_eq!(with_watch(|w| w.guarded.len()), 0, "lifted when it returns");
        // Work in flight keeps its guard past a host function's run.
        let first = batch.entries.len();
        batch.push(call(), copy_to(base, 7));
        driver_call(&batch, first);
        let before =
            with_watch(|w| w.guarded.iter().map(|g| (g.start, g.end, g.prot, g.waits.clone())).collect::<Vec<_>>());
        host_function_starts(42);
        let during =
            with_watch(|w| w.guarded.iter().map(|g| (g.start, g.end, g.prot, g.waits.clone())).collect::<Vec<_>>());
        assert_eq!(during, before, "a block work guards keeps its guard as the work set it");
        host_function_returned(42);
        assert_eq!(with_watch(|w| w.guarded.len()), 1, "the copy's guard stays");
        let first = batch.entries.len();
        batch.push(call(), Record::Sync { target: SyncTarget::Stream(7), api: "cuStreamSynchronize" });
        recorded(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 0);
        // Safety: lifted: the page is the program's again.
        unsafe { *(base as *mut u8) = 1 };
    }

    #[test]
    fn a_synchronization_lifts_its_guards_when_it_returns_not_when_it_starts() {
        let _turn = fresh_watch();
        let mut batch = Batch::default();
        let base = pinned(&mut batch);
        recorded(&batch, 0);
        let first = batch.entries.len();
        batch.push(call(), copy_to(base, 7));
        driver_call(&batch, first);
        // The synchronization is recorded at its entry, and waits.
        let first = batch.entries.len();
        batch.push(call(), Record::Sync { target: SyncTarget::Context(0), api: "cuCtxSynchronize" });
        passing(false);
        recorded(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 1, "still guarded while the synchronization waits");
        passing(true);
        assert_eq!(with_watch(|w| w.guarded.len()), 0, "lifted when it returns");
        // Safety: lifted: the page is the program's again.
        unsafe { *(base as *mut u8) = 2 };
    }

    #[test]
    fn a_kernel_writing_managed_memory_guards_it_against_host_reads_until_the_host_learns_it_done() {
        let _turn = fresh_watch();
        let mut batch = Batch::default();
        let base = pinned(&mut batch);
        if let Some(Entry { record: Record::Alloc { kind, api, .. }, .. }) = batch.entries.last_mut() {
            *kind = AllocKind::Managed;
            *api = "cuMemAllocManaged";
        }
        recorded(&batch, 0);
        let first = batch.entries.len();
        batch.pointers.push(PointerArg { address: base + 8, writes: true });
        batch.push(call(), kernel_on(7));
        driver_call(&batch, first);
        assert_eq!(guards::claim(base + 4096), guards::Claim::Lifted { start: base, end: base + 3 * 4096 });
        // Safety: the claim lifted the guard: the pages are the program's again.
        unsafe { *(base as *mut u8) = 3 };
        let first = batch.entries.len();
        batch.push(call(), Record::Free { id: 1, kind: FreeKind::Synchronous, stream: None, api: "cuMemFree" });
        recorded(&batch, first);
        assert!(with_watch(|w| w.blocks.is_empty() && w.guarded.is_empty()), "cuMemFree forgets the managed block");
    }

    fn graph(record: GraphRecord) -> Record {
        Record::Graph { graph: record, api: "cuGraph" }
    }

    /// A launch on `stream` whose one pointer word is the batch's first.
    fn kernel_on(stream: u64) -> Record {
        Record::Kernel { stream, function: 0, first_pointer: 0, pointer_count: 1, api: "cuLaunchKernel", known: None }
    }

    /// A driver call that made `batch.entries[first..]`: entered, its records read, returned.
    fn driver_call(batch: &Batch, first: usize) {
        passing(false);
        recorded(batch, first);
        passing(true);
    }

    #[test]
    fn a_graph_launch_guards_what_its_nodes_touch_and_captured_work_waits_for_the_launch() {
        let _turn = fresh_watch();
        let mut batch = Batch::default();
        let base = pinned(&mut batch);
        recorded(&batch, 0);
        // A kernel captured on stream 7 writes the block: nothing runs yet, so nothing is guarded.
        let first = batch.entries.len();
        batch.pointers.push(PointerArg { address: base, writes: true });
        batch.push(call(), graph(GraphRecord::CaptureBegin { stream: 7, into: None }));
        batch.push(call(), kernel_on(7));
        batch.push(call(), graph(GraphRecord::CaptureEnd { stream: 7, graph: Some(30) }));
        // A graph built by hand: a copy node reads the block.
        let from = Some((base + 4096, 4096));
        let node = NodeBody::Copy { from, to: Some((0xd000_0000, 4096)) };
        batch.push(call(), graph(GraphRecord::Node { graph: 31, node: 1, deps: Box::new([]), body: node }));
        batch.push(call(), graph(GraphRecord::Instantiate { graph: 30, exec: 40 }));
        batch.push(call(), graph(GraphRecord::Instantiate { graph: 31, exec: 41 }));
        driver_call(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 0, "captured work and graph building guard nothing");
        let first = batch.entries.len();
        batch.push(call(), graph(GraphRecord::Launch { exec: 41, stream: 9 }));
        driver_call(&batch, first);
        let guarded = with_watch(|w| w.guarded.iter().map(|g| (g.start, g.end, g.prot)).collect::<Vec<_>>());
        assert_eq!(guarded, [(base + 4096, base + 2 * 4096, libc::PROT_READ)], "the copy node's source page");
        let first = batch.entries.len();
        batch.push(call(), graph(GraphRecord::Launch { exec: 40, stream: 9 }));
        driver_call(&batch, first);
        assert_eq!(
            with_watch(|w| w.guarded.iter().map(|g| (g.start, g.end, g.prot)).collect::<Vec<_>>()),
            [(base, base + 3 * 4096, libc::PROT_NONE)],
            "the captured kernel's whole block, merged with the copy's page"
        );
        let first = batch.entries.len();
        batch.push(call(), Record::Sync { target: SyncTarget::Stream(9), api: "cuStreamSynchronize" });
        recorded(&batch, first);
        assert_eq!(with_watch(|w| w.guarded.len()), 0, "the launch stream's synchronization lifts both");
        // Safety: lifted: the pages are the program's again.
        unsafe { *(base as *mut u8) = 4 };
    }
}
