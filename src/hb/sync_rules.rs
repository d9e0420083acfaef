//! Every synchronization the engine models, and nothing else (as TSan's `tsan_rtl_mutex.cpp` holds its sync
//! events): a stream's own order, what an enqueue inherits from the host thread and from the legacy default
//! stream, event record and wait, host synchronization and successful queries, and blocking API calls (how host
//! threads are ordered among themselves is `host_order`'s). Each rule is marked `rule N` where it is applied.
//!
//! It touches the clocks of streams, host threads and events, each stream's latest operation, the streams a
//! process has run work on, and the edges and wait findings it hands to the collector; never shadow memory or
//! allocations (`access` owns those). The stream step hands its T0 pair grouping to `unordered_pairs`;
//! which streams a synchronization of a whole device, context or process visits is `idle_streams`' book.

use std::sync::Arc;

use super::clock::{Epoch, Slot, VectorClock, VersionedClock};
use super::sites::SiteId;
use super::state::{pair_mut, Engine, EngineError, HbEdge, Scope};
use crate::findings::{AccessAction, EdgeKind, OpClass, OpOccurrence, UnrecordedWait};
use crate::model::{
    EventId, FreeKind, HostSync, MemoryKind, OpKind, Operation, ProcessId, QueryTarget, StreamId, StreamKind, ThreadId,
};

/// How long a call that touches memory keeps its host thread waiting, and so what the host has learned when it
/// returns.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum HostWait {
    /// It returns at once: the host learns nothing.
    Nothing,
    /// It waits for its stream's earlier work, then returns before its own is done (a copy from pageable memory
    /// returns once the data is staged; the DMA into the destination finishes later).
    EarlierWork,
    /// It returns once its own work is done.
    OwnWork,
    /// It waits for the whole device (`cudaFree`, `cudaFreeHost`).
    Device,
}

/// rule 6: blocking APIs follow CUDA's "API synchronization behavior" page, not their names. Whether a copy or
/// set makes the host wait depends on the call's form and on the memory on both sides; a free synchronizes the
/// device first.
pub(super) fn host_wait(kind: &OpKind) -> HostWait {
    match *kind {
        OpKind::Memcpy { synchronous, src_memory, dst_memory, .. } => {
            use MemoryKind::{Pageable, Unknown};
            if src_memory == Unknown || dst_memory == Unknown {
                // The trace does not say what memory it was: a non-Async call is taken to block, as its name says.
                return if synchronous { HostWait::OwnWork } else { HostWait::Nothing };
            }
            match (src_memory.is_host(), dst_memory.is_host(), synchronous) {
                // Host to host: synchronous in both forms.
                (true, true, _) => HostWait::OwnWork,
                // Device to pageable host: returns when done, in both forms; to pinned host, the plain form.
                (false, true, _) if dst_memory == Pageable => HostWait::OwnWork,
                (false, true, true) => HostWait::OwnWork,
                // Pageable host to device: waits for the stream's earlier work, returns once staged.
                (true, false, true) if src_memory == Pageable => HostWait::EarlierWork,
                (true, false, true) => HostWait::OwnWork,
                // Device to device, and every other Async form.
                _ => HostWait::Nothing,
            }
        }
        // A set is asynchronous on device memory, synchronous on pinned host or managed memory.
        OpKind::Memset { synchronous: true, dst_memory, .. } if dst_memory != MemoryKind::Device => HostWait::OwnWork,
        OpKind::Free { free_kind: FreeKind::Synchronous | FreeKind::Host, .. } => HostWait::Device,
        _ => HostWait::Nothing,
    }
}

