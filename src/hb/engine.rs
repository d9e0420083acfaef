//! The engine's dispatch, on top of its rule files: [`Engine::apply`] registers streams, events and threads and
//! hands each operation to the file that holds its rule; [`Engine::finish`] folds what the rules counted into
//! findings. The engine decides; it never formats.
//!
//! Each rule of DESIGN.md is applied in one place, marked `rule N` there: synchronization (stream order,
//! enqueue, events, host synchronization, blocking calls, the legacy default stream) in `sync_rules`, the order
//! among host threads in `host_order`, memory operations and the shadow check in `access`, conflicts made
//! findings in `race_report`, CUDA graphs in `graph`, and tier T0's unordered pairs in `unordered_pairs`; which
//! streams a synchronization of many streams visits (those that ran nothing cost nothing) is decided in
//! `idle_streams`. They share the state in `state`; this file alone imports them, and touches no clock beyond
//! what they hand back.

use rustc_hash::FxHashMap;

use super::checker::CheckerLink;
use super::host_order::host_role;
use super::shadow::{prefetch_bytes, prefetch_value};
use super::sites::{SiteId, SiteTable};
use super::state::{ContextState, Engine, EngineError, EngineOptions, EngineStats, EventState, HbEdge, StreamState};
use super::state::{ThreadOrder, ThreadState};
use super::sync_rules::{host_wait, HostWait};
use crate::findings::{FindingCollector, Findings};
use crate::model::{
    Access, AccessRange, Allocation, EventInfo, OpKind, Operation, StreamId, StreamInfo, StreamKind, ThreadId,
    ThreadInfo, TraceRecord,
};

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
            counted_from: Default::default(),
            sites: SiteTable::default(),
            collector: FindingCollector::default(),
            stats: EngineStats::default(),
            conflicts: Vec::new(),
            graph_memos: FxHashMap::default(),
            edge_log: None,
            pointer_scratch: Vec::new(),
            whole_block_sites: Default::default(),
            host_sync_recorded: false,
            // Without a thread for it, the check runs here: the same findings.
            checker: options.check_thread.wanted().then(CheckerLink::start).and_then(Result::ok),
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
            TraceRecord::Op(op) => {
                self.apply_op(op)?;
                self.collect_sites_when_due();
                Ok(())
            }
            TraceRecord::GpuTime { .. }
            | TraceRecord::Created(_)
            | TraceRecord::GroupStream(_)
            | TraceRecord::Job(_)
            | TraceRecord::RangeEnd { .. }
            | TraceRecord::FrameLine(_)
            | TraceRecord::Annotation(_) => Ok(()),
            TraceRecord::RangeBegin { process, .. } => {
                self.range_begins(*process);
                Ok(())
            }
            TraceRecord::HostSyncRecorded => {
                // From the header, before any thread: it decides the order `Auto` stands for.
                self.host_sync_recorded = true;
                Ok(())
            }
        }
    }

    /// Starts loading the memory the next records will touch, without using it: `ahead(k)` is the record `k`
    /// places after the one applied next (`ahead(1)` the one right after), when there is one. The engine is
    /// bound by memory latency (one random shadow lookup per access among ~100,000 segments, in records the
    /// reader wrote on the other core), and a miss that waits for another is not overlapped: so each record
    /// is loaded in steps, one step a record, each reading only what the step before loaded. Three records
    /// ahead, its accesses' list (on the heap, written by the reader); two ahead, the radix table's entry for
    /// each access (which that list gives); one ahead, the bucket of each (which that entry gives). Before all
    /// that, six ahead, the record itself (a few cache lines the reader's core wrote), which the step three
    /// ahead reads.
    pub fn prefetch<'r>(&self, ahead: impl Fn(usize) -> Option<&'r TraceRecord>) {
        if let Some(record) = ahead(PREFETCH_AHEAD + 3) {
            prefetch_value(record as *const TraceRecord);
        }
        if let Some(TraceRecord::Op(op)) = ahead(PREFETCH_AHEAD) {
            if let OpKind::Kernel { accesses, .. } = &op.kind {
                let bytes = size_of_val(accesses.as_slice()).min(PREFETCH_ACCESS_BYTES);
                prefetch_bytes(accesses.as_ptr() as *const u8, bytes);
            }
        }
        if self.checker.is_some() {
            // The shadows are the checker's, which prefetches them itself.
            return;
        }
        if let Some(TraceRecord::Op(op)) = ahead(2) {
            if let Some(process) = self.processes.get(op.process.index()) {
                each_access_start(op, |start| process.shadow.prefetch_index(start));
            }
        }
        if let Some(TraceRecord::Op(op)) = ahead(1) {
            if let Some(process) = self.processes.get(op.process.index()) {
                each_access_start(op, |start| process.shadow.prefetch(start));
            }
        }
    }

    /// Ends the analysis: folds the per-stream counts into findings.
    pub fn finish(mut self) -> (Findings, EngineStats) {
        if let Some(checker) = self.checker.as_mut() {
            let totals = checker.finish();
            self.report_checked();
            self.checker = None;
            self.stats.peak_shadow_segments = self.stats.peak_shadow_segments.max(totals.peak_shadow_segments);
            self.stats.assumed_view_overlaps += totals.assumed_view_overlaps;
        }
        self.fold_unordered_pairs();
        // A wait before any record is a finding when the event was recorded later (the order is
        // wrong); a wait on an event that nothing ever recorded is a library's deliberate no-op (NCCL's).
        self.set_aside_harmless_waits();
        self.count_idle_edges();
        self.stats.streams = self.streams.len();
        self.stats.events = self.events.len();
        self.stats.threads = self.threads.len();
        self.stats.sites = self.sites.len();
        self.stats.assumed_view_overlaps +=
            self.processes.iter().map(|p| p.shadow.assumed_view_overlaps()).sum::<u64>();
        let streams = &self.streams;
        let (sites, natives, renumber) = self.sites.into_tables();
        self.collector.renumber_sites(|id| renumber[id.index()].expect("a site a finding names is kept"));
        let findings = self.collector.into_findings(sites, natives, |id| streams[id.index()].info.handle);
        (findings, self.stats)
    }

    fn add_thread(&mut self, info: ThreadInfo) -> Result<(), EngineError> {
        if info.id.index() != self.threads.len() {
            return Err(EngineError { origin: 0, message: format!("thread ids out of order at {:?}", info.id) });
        }
        let host_clock = self.host_clock_for_thread(info.process);
        self.threads.push(ThreadState { process: info.process, host_clock, order: ThreadOrder::default() });
        Ok(())
    }

    fn add_stream(&mut self, info: StreamInfo) -> Result<(), EngineError> {
        if info.id.index() != self.streams.len() {
            return Err(EngineError { origin: 0, message: format!("stream ids out of order at {:?}", info.id) });
        }
        let (clock, creation) = self.clock_of_new_stream(info.created_by)?;
        // The legacy default stream's barrier (applied at each enqueue) needs each context's legacy stream and
        // the streams that take part.
        let ctx = info.context.index();
        if ctx >= self.contexts.len() {
            self.contexts.resize_with(ctx + 1, ContextState::default);
        }
        if info.kind == StreamKind::LegacyDefault {
            if self.contexts[ctx].legacy.is_some() {
                return Err(EngineError {
                    origin: 0,
                    message: format!("a second legacy default stream (handle {}) in one context", info.handle),
                });
            }
            self.contexts[ctx].legacy = Some(info.id);
        }
        let idle_edge_base = self.register_idle_stream(&info);
        self.streams.push(StreamState {
            info,
            clock,
            creation,
            awake: false,
            slot: None,
            idle_edge_base,
            // A stream that ran nothing has no work for the legacy default stream to wait for: it takes part
            // from its first operation.
            barrier_pending: false,
            seen_host: Vec::new(),
            seen_stream: Vec::new(),
            last_site: None,
            last_seq: 0,
            ordered_debit: Default::default(),
            counted_from: 0,
        });
        Ok(())
    }

    fn add_event(&mut self, info: EventInfo) -> Result<(), EngineError> {
        if info.id.index() != self.events.len() {
            return Err(EngineError { origin: 0, message: format!("event ids out of order at {:?}", info.id) });
        }
        self.events.push(EventState {
            info,
            snapshot: None,
            recorded_on: None,
            recorded_after: None,
            waited_after_record: false,
        });
        Ok(())
    }

    fn host_clock_of(&self, thread: ThreadId, origin: u64) -> Result<usize, EngineError> {
        self.threads
            .get(thread.index())
            .map(|t| t.host_clock)
            .ok_or_else(|| EngineError { origin, message: format!("thread {} unknown", thread.0) })
    }

    /// A copy or set, with what its call makes the host wait for: its stream's earlier work (joined before the
    /// copy's own step) or its own work (after).
    fn copy_or_set_waited(
        &mut self,
        op: &Operation,
        host: usize,
        stream: StreamId,
        site: SiteId,
        src: Option<AccessRange>,
        dst: Option<AccessRange>,
    ) {
        let wait = host_wait(&op.kind);
        if wait == HostWait::EarlierWork {
            self.host_waited(host, wait, Some(stream), op.process, op.seq);
            if let (Some(_), Some(_)) = (src, dst) {
                // From pageable memory the call reads the source into a staging buffer and returns; the DMA into
                // the destination finishes later (DESIGN.md, blocking APIs). Two steps of the stream: the source
                // read, which the host has waited for when the call returns (the program may reuse the buffer),
                // then the destination's write.
                self.copy_or_set(op, stream, site, src, None);
                self.host_waited(host, HostWait::OwnWork, Some(stream), op.process, op.seq);
                self.copy_or_set(op, stream, site, None, dst);
                return;
            }
        }
        self.copy_or_set(op, stream, site, src, dst);
        if wait == HostWait::OwnWork {
            self.host_waited(host, wait, Some(stream), op.process, op.seq);
        }
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
            if op.kind.enqueued() {
                self.enqueue(stream, host);
            }
        }
        match &op.kind {
            OpKind::Kernel { stream, name, accesses, pointers, exact } => {
                if let Some(exact) = exact {
                    self.stats.exact_kernels.count(*exact, name);
                }
                self.kernel_launch(op, *stream, accesses, pointers);
            }
            OpKind::Memcpy { stream, src, dst, .. } => {
                let site = self.hot_site(op);
                self.copy_or_set_waited(op, host, *stream, site, *src, *dst);
            }
            OpKind::Memset { stream, dst, .. } => {
                let site = self.hot_site(op);
                self.copy_or_set_waited(op, host, *stream, site, None, *dst);
            }
            OpKind::HostAccess { lane, name, accesses } => self.host_access(op, host, *lane, name, accesses),
            OpKind::HostFunc { stream, name, accesses, .. } | OpKind::HostFuncAccess { stream, name, accesses, .. } => {
                self.host_func(op, *stream, name, accesses)
            }
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
            OpKind::Free { alloc, free_kind, stream } => {
                // A free that synchronizes the device (`cudaFree`, `cudaFreeHost`) does so before the block ends.
                self.host_waited(host, host_wait(&op.kind), None, op.process, op.seq);
                self.free(op, host, *alloc, *free_kind, *stream)?;
            }
            OpKind::GraphLaunch { stream, graph, host_runs } => self.graph_launch(op, *stream, graph, host_runs)?,
            OpKind::HostRelease { object } => self.host_release(op, *object),
            OpKind::HostAcquire { object } => self.host_acquire(op, *object),
            // The reader turns graph calls into launches; none reaches here.
            OpKind::GraphCall(_) => {}
        }
        self.after_host_call(op.thread, op.process, role);
        match self.checker.as_mut() {
            Some(checker) => checker.operation_end(op.process),
            None => {
                let segments = self.processes.get(op.process.index()).map_or(0, |p| p.shadow.segments());
                self.stats.peak_shadow_segments = self.stats.peak_shadow_segments.max(segments);
            }
        }
        Ok(())
    }
}

/// How many records ahead of the one applied [`Engine::prefetch`] reaches.
const PREFETCH_AHEAD: usize = 3;

/// The bytes of a kernel's access list loaded ahead: a launch's usual few accesses (a gather's 100,000 ranges
/// would crowd out what the next records need).
const PREFETCH_ACCESS_BYTES: usize = 256;

/// Calls `each` with the start of every plain range `op` accesses directly (not through pointer arguments).
fn each_access_start(op: &Operation, mut each: impl FnMut(u64)) {
    match &op.kind {
        OpKind::Kernel { accesses, .. } => {
            accesses.iter().take(PREFETCH_ACCESS_BYTES / size_of::<Access>()).for_each(|a| each(a.range.start))
        }
        OpKind::Memcpy { src, dst, .. } => src.iter().chain(dst).for_each(|r| each(r.start)),
        OpKind::Memset { dst: Some(range), .. } => each(range.start),
        _ => {}
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
