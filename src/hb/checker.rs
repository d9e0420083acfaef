//! The shadow check on a thread of its own (issue 23 item 6, docs/engine-split.md): the engine steps clocks and
//! applies the rules on its thread; a checker thread owns each process's shadow memory and checks every access
//! against it, so that the two halves of the work run on two cores (beside the reader's: `CheckThread::Auto`
//! asks for three).
//!
//! The checker keeps replicas of what a check and a conflict's description read: every stream's and host
//! thread's clock (the engine sends the components its joins raised, in order with the jobs; a stream's own
//! component comes with each access's stamp), and each process's allocation table (fed the same inserts and
//! frees). A conflict goes back as a [`CheckedConflict`] holding everything that depended on the moment of the
//! check; the engine makes it a finding (`race_report`) in the order the conflicts were found, so the findings
//! are those of the check on the engine's own thread.
//!
//! It touches the shadows and the replicas, and nothing of the engine's state: the engine holds only the
//! [`CheckerLink`], and waits for the checker (`drain`) before it reads or changes what a pending conflict's
//! finding depends on (a site collection, a graph's own races, a new whole-block site, the end of a range).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::allocations::AllocationTable;
use super::clock::{Slot, VectorClock, VersionedClock};
use super::shadow::{Conflict, Effect, ShadowMemory, Stamp};
use super::sites::{SiteId, SiteMarks};
use crate::findings::{AccessAction, AllocationRef, NativeId};
use crate::model::{AccessMode, AccessRange, AllocId, Allocation, NativeSite, ProcessId, SourceLocation, StridedView};

/// The later party of a conflict, as the access check hands it to the race report. Here, below the engine's
/// state, because both checks make it: the one on the engine's thread (`access`) and the checker's.
#[derive(Clone, Debug)]
pub(super) struct Later {
    pub(super) site: SiteId,
    pub(super) seq: u64,
    pub(super) origin: u64,
    pub(super) position: Option<u64>,
    pub(super) action: AccessAction,
    /// Its strided view (tier T2), when the access was one.
    pub(super) view: Option<Arc<StridedView>>,
}

/// What an access did, as findings name it.
pub(super) fn action_of(effect: Effect, mode: AccessMode) -> AccessAction {
    match (effect, mode) {
        (Effect::Free, _) => AccessAction::Free,
        (Effect::Alloc, _) => AccessAction::Alloc,
        (Effect::Access, AccessMode::Read) => AccessAction::Read,
        (Effect::Access, AccessMode::Write) => AccessAction::Write,
    }
}

/// Jobs the engine queues before it sends them: a batch is some tens of microseconds of checking, so that the
/// hand-over's cost is spread thin and a barrier waits little.
const JOBS_PER_BATCH: usize = 4096;

/// Batches queued ahead of the checker: few, so that the jobs in flight stay in the shared cache.
const QUEUED_BATCHES: usize = 4;

/// Whose clock a job reads: a stream's, by its slot (which its accesses' stamps carry), or a host clock's.
#[derive(Copy, Clone, Debug)]
enum ClockHolder {
    Stream(Slot),
    Host(usize),
}

/// One step of the checker's work, in the engine's order.
enum Job {
    /// A join raised a component of a clock to `tick`.
    Raise {
        holder: ClockHolder,
        slot: Slot,
        tick: u64,
    },
    /// An access at its stamp's epoch (by the stream of the stamp's slot), checked against the shadow of
    /// `process`.
    Access {
        process: ProcessId,
        range: AccessRange,
        view: Option<Arc<StridedView>>,
        stamp: Stamp,
    },
    /// A free on the host at host clock `host`: the block's range released.
    Release {
        process: ProcessId,
        host: usize,
        range: AccessRange,
        site: SiteId,
        seq: u64,
        origin: u64,
    },
    /// A new block: what the shadow held for its range is forgotten.
    Forget {
        process: ProcessId,
        range: AccessRange,
    },
    /// The allocation table's replica takes a block, or frees one.
    Allocate {
        allocation: Box<Allocation>,
        seq: u64,
    },
    Free {
        process: ProcessId,
        alloc: AllocId,
        keep: bool,
        source: Option<SourceLocation>,
    },
    /// An operation that sent jobs ended: the peak segment count is taken at operation ends.
    OperationEnd {
        process: ProcessId,
    },
    /// A site collection marks the sites the shadows' stamps name.
    MarkSites(SiteMarks),
}