impl Engine {
    /// rule 1: operations on one stream run in issue order. A memory-touching operation advances its stream's own
    /// clock component, so that every later operation of the stream covers it; on the way, the operations of other
    /// streams it is unordered with are counted.
    pub(super) fn tick(&mut self, stream: StreamId, site: SiteId, op: &Operation, has_addresses: bool) -> Epoch {
        let s = stream.index();
        let slot = match self.streams[s].slot {
            Some(slot) => slot,
            None => {
                // Its first memory-touching operation: from now on it has a component in clocks.
                let slot = Slot(self.slot_streams.len() as u32);
                self.slot_streams.push(stream);
                self.streams[s].slot = Some(slot);
                self.process_mut(op.process).active_streams.push((stream, slot));
                slot
            }
        };
        let epoch = self.streams[s].clock.tick(stream, slot);
        self.stats.has_addresses |= has_addresses;
        self.group_unordered_pairs(stream, site, op, has_addresses);
        let state = &mut self.streams[s];
        state.last_site = Some(site);
        state.last_seq = op.seq;
        epoch
    }

    /// What every enqueue does before the operation itself: the host thread's knowledge, then the legacy default
    /// stream's barrier.
    pub(super) fn enqueue(&mut self, stream: StreamId, host: usize) {
        let s = stream.index();
        if !self.streams[s].awake {
            self.wake(stream);
        }
        // rule 2: the stream runs the operation after everything the host thread had observed complete.
        let host_clock = &self.host_clocks[host];
        let state = &mut self.streams[s];
        if state.seen_host.get(host) != Some(&host_clock.version) {
            state.join(&host_clock.clock, &self.counted_from);
            set_grow(&mut state.seen_host, host, host_clock.version);
        }
        // rule 7: the legacy default stream waits for every blocking stream of its context, and blocking streams
        // wait for it. A blocking stream not enqueued on since the legacy default stream last joined it has not
        // changed: only the others are joined, in id order as a walk over all of them would.
        let ctx = state.info.context.index();
        match state.info.kind {
            StreamKind::LegacyDefault => {
                let mut pending = std::mem::take(&mut self.contexts[ctx].barrier_pending);
                pending.sort_unstable();
                for &from in &pending {
                    self.streams[from.index()].barrier_pending = false;
                    self.stream_joins_stream(s, from.index());
                }
                pending.clear();
                self.contexts[ctx].barrier_pending = pending;
            }
            kind if kind.syncs_with_legacy_default() => {
                if let Some(legacy) = self.contexts[ctx].legacy {
                    self.stream_joins_stream(s, legacy.index());
                }
                // What this operation does to the stream is for the legacy default stream's next barrier.
                if !self.streams[s].barrier_pending {
                    self.streams[s].barrier_pending = true;
                    self.contexts[ctx].barrier_pending.push(stream);
                }
            }
            _ => {}
        }
    }

    /// A new stream starts from what its creator had observed: work on it runs after that. Returns its clock
    /// (empty but for the version until it wakes) and the snapshot its first operation starts from.
    pub(super) fn clock_of_new_stream(
        &mut self,
        created_by: Option<ThreadId>,
    ) -> Result<(VersionedClock, Option<Arc<VectorClock>>), EngineError> {
        let Some(creator) = created_by else { return Ok((VersionedClock::default(), None)) };
        let host = index_mut(&mut self.threads, creator.index(), "thread", 0)?.host_clock;
        let creation = self.creation_snapshot(host);
        // The version a join of the snapshot into an empty clock would leave.
        let clock = VersionedClock { clock: VectorClock::new(), version: u64::from(creation.is_some()), raised: 0 };
        Ok((clock, creation))
    }

    fn stream_joins_stream(&mut self, to: usize, from: usize) {
        // A stream that ran nothing has no work to wait for (what it was created with orders its own work only).
        if to == from || !self.streams[from].awake {
            return;
        }
        let (dst, src) = pair_mut(&mut self.streams, to, from);
        if dst.seen_stream.get(from) == Some(&src.clock.version) {
            return;
        }
        let before = dst.clock.version;
        dst.join(&src.clock.clock, &self.counted_from);
        set_grow(&mut dst.seen_stream, from, src.clock.version);
        if dst.clock.version != before {
            self.collector.edge(EdgeKind::LegacyDefault, src.info.id, Some(dst.info.id));
        }
    }

