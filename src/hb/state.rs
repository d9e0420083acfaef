//! The happens-before engine's state, at the bottom of the engine: one vector clock per stream, host clock and
//! event, each thread's place in the order among host threads, each process's shadow memory and allocations,
//! the books of synchronization scopes and graph launches, and the settings and counters of one analysis.
//!
//! Every rule file (`sync_rules`, `host_order`, `access`, `race_report`, `graph`, `unordered_pairs`,
//! `idle_streams`) imports this file and never a sibling, as TSan's rule files include `tsan_rtl.h` and never
//! each other; where one rule needs another (a copy's stream step, a graph's event nodes), it calls the
//! [`Engine`] method that applies it, as TSan's files call the functions that header declares. The dispatch
//! (`engine`) stands on top. This file holds data and the lookups every rule shares, and applies no rule.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::allocations::AllocationTable;
use super::checker::CheckerLink;
pub(super) use super::checker::{action_of, Later};
use super::clock::{Slot, VectorClock, VersionedClock};
use super::shadow::{Conflict, ShadowMemory};
use super::site_hints::hot_site_of;
use super::sites::{SiteId, SiteName, SiteParts, SiteTable};
use super::slot_values::SlotValues;
use crate::findings::{EdgeKind, FindingCollector, GraphSite, OpClass, RaceKey};
use crate::model::{
    Access, AccessRange, ContextId, Coverage, DeviceId, EventInfo, ExactCoverage, Operation, ProcessId, StreamId,
    StreamInfo,
};

/// How host API calls of different threads are ordered (DESIGN.md, host threads).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostOrder {
    /// The per-thread order where the trace records the host synchronization between its threads (its header
    /// says so), the global order where it does not.
    #[default]
    Auto,
    /// The timestamp order: host-side synchronization that the trace does not record is taken to follow the
    /// calls' timestamps, through one host clock per process (`host_order`).
    Global,
    /// One host clock per thread: only CUDA synchronization and the host synchronization the trace records
    /// order threads.
    PerThread,
}

/// Where the shadow check runs: on the engine's thread, or on a thread of its own (`checker`). The findings are
/// the same.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckThread {
    /// A thread of its own where the analysis may use three cores or more (the reader's, the engine's and the
    /// checker's): on two, the hand-over costs more than the second half of the work gives back
    /// (docs/performance.md).
    #[default]
    Auto,
    On,
    Off,
}

impl CheckThread {
    /// Whether the check gets a thread of its own on this machine.
    pub fn wanted(self) -> bool {
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        self.decided_for_cores(cores) == CheckThread::On
    }

    /// `Auto` decided for an analysis that may use `cores` cores (a job's traces analyzed at once share the
    /// machine's); `On` and `Off` as they are.
    pub fn decided_for_cores(self, cores: usize) -> CheckThread {
        match self {
            CheckThread::Auto if cores >= 3 => CheckThread::On,
            CheckThread::Auto => CheckThread::Off,
            fixed => fixed,
        }
    }
}

/// Settings of one analysis.
#[derive(Copy, Clone, Debug, Default)]
pub struct EngineOptions {
    pub host_order: HostOrder,
    pub check_thread: CheckThread,
}

/// A record the engine cannot apply: it refers to something the ingester never introduced.
#[derive(Debug, thiserror::Error)]
#[error("operation at {origin}: {message}")]
pub struct EngineError {
    pub origin: u64,
    pub message: String,
}

/// What the engine did, for reports and benchmarks.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EngineStats {
    pub operations: u64,
    pub accesses: u64,
    pub race_occurrences: u64,
    pub streams: usize,
    pub events: usize,
    pub threads: usize,
    pub sites: usize,
    /// Whether any operation carried addresses (access tier T1 or above).
    pub has_addresses: bool,
    pub peak_shadow_segments: usize,
    /// Overlap questions between strided views answered "overlap" because they ran past their step budget:
    /// each may be a race reported that is not one.
    pub assumed_view_overlaps: u64,
    pub peak_live_allocations: usize,
    /// Pointer-sized kernel arguments that fell in no live allocation (not pointers, or host memory).
    pub unresolved_pointers: u64,
    /// Kernels whose accesses came from pointer arguments (tier T1).
    pub kernels_with_pointers: u64,
    /// Host synchronizations and successful queries made by threads that had issued no work, which the global
    /// host order keeps from other threads (`host_order`: PyTorch's NCCL watchdog polls events).
    pub unshared_observations: u64,
    /// Host synchronization the trace recorded (`host_release`, `host_acquire`): releases, and acquires that
    /// found a release to join.
    pub host_releases: u64,
    pub host_acquires: u64,
    /// Acquires of an object nothing had released into yet: they ordered nothing.
    pub host_acquires_of_nothing: u64,
    /// Which kernels of an exact-access capture ran at which tier (absent for other traces).
    #[serde(skip_serializing_if = "ExactKernels::is_empty")]
    pub exact_kernels: ExactKernels,
}

