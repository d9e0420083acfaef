//! The happens-before engine's state and its per-record dispatch: one vector clock per stream, host clock and
//! event, the shadow memory and allocations of each process, and [`Engine::apply`], which hands each operation to
//! the file that holds its rule. The engine decides; it never formats.
//!
//! Each rule of DESIGN.md is applied in one place, marked `rule N` there: synchronization (stream order,
//! enqueue, events, host synchronization, blocking calls, the legacy default stream, host threads) in
//! `sync_rules`, memory operations and the shadow check in `access`, conflicts made findings in `race_report`,
//! CUDA graphs in `graph`, and tier T0's unordered pairs in `unordered_pairs`; which streams a synchronization of
//! many streams visits (those that ran nothing cost nothing) is decided in `idle_streams`. This file registers
//! streams, events and threads and touches no clock beyond what those files hand back.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::allocations::AllocationTable;
use super::clock::{Slot, VectorClock, VersionedClock};
use super::graph::GraphMemo;
use super::host_order::{host_role, ThreadOrder};
use super::idle_streams::SyncScope;
use super::shadow::{Conflict, ShadowMemory};
use super::sites::{SiteId, SiteTable};
use crate::findings::{EdgeKind, FindingCollector, Findings, StreamRef, ThreadRef};
use crate::model::{
    Access, Allocation, EventInfo, OpKind, Operation, ProcessId, StreamId, StreamInfo, StreamKind, ThreadId,
    ThreadInfo, TraceRecord,
};

/// How host API calls of different threads are ordered (DESIGN.md, host threads).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostOrder {
    /// Host-side synchronization between threads is invisible to tracing, so calls of all threads of a process
    /// are taken in their timestamp order: one host clock per process.
    #[default]
    Global,
    /// One host clock per thread: only CUDA synchronization orders threads.
    PerThread,
}

/// Settings of one analysis.
#[derive(Copy, Clone, Debug, Default)]
pub struct EngineOptions {
    pub host_order: HostOrder,
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
}

pub(super) struct StreamState {
    pub(super) info: StreamInfo,
    pub(super) sref: StreamRef,
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
    /// Unordered operation pairs with each other stream, by its slot, counted when this stream's operation is
    /// the later one.
    pub(super) unordered_with: Vec<u64>,
}

impl StreamState {
    /// What the stream has observed: while it has run nothing, the clock it was created with.
    pub(super) fn current_clock(&self) -> &VectorClock {
        self.creation.as_deref().unwrap_or(&self.clock.clock)
    }

    /// How many memory-touching operations it has run.
    pub(super) fn position(&self) -> u64 {
        self.slot.map_or(0, |slot| self.clock.clock.get(slot))
    }
}

pub(super) struct EventState {
    pub(super) info: EventInfo,
    /// The clock captured by the last record; `None` until the first record.
    pub(super) snapshot: Option<VectorClock>,
    pub(super) recorded_on: Option<StreamId>,
    /// The last memory-touching operation of the recording stream when it was recorded.
    pub(super) recorded_after: Option<u64>,
}

pub(super) struct ThreadState {
    pub(super) tref: ThreadRef,
    /// Its own host clock (an index into `host_clocks`).
    pub(super) host_clock: usize,
    /// Its place in the order among host threads (`host_order`).
    pub(super) order: ThreadOrder,
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

impl Engine {
    pub fn new(options: EngineOptions) -> Engine {
        Engine {
            options,
            streams: Vec::new(),
            events: Vec::new(),
            threads: Vec::new(),
            contexts: Vec::new(),
            processes: Vec::new(),
            host_clocks: Vec::new(),
            creation_snapshots: Vec::new(),
            devices: Vec::new(),
            slot_streams: Vec::new(),
            sites: SiteTable::default(),
            collector: FindingCollector::default(),
            stats: EngineStats::default(),
            conflicts: Vec::new(),
            graph_memos: FxHashMap::default(),
            edge_log: None,
            pointer_scratch: Vec::new(),
        }
    }

    /// Keeps every happens-before edge for [`Engine::take_edges`] (timeline reports).
    pub fn log_edges(&mut self) {
        self.edge_log.get_or_insert_with(Vec::new);
    }

    /// The edges logged since [`Engine::log_edges`].
    pub fn take_edges(&mut self) -> Vec<HbEdge> {
        self.edge_log.take().unwrap_or_default()
    }