/// A conflict found by the checker, with what its finding reads of that moment.
pub(super) struct CheckedConflict {
    pub(super) conflict: Conflict,
    pub(super) later: Later,
    /// What the later party's clock knew of the earlier party's stream.
    pub(super) known: u64,
    /// The memory, as the allocation table described it then; its native call site, which the engine numbered
    /// when the block was allocated, is looked up there.
    pub(super) allocation: Option<AllocationRef>,
    pub(super) allocation_native: Option<NativeSite>,
}

/// A batch handed back: its jobs' memory to be filled again, the conflicts its checks found, and a site
/// collection's marks when it carried them.
struct Reply {
    jobs: Vec<Job>,
    conflicts: Vec<CheckedConflict>,
    marks: Option<SiteMarks>,
}

/// What the checker counted, handed over when it ends.
#[derive(Default)]
pub(super) struct CheckerTotals {
    pub(super) peak_shadow_segments: usize,
    pub(super) assumed_view_overlaps: u64,
}

/// The engine's end of the checker: the batch being filled, the hand-over's channels, and what the checker's
/// clock replicas hold (so that only the components joins raised are sent).
pub(super) struct CheckerLink {
    batch: Vec<Job>,
    to_checker: Option<SyncSender<Vec<Job>>>,
    replies: Receiver<Reply>,
    /// Batches handed back, the longest back first: their lines have left the checker's core's caches.
    spare: std::collections::VecDeque<Vec<Job>>,
    in_flight: usize,
    /// Conflicts handed back and not yet made findings.
    pub(super) checked: Vec<CheckedConflict>,
    marks: Option<SiteMarks>,
    /// By stream slot: the count of raises its clock had when the replica was last brought to it, and the
    /// replica's components.
    sent_streams: Vec<(u64, VectorClock)>,
    /// By host clock: the replica's components.
    sent_hosts: Vec<VectorClock>,
    /// Whether the operation being applied sent anything that changes a shadow.
    touched: bool,
    /// Reused list of the components a clock's joins raised since its replica was last brought up to date.
    raised: Vec<(Slot, u64)>,
    thread: Option<JoinHandle<CheckerTotals>>,
}

impl CheckerLink {
    /// Starts the checker's thread.
    pub(super) fn start() -> std::io::Result<CheckerLink> {
        let (to_checker, jobs) = sync_channel(QUEUED_BATCHES);
        let (to_engine, replies) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("shadow-check".into())
            .spawn(move || Checker::default().run(jobs, to_engine))?;
        Ok(CheckerLink {
            batch: Vec::with_capacity(JOBS_PER_BATCH),
            to_checker: Some(to_checker),
            replies,
            spare: std::collections::VecDeque::new(),
            in_flight: 0,
            checked: Vec::new(),
            marks: None,
            sent_streams: Vec::new(),
            sent_hosts: Vec::new(),
            touched: false,
            raised: Vec::new(),
            thread: Some(thread),
        })
    }

    /// Queues the check of an access by the stream whose clock (with its own component at the stamp's tick) is
    /// `clock`.
    #[inline]
    pub(super) fn access(
        &mut self,
        process: ProcessId,
        clock: &VersionedClock,
        range: AccessRange,
        view: Option<Arc<StridedView>>,
        stamp: Stamp,
    ) {
        self.bring_stream_clock(clock, stamp.slot);
        self.touched = true;
        let len = self.batch.len();
        assert!(len < self.batch.capacity(), "a batch is made with room for a whole batch");
        // SAFETY: `len` is inside the allocation (checked above), and the slot is written before the length
        // covers it. Written in place: `Vec::push` built the job on the stack and copied it, a store-forwarding
        // stall on every access.
        unsafe {
            self.batch.as_mut_ptr().add(len).write(Job::Access { process, range, view, stamp });
            self.batch.set_len(len + 1);
        }
        if len + 1 >= JOBS_PER_BATCH {
            self.send_batch();
        }
    }