/// The launches of an exact-access capture (tier T3) by how much of them was seen, and why the rest was not.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExactKernels {
    /// Launches whose every access was seen (tier T3).
    pub whole: u64,
    /// Launches seen in part, which keep their pointer arguments' blocks beside (T3 and T1).
    pub partly: u64,
    /// Launches with their pointer arguments alone (T1).
    pub arguments_only: u64,
    /// For each reason a launch was not seen whole: how many, and the first few kernels' names.
    pub unseen: Vec<UnseenKernels>,
    /// Kernel nodes of launched graphs with pointer arguments: graph launches keep tier T1 (docs/capture.md).
    pub graph_nodes_with_arguments: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct UnseenKernels {
    pub reason: &'static str,
    pub launches: u64,
    pub kernels: Vec<Arc<str>>,
}

impl ExactKernels {
    pub fn is_empty(&self) -> bool {
        self.whole + self.partly + self.arguments_only == 0
    }

    /// Counts one launch of kernel `name`.
    pub fn count(&mut self, coverage: ExactCoverage, name: &Arc<str>) {
        /// Kernel names kept per reason.
        const NAMED: usize = 3;
        match coverage.coverage {
            Coverage::Exact => self.whole += 1,
            Coverage::ExactAndArguments => self.partly += 1,
            Coverage::Arguments => self.arguments_only += 1,
        }
        let Some(unseen) = coverage.unseen else { return };
        let reason = unseen.as_str();
        let entry = match self.unseen.iter().position(|u| u.reason == reason) {
            Some(i) => &mut self.unseen[i],
            None => {
                self.unseen.push(UnseenKernels { reason, launches: 0, kernels: Vec::new() });
                self.unseen.last_mut().expect("just pushed")
            }
        };
        entry.launches += 1;
        if entry.kernels.len() < NAMED && !entry.kernels.contains(name) {
            entry.kernels.push(name.clone());
        }
    }
}

/// One happens-before edge between operations, for timelines: the operation `from_seq` is ordered before
/// whatever the wait or synchronization at `at_seq` releases (the next operation on `to_stream`, or the host).
#[derive(Copy, Clone, Debug, Serialize)]
pub struct HbEdge {
    pub kind: EdgeKind,
    pub from_seq: u64,
    pub at_seq: u64,
    #[serde(skip)]
    pub to_stream: Option<StreamId>,
}

pub(super) struct StreamState {
    pub(super) info: StreamInfo,
    /// Its own clock, once it has been enqueued on; until then it is `creation`, and this one is empty but for
    /// its version (`idle_streams`).
    pub(super) clock: VersionedClock,
    /// The clock it was created with, shared with the streams created at the same point, while it is idle.
    pub(super) creation: Option<Arc<VectorClock>>,
    /// Whether anything was enqueued on it yet.
    pub(super) awake: bool,
    /// Its component in clocks, from its first memory-touching operation on.
    pub(super) slot: Option<Slot>,
    /// Synchronizations of its device, context and process before it was created: the happens-before edges
    /// it took part in while idle are counted from these when it wakes.
    pub(super) idle_edge_base: u64,
    /// Whether it may have changed since the legacy default stream last joined it (blocking streams only).
    pub(super) barrier_pending: bool,
    /// Version of each host clock last joined into this stream, by host clock index.
    pub(super) seen_host: Vec<u64>,
    /// Version of each stream clock last joined into this one (the legacy default stream's barrier).
    pub(super) seen_stream: Vec<u64>,
    /// Site of the latest memory-touching operation.
    pub(super) last_site: Option<SiteId>,
    pub(super) last_seq: u64,
    /// For each other stream's slot: the sum, over the joins that raised what this clock knows of that stream
    /// since its count began (its component less its `counted_from`) after this stream had stepped since its
    /// own, of the raise times those steps. The ordered operation pairs are counted from it (`unordered_pairs`).
    pub(super) ordered_debit: SlotValues,
    /// Its position when the unordered-pair count last began (0; a capture range's end starts it again).
    pub(super) counted_from: u64,
}