    /// Applies one record.
    pub fn apply(&mut self, record: &TraceRecord) -> Result<(), EngineError> {
        match record {
            TraceRecord::Thread(info) => self.add_thread(info.clone()),
            TraceRecord::Stream(info) => self.add_stream(info.clone()),
            TraceRecord::Event(info) => self.add_event(info.clone()),
            TraceRecord::Op(op) => self.apply_op(op),
            TraceRecord::GpuTime { .. }
            | TraceRecord::Created(_)
            | TraceRecord::GroupStream(_)
            | TraceRecord::Job(_) => Ok(()),
        }
    }

    /// Starts loading the shadow state `record` will touch, without using it. The engine is bound by memory
    /// latency (one random shadow lookup per access among ~100,000 segments); touching the next operation's
    /// segments while the current one is analyzed lets those cache misses overlap.
    pub fn prefetch(&self, record: &TraceRecord) {
        let TraceRecord::Op(op) = record else { return };
        let Some(process) = self.processes.get(op.process.index()) else { return };
        match &op.kind {
            OpKind::Kernel { accesses, .. } => accesses.iter().for_each(|a| process.shadow.prefetch(a.range.start)),
            OpKind::Memcpy { src, dst, .. } => src.iter().chain(dst).for_each(|r| process.shadow.prefetch(r.start)),
            OpKind::Memset { dst: Some(range), .. } => process.shadow.prefetch(range.start),
            _ => {}
        }
    }

    /// Ends the analysis: folds the per-stream counts into findings.
    pub fn finish(mut self) -> (Findings, EngineStats) {
        self.fold_unordered_pairs();
        // A wait before any record is a finding when the event was recorded later (the order is
        // wrong); a wait on an event that nothing ever recorded is a library's deliberate no-op (NCCL's).
        let events = &self.events;
        self.collector
            .set_aside_never_recorded_waits(|event| events.get(event.index()).is_some_and(|e| e.recorded_on.is_none()));
        self.count_idle_edges();
        self.stats.streams = self.streams.len();
        self.stats.events = self.events.len();
        self.stats.threads = self.threads.len();
        self.stats.sites = self.sites.len();
        self.stats.assumed_view_overlaps = self.processes.iter().map(|p| p.shadow.assumed_view_overlaps()).sum();
        (self.collector.into_findings(), self.stats)
    }

    pub(super) fn process_mut(&mut self, process: ProcessId) -> &mut ProcessState {
        let i = process.index();
        if i >= self.processes.len() {
            self.processes.resize_with(i + 1, ProcessState::default);
        }
        &mut self.processes[i]
    }

    fn add_thread(&mut self, info: ThreadInfo) -> Result<(), EngineError> {
        if info.id.index() != self.threads.len() {
            return Err(EngineError { origin: 0, message: format!("thread ids out of order at {:?}", info.id) });
        }
        let host_clock = self.host_clock_for_thread(info.process);
        self.threads.push(ThreadState {
            tref: ThreadRef { id: info.id, tid: info.tid },
            host_clock,
            order: ThreadOrder::default(),
        });
        Ok(())
    }

    fn add_stream(&mut self, info: StreamInfo) -> Result<(), EngineError> {
        if info.id.index() != self.streams.len() {
            return Err(EngineError { origin: 0, message: format!("stream ids out of order at {:?}", info.id) });
        }
        let (clock, creation, host) = self.clock_of_new_stream(info.created_by)?;
        // The legacy default stream's barrier (applied at each enqueue) needs each context's legacy stream and
        // the streams that take part.
        let ctx = info.context.index();
        if ctx >= self.contexts.len() {
            self.contexts.resize_with(ctx + 1, ContextState::default);
        }
        let takes_part = info.kind.syncs_with_legacy_default();
        match info.kind {
            StreamKind::LegacyDefault => {
                if self.contexts[ctx].legacy.is_some() {
                    return Err(EngineError {
                        origin: 0,
                        message: format!("a second legacy default stream (handle {}) in one context", info.handle),
                    });
                }
                self.contexts[ctx].legacy = Some(info.id);
            }
            _ if takes_part => self.contexts[ctx].barrier_pending.push(info.id),
            _ => {}
        }
        let idle_edge_base = self.register_idle_stream(&info, host, creation.as_ref());
        let sref = StreamRef { device: info.gpu, ..StreamRef::new(info.id, info.handle, info.kind) };
        self.streams.push(StreamState {
            info,
            sref,
            clock,
            creation,
            awake: false,
            slot: None,
            idle_edge_base,
            barrier_pending: takes_part,
            seen_host: Vec::new(),
            seen_stream: Vec::new(),
            last_site: None,
            last_seq: 0,
            unordered_with: Vec::new(),
        });
        Ok(())
    }

