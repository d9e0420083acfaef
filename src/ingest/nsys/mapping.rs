//! Mapping rows to model records: each group of activities that one API call caused becomes operations on
//! streams, events and allocations, declared as they first appear. Synchronization rows are classified by the
//! API name of their call, since `syncType` disagrees with its own enum in many versions (MANIFEST.md).
//! Ids are drawn from the shared dense-id tables (`stages::ids`), and operations go through the stages every
//! reader shares (an export holds no framework frames or graph calls: they pass unchanged). Memory grows with
//! streams and events, not with rows.

use std::path::PathBuf;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::calls::{classify_sync, ApiCalls, CallName, SyncKind};
use super::nvtx::RegionCursor;
use super::schema::Lookups;
use super::tables::{Activity, ActivityRow, NOT_APPLICABLE};
use crate::ingest::background::{Batch, BatchSender};
use crate::ingest::counters::{Counter, ImportCounters};
use crate::ingest::record_source::{IngestError, BATCH};
use crate::ingest::stages::ids::DenseIds;
use crate::ingest::stages::Stages;
use crate::model::{
    AccessRange, AllocId, AllocKind, AnnotatedRange, ContextId, CopyKind, DeviceId, EventId, EventInfo, FreeKind,
    HostSync, MemoryKind, OpKind, Operation, ProcessId, SiteHint, StreamId, StreamInfo, StreamKind, ThreadId,
    ThreadInfo, TraceRecord,
};

/// What a thread id stands for in an export: a thread by its globalTid, or the one unknown thread of a process
/// whose activities came without an API call (one numbering for both).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
enum ThreadHandle {
    Global(i64),
    Unknown(ProcessId),
}

/// How many records of one event (one eventId of one process) keep an event of their own, in an export with
/// sync ids: a wait names its record by sync id, and since a wait waits for the latest record when it is called,
/// it names one of the last few of its event. Older records hand their event on to newer ones, so that the
/// events, and the clock snapshot the analysis keeps for each, grow with the events a program uses, not with
/// how often it records them (a training loop records the same few events millions of times).
const RECORDS_KEPT: usize = 8;

/// The events the latest records of one eventId stand for, with each one's key (its sync id).
#[derive(Default)]
struct KeptRecords {
    events: Vec<(EventId, i64)>,
    /// Which of them the next record takes over once all are drawn: the oldest.
    next: usize,
    /// Whether a record has given its event up.
    handed_on: bool,
}

/// The ids given so far and the records not yet handed over.
pub(super) struct Mapper {
    /// The export, as errors name it.
    path: PathBuf,
    tx: BatchSender,
    batch: Batch,
    pub(super) counters: ImportCounters,
    pub(super) lookups: Lookups,
    /// Whether the export recorded event records (a wait without one is then a wait on a never-recorded event).
    pub(super) has_event_table: bool,
    /// Whether its event tables carry sync ids: a record or wait without one then lost it.
    pub(super) event_sync_ids: bool,
    seq: u64,
    processes: DenseIds<i64, ProcessId>,
    threads: DenseIds<ThreadHandle, ThreadId>,
    /// Streams by (pid, context, stream).
    streams: DenseIds<(i64, i64, i64), StreamId>,
    contexts: DenseIds<(i64, i64), ContextId>,
    devices: DenseIds<(i64, i64), DeviceId>,
    /// Events by (pid, eventSyncId) when the export has sync ids (the last [`RECORDS_KEPT`] records of each
    /// eventId), else by (pid, eventId): the latest record.
    events: DenseIds<(i64, i64), EventId>,
    /// The kept records of each eventId, by (pid, eventId), in an export with sync ids.
    kept_records: FxHashMap<(i64, i64), KeptRecords>,
    /// The (pid, context)s whose legacy default stream is declared: a context has one.
    legacy_contexts: rustc_hash::FxHashSet<(i64, i64)>,
    /// In an export with sync ids, each event's latest record that lost its sync id, by (pid, eventId): what a
    /// wait whose sync id names no record waits for.
    records_without_sync_id: FxHashMap<(i64, i64), EventId>,
    /// Each event's latest record, by (pid, eventId): what a wait that lost its sync id waits for.
    latest_records: FxHashMap<(i64, i64), EventId>,
    /// Live allocations by (pid, address).
    live_allocations: DenseIds<(i64, i64), AllocId>,
    /// What each API function's name says.
    pub(super) api_calls: ApiCalls,
    /// Framework frames and CUDA graphs, which every reader's operations pass through (an export has neither:
    /// its operations pass unchanged).
    stages: Stages,
}