impl StreamState {
    /// How many memory-touching operations it has run.
    pub(super) fn position(&self) -> u64 {
        self.slot.map_or(0, |slot| self.clock.clock.get(slot))
    }

    /// Its memory-touching operations since the unordered-pair count began.
    pub(super) fn counted_steps(&self) -> u64 {
        self.position() - self.counted_from
    }

    /// Joins `other` into its own clock (acquire), keeping the books the unordered-pair count needs;
    /// `counted_from` gives each slot's stream's `counted_from`.
    pub(super) fn join(&mut self, other: &VectorClock, counted_from: &SlotValues) {
        let steps = self.counted_steps();
        let debit = &mut self.ordered_debit;
        self.clock.join_observed(other, |slot, old, new| {
            if steps > 0 {
                let from = counted_from.get(slot.index());
                let raise = new.saturating_sub(from) - old.saturating_sub(from);
                debit.add(slot.index(), raise * steps);
            }
        });
    }
}

pub(super) struct EventState {
    pub(super) info: EventInfo,
    /// The clock captured by the last record; `None` until the first record.
    pub(super) snapshot: Option<VectorClock>,
    pub(super) recorded_on: Option<StreamId>,
    /// The last memory-touching operation of the recording stream when it was recorded.
    pub(super) recorded_after: Option<u64>,
    /// Whether a stream waited on it after a record: then a wait before its first record was a pipeline's
    /// first turn (`FindingCollector::set_aside_harmless_waits`).
    pub(super) waited_after_record: bool,
}

pub(super) struct ThreadState {
    pub(super) process: ProcessId,
    /// Its own host clock (an index into `host_clocks`).
    pub(super) host_clock: usize,
    /// Its place in the order among host threads (`host_order`).
    pub(super) order: ThreadOrder,
}

/// A thread's place in the order among host threads (`host_order`).
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct ThreadOrder {
    /// Whether it has issued work: only then do its observations reach other threads.
    pub(super) worker: bool,
    /// The version of the shared clock it last took in.
    pub(super) shared_seen: Option<u64>,
    /// The version of its own clock it last published.
    pub(super) published: Option<u64>,
}

#[derive(Default)]
pub(super) struct ContextState {
    pub(super) legacy: Option<StreamId>,
    /// Streams that take part in the legacy default stream's barrier (blocking and per-thread default) and may
    /// have changed since the legacy default stream last joined them: created or enqueued on since.
    pub(super) barrier_pending: Vec<StreamId>,
    pub(super) scope: SyncScope,
}

#[derive(Default)]
pub(super) struct ProcessState {
    pub(super) scope: SyncScope,
    /// Streams that have run a memory-touching operation, with their slots: only they can be unordered with
    /// anything. PyTorch creates 128 pool streams at start-up and uses a few.
    pub(super) active_streams: Vec<(StreamId, Slot)>,
    pub(super) shadow: ShadowMemory,
    pub(super) allocations: AllocationTable,
    /// The host clock its threads share in the global host order (`host_order`).
    pub(super) shared_host_clock: Option<usize>,
    /// The host synchronization objects its threads released into, by the trace's id: what the releasing
    /// threads knew (`host_order`).
    pub(super) host_objects: FxHashMap<u64, VectorClock>,
}

/// The streams of one device, context or process, as a synchronization of all of them needs them
/// (`idle_streams` keeps these books).
#[derive(Default)]
pub(super) struct SyncScope {
    /// Streams that have been enqueued on, in the order they woke up.
    pub(super) awake: Vec<StreamId>,
    /// Synchronizations of the whole scope so far.
    pub(super) syncs: u64,
}