    fn add_event(&mut self, info: EventInfo) -> Result<(), EngineError> {
        if info.id.index() != self.events.len() {
            return Err(EngineError { origin: 0, message: format!("event ids out of order at {:?}", info.id) });
        }
        self.events.push(EventState { info, snapshot: None, recorded_on: None, recorded_after: None });
        Ok(())
    }

    fn host_clock_of(&self, thread: ThreadId, origin: u64) -> Result<usize, EngineError> {
        self.threads
            .get(thread.index())
            .map(|t| t.host_clock)
            .ok_or_else(|| EngineError { origin, message: format!("thread {} unknown", thread.0) })
    }

    pub(super) fn check_stream(&self, stream: StreamId, origin: u64) -> Result<(), EngineError> {
        match self.streams.get(stream.index()) {
            Some(_) => Ok(()),
            None => Err(EngineError { origin, message: format!("stream {} unknown", stream.0) }),
        }
    }

    /// The interned site of `op`, named `name` in the class `class`.
    pub(super) fn site(&mut self, class: &'static str, name: &str, stream: Option<StreamId>, op: &Operation) -> SiteId {
        let sref = stream.map(|s| &self.streams[s.index()].sref);
        let tref = &self.threads[op.thread.index()].tref;
        self.sites.intern(class, name, sref, tref, op.source.as_ref(), op.native.as_ref(), op.region.as_ref(), None)
    }

    /// Every operation is first enqueued on its stream, if it has one; then its own rule applies.
    fn apply_op(&mut self, op: &Operation) -> Result<(), EngineError> {
        self.stats.operations += 1;
        let origin = op.origin;
        let host = self.host_clock_of(op.thread, origin)?;
        let role = host_role(&op.kind);
        self.before_host_call(op.thread, op.process, role);
        if let Some(stream) = op.kind.stream() {
            self.check_stream(stream, origin)?;
            self.enqueue(stream, host);
        }
        match &op.kind {
            OpKind::Kernel { stream, name, accesses, pointers } => {
                self.kernel_launch(op, *stream, name, accesses, pointers);
            }
            OpKind::Memcpy { stream, copy, src, dst, .. } => {
                let name = format!("memcpy {}", copy.as_str());
                let site = self.site("memcpy", &name, Some(*stream), op);
                self.copy_or_set_waited(op, host, *stream, site, *src, *dst);
            }
            OpKind::Memset { stream, dst, .. } => {
                let site = self.site("memset", "memset", Some(*stream), op);
                self.copy_or_set_waited(op, host, *stream, site, None, *dst);
            }
            OpKind::HostAccess { lane, name, accesses } => self.host_access(op, host, *lane, name, accesses),
            OpKind::EventRecord { event, stream } => self.event_record(*event, *stream, origin)?,
            OpKind::StreamWait { stream, event } => self.stream_wait(op, *stream, *event)?,
            OpKind::StreamWaitUnknownRecord { stream, event } => self.wait_with_unknown_record(op, *stream, *event),
            OpKind::HostSync(sync) => self.host_sync(host, *sync, op.seq, origin)?,
            OpKind::Query { target, ready } => self.query(host, *target, *ready, op.seq, origin)?,
            OpKind::Alloc { alloc, handle, range, alloc_kind, stream, label } => {
                let allocation = Allocation {
                    id: *alloc,
                    handle: *handle,
                    process: op.process,
                    range: *range,
                    kind: *alloc_kind,
                    label: label.clone(),
                    source: op.source.clone(),
                    native: op.native.clone(),
                };
                self.alloc(op, allocation, *stream, label.as_deref());
            }
            OpKind::Free { alloc, free_kind, stream } => self.free(op, host, *alloc, *free_kind, *stream)?,
            OpKind::GraphLaunch { stream, graph } => self.graph_launch(op, *stream, graph)?,
            // The reader turns graph calls into launches; none reaches here.
            OpKind::GraphCall(_) => {}
        }
        self.after_host_call(op.thread, op.process, role);
        let segments = self.processes.get(op.process.index()).map_or(0, |p| p.shadow.segments());
        self.stats.peak_shadow_segments = self.stats.peak_shadow_segments.max(segments);
        Ok(())
    }
}

/// Runs a whole record stream through a fresh engine.
pub fn analyze_records<I, E>(records: I, options: EngineOptions) -> Result<(Findings, EngineStats), E>
where
    I: IntoIterator<Item = Result<TraceRecord, E>>,
    E: From<EngineError>,
{
    let mut engine = Engine::new(options);
    for record in records {
        engine.apply(&record?)?;
    }
    Ok(engine.finish())
}