/// What the API call behind a group of activities tells about each of them.
struct CallContext {
    process: ProcessId,
    thread: ThreadId,
    correlation: i64,
    host_start: Option<u64>,
    host_end: Option<u64>,
    api: Option<Arc<str>>,
    region: Option<Arc<str>>,
}

impl Mapper {
    pub(super) fn new(path: PathBuf, tx: BatchSender) -> Mapper {
        Mapper {
            path,
            tx,
            batch: Vec::with_capacity(BATCH),
            counters: ImportCounters::default(),
            lookups: Lookups::default(),
            has_event_table: false,
            event_sync_ids: false,
            records_without_sync_id: FxHashMap::default(),
            latest_records: FxHashMap::default(),
            seq: 0,
            processes: DenseIds::default(),
            threads: DenseIds::default(),
            streams: DenseIds::default(),
            contexts: DenseIds::default(),
            devices: DenseIds::default(),
            events: DenseIds::default(),
            kept_records: FxHashMap::default(),
            live_allocations: DenseIds::default(),
            legacy_contexts: Default::default(),
            api_calls: ApiCalls::default(),
            stages: Stages::default(),
        }
    }

    /// Hands over the last records, then `error` if reading failed; the counters of what was read.
    pub(super) fn finish(mut self, error: Option<IngestError>) -> ImportCounters {
        if let Some(error) = error {
            self.batch.push(Err(error));
        }
        self.tx.send_last(self.batch);
        self.counters
    }

    /// A declaration (a thread, stream or event), into the batch.
    fn push(&mut self, record: TraceRecord) {
        self.batch.push(Ok(record));
        self.flush_when_full();
    }

    fn flush_when_full(&mut self) {
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        // A closed receiver means the consumer stopped early (an error downstream): nothing left to do.
        self.tx.send(&mut self.batch);
    }

    fn process(&mut self, pid: i64) -> ProcessId {
        self.processes.get_or_add(pid).0
    }

    fn thread(&mut self, process: ProcessId, global_tid: Option<i64>) -> ThreadId {
        let (key, tid) = match global_tid {
            Some(g) => (ThreadHandle::Global(g), (g & 0xFF_FFFF) as u64),
            None => (ThreadHandle::Unknown(process), 0),
        };
        let (id, fresh) = self.threads.get_or_add(key);
        if fresh {
            self.push(TraceRecord::Thread(ThreadInfo { id, process, tid, name: None }));
        }
        id
    }

    fn device(&mut self, pid: i64, device: i64) -> DeviceId {
        self.devices.get_or_add((pid, device)).0
    }

    /// The stream (pid, context, stream), declared on first use from TARGET_INFO's flags.
    fn stream(&mut self, pid: i64, context: i64, stream: i64, device: Option<i64>) -> StreamId {
        if let Some(id) = self.streams.get(&(pid, context, stream)) {
            return id;
        }
        let process = self.process(pid);
        let id = self.streams.add((pid, context, stream));
        let null = self.lookups.null_streams.get(&(pid, context)).copied();
        let kind = match (self.lookups.stream_flags.get(&(pid, context, stream)), null) {
            (_, Some((null_stream, _))) if null_stream == stream => StreamKind::LegacyDefault,
            (Some((3, _)), _) => StreamKind::LegacyDefault,
            (Some((1, _)), _) => StreamKind::Blocking,
            (Some((2, _)), _) => StreamKind::NonBlocking,
            _ => {
                self.counters.bump(Counter::NsysStreamFlagsUnknown, 1);
                StreamKind::NonBlocking
            }
        };
        let kind = if kind == StreamKind::LegacyDefault && !self.legacy_contexts.insert((pid, context)) {
            self.counters.bump(Counter::NsysSecondLegacyDefault, 1);
            StreamKind::Blocking
        } else {
            kind
        };
        let priority = self.lookups.stream_flags.get(&(pid, context, stream)).map(|&(_, p)| p as i32);
        let device_number = null.map(|(_, d)| d).or(device).unwrap_or(0);
        let device = self.device(pid, device_number);
        let context_id = self.contexts.get_or_add((pid, context)).0;
        self.push(TraceRecord::Stream(StreamInfo {
            id,
            handle: stream as u64,
            kind,
            priority,
            process,
            device,
            gpu: device_number as u32,
            context: context_id,
            created_by: None,
            source: None,
            native: None,
        }));
        id
    }