    /// The host thread observes everything issued on `stream` so far, at the operation `at_seq`.
    pub(super) fn host_joins_stream(&mut self, host: usize, stream: StreamId, at_seq: u64) {
        self.host_joins_stream_alone(host, stream, at_seq);
        // DESIGN.md, the legacy default stream: its synchronization waits for what an operation issued on it now
        // would, so also the blocking streams' work since its last barrier (it holds the rest already).
        let info = &self.streams[stream.index()].info;
        if info.kind == StreamKind::LegacyDefault {
            let ctx = info.context.index();
            let pending = std::mem::take(&mut self.contexts[ctx].barrier_pending);
            for &blocking in &pending {
                self.host_joins_stream_alone(host, blocking, at_seq);
            }
            self.contexts[ctx].barrier_pending = pending;
        }
    }

    /// The host thread observes `stream`'s own work alone (a scope synchronization joins every awake stream so).
    /// A stream that ran nothing teaches nothing: what it was created with orders its own work only.
    pub(super) fn host_joins_stream_alone(&mut self, host: usize, stream: StreamId, at_seq: u64) {
        let state = &self.streams[stream.index()];
        if state.awake {
            self.host_clocks[host].join(&state.clock.clock);
        }
        self.collector.edge(EdgeKind::HostSync, stream, None);
        if let Some(log) = self.edge_log.as_mut() {
            if state.position() > 0 {
                log.push(HbEdge { kind: EdgeKind::HostSync, from_seq: state.last_seq, at_seq, to_stream: None });
            }
        }
    }

    /// The host thread knows its own accesses once it has made them (no edge: nothing was waited for).
    pub(super) fn host_knows_its_lane(&mut self, host: usize, lane: StreamId) {
        self.host_clocks[host].join(&self.streams[lane.index()].clock.clock);
    }

    /// rule 3: the record captures the stream's clock; a later record replaces it.
    pub(super) fn event_record(&mut self, event: EventId, stream: StreamId, origin: u64) -> Result<(), EngineError> {
        let ev = index_mut(&mut self.events, event.index(), "event", origin)?;
        let clock = &self.streams[stream.index()].clock.clock;
        match &mut ev.snapshot {
            Some(snapshot) => snapshot.assign(clock),
            None => ev.snapshot = Some(clock.clone()),
        }
        ev.recorded_on = Some(stream);
        let recording = &self.streams[stream.index()];
        ev.recorded_after = (recording.position() > 0).then_some(recording.last_seq);
        Ok(())
    }

    /// rule 4: the wait joins the event's snapshot as it is now; a never-recorded event orders nothing, and the
    /// wait is reported.
    pub(super) fn stream_wait(&mut self, op: &Operation, stream: StreamId, event: EventId) -> Result<(), EngineError> {
        let ev = index_mut(&mut self.events, event.index(), "event", op.origin)?;
        ev.waited_after_record |= ev.recorded_on.is_some();
        match (&ev.snapshot, ev.recorded_on) {
            (Some(snapshot), Some(from)) => {
                self.streams[stream.index()].join(snapshot, &self.counted_from);
                if let (Some(log), Some(from_seq)) = (self.edge_log.as_mut(), ev.recorded_after) {
                    log.push(HbEdge { kind: EdgeKind::EventWait, from_seq, at_seq: op.seq, to_stream: Some(stream) });
                }
                self.collector.edge(EdgeKind::EventWait, from, Some(stream));
            }
            _ => {
                let (handle, id) = (ev.info.handle, ev.info.id);
                let (site, occurrence) = self.wait_occurrence(op, stream);
                self.collector.unrecorded_wait(site.0, || UnrecordedWait {
                    wait: occurrence,
                    event: handle,
                    event_id: Some(id),
                    count: 1,
                });
            }
        }
        Ok(())
    }