    /// Queues the release of a freed block's range at host clock `host`.
    pub(super) fn release(
        &mut self,
        process: ProcessId,
        host: usize,
        clock: &VectorClock,
        range: AccessRange,
        later: &Later,
    ) {
        if host >= self.sent_hosts.len() {
            self.sent_hosts.resize_with(host + 1, VectorClock::new);
        }
        let sent = &mut self.sent_hosts[host];
        let mut raised = std::mem::take(&mut self.raised);
        raised.extend(clock.components().filter(|&(slot, tick)| sent.get(slot) != tick));
        self.send_raises(ClockHolder::Host(host), &mut raised);
        self.touched = true;
        let (site, seq, origin) = (later.site, later.seq, later.origin);
        self.push(Job::Release { process, host, range, site, seq, origin });
    }

    /// Queues the forgetting of what a new block's range held.
    pub(super) fn forget(&mut self, process: ProcessId, range: AccessRange) {
        self.touched = true;
        self.push(Job::Forget { process, range });
    }

    /// Queues a block for the replica of its process's allocation table.
    pub(super) fn allocate(&mut self, allocation: Allocation, seq: u64) {
        self.push(Job::Allocate { allocation: Box::new(allocation), seq });
    }

    /// Queues a free for the replica of its process's allocation table.
    pub(super) fn free(&mut self, process: ProcessId, alloc: AllocId, keep: bool, source: Option<&SourceLocation>) {
        self.push(Job::Free { process, alloc, keep, source: source.cloned() });
    }

    /// Ends an operation: its process's segment count is taken if it changed a shadow.
    #[inline]
    pub(super) fn operation_end(&mut self, process: ProcessId) {
        if std::mem::take(&mut self.touched) {
            self.push(Job::OperationEnd { process });
        }
    }

    /// Marks the sites the shadows name, once every job before is done.
    pub(super) fn mark_sites(&mut self, marks: SiteMarks) -> SiteMarks {
        self.push(Job::MarkSites(marks));
        self.drain();
        self.marks.take().expect("the checker hands a collection's marks back with its batch")
    }

    /// Waits until every job sent is checked, its conflicts in [`CheckerLink::checked`].
    pub(super) fn drain(&mut self) {
        self.send_batch();
        while self.in_flight > 0 {
            match self.replies.recv() {
                Ok(reply) => self.take_reply(reply),
                Err(_) => self.checker_gone(),
            }
        }
    }

    /// Ends the checker, once every job is checked.
    pub(super) fn finish(&mut self) -> CheckerTotals {
        self.drain();
        self.to_checker = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(totals)) => totals,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => CheckerTotals::default(),
        }
    }

    /// Brings the checker's replica of the clock of the stream at `own` to `clock`, but for the stream's own
    /// component, which each access's stamp carries: the components joins raised since, as jobs.
    #[inline]
    fn bring_stream_clock(&mut self, clock: &VersionedClock, own: Slot) {
        let s = own.index();
        if s >= self.sent_streams.len() {
            self.sent_streams.resize_with(s + 1, Default::default);
        }
        let (raised_seen, sent) = &mut self.sent_streams[s];
        if *raised_seen == clock.raised {
            return;
        }
        *raised_seen = clock.raised;
        let mut raised = std::mem::take(&mut self.raised);
        raised.extend(clock.clock.components().filter(|&(slot, tick)| slot != own && sent.get(slot) != tick));
        self.send_raises(ClockHolder::Stream(own), &mut raised);
    }

    /// Queues the components `raised` of the clock of `holder`, and notes them as the replica's.
    #[inline(never)]
    fn send_raises(&mut self, holder: ClockHolder, raised: &mut Vec<(Slot, u64)>) {
        let sent = match holder {
            ClockHolder::Stream(slot) => &mut self.sent_streams[slot.index()].1,
            ClockHolder::Host(host) => &mut self.sent_hosts[host],
        };
        raised.iter().for_each(|&(slot, tick)| sent.set(slot, tick));
        for &(slot, tick) in raised.iter() {
            self.push(Job::Raise { holder, slot, tick });
        }
        raised.clear();
        self.raised = std::mem::take(raised);
    }

    #[inline]
    fn push(&mut self, job: Job) {
        self.batch.push(job);
        if self.batch.len() >= JOBS_PER_BATCH {
            self.send_batch();
        }
    }

    /// Sends the batch being filled, and takes a batch to fill from those handed back (or a new one).
    fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        loop {
            match self.replies.try_recv() {
                Ok(reply) => self.take_reply(reply),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => self.checker_gone(),
            }
        }
        let next = self.spare.pop_front().unwrap_or_else(|| Vec::with_capacity(JOBS_PER_BATCH));
        let full = std::mem::replace(&mut self.batch, next);
        let sent = self.to_checker.as_ref().map(|to| to.send(full));
        match sent {
            Some(Ok(())) => self.in_flight += 1,
            _ => self.checker_gone(),
        }
    }

    fn take_reply(&mut self, reply: Reply) {
        self.in_flight -= 1;
        self.checked.extend(reply.conflicts);
        if reply.marks.is_some() {
            self.marks = reply.marks;
        }
        self.spare.push_back(reply.jobs);
    }

    /// The checker ended without being asked to: it panicked, which its join hands on.
    fn checker_gone(&mut self) -> ! {
        self.to_checker = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            _ => panic!("the shadow checker's thread ended before the engine"),
        }
    }
}