/// A group of streams that one host call synchronizes with.
#[derive(Copy, Clone)]
pub(super) enum Scope {
    Device(DeviceId),
    Context(ContextId),
    Process(ProcessId),
}

/// What the engine keeps about one executable graph launched from one site (`graph`).
pub(super) struct GraphMemo {
    /// The graph and where it was launched from, which its nodes' sites name.
    pub(super) place: Arc<GraphSite>,
    pub(super) node_sites: Vec<SiteId>,
    pub(super) races: Vec<RaceKey>,
    /// What one launch touches, as one operation: every node's accesses (pointer arguments resolved), less
    /// reads inside a range the launch also writes, each with its node's site.
    pub(super) footprint: Vec<(Access, SiteId)>,
    /// The allocation table's generation the pointer arguments were resolved in.
    pub(super) resolved_in: u64,
}

/// Consumes records and produces findings.
pub struct Engine {
    pub(super) options: EngineOptions,
    pub(super) streams: Vec<StreamState>,
    pub(super) events: Vec<EventState>,
    pub(super) threads: Vec<ThreadState>,
    pub(super) contexts: Vec<ContextState>,
    pub(super) processes: Vec<ProcessState>,
    pub(super) host_clocks: Vec<VersionedClock>,
    /// The latest clock a stream was created with, per host clock, and that host clock's version then.
    pub(super) creation_snapshots: Vec<Option<(u64, Option<Arc<VectorClock>>)>>,
    /// Device-wide synchronization scopes, by device index.
    pub(super) devices: Vec<SyncScope>,
    /// The stream of each slot.
    pub(super) slot_streams: Vec<StreamId>,
    /// Each slot's stream's `counted_from` (none but after a capture range).
    pub(super) counted_from: SlotValues,
    pub(super) sites: SiteTable,
    pub(super) collector: FindingCollector,
    pub(super) stats: EngineStats,
    pub(super) conflicts: Vec<Conflict>,
    /// What the engine learned about each executable graph launched from one launch site: its nodes' sites
    /// and the races between its nodes, so that a graph replayed every iteration is checked once.
    pub(super) graph_memos: FxHashMap<(u64, SiteId), GraphMemo>,
    /// Every happens-before edge, kept only when a timeline report asks for them (it grows with the trace).
    pub(super) edge_log: Option<Vec<HbEdge>>,
    /// Reused list for a launch's resolved pointer arguments.
    pub(super) pointer_scratch: Vec<Access>,
    /// Kernel sites that accessed a whole allocation block for a pointer argument (tier T1), with those blocks: a
    /// race of theirs on bytes of one says so ([`AccessExtent`](crate::findings::AccessExtent)).
    pub(super) whole_block_sites: rustc_hash::FxHashMap<SiteId, WholeBlocks>,
    /// Whether the trace's header says it records the host synchronization between its threads.
    pub(super) host_sync_recorded: bool,
    /// The shadow checker's thread, when the check runs there (`EngineOptions::check_thread`): then the
    /// processes' own shadows stay empty.
    pub(super) checker: Option<CheckerLink>,
}

/// Whose clock a conflict's later party had.
#[derive(Copy, Clone)]
pub(super) enum Known {
    Stream(StreamId),
    Host(usize),
}

impl Engine {
    /// The host order in effect: `Auto` decided by what the trace's header said (final once its first thread
    /// is known).
    pub fn host_order(&self) -> HostOrder {
        match self.options.host_order {
            HostOrder::Auto if self.host_sync_recorded => HostOrder::PerThread,
            HostOrder::Auto => HostOrder::Global,
            fixed => fixed,
        }
    }

    /// Whether the trace's header says it records the host synchronization between its threads.
    pub fn host_sync_recorded(&self) -> bool {
        self.host_sync_recorded
    }

    pub(super) fn process_mut(&mut self, process: ProcessId) -> &mut ProcessState {
        let i = process.index();
        if i >= self.processes.len() {
            self.processes.resize_with(i + 1, ProcessState::default);
        }
        &mut self.processes[i]
    }

    pub(super) fn check_stream(&self, stream: StreamId, origin: u64) -> Result<(), EngineError> {
        match self.streams.get(stream.index()) {
            Some(_) => Ok(()),
            None => Err(EngineError { origin, message: format!("stream {} unknown", stream.0) }),
        }
    }