    /// An NVTX range of thread `global_tid`, for timelines (host times share the export's clock with GPU times).
    pub(super) fn annotated_range(&mut self, pid: i64, global_tid: i64, start: i64, end: i64, text: String) {
        let Some(end) = self.end_after_start(start, end) else { return };
        let process = self.process(pid);
        let thread = self.thread(process, Some(global_tid));
        self.push(TraceRecord::Annotation(AnnotatedRange {
            process,
            thread,
            start_ns: start.max(0) as u64,
            end_ns: end.max(0) as u64,
            text: Arc::from(text),
        }));
    }

    /// Declares the event `id` the export calls `handle`.
    fn declare_event(&mut self, pid: i64, handle: i64, id: EventId) -> EventId {
        let process = self.process(pid);
        self.push(TraceRecord::Event(EventInfo { id, handle: handle as u64, process, source: None, native: None }));
        id
    }

    /// The key an event record and its waits share: the sync id where the export has one, else the event id.
    fn event_key(event: i64, event_sync: i64) -> Option<i64> {
        match event_sync {
            sync if sync != NOT_APPLICABLE => Some(sync),
            _ if event != NOT_APPLICABLE => Some(-1 - event), // a separate key space for plain event ids
            _ => None,
        }
    }

    /// The record a wait or event synchronization names: by its sync id, or by its event id where the export
    /// has no sync ids. Where one side lost the sync id the export has elsewhere (counted), the event's latest
    /// record (that lost its own) stands in.
    fn recorded_event(&mut self, pid: i64, event: i64, event_sync: i64) -> Option<EventId> {
        let found = Self::event_key(event, event_sync).and_then(|key| self.events.get(&(pid, key)));
        if found.is_some() || !self.event_sync_ids || event == NOT_APPLICABLE {
            return found;
        }
        if event_sync == NOT_APPLICABLE {
            self.counters.bump(Counter::NsysEventSyncIdMissing, 1);
            return self.latest_records.get(&(pid, event)).copied();
        }
        if let Some(id) = self.handed_on_record(pid, event, event_sync) {
            return Some(id);
        }
        self.records_without_sync_id.get(&(pid, event)).copied()
    }

    /// The event of a record with a sync id: a new one for each of the first [`RECORDS_KEPT`] records of its
    /// eventId, then the oldest record's, whose sync id then names nothing.
    fn kept_record(&mut self, pid: i64, event: i64, key: i64) -> EventId {
        let kept = self.kept_records.entry((pid, event)).or_default();
        if kept.events.len() < RECORDS_KEPT {
            let id = self.events.add((pid, key));
            kept.events.push((id, key));
            return self.declare_event(pid, event, id);
        }
        let (id, old_key) = kept.events[kept.next];
        kept.events[kept.next] = (id, key);
        kept.next = (kept.next + 1) % RECORDS_KEPT;
        kept.handed_on = true;
        self.events.remove(&(pid, old_key));
        self.events.reassign((pid, key), id);
        id
    }

    /// For a wait whose sync id names a record older than every record kept of its eventId (sync ids grow with
    /// time), the oldest kept record, counted: that record's own clock is gone.
    fn handed_on_record(&mut self, pid: i64, event: i64, event_sync: i64) -> Option<EventId> {
        let kept = self.kept_records.get(&(pid, event)).filter(|kept| kept.handed_on)?;
        let &(id, oldest) = kept.events.iter().min_by_key(|(_, key)| *key)?;
        if event_sync >= oldest {
            return None;
        }
        self.counters.bump(Counter::NsysEventRecordHandedOn, 1);
        Some(id)
    }