/// One process as the checker holds it.
#[derive(Default)]
struct CheckedProcess {
    shadow: ShadowMemory,
    allocations: AllocationTable,
}

/// The checker's thread: the shadows, the replicas, and its scratch list.
#[derive(Default)]
struct Checker {
    processes: Vec<CheckedProcess>,
    /// By stream slot.
    stream_clocks: Vec<VectorClock>,
    host_clocks: Vec<VectorClock>,
    conflicts: Vec<Conflict>,
    peak_shadow_segments: usize,
}

/// How many jobs ahead of the one checked its shadow bucket is loaded; the radix table's entry that finds the
/// bucket is loaded as far again ahead. A job is far less work than a record, so the engine's distances
/// (`Engine::prefetch`: one and two records) would leave the loads no time.
const PREFETCH_JOBS: usize = 6;

/// Starts loading the shadow the jobs ahead will touch (`ahead`: those after the one checked now).
#[inline]
fn prefetch_ahead(processes: &[CheckedProcess], ahead: &[Job]) {
    if let Some(Job::Access { process, range, .. }) = ahead.get(2 * PREFETCH_JOBS - 1) {
        if let Some(state) = processes.get(process.index()) {
            state.shadow.prefetch_index(range.start);
        }
    }
    if let Some(Job::Access { process, range, .. }) = ahead.get(PREFETCH_JOBS - 1) {
        if let Some(state) = processes.get(process.index()) {
            state.shadow.prefetch(range.start);
        }
    }
}

impl Checker {
    fn run(mut self, jobs: Receiver<Vec<Job>>, replies: std::sync::mpsc::Sender<Reply>) -> CheckerTotals {
        while let Ok(mut batch) = jobs.recv() {
            let mut reply = Reply { jobs: Vec::new(), conflicts: Vec::new(), marks: None };
            let mut jobs_left = batch.drain(..);
            while let Some(job) = jobs_left.next() {
                prefetch_ahead(&self.processes, jobs_left.as_slice());
                self.apply(job, &mut reply);
            }
            drop(jobs_left);
            reply.jobs = batch;
            if replies.send(reply).is_err() {
                break;
            }
        }
        CheckerTotals {
            peak_shadow_segments: self.peak_shadow_segments,
            assumed_view_overlaps: self.processes.iter().map(|p| p.shadow.assumed_view_overlaps()).sum(),
        }
    }

    #[inline]
    fn process(&mut self, process: ProcessId) -> &mut CheckedProcess {
        let i = process.index();
        if i >= self.processes.len() {
            self.add_processes(i + 1);
        }
        &mut self.processes[i]
    }