    /// The site of `op`, a kernel launch, a copy or a set ([`hot_site_of`]), found through the hint its reader
    /// gave where there is one.
    pub(super) fn hot_site(&mut self, op: &Operation) -> SiteId {
        let Some((class, name, stream)) = hot_site_of(op) else {
            unreachable!("asked only for a kernel launch, a copy or a set")
        };
        self.sites.intern_hinted(op.site_hint, || op_site_parts(class, name, Some(stream), op))
    }

    /// The interned site of `op`, named `name` in the class `class`.
    pub(super) fn site<'a>(
        &mut self,
        class: OpClass,
        name: impl Into<SiteName<'a>>,
        stream: Option<StreamId>,
        op: &Operation,
    ) -> SiteId {
        self.sites.intern(op_site_parts(class, name.into(), stream, op))
    }
}

/// The parts of a site of `op` itself, named `name` in the class `class`: the operation's thread, source line,
/// native call site and region.
fn op_site_parts<'a>(class: OpClass, name: SiteName<'a>, stream: Option<StreamId>, op: &'a Operation) -> SiteParts<'a> {
    SiteParts {
        class,
        name,
        stream,
        thread: op.thread,
        source: op.source.as_ref(),
        native: op.native.as_ref(),
        region: op.region.as_ref(),
        graph: None,
    }
}

/// Mutable references to two distinct elements.
pub(super) fn pair_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    debug_assert_ne!(a, b);
    if a < b {
        let (left, right) = v.split_at_mut(b);
        (&mut left[a], &mut right[0])
    } else {
        let (left, right) = v.split_at_mut(a);
        (&mut right[0], &mut left[b])
    }
}

/// The blocks one kernel site's pointer arguments stood for whole (tier T1). A site that also has exact ranges (a
/// library call's operands, docs/capture.md) races on those as known bytes; only a race on bytes of one of these
/// blocks rests on a pointer argument taken for its block.
#[derive(Default)]
pub(super) struct WholeBlocks {
    ranges: Vec<AccessRange>,
    /// Past [`WholeBlocks::KEPT`] blocks the site counts as whole on every block.
    all: bool,
}

impl WholeBlocks {
    const KEPT: usize = 16;

    pub(super) fn holds(&self, block: AccessRange) -> bool {
        self.all || self.ranges.contains(&block)
    }

    pub(super) fn add(&mut self, block: AccessRange) {
        if self.holds(block) {
            return;
        }
        if self.ranges.len() == Self::KEPT {
            self.all = true;
            self.ranges = Vec::new();
        } else {
            self.ranges.push(block);
        }
    }

    /// Whether a race on `bytes` may rest on one of the blocks.
    pub(super) fn covers(&self, bytes: AccessRange) -> bool {
        self.all || self.ranges.iter().any(|block| block.intersection(bytes).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_blocks_cover_bytes_in_their_blocks_and_all_blocks_past_the_ones_kept() {
        let block = |start| AccessRange { start, len: 0x100 };
        let mut blocks = WholeBlocks::default();
        blocks.add(block(0x1000));
        assert!(blocks.holds(block(0x1000)) && !blocks.holds(block(0x2000)));
        assert!(blocks.covers(AccessRange { start: 0x10f0, len: 0x40 }));
        assert!(!blocks.covers(AccessRange { start: 0x1100, len: 0x40 }));
        for i in 0..WholeBlocks::KEPT as u64 {
            blocks.add(block(0x10_0000 + i * 0x1000));
        }
        assert!(blocks.covers(AccessRange { start: 0xdead_0000, len: 1 }), "a site of many blocks counts on all");
    }

    #[test]
    fn auto_gives_the_check_its_own_thread_from_three_cores_on() {
        assert_eq!(CheckThread::Auto.decided_for_cores(1), CheckThread::Off);
        assert_eq!(CheckThread::Auto.decided_for_cores(2), CheckThread::Off);
        assert_eq!(CheckThread::Auto.decided_for_cores(3), CheckThread::On);
        assert_eq!(CheckThread::On.decided_for_cores(1), CheckThread::On);
        assert_eq!(CheckThread::Off.decided_for_cores(16), CheckThread::Off);
    }
}