    /// Sets aside, as info, the waits before a record that order nothing because nothing needed ordering yet: on
    /// an event that no record ever named (a library's deliberate no-op: NCCL's), and before the first record of
    /// an event the program waits on again once recorded: a pipeline's first turn, where each stage waits for
    /// the record of the stage before and the first has none (cuBLAS-XT's tiles, an IPC hand-over loop). A wait
    /// whose event is recorded only after it, and never waited on after a record, stays a finding: the order is
    /// wrong. Either way, an ordering the wait fails to give shows up as a race.
    pub(super) fn set_aside_harmless_waits(&mut self) {
        let events = &self.events;
        let event = |id: EventId| events.get(id.index());
        self.collector.set_aside_harmless_waits(
            |id| event(id).is_some_and(|e| e.recorded_on.is_none()),
            |id| event(id).is_some_and(|e| e.waited_after_record),
        );
    }

    /// A wait whose event record the trace does not hold orders nothing; the report says so.
    pub(super) fn wait_with_unknown_record(&mut self, op: &Operation, stream: StreamId, event: u64) {
        let (site, occurrence) = self.wait_occurrence(op, stream);
        self.collector.wait_with_unknown_record(site.0, || UnrecordedWait {
            wait: occurrence,
            event,
            event_id: None,
            count: 1,
        });
    }

    /// The wait `op` on `stream` as findings show it: its site and its place in the stream.
    fn wait_occurrence(&mut self, op: &Operation, stream: StreamId) -> (SiteId, OpOccurrence) {
        let site = self.site(OpClass::StreamWait, "cudaStreamWaitEvent", Some(stream), op);
        let position = self.streams[stream.index()].position();
        let occurrence = OpOccurrence {
            site,
            action: AccessAction::Read,
            seq: op.seq,
            origin: op.origin,
            stream_position: Some(position),
            node: None,
        };
        (site, occurrence)
    }

    /// rule 5: a host synchronization joins what it waited for into the calling thread's host clock.
    pub(super) fn host_sync(
        &mut self,
        host: usize,
        sync: HostSync,
        at_seq: u64,
        origin: u64,
    ) -> Result<(), EngineError> {
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
                    self.collector.edge(EdgeKind::HostSync, from, None);
                    if let (Some(log), Some(from_seq)) = (self.edge_log.as_mut(), ev.recorded_after) {
                        log.push(HbEdge { kind: EdgeKind::HostSync, from_seq, at_seq, to_stream: None });
                    }
                }
            }
            HostSync::Device(device) => self.host_joins_scope(host, Scope::Device(device), at_seq),
            HostSync::Context(context) => self.host_joins_scope(host, Scope::Context(context), at_seq),
        }
        Ok(())
    }

    /// Only a query that returned success tells the host the work is done: it is then a host synchronization on
    /// what it asked about.
    pub(super) fn query(
        &mut self,
        host: usize,
        target: QueryTarget,
        ready: bool,
        at_seq: u64,
        origin: u64,
    ) -> Result<(), EngineError> {
        if !ready {
            return Ok(());
        }
        let sync = match target {
            QueryTarget::Stream(s) => HostSync::Stream(s),
            QueryTarget::Event(e) => HostSync::Event(e),
        };
        self.host_sync(host, sync, at_seq, origin)
    }

    /// A blocking call returns only once what it waited for has run, so the host thread joins it: a copy or
    /// set its stream (before or after its own work, as [`host_wait`] says), a free every stream of the process.
    pub(super) fn host_waited(
        &mut self,
        host: usize,
        wait: HostWait,
        stream: Option<StreamId>,
        process: ProcessId,
        at_seq: u64,
    ) {
        match (wait, stream) {
            (HostWait::EarlierWork | HostWait::OwnWork, Some(stream)) => self.host_joins_stream(host, stream, at_seq),
            (HostWait::Device, _) => self.host_joins_scope(host, Scope::Process(process), at_seq),
            _ => {}
        }
    }
}

fn index_mut<'a, T>(v: &'a mut [T], index: usize, what: &str, origin: u64) -> Result<&'a mut T, EngineError> {
    let len = v.len();
    v.get_mut(index).ok_or_else(|| EngineError { origin, message: format!("{what} {index} unknown ({len} known)") })
}

fn set_grow(v: &mut Vec<u64>, index: usize, value: u64) {
    if index >= v.len() {
        v.resize(index + 1, 0);
    }
    v[index] = value;
}
