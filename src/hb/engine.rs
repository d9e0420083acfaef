//! The happens-before engine: consumes trace records in host issue order, keeps one vector clock per stream, host
//! clock and event, checks every memory access against shadow memory, and hands what it finds to a
//! [`FindingCollector`]. It decides; it never formats.
//!
//! Each rule of DESIGN.md is applied in one place, marked `rule N` below.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::allocations::AllocationTable;
use super::clock::{Epoch, VectorClock, VersionedClock};
use super::shadow::{Conflict, Effect, ShadowMemory, Stamp};
use super::sites::{SiteId, SiteTable};
use crate::findings::{
    AccessAction, EdgeKind, FindingCollector, Findings, Fix, OpOccurrence, RaceFinding, RaceKey,
    RaceKind, StreamRef, ThreadRef, Unordered, UnorderedPairGroup, UnrecordedWait,
};
use crate::model::{
    Access, AccessMode, AllocKind, Allocation, EventInfo, FreeKind, GraphNode, HostSync, OpKind,
    Operation, PointerArg, ProcessId, QueryTarget, StreamId, StreamInfo, StreamKind, ThreadId, ThreadInfo, TraceRecord,
};

/// How host API calls of different threads are ordered (DESIGN.md rule 10).
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
    pub peak_live_allocations: usize,
    /// Pointer-sized kernel arguments that fell in no live allocation (not pointers, or host memory).
    pub unresolved_pointers: u64,
    /// Kernels whose accesses came from pointer arguments (tier T1).
    pub kernels_with_pointers: u64,
}

struct StreamState {
    info: StreamInfo,
    sref: StreamRef,
    clock: VersionedClock,
    /// Version of each host clock last joined into this stream, by host clock index.
    seen_host: Vec<u64>,
    /// Version of each stream clock last joined into this one (the legacy default stream's barrier).
    seen_stream: Vec<u64>,
    /// Site of the latest memory-touching operation.
    last_site: Option<SiteId>,
    last_seq: u64,
    /// Unordered operation pairs with each other stream, counted when this stream's operation is the later one.
    unordered_with: Vec<u64>,
}

struct EventState {
    info: EventInfo,
    /// The clock captured by the last record; `None` until the first record (rule 3).
    snapshot: Option<VectorClock>,
    recorded_on: Option<StreamId>,
    /// The last memory-touching operation of the recording stream when it was recorded.
    recorded_after: Option<u64>,
}

struct ThreadState {
    tref: ThreadRef,
    host_clock: usize,
}

#[derive(Default)]
struct ContextState {
    legacy: Option<StreamId>,
    /// Streams that take part in the legacy default stream's barrier (blocking and per-thread default).
    blocking: Vec<StreamId>,
}

#[derive(Default)]
struct ProcessState {
    streams: Vec<StreamId>,
    /// Streams that have run a memory-touching operation: only they can be unordered with anything. PyTorch
    /// creates 128 pool streams at start-up and uses a few.
    active_streams: Vec<StreamId>,
    shadow: ShadowMemory,
    allocations: AllocationTable,
    host_clock: Option<usize>,
}

/// The later party of a conflict, as the engine knows it at the time.
struct Later {
    site: SiteId,
    seq: u64,
    origin: u64,
    position: Option<u64>,
    action: AccessAction,
}

/// Consumes records and produces findings.
pub struct Engine {
    options: EngineOptions,
    streams: Vec<StreamState>,
    events: Vec<EventState>,
    threads: Vec<ThreadState>,
    contexts: Vec<ContextState>,
    processes: Vec<ProcessState>,
    host_clocks: Vec<VersionedClock>,
    sites: SiteTable,
    collector: FindingCollector,
    stats: EngineStats,
    conflicts: Vec<Conflict>,
    /// Races found inside each graph, by graph name and size: a graph launched every iteration is checked once.
    graph_races: FxHashMap<(String, usize), Vec<RaceKey>>,
    /// Every happens-before edge, kept only when a timeline report asks for them (it grows with the trace).
    edge_log: Option<Vec<HbEdge>>,
    /// Reused list for a launch's resolved pointer arguments.
    pointer_scratch: Vec<Access>,
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

fn index_mut<'a, T>(v: &'a mut [T], index: usize, what: &str, origin: u64) -> Result<&'a mut T, EngineError> {
    let len = v.len();
    v.get_mut(index).ok_or_else(|| EngineError { origin, message: format!("{what} {index} unknown ({len} known)") })
}