    #[cold]
    fn add_processes(&mut self, count: usize) {
        self.processes.resize_with(count, CheckedProcess::default);
    }

    /// The replica of `holder`'s clock, made (empty) the first time.
    #[inline]
    fn replica(&mut self, holder: ClockHolder) -> &mut VectorClock {
        let (clocks, i) = match holder {
            ClockHolder::Stream(slot) => (&mut self.stream_clocks, slot.index()),
            ClockHolder::Host(host) => (&mut self.host_clocks, host),
        };
        if i >= clocks.len() {
            clocks.resize_with(i + 1, VectorClock::new);
        }
        &mut clocks[i]
    }

    #[inline]
    fn apply(&mut self, job: Job, reply: &mut Reply) {
        match job {
            Job::Access { process, range, view, stamp } => {
                // The stream's own component: its step, which the accesses of one operation share.
                let own = self.replica(ClockHolder::Stream(stamp.slot));
                if own.get(stamp.slot) != stamp.tick() {
                    own.set(stamp.slot, stamp.tick());
                }
                self.process(process);
                let Checker { processes, stream_clocks, conflicts, .. } = self;
                conflicts.clear();
                let (clock, shadow) = (&stream_clocks[stamp.slot.index()], &mut processes[process.index()].shadow);
                match &view {
                    None => shadow.access(range, stamp, clock, conflicts),
                    Some(view) => shadow.access_view(range.start, view, stamp, clock, conflicts),
                }
                if !self.conflicts.is_empty() {
                    let action = action_of(stamp.effect(), stamp.mode());
                    let later = Later {
                        site: stamp.site,
                        seq: stamp.seq,
                        origin: stamp.origin,
                        position: Some(stamp.tick()),
                        action,
                        view,
                    };
                    self.hand_back_conflicts(process, ClockHolder::Stream(stamp.slot), later, reply);
                }
            }
            Job::Raise { holder, slot, tick } => self.replica(holder).set(slot, tick),
            Job::Release { process, host, range, site, seq, origin } => {
                self.replica(ClockHolder::Host(host));
                self.process(process);
                let Checker { processes, host_clocks, conflicts, .. } = self;
                conflicts.clear();
                processes[process.index()].shadow.release(range, &host_clocks[host], conflicts);
                if !self.conflicts.is_empty() {
                    let later = Later { site, seq, origin, position: None, action: AccessAction::Free, view: None };
                    self.hand_back_conflicts(process, ClockHolder::Host(host), later, reply);
                }
            }
            Job::Forget { process, range } => self.process(process).shadow.forget(range),
            Job::Allocate { allocation, seq } => {
                self.process(allocation.process).allocations.insert(*allocation, seq);
            }
            Job::Free { process, alloc, keep, source } => {
                self.process(process).allocations.free(alloc, keep, source.as_ref());
            }
            Job::OperationEnd { process } => {
                let segments = self.process(process).shadow.segments();
                self.peak_shadow_segments = self.peak_shadow_segments.max(segments);
            }
            Job::MarkSites(mut marks) => {
                for process in &self.processes {
                    process.shadow.for_each_site(|site| marks.mark(site));
                }
                reply.marks = Some(marks);
            }
        }
    }

    /// The conflicts just found, each with what its finding reads of this moment.
    fn hand_back_conflicts(&mut self, process: ProcessId, holder: ClockHolder, later: Later, reply: &mut Reply) {
        let known_clock = match holder {
            ClockHolder::Stream(slot) => &self.stream_clocks[slot.index()],
            ClockHolder::Host(host) => &self.host_clocks[host],
        };
        let allocations = &self.processes[process.index()].allocations;
        for conflict in self.conflicts.drain(..) {
            let earlier = &conflict.earlier;
            let mut allocation_native = None;
            let allocation = allocations.describe(conflict.range, Some(earlier.seq), |native| {
                allocation_native = Some(native.clone());
                NativeId(0)
            });
            let known = known_clock.get(earlier.slot);
            reply.conflicts.push(CheckedConflict {
                conflict,
                later: later.clone(),
                known,
                allocation,
                allocation_native,
            });
        }
    }
}