    /// Maps one group of the merge: the rows of one (process, correlation id).
    pub(super) fn emit_group(&mut self, group: &mut [Activity], regions: &mut Option<RegionCursor>) {
        let Some(first) = group.first() else { return };
        let (pid, correlation) = (first.pid, first.correlation);
        let process = self.process(pid);
        let api = group.iter().find_map(|a| match &a.row {
            ActivityRow::Api { start, end, global_tid, name } => Some((*start, *end, *global_tid, *name)),
            _ => None,
        });
        let thread = self.thread(process, api.as_ref().map(|a| a.2));
        let (api_name, says) = match &api {
            Some(a) => {
                let call = self.api_calls.get(a.3, &self.lookups.strings);
                (Some(call.name.clone()), call.says)
            }
            None => (None, CallName::of("", "")),
        };
        let region = match (regions.as_mut(), &api) {
            (Some(cursor), Some((start, _, global_tid, _))) => cursor.region_at(pid, *global_tid, *start),
            _ => None,
        };
        let call = CallContext {
            process,
            thread,
            correlation,
            host_start: api.as_ref().map(|a| a.0.max(0) as u64),
            host_end: api.as_ref().and_then(|a| self.end_after_start(a.0, a.1)).map(|end| end.max(0) as u64),
            api: api_name.clone(),
            region,
        };
        let gpu_rows = group.iter().filter(|a| !matches!(a.row, ActivityRow::Api { .. })).count();
        if api.is_none() {
            self.counters.bump(Counter::NsysActivityWithoutApiCall, gpu_rows as u64);
        }
        let mut emitted = false;
        for activity in group.iter_mut() {
            let row =
                std::mem::replace(&mut activity.row, ActivityRow::Api { start: 0, end: 0, global_tid: 0, name: -1 });
            let kind = match row {
                ActivityRow::Api { .. } => continue,
                ActivityRow::Kernel { start, end, device, context, stream, name: kernel } => {
                    self.counters.bump(Counter::NsysKernels, 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let name = self.lookups.strings.get(&kernel).cloned().unwrap_or_else(|| Arc::from("kernel"));
                    let op = OpKind::Kernel { stream, name, accesses: Vec::new(), pointers: Vec::new(), exact: None };
                    let gpu = self.gpu_times(start, end);
                    self.push_op(&call, gpu, op);
                    emitted = true;
                    continue;
                }
                ActivityRow::Memcpy { start, end, device, context, stream, bytes, copy_kind, src_kind, dst_kind } => {
                    self.counters.bump(Counter::NsysMemcpys, 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let copy = match copy_kind {
                        1 => CopyKind::HtoD,
                        2 => CopyKind::DtoH,
                        8 => CopyKind::DtoD,
                        9 => CopyKind::HtoH,
                        10 => CopyKind::PtoP,
                        _ => CopyKind::Default,
                    };
                    let synchronous = says.synchronous_memcpy;
                    let (src_memory, dst_memory) = (memory_kind(src_kind), memory_kind(dst_kind));
                    let op = OpKind::Memcpy {
                        stream,
                        copy,
                        bytes: bytes.max(0) as u64,
                        src: None,
                        dst: None,
                        synchronous,
                        src_memory,
                        dst_memory,
                    };
                    let gpu = self.gpu_times(start, end);
                    self.push_op(&call, gpu, op);
                    emitted = true;
                    continue;
                }
                ActivityRow::Memset { start, end, device, context, stream, bytes, mem_kind } => {
                    self.counters.bump(Counter::NsysMemsets, 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let synchronous = says.synchronous_memset;
                    let op = OpKind::Memset {
                        stream,
                        bytes: bytes.max(0) as u64,
                        dst: None,
                        synchronous,
                        dst_memory: memory_kind(mem_kind),
                    };
                    let gpu = self.gpu_times(start, end);
                    self.push_op(&call, gpu, op);
                    emitted = true;
                    continue;
                }
                ActivityRow::EventRecord { device, context, stream, event, event_sync } => {
                    self.counters.bump(Counter::NsysEventRecords, 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let Some(key) = Self::event_key(event, event_sync) else {
                        self.counters.bump(Counter::NsysEventWithoutId, 1);
                        continue;
                    };
                    // With sync ids a record is its own event (one of the last few of its eventId); without, a
                    // record replaces the last one.
                    let id = match (event_sync != NOT_APPLICABLE, self.events.get(&(pid, key))) {
                        (true, _) => self.kept_record(pid, event, key),
                        (false, Some(id)) => id,
                        (false, None) => {
                            let id = self.events.add((pid, key));
                            self.declare_event(pid, event, id)
                        }
                    };
                    if event != NOT_APPLICABLE {
                        self.latest_records.insert((pid, event), id);
                        if self.event_sync_ids && event_sync == NOT_APPLICABLE {
                            self.counters.bump(Counter::NsysEventSyncIdMissing, 1);
                            self.records_without_sync_id.insert((pid, event), id);
                        }
                    }
                    OpKind::EventRecord { event: id, stream }
                }
                ActivityRow::Sync { context, stream, sync_type, event, event_sync } => {
                    self.counters.bump(Counter::NsysSyncs, 1);
                    let class = classify_sync(says.sync, sync_type);
                    if api.is_none() || class.by_type {
                        self.counters.bump(Counter::NsysSyncClassifiedByType, 1);
                    }
                    match class.kind {
                        SyncKind::StreamWait => {
                            let waiting = self.stream(pid, context, stream, None);
                            match self.recorded_event(pid, event, event_sync) {
                                Some(id) => OpKind::StreamWait { stream: waiting, event: id },
                                None if self.has_event_table => {
                                    // The export records event records, and none came before this wait.
                                    let id = self.events.draw();
                                    let id = self.declare_event(pid, event, id);
                                    OpKind::StreamWait { stream: waiting, event: id }
                                }
                                None => {
                                    self.counters.bump(Counter::NsysWaitRecordUnknown, 1);
                                    OpKind::StreamWaitUnknownRecord { stream: waiting, event: event.max(0) as u64 }
                                }
                            }
                        }
                        SyncKind::Stream => OpKind::HostSync(HostSync::Stream(self.stream(pid, context, stream, None))),
                        SyncKind::Event => match self.recorded_event(pid, event, event_sync) {
                            Some(id) => OpKind::HostSync(HostSync::Event(id)),
                            None => {
                                self.counters.bump(Counter::NsysEventSyncRecordUnknown, 1);
                                continue;
                            }
                        },
                        SyncKind::Context => {
                            let ctx = self.contexts.get_or_add((pid, context)).0;
                            OpKind::HostSync(HostSync::Context(ctx))
                        }
                    }
                }
                ActivityRow::Memory { address, bytes, free, name: label } => {
                    self.counters.bump(Counter::NsysMemoryEvents, 1);
                    if free {
                        match self.live_allocations.remove(&(pid, address)) {
                            Some(alloc) => OpKind::Free { alloc, free_kind: FreeKind::VirtualUnmap, stream: None },
                            None => continue, // allocated before the capture started
                        }
                    } else {
                        let Ok(range) = AccessRange::new(address as u64, bytes.max(0) as u64) else {
                            self.counters.bump(Counter::NsysBadMemoryRange, 1);
                            continue;
                        };
                        let replaced = self.live_allocations.remove(&(pid, address));
                        let alloc = self.live_allocations.add((pid, address));
                        if let Some(old) = replaced {
                            self.push_op(
                                &call,
                                None,
                                OpKind::Free { alloc: old, free_kind: FreeKind::VirtualUnmap, stream: None },
                            );
                        }
                        OpKind::Alloc {
                            alloc,
                            handle: alloc.0 as u64,
                            range,
                            alloc_kind: AllocKind::Device,
                            stream: None,
                            label,
                        }
                    }
                }
            };
            self.push_op(&call, None, kind);
            emitted = true;
        }
        // API calls whose effect nsys records no activity for.
        if !emitted && api.is_some() && says.blocks_device {
            // cudaFree and cudaFreeHost synchronize the device (DESIGN.md's blocking-API rule), and a device
            // synchronization may come without a SYNCHRONIZATION row: the host joins every context of the process.
            let contexts: Vec<ContextId> =
                self.contexts.iter().filter(|((p, _), _)| *p == pid).map(|(_, c)| c).collect();
            for ctx in contexts {
                self.push_op(&call, None, OpKind::HostSync(HostSync::Context(ctx)));
            }
        }
    }

    /// A row's GPU interval; `None`, counted, when its end is before its start (the JSON reader refuses such a
    /// record; here the operation is kept, since it still orders and accesses, without its times).
    fn gpu_times(&mut self, start: i64, end: i64) -> Option<(i64, i64)> {
        self.end_after_start(start, end).map(|end| (start, end))
    }

    /// `end`, unless it is before `start` (then counted).
    fn end_after_start(&mut self, start: i64, end: i64) -> Option<i64> {
        if end < start {
            self.counters.bump(Counter::NsysEndBeforeStart, 1);
            return None;
        }
        Some(end)
    }

    fn push_op(&mut self, call: &CallContext, gpu: Option<(i64, i64)>, kind: OpKind) {
        let op = Operation {
            seq: self.seq,
            process: call.process,
            thread: call.thread,
            host_time_ns: call.host_start,
            gpu_start_ns: gpu.map(|g| g.0.max(0) as u64),
            gpu_end_ns: gpu.map(|g| g.1.max(0) as u64),
            correlation_id: Some(call.correlation as u64),
            host_end_ns: call.host_end,
            api: call.api.clone(),
            region: call.region.clone(),
            source: None,
            native: None,
            origin: call.correlation as u64,
            kind,
            site_hint: SiteHint::NONE,
        };
        self.seq += 1;
        self.stages.op(call.thread, op);
        let Mapper { stages, batch, path, .. } = self;
        // An export holds no graph calls, so the graphs stage takes every operation; should it refuse one, the
        // reading ends there.
        let refused = stages.flush(batch, &mut |origin, problem| {
            Err(IngestError::new(path, Some(format!("correlation id {origin}")), problem.0))
        });
        if let Err(error) = refused {
            self.batch.push(Err(error));
        }
        self.flush_when_full();
    }
}

/// ENUM_CUDA_MEM_KIND (0-based: 0 pageable, 1 pinned, 2 device, 3 array, 4 managed, 5 device static, 6 managed
/// static, 7 unknown) as the blocking rules see it.
fn memory_kind(value: i64) -> MemoryKind {
    match value {
        0 => MemoryKind::Pageable,
        1 => MemoryKind::Pinned,
        2 | 3 | 5 => MemoryKind::Device,
        4 | 6 => MemoryKind::Managed,
        _ => MemoryKind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(correlation: i64, row: ActivityRow) -> Vec<Activity> {
        vec![Activity { pid: 1, correlation, row }]
    }

    #[test]
    fn records_of_one_event_share_a_bounded_set_of_events_and_each_wait_joins_the_record_it_names() {
        // One batch holds every record here, so the queue does not fill.
        // Nothing is given back: the sender's last batch finds the analysis gone, as at the end of a trace.
        let (tx, rx, give_back) = BatchSender::new();
        drop(give_back);
        let mut mapper = Mapper::new(PathBuf::from("export.sqlite"), tx);
        mapper.event_sync_ids = true;
        mapper.has_event_table = true;
        let mut regions = None;
        let record = |sync| ActivityRow::EventRecord { device: 0, context: 1, stream: 7, event: 5, event_sync: sync };
        let wait = |sync| ActivityRow::Sync { context: 1, stream: 8, sync_type: 2, event: 5, event_sync: sync };
        // Each wait names the record before it, and the one after names the record two back (kept too).
        for i in 0..40 {
            mapper.emit_group(&mut group(3 * i, record(100 + i)), &mut regions);
            mapper.emit_group(&mut group(3 * i + 1, wait(100 + i)), &mut regions);
            mapper.emit_group(&mut group(3 * i + 2, wait(100 + (i - 2).max(0))), &mut regions);
        }
        // A wait naming a record long handed on joins the oldest kept one, counted.
        mapper.emit_group(&mut group(1000, wait(101)), &mut regions);
        let counters = mapper.finish(None);
        let records: Vec<TraceRecord> = rx.try_iter().flatten().map(|r| r.expect("no error")).collect();
        let declared = records.iter().filter(|r| matches!(r, TraceRecord::Event(_))).count();
        assert_eq!(declared, RECORDS_KEPT, "one event per kept record, not per record");
        let (mut recorded, mut waited) = (Vec::new(), Vec::new());
        for record in &records {
            if let TraceRecord::Op(op) = record {
                match op.kind {
                    OpKind::EventRecord { event, .. } => recorded.push(event),
                    OpKind::StreamWait { event, .. } => waited.push(event),
                    _ => {}
                }
            }
        }
        assert_eq!(recorded.len(), 40);
        for i in 0..40 {
            assert_eq!(waited[2 * i], recorded[i], "the wait after record {i}");
            assert_eq!(waited[2 * i + 1], recorded[i.saturating_sub(2)], "the wait naming record {}", i - 2.min(i));
        }
        assert_eq!(waited[80], recorded[32], "the oldest kept record");
        let handed_on = counters.iter().find(|c| c.counter == Counter::NsysEventRecordHandedOn).map(|c| c.count);
        assert_eq!(handed_on, Some(1));
    }
}