/// Mutable references to two distinct elements.
fn pair_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    debug_assert_ne!(a, b);
    if a < b {
        let (left, right) = v.split_at_mut(b);
        (&mut left[a], &mut right[0])
    } else {
        let (left, right) = v.split_at_mut(a);
        (&mut right[0], &mut left[b])
    }
}

fn set_grow(v: &mut Vec<u64>, index: usize, value: u64) {
    if index >= v.len() {
        v.resize(index + 1, 0);
    }
    v[index] = value;
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
            sites: SiteTable::default(),
            collector: FindingCollector::default(),
            stats: EngineStats::default(),
            conflicts: Vec::new(),
            graph_races: FxHashMap::default(),
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
            TraceRecord::GpuTime { .. } => Ok(()),
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
        for s in 0..self.streams.len() {
            for (o, &pairs) in self.streams[s].unordered_with.iter().enumerate() {
                if pairs > 0 {
                    self.collector.stream_pair(&self.streams[s].sref, &self.streams[o].sref, pairs);
                }
            }
        }
        self.stats.streams = self.streams.len();
        self.stats.events = self.events.len();
        self.stats.threads = self.threads.len();
        self.stats.sites = self.sites.len();
        (self.collector.into_findings(), self.stats)
    }

    fn process_mut(&mut self, process: ProcessId) -> &mut ProcessState {
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
        let host_clock = match self.options.host_order {
            HostOrder::PerThread => None,
            HostOrder::Global => self.process_mut(info.process).host_clock,
        }
        .unwrap_or_else(|| {
            self.host_clocks.push(VersionedClock::default());
            self.host_clocks.len() - 1
        });
        if self.options.host_order == HostOrder::Global {
            self.process_mut(info.process).host_clock = Some(host_clock);
        }
        self.threads.push(ThreadState { tref: ThreadRef { id: info.id, tid: info.tid }, host_clock });
        Ok(())
    }

    fn add_stream(&mut self, info: StreamInfo) -> Result<(), EngineError> {
        if info.id.index() != self.streams.len() {
            return Err(EngineError { origin: 0, message: format!("stream ids out of order at {:?}", info.id) });
        }
        // A new stream starts from what its creator had observed: work on it runs after that.
        let mut clock = VersionedClock::default();
        if let Some(creator) = info.created_by {
            let thread = index_mut(&mut self.threads, creator.index(), "thread", 0)?;
            clock.join(&self.host_clocks[thread.host_clock].clock);
        }
        let ctx = info.context.index();
        if ctx >= self.contexts.len() {
            self.contexts.resize_with(ctx + 1, ContextState::default);
        }
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
            kind if kind.syncs_with_legacy_default() => self.contexts[ctx].blocking.push(info.id),
            _ => {}
        }
        self.process_mut(info.process).streams.push(info.id);
        let sref = StreamRef { id: info.id, handle: info.handle, kind: info.kind };
        self.streams.push(StreamState {
            info,
            sref,
            clock,
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

    fn check_stream(&self, stream: StreamId, origin: u64) -> Result<(), EngineError> {
        match self.streams.get(stream.index()) {
            Some(_) => Ok(()),
            None => Err(EngineError { origin, message: format!("stream {} unknown", stream.0) }),
        }
    }

    fn site(&mut self, class: &'static str, name: &str, stream: Option<StreamId>, op: &Operation) -> SiteId {
        let sref = stream.map(|s| &self.streams[s.index()].sref);
        let tref = &self.threads[op.thread.index()].tref;
        self.sites.intern(class, name, sref, tref, op.source.as_ref(), op.region.as_ref())
    }

    fn apply_op(&mut self, op: &Operation) -> Result<(), EngineError> {
        self.stats.operations += 1;
        let origin = op.origin;
        let host = self.host_clock_of(op.thread, origin)?;
        if let Some(stream) = op.kind.stream() {
            self.check_stream(stream, origin)?;
            self.enqueue(stream, host);
        }
        match &op.kind {
            OpKind::Kernel { stream, name, accesses, pointers } => {
                let site = self.site("kernel", name, Some(*stream), op);
                let epoch = self.tick(*stream, site, op, !accesses.is_empty() || !pointers.is_empty());
                // Pointer arguments (tier T1) become block accesses in a scratch list; exact accesses are used as
                // they are, without a copy per launch.
                let resolved = if pointers.is_empty() {
                    None
                } else {
                    self.stats.kernels_with_pointers += 1;
                    let mut all = std::mem::take(&mut self.pointer_scratch);
                    all.clear();
                    all.extend_from_slice(accesses);
                    self.resolve_pointers(op.process, pointers, &mut all);
                    Some(all)
                };
                for access in effective_accesses(resolved.as_deref().unwrap_or(accesses)) {
                    self.access(op, epoch, site, *access, Effect::Access);
                }
                if let Some(all) = resolved {
                    self.pointer_scratch = all;
                }
            }
            OpKind::Memcpy { stream, copy, src, dst, synchronous, .. } => {
                let name = format!("memcpy {}", copy.as_str());
                let site = self.site("memcpy", &name, Some(*stream), op);
                let epoch = self.tick(*stream, site, op, src.is_some() || dst.is_some());
                // rule 11: a copy reads its source and writes its destination.
                if let Some(range) = src {
                    self.access(op, epoch, site, Access { range: *range, mode: AccessMode::Read }, Effect::Access);
                }
                if let Some(range) = dst {
                    self.access(op, epoch, site, Access { range: *range, mode: AccessMode::Write }, Effect::Access);
                }
                if *synchronous {
                    // rule 6: a synchronous copy returns when the stream has run it.
                    self.host_joins_stream(host, *stream, op.seq);
                }
            }
            OpKind::Memset { stream, dst, synchronous, .. } => {
                let site = self.site("memset", "memset", Some(*stream), op);
                let epoch = self.tick(*stream, site, op, dst.is_some());
                if let Some(range) = dst {
                    self.access(op, epoch, site, Access { range: *range, mode: AccessMode::Write }, Effect::Access);
                }
                if *synchronous {
                    self.host_joins_stream(host, *stream, op.seq);
                }
            }
            OpKind::EventRecord { event, stream } => {
                // rule 3: the record captures the stream's clock; a later record replaces it.
                let ev = index_mut(&mut self.events, event.index(), "event", origin)?;
                let clock = &self.streams[stream.index()].clock.clock;
                match &mut ev.snapshot {
                    Some(snapshot) => snapshot.assign(clock),
                    None => ev.snapshot = Some(clock.clone()),
                }
                ev.recorded_on = Some(*stream);
                let recording = &self.streams[stream.index()];
                ev.recorded_after = (recording.clock.clock.get(*stream) > 0).then_some(recording.last_seq);
            }
            OpKind::StreamWait { stream, event } => {
                // rule 4: the wait joins the event's snapshot as it is now; a never-recorded event orders nothing.
                let ev = index_mut(&mut self.events, event.index(), "event", origin)?;
                match (&ev.snapshot, ev.recorded_on) {
                    (Some(snapshot), Some(from)) => {
                        self.streams[stream.index()].clock.join(snapshot);
                        if let (Some(log), Some(from_seq)) = (self.edge_log.as_mut(), ev.recorded_after) {
                            log.push(HbEdge { kind: EdgeKind::EventWait, from_seq, at_seq: op.seq, to_stream: Some(*stream) });
                        }
                        self.collector.edge(
                            EdgeKind::EventWait,
                            &self.streams[from.index()].sref,
                            Some(&self.streams[stream.index()].sref),
                        );
                    }
                    _ => {
                        let handle = ev.info.handle;
                        let site = self.site("stream wait", "cudaStreamWaitEvent", Some(*stream), op);
                        let position = self.streams[stream.index()].clock.clock.get(*stream);
                        let occurrence = self.occurrence(site, op, Some(position), AccessAction::Read);
                        self.collector.unrecorded_wait(site.0, || UnrecordedWait {
                            wait: occurrence,
                            event: handle,
                            count: 1,
                        });
                    }
                }
            }
            OpKind::StreamWaitUnknownRecord { stream, event } => {
                let site = self.site("stream wait", "cudaStreamWaitEvent", Some(*stream), op);
                let position = self.streams[stream.index()].clock.clock.get(*stream);
                let occurrence = self.occurrence(site, op, Some(position), AccessAction::Read);
                self.collector.wait_with_unknown_record(site.0, || UnrecordedWait { wait: occurrence, event: *event, count: 1 });
            }
            OpKind::HostSync(sync) => self.host_sync(host, *sync, op.seq, origin)?,
            OpKind::Query { target, ready } => {
                // rule 5: only a query that returned success tells the host the work is done.
                if *ready {
                    let sync = match *target {
                        QueryTarget::Stream(s) => HostSync::Stream(s),
                        QueryTarget::Event(e) => HostSync::Event(e),
                    };
                    self.host_sync(host, sync, op.seq, origin)?;
                }
            }
            OpKind::Alloc { alloc, handle, range, alloc_kind, stream, label } => {
                let allocation = Allocation {
                    id: *alloc,
                    handle: *handle,
                    process: op.process,
                    range: *range,
                    kind: *alloc_kind,
                    label: label.clone(),
                    source: op.source.clone(),
                };
                self.process_mut(op.process).allocations.insert(allocation, op.seq);
                let live = self.processes[op.process.index()].allocations.live();
                self.stats.peak_live_allocations = self.stats.peak_live_allocations.max(live);
                match (alloc_kind, stream) {
                    // A pool block only names memory: the accesses made there before stay in the shadow, so that
                    // a block handed out again while another stream still uses it is seen (CSAN forgets them).
                    (AllocKind::PoolBlock, _) => {}
                    (AllocKind::StreamOrdered, Some(stream)) => {
                        // rule 8: a stream-ordered allocation writes the whole block at its place in the stream.
                        let site = self.site("alloc", label.as_deref().unwrap_or("cudaMallocAsync"), Some(*stream), op);
                        let epoch = self.tick(*stream, site, op, true);
                        self.access(op, epoch, site, Access { range: *range, mode: AccessMode::Write }, Effect::Alloc);
                    }
                    _ => self.processes[op.process.index()].shadow.forget(*range),
                }
            }
            OpKind::Free { alloc, free_kind, stream } => self.free(op, host, *alloc, *free_kind, *stream)?,
            OpKind::GraphLaunch { stream, name, nodes } => {
                // rule 9: the whole graph is one step of its stream; its nodes share that step's epoch.
                let launch_site = self.site("graph launch", name, Some(*stream), op);
                let has_addresses = nodes.iter().any(|n| !n.accesses.is_empty());
                let epoch = self.tick(*stream, launch_site, op, has_addresses);
                let mut node_sites = Vec::with_capacity(nodes.len());
                for node in nodes {
                    let site = self.site("graph node", &format!("{name}/{}", node.name), Some(*stream), op);
                    node_sites.push(site);
                    for access in effective_accesses(&node.accesses) {
                        self.access(op, epoch, site, *access, Effect::Access);
                    }
                }
                self.check_graph(op, name, nodes, &node_sites, epoch);
            }
        }
        let segments = self.processes.get(op.process.index()).map_or(0, |p| p.shadow.segments());
        self.stats.peak_shadow_segments = self.stats.peak_shadow_segments.max(segments);
        Ok(())
    }

    /// Tier T1: a pointer argument that falls in a live allocation accesses that whole block. Words that point
    /// nowhere (sizes, flags, host pointers, freed memory) are ignored and counted.
    fn resolve_pointers(&mut self, process: ProcessId, pointers: &[PointerArg], out: &mut Vec<Access>) {
        let Some(state) = self.processes.get(process.index()) else { return };
        for pointer in pointers {
            match state.allocations.live_block_at(pointer.address) {
                Some(range) => {
                    if !out.iter().any(|a| a.range == range && a.mode == pointer.mode) {
                        out.push(Access { range, mode: pointer.mode });
                    }
                }
                None => self.stats.unresolved_pointers += 1,
            }
        }
    }

    /// What every enqueue does before the operation itself (rules 2 and 7).
    fn enqueue(&mut self, stream: StreamId, host: usize) {
        let s = stream.index();
        // rule 2: the stream runs the operation after everything the host thread had observed complete.
        let host_clock = &self.host_clocks[host];
        let state = &mut self.streams[s];
        if state.seen_host.get(host) != Some(&host_clock.version) {
            state.clock.join(&host_clock.clock);
            set_grow(&mut state.seen_host, host, host_clock.version);
        }
        // rule 7: the legacy default stream waits for every blocking stream of its context, and blocking streams
        // wait for it.
        let ctx = state.info.context.index();
        match state.info.kind {
            StreamKind::LegacyDefault => {
                for i in 0..self.contexts[ctx].blocking.len() {
                    let from = self.contexts[ctx].blocking[i];
                    self.stream_joins_stream(s, from.index());
                }
            }
            kind if kind.syncs_with_legacy_default() => {
                if let Some(legacy) = self.contexts[ctx].legacy {
                    self.stream_joins_stream(s, legacy.index());
                }
            }
            _ => {}
        }
    }

    fn stream_joins_stream(&mut self, to: usize, from: usize) {
        if to == from {
            return;
        }
        let (dst, src) = pair_mut(&mut self.streams, to, from);
        if dst.seen_stream.get(from) == Some(&src.clock.version) {
            return;
        }
        let before = dst.clock.version;
        dst.clock.join(&src.clock.clock);
        set_grow(&mut dst.seen_stream, from, src.clock.version);
        if dst.clock.version != before {
            self.collector.edge(EdgeKind::LegacyDefault, &src.sref, Some(&dst.sref));
        }
    }

    /// Advances the stream past a memory-touching operation and counts the operations of other streams it is
    /// unordered with. Pairs are grouped by site only for operations without addresses (tier T0), where they
    /// are the finding; with addresses, races say more and the exact per-stream-pair count suffices.
    fn tick(&mut self, stream: StreamId, site: SiteId, op: &Operation, has_addresses: bool) -> Epoch {
        let s = stream.index();
        let epoch = self.streams[s].clock.tick(stream);
        self.stats.has_addresses |= has_addresses;
        if epoch.tick == 1 {
            self.process_mut(op.process).active_streams.push(stream);
        }
        let Engine { streams, processes, collector, sites, .. } = self;
        for &other in &processes[op.process.index()].active_streams {
            let o = other.index();
            if o == s {
                continue;
            }
            let latest = streams[o].clock.clock.get(other);
            let known = streams[s].clock.clock.get(other);
            if latest <= known {
                continue;
            }
            let pairs = latest - known;
            let counts = &mut streams[s].unordered_with;
            if o >= counts.len() {
                counts.resize(o + 1, 0);
            }
            counts[o] += pairs;
            if let (false, Some(earlier)) = (has_addresses, streams[o].last_site) {
                let first = (streams[o].last_seq, op.seq);
                collector.unordered_pairs(earlier.0, site.0, pairs, || UnorderedPairGroup {
                    earlier: sites.get(earlier).clone(),
                    later: sites.get(site).clone(),
                    pairs,
                    first,
                });
            }
        }
        streams[s].last_site = Some(site);
        streams[s].last_seq = op.seq;
        epoch
    }

    /// The host thread observes everything issued on `stream` so far, at the operation `at_seq`.
    fn host_joins_stream(&mut self, host: usize, stream: StreamId, at_seq: u64) {
        let state = &self.streams[stream.index()];
        self.host_clocks[host].join(&state.clock.clock);
        self.collector.edge(EdgeKind::HostSync, &state.sref, None);
        if let Some(log) = self.edge_log.as_mut() {
            if state.clock.clock.get(stream) > 0 {
                log.push(HbEdge { kind: EdgeKind::HostSync, from_seq: state.last_seq, at_seq, to_stream: None });
            }
        }
    }

    /// rule 5: a host synchronization joins what it waited for into the calling thread's host clock.
    fn host_sync(&mut self, host: usize, sync: HostSync, at_seq: u64, origin: u64) -> Result<(), EngineError> {
        match sync {
            HostSync::Stream(stream) => {
                self.check_stream(stream, origin)?;
                self.host_joins_stream(host, stream, at_seq);
            }
            HostSync::Event(event) => {
                let ev = index_mut(&mut self.events, event.index(), "event", origin)?;
                // An event synchronize gives the event's snapshot, not the stream's later work.
                if let (Some(snapshot), Some(from)) = (&ev.snapshot, ev.recorded_on) {
                    self.host_clocks[host].join(snapshot);
                    self.collector.edge(EdgeKind::HostSync, &self.streams[from.index()].sref, None);
                    if let (Some(log), Some(from_seq)) = (self.edge_log.as_mut(), ev.recorded_after) {
                        log.push(HbEdge { kind: EdgeKind::HostSync, from_seq, at_seq, to_stream: None });
                    }
                }
            }
            HostSync::Device(device) => {
                let targets: Vec<StreamId> =
                    self.streams.iter().filter(|s| s.info.device == device).map(|s| s.info.id).collect();
                for stream in targets {
                    self.host_joins_stream(host, stream, at_seq);
                }
            }
            HostSync::Context(context) => {
                let targets: Vec<StreamId> =
                    self.streams.iter().filter(|s| s.info.context == context).map(|s| s.info.id).collect();
                for stream in targets {
                    self.host_joins_stream(host, stream, at_seq);
                }
            }
        }
        Ok(())
    }

    fn free(
        &mut self,
        op: &Operation,
        host: usize,
        alloc: crate::model::AllocId,
        kind: FreeKind,
        stream: Option<StreamId>,
    ) -> Result<(), EngineError> {
        let process = op.process;
        let Some(range) = self.process_mut(process).allocations.get(alloc).map(|a| a.range) else {
            return Err(EngineError { origin: op.origin, message: format!("free of unknown allocation {}", alloc.0) });
        };
        match (kind, stream) {
            (FreeKind::PoolBlock, _) => {
                // Given back to the framework's pool: nothing happens on the device.
                self.processes[process.index()].allocations.free(alloc, true, op.source.as_ref());
            }
            (FreeKind::StreamOrdered, Some(stream)) => {
                // rule 8: the free is a write of the whole block at its place in the stream.
                let site = self.site("free", "cudaFreeAsync", Some(stream), op);
                let epoch = self.tick(stream, site, op, true);
                self.access(op, epoch, site, Access { range, mode: AccessMode::Write }, Effect::Free);
                self.processes[process.index()].allocations.free(alloc, true, None);
            }
            _ => {
                if matches!(kind, FreeKind::Synchronous | FreeKind::Host) {
                    // rule 6: cudaFree synchronizes the device before releasing the block.
                    let targets: Vec<StreamId> = self.processes[process.index()].streams.clone();
                    for stream in targets {
                        self.host_joins_stream(host, stream, op.seq);
                    }
                }
                let name = match kind {
                    FreeKind::VirtualUnmap => "cuMemUnmap",
                    FreeKind::Host => "cudaFreeHost",
                    _ => "cudaFree",
                };
                let site = self.site("free", name, None, op);
                let Engine { processes, host_clocks, conflicts, .. } = self;
                conflicts.clear();
                processes[process.index()].shadow.release(range, &host_clocks[host].clock, conflicts);
                let later = Later { site, seq: op.seq, origin: op.origin, position: None, action: AccessAction::Free };
                self.report(process, &later, Known::Host(host));
                self.processes[process.index()].allocations.free(alloc, false, None);
            }
        }
        Ok(())
    }

    fn occurrence(&self, site: SiteId, op: &Operation, position: Option<u64>, action: AccessAction) -> OpOccurrence {
        OpOccurrence { site: self.sites.get(site).clone(), action, seq: op.seq, origin: op.origin, stream_position: position }
    }

    /// rule 11 and the race check: one access of `op`, at `epoch`, against the shadow of its process.
    fn access(&mut self, op: &Operation, epoch: Epoch, site: SiteId, access: Access, effect: Effect) {
        self.stats.accesses += 1;
        let stamp = Stamp { epoch, seq: op.seq, origin: op.origin, site, mode: access.mode, effect };
        let process = op.process;
        let Engine { processes, streams, conflicts, .. } = self;
        conflicts.clear();
        let clock = &streams[epoch.stream.index()].clock.clock;
        processes[process.index()].shadow.access(access.range, stamp, clock, conflicts);
        if conflicts.is_empty() {
            return;
        }
        let later = Later { site, seq: op.seq, origin: op.origin, position: Some(epoch.tick), action: action_of(effect, access.mode) };
        self.report(process, &later, Known::Stream(epoch.stream));
    }

    /// Turns the conflicts in `self.conflicts` into race findings.
    fn report(&mut self, process: ProcessId, later: &Later, known: Known) {
        let Engine { conflicts, sites, collector, processes, streams, host_clocks, stats, .. } = self;
        let known_clock = match known {
            Known::Stream(s) => &streams[s.index()].clock.clock,
            Known::Host(h) => &host_clocks[h].clock,
        };
        let allocations = &processes[process.index()].allocations;
        for conflict in conflicts.iter() {
            let earlier = conflict.earlier;
            let earlier_action = action_of(earlier.effect, earlier.mode);
            let kind = match (earlier_action, later.action) {
                (AccessAction::Free, _) | (_, AccessAction::Free) => RaceKind::UseAfterFree,
                (AccessAction::Read, _) => RaceKind::WriteAfterRead,
                (_, AccessAction::Read) => RaceKind::ReadAfterWrite,
                _ => RaceKind::WriteAfterWrite,
            };
            stats.race_occurrences += 1;
            collector.race((kind, earlier.site.0, later.site.0), || {
                let earlier_occurrence = OpOccurrence {
                    site: sites.get(earlier.site).clone(),
                    action: earlier_action,
                    seq: earlier.seq,
                    origin: earlier.origin,
                    stream_position: Some(earlier.epoch.tick),
                };
                let later_occurrence = OpOccurrence {
                    site: sites.get(later.site).clone(),
                    action: later.action,
                    seq: later.seq,
                    origin: later.origin,
                    stream_position: later.position,
                };
                let fix = Fix::for_race(&earlier_occurrence, &later_occurrence).unwrap_or(Fix::SyncBeforeRelease {
                    stream: streams[earlier.epoch.stream.index()].sref.clone(),
                    after: earlier_occurrence.site.name.clone(),
                });
                RaceFinding {
                    kind,
                    range: conflict.range,
                    allocation: allocations.describe(conflict.range, Some(earlier.seq)),
                    why: Unordered::CrossStream { known: known_clock.get(earlier.epoch.stream), position: earlier.epoch.tick },
                    fix,
                    count: 1,
                    earlier: earlier_occurrence,
                    later: later_occurrence,
                }
            });
        }
    }

    /// rule 9, inside a graph: nodes with no dependency path between them run concurrently.
    fn check_graph(&mut self, op: &Operation, name: &str, nodes: &[GraphNode], node_sites: &[SiteId], epoch: Epoch) {
        let memo_key = (name.to_string(), nodes.len());
        if let Some(keys) = self.graph_races.get(&memo_key) {
            for key in keys {
                self.stats.race_occurrences += 1;
                self.collector.count_again(*key);
            }
            return;
        }
        // ancestors[i] holds every node that node i transitively depends on.
        let words = nodes.len().div_ceil(64);
        let mut ancestors = vec![vec![0u64; words]; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            for &dep in &node.depends_on {
                if dep < i {
                    let (before, rest) = ancestors.split_at_mut(i);
                    for (mine, theirs) in rest[0].iter_mut().zip(&before[dep]) {
                        *mine |= *theirs;
                    }
                    rest[0][dep / 64] |= 1 << (dep % 64);
                }
            }
        }
        let mut keys = Vec::new();
        for j in 0..nodes.len() {
            for i in 0..j {
                if ancestors[j][i / 64] & (1 << (i % 64)) != 0 {
                    continue;
                }
                for a in &nodes[i].accesses {
                    for b in &nodes[j].accesses {
                        let Some(range) = a.range.intersection(b.range) else { continue };
                        let kind = match (a.mode, b.mode) {
                            (AccessMode::Read, AccessMode::Read) => continue,
                            (AccessMode::Write, AccessMode::Read) => RaceKind::ReadAfterWrite,
                            (AccessMode::Read, AccessMode::Write) => RaceKind::WriteAfterRead,
                            (AccessMode::Write, AccessMode::Write) => RaceKind::WriteAfterWrite,
                        };
                        let key = (kind, node_sites[i].0, node_sites[j].0);
                        keys.push(key);
                        self.stats.race_occurrences += 1;
                        let occurrence = |site: SiteId, mode: AccessMode| OpOccurrence {
                            site: self.sites.get(site).clone(),
                            action: action_of(Effect::Access, mode),
                            seq: op.seq,
                            origin: op.origin,
                            stream_position: Some(epoch.tick),
                        };
                        let earlier = occurrence(node_sites[i], a.mode);
                        let later = occurrence(node_sites[j], b.mode);
                        let allocation =
                            self.processes[op.process.index()].allocations.describe(range, None);
                        self.collector.race(key, || RaceFinding {
                            kind,
                            range,
                            allocation,
                            why: Unordered::GraphNodes { graph: name.to_string() },
                            fix: Fix::GraphDependency {
                                graph: name.to_string(),
                                from: nodes[i].name.clone(),
                                to: nodes[j].name.clone(),
                            },
                            count: 1,
                            earlier,
                            later,
                        });
                    }
                }
            }
        }
        self.graph_races.insert(memo_key, keys);
    }
}

/// The accesses of one operation that can race: a read inside a range the same operation writes adds nothing
/// (the write conflicts with everything the read would), and would report one bug twice.
fn effective_accesses(accesses: &[Access]) -> impl Iterator<Item = &Access> {
    accesses.iter().filter(move |a| {
        a.mode == AccessMode::Write
            || !accesses.iter().any(|w| w.mode == AccessMode::Write && w.range.contains(a.range))
    })
}

/// What an access did, as findings name it.
fn action_of(effect: Effect, mode: AccessMode) -> AccessAction {
    match (effect, mode) {
        (Effect::Free, _) => AccessAction::Free,
        (Effect::Alloc, _) => AccessAction::Alloc,
        (Effect::Access, AccessMode::Read) => AccessAction::Read,
        (Effect::Access, AccessMode::Write) => AccessAction::Write,
    }
}

/// Whose clock a conflict's later party had.
#[derive(Copy, Clone)]
enum Known {
    Stream(StreamId),
    Host(usize),
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
