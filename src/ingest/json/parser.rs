//! The stateful part of reading a JSON trace: the header, the id maps, and what to do with a record that
//! cannot be taken as it is.
//!
//! Two readings, chosen by the header. A trace written by hand or by a generator is read strictly: the first
//! record that is malformed, of an unknown kind, carries a field of another kind or contradicts the records
//! before it ends the reading with an error naming its line (exit status 2). A recording (`"producer":
//! "capture"`) is what a live program did, and one odd record must not cost the user the whole analysis: such a
//! record is skipped (or its unknown fields dropped), counted under an import counter of severity data loss
//! with the first place it happened, and the rest is analyzed. docs/trace-format.md says which is which.

use std::sync::Arc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::Deserialize;
use streamtrace_format::{Field, Producer, RecordKind, FORMAT_VERSION, MAX_FRAME_LINE_DEPTH};

use super::accesses::read_write_accesses;
use super::native::NativeSites;
use super::op_fields::{CommonFields, OpFields, Text};
use super::problem::{Problem, ProblemKind};
use super::raw::{without_unknown_fields, RawRecord};
use crate::ingest::background::{Batch, SpareVecs};
use crate::ingest::counters::{Counter, ImportCounters};
use crate::ingest::record_source::IngestError;
use crate::ingest::stages::frames::{EndMatch, EndMismatch, FrameFacts, FrameKind};
use crate::ingest::stages::ids::DenseIds;
use crate::ingest::stages::Stages;
use crate::model::{
    normalize_region, AllocId, ContextId, DeviceId, EventId, JobPlace, NativeSite, OpKind, Operation, ProcessId,
    RecordedLine, SiteHint, SourceLocation, StreamId, ThreadId, ThreadInfo, TraceRecord,
};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Distinct names and source lines kept for sharing. A program has a few hundred; a trace that gives every
/// operation one of its own would make these tables grow with its length, so past this many they start over
/// (sharing is for memory only: an operation holds its own copy of what it names).
const SHARED_TEXTS: usize = 1 << 16;

/// A `host_func` record's stream and name, and its graph node when it is a graph host node's run: what the
/// `host_access` records of its function take.
#[derive(Clone)]
pub(super) struct DeclaredHostFunc {
    pub stream: StreamId,
    pub name: Arc<str>,
    pub graph_node: Option<u64>,
}

/// A record's `pid` and `thread` as it gave them, and the process and thread they stand for.
#[derive(Copy, Clone)]
struct Caller {
    named: (Option<u64>, Option<u64>),
    ids: (ProcessId, ThreadId),
}

/// What a stream id stands for in a JSON trace: a declared stream, or a host thread's host-access lane (one
/// numbering for both).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub(super) enum StreamHandle {
    Declared(ProcessId, u64),
    HostLane(ThreadId),
}

/// What an allocation id stands for: a driver allocation, or a caching-allocator block (`pool_block`), whose
/// ids are their own namespace (one numbering for both).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub(super) enum AllocHandle {
    Driver(ProcessId, u64),
    PoolBlock(ProcessId, u64),
}

pub(in crate::ingest) struct JsonTraceParser {
    pub path: PathBuf,
    /// How places in the input are named: lines of text, or records of a binary trace.
    pub places: Places,
    pub counters: ImportCounters,
    seen_header: bool,
    /// Strict (hand-written, generated) or tolerant (a recording); see the module doc.
    strict: bool,
    /// Whether the recording's closing `capture_stats` record was read: without it, its end was lost.
    closed: bool,
    pub seq: u64,
    processes: DenseIds<u64, ProcessId>,
    threads: DenseIds<(ProcessId, u64), ThreadId>,
    /// Declared streams, and each host thread's host-access lane, declared at its first host access.
    pub(super) streams: DenseIds<StreamHandle, StreamId>,
    pub events: DenseIds<(ProcessId, u64), EventId>,
    pub(super) allocs: DenseIds<AllocHandle, AllocId>,
    pub devices: DenseIds<(ProcessId, u64), DeviceId>,
    pub contexts: DenseIds<(ProcessId, u64), ContextId>,
    /// Each context's legacy default stream, by (process, context handle): a context has one.
    pub legacy_defaults: HashMap<(ProcessId, u64), u64>,
    names: HashSet<Arc<str>>,
    sources: HashMap<String, SourceLocation>,
    /// Framework frames and CUDA graphs, which every reader's operations pass through.
    pub stages: Stages,
    /// Modules and call sites declared so far.
    native: NativeSites,
    /// Each host function's stream and name (and graph node), by (process, id).
    pub(super) host_funcs: HashMap<(ProcessId, u64), DeclaredHostFunc>,
    /// The host function the last operation was (or whose access it was): only its accesses may come next.
    pub last_host_func: Option<(ProcessId, u64)>,
    /// Kernels' access and pointer lists from batches the analysis gave back, filled again here.
    pub spare: SpareVecs,
    /// The last record's `pid` and `thread` and what they were resolved to: consecutive records are mostly one
    /// thread's, which then costs no lookup (ids are never given up, so the pair stays right).
    last_caller: Option<Caller>,
}

impl JsonTraceParser {
    pub fn new(path: PathBuf) -> Self {
        JsonTraceParser {
            path,
            places: Places::Lines,
            counters: ImportCounters::default(),
            seen_header: false,
            strict: true,
            closed: false,
            seq: 0,
            processes: DenseIds::default(),
            threads: DenseIds::default(),
            streams: DenseIds::default(),
            events: DenseIds::default(),
            allocs: DenseIds::default(),
            devices: DenseIds::default(),
            contexts: DenseIds::default(),
            legacy_defaults: HashMap::default(),
            names: HashSet::default(),
            sources: HashMap::default(),
            stages: Stages::default(),
            native: NativeSites::default(),
            host_funcs: HashMap::default(),
            last_host_func: None,
            spare: SpareVecs::default(),
            last_caller: None,
        }
    }

    pub fn error(&self, line: u64, message: impl Into<String>) -> IngestError {
        error(&self.path, self.places, line, message)
    }

    pub fn finish(&mut self, out: &mut Batch) {
        let open = self.stages.finish();
        if let Err(error) = self.flush(out) {
            out.push(Err(error));
        }
        self.counters.bump(Counter::GraphsCapturedOps, self.stages.captured_ops());
        self.counters.bump(Counter::GraphsFailedCaptures, self.stages.failed_captures());
        self.counters.bump(Counter::JsonFramesLeftOpen, open);
        if self.seen_header && !self.strict && !self.closed {
            let path = &self.path;
            self.counters.bump_noting(Counter::JsonRecordingWithoutClosingRecord, 1, || {
                format!("{}: no capture_stats record after the last one read", path.display())
            });
        }
        if !self.seen_header {
            out.push(Err(IngestError::new(
                &self.path,
                None,
                "empty: a streamtrace JSON trace starts with a header record {\"type\": \"streamtrace\", \"version\": 1}",
            )));
        }
    }

    /// Takes one record, whose text `text` starts at `line`, as serde decoded it (or the reason it could not).
    pub fn accept(
        &mut self,
        line: u64,
        text: &[u8],
        decoded: Result<&RawRecord, &serde_json::Error>,
        out: &mut Batch,
    ) -> Result<(), IngestError> {
        let cleaned: serde_json::Value;
        let cleaned_raw: RawRecord;
        let raw = match decoded {
            Ok(raw) => raw,
            Err(e) if self.strict || !self.seen_header => return Err(self.decode_error(line, text, e)),
            Err(e) => {
                // A recording: a newer capture may have written fields this build does not know.
                let Some((value, dropped)) = without_unknown_fields(text).filter(|(_, dropped)| !dropped.is_empty())
                else {
                    return self.skip(line, Problem::malformed(decode_message(e)));
                };
                cleaned = value;
                match RawRecord::from_value(&cleaned) {
                    Ok(raw) => {
                        let (path, places) = (&self.path, self.places);
                        self.counters.bump_noting(Counter::JsonDroppedUnknownFields, dropped.len() as u64, || {
                            format!("{}:{}: field `{}`", path.display(), places.name(line), dropped[0])
                        });
                        cleaned_raw = raw;
                        &cleaned_raw
                    }
                    Err(e) => return self.skip(line, Problem::malformed(e.to_string())),
                }
            }
        };
        self.accept_raw(line, raw, out)
    }

    /// Takes one record decoded at `line` (a JSON line, or a record of a binary trace).
    pub fn accept_raw(&mut self, line: u64, raw: &RawRecord, out: &mut Batch) -> Result<(), IngestError> {
        if !self.seen_header {
            return self.header(line, raw, out);
        }
        let kind = match raw.known_kind.map_or_else(|| RecordKind::parse(&raw.kind), Ok) {
            Ok(RecordKind::Header) => Err(Problem::malformed("a second header record")),
            Ok(kind) => Ok(kind),
            Err(unknown) => Err(Problem { kind: ProblemKind::UnknownKind, message: unknown.to_string() }),
        };
        let kind = match kind {
            Ok(kind) => kind,
            Err(problem) => return self.skip(line, problem),
        };
        let foreign = raw.fields_present().outside(kind.allowed_fields());
        if let Some(field) = foreign.iter().next() {
            let message = format!(
                "field `{field}` does not belong to a {kind} record (it may carry {})",
                kind.fields().iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ")
            );
            if self.strict {
                return Err(self.error(line, message));
            }
            let (path, places) = (&self.path, self.places);
            self.counters.bump_noting(Counter::JsonIgnoredForeignFields, foreign.iter().count() as u64, || {
                format!("{}:{}: {message}", path.display(), places.name(line))
            });
        }
        let converted = if OpFields::holds(kind) {
            self.counters.bump(Counter::JsonRecords, 1);
            self.common_op(line, kind, &OpFields::of(raw), out)
        } else {
            self.convert(line, kind, raw, out)
        };
        self.settle(line, converted, out)
    }

    /// Whether the header was read: from then on, records of [`OpFields::KINDS`] may come through
    /// [`JsonTraceParser::accept_op`].
    pub fn past_header(&self) -> bool {
        self.seen_header
    }

    /// Takes one record of one of [`OpFields::KINDS`] at `line`, after the header, as a binary frame gave it:
    /// what [`JsonTraceParser::accept_raw`] does with such a record, without the raw record. (Such a frame
    /// carries no field of another kind: its layout holds only the kind's own.)
    // Always inlined into the binary reader's loop, its one caller.
    #[inline(always)]
    pub fn accept_op(
        &mut self,
        line: u64,
        kind: RecordKind,
        fields: &OpFields,
        out: &mut Batch,
    ) -> Result<(), IngestError> {
        self.counters.bump(Counter::JsonRecords, 1);
        let converted = self.common_op(line, kind, fields, out);
        self.settle(line, converted, out)
    }

    /// After a record was converted: one that could not be taken is skipped (or ends a strict reading); what
    /// it made passes the stages.
    fn settle(&mut self, line: u64, converted: Result<(), Problem>, out: &mut Batch) -> Result<(), IngestError> {
        if let Err(problem) = converted {
            self.skip(line, problem)?;
        }
        self.flush(out)
    }

    /// Passes what the record made through the stages into `out` (see [`Stages::flush`]): an operation the
    /// graphs stage cannot take is skipped like a record that contradicts the trace before it.
    fn flush(&mut self, out: &mut Batch) -> Result<(), IngestError> {
        let JsonTraceParser { stages, path, places, strict, counters, .. } = self;
        stages.flush(out, &mut |line, problem| {
            skip(path, *places, *strict, counters, line, Problem::inconsistent(problem.0))
        })
    }

    /// A record that cannot be taken: the end of a strict reading, a counted skip in a tolerant one.
    pub fn skip(&mut self, line: u64, problem: Problem) -> Result<(), IngestError> {
        skip(&self.path, self.places, self.strict, &mut self.counters, line, problem)
    }

    fn decode_error(&self, line: u64, text: &[u8], e: &serde_json::Error) -> IngestError {
        let what = if self.seen_header {
            "malformed record"
        } else if is_header_object(text) {
            // Our header with a value out of place (a rank past 2^32) is a trace, if a broken one.
            "malformed header"
        } else {
            "not a trace streamtrace reads (a streamtrace JSON trace, an nsys .sqlite export or an .nsys-rep report): not a streamtrace JSON trace"
        };
        // serde_json counts lines from the start of this record's text; say the position once, in file terms.
        let at = line + e.line().saturating_sub(1) as u64;
        self.error(at, format!("{what}: {} (column {})", decode_message(e), e.column()))
    }

    fn header(&mut self, line: u64, raw: &RawRecord, out: &mut Batch) -> Result<(), IngestError> {
        let header = RecordKind::Header.as_str();
        if raw.kind != header {
            return Err(self.error(
                line,
                format!(
                    "not a streamtrace JSON trace: the first record must be {{\"type\": \"{header}\", \"version\": {FORMAT_VERSION}}}, found type `{}`",
                    raw.kind
                ),
            ));
        }
        if let Some(field) = raw.fields_present().outside(RecordKind::Header.allowed_fields()).iter().next() {
            return Err(self.error(line, format!("field `{field}` does not belong to the header")));
        }
        match raw.version {
            Some(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(
                    self.error(line, format!("unsupported format version {v} (this build reads {FORMAT_VERSION})"))
                )
            }
            None => return Err(self.error(line, "header without `version`")),
        }
        let producer =
            raw.producer.as_deref().map(Producer::parse).transpose().map_err(|e| self.error(line, e.to_string()))?;
        self.strict = producer != Some(Producer::Capture);
        self.seen_header = true;
        let job = JobPlace { rank: raw.rank, local_rank: raw.local_rank, world_size: raw.world_size };
        if let Some(world_size) = job.world_size {
            for (field, place) in [(Field::Rank, job.rank), (Field::LocalRank, job.local_rank)] {
                if let Some(place) = place.filter(|&p| p >= world_size) {
                    return Err(self.error(
                        line,
                        format!("header: `{field}` {place} is not a place in a job of `world_size` {world_size}"),
                    ));
                }
            }
        }
        if job != JobPlace::default() {
            out.push(Ok(TraceRecord::Job(job)));
        }
        if raw.host_sync == Some(true) {
            out.push(Ok(TraceRecord::HostSyncRecorded));
        }
        Ok(())
    }

    fn process(&mut self, pid: Option<u64>) -> ProcessId {
        self.processes.get_or_add(pid.unwrap_or(0)).0
    }

    /// The process and thread a record's `pid` and `thread` name; a thread seen first is declared into `out`.
    // Always inlined: the same caller as the last record's is a comparison (plain `inline` was not taken).
    #[inline(always)]
    fn caller(&mut self, pid: Option<u64>, tid: Option<u64>, out: &mut Batch) -> (ProcessId, ThreadId) {
        match self.last_caller {
            Some(last) if last.named == (pid, tid) => last.ids,
            _ => self.new_caller(pid, tid, out),
        }
    }

    /// [`JsonTraceParser::caller`] of a record whose `pid` and `thread` are not the last record's.
    fn new_caller(&mut self, pid: Option<u64>, tid: Option<u64>, out: &mut Batch) -> (ProcessId, ThreadId) {
        let process = self.process(pid);
        let ids = (process, self.thread(process, tid, out));
        self.last_caller = Some(Caller { named: (pid, tid), ids });
        ids
    }

    fn thread(&mut self, process: ProcessId, tid: Option<u64>, out: &mut Batch) -> ThreadId {
        let tid = tid.unwrap_or(1);
        let (id, fresh) = self.threads.get_or_add((process, tid));
        if fresh {
            out.push(Ok(TraceRecord::Thread(ThreadInfo { id, process, tid, name: None })));
        }
        id
    }

    /// One shared copy of each kernel name: traces repeat a few names millions of times.
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        match self.names.get(name) {
            Some(interned) => interned.clone(),
            None => {
                if self.names.len() >= SHARED_TEXTS {
                    self.names.clear();
                }
                let interned: Arc<str> = name.into();
                self.names.insert(interned.clone());
                interned
            }
        }
    }

    /// [`JsonTraceParser::intern`] for a name field: a string the trace declared once is already shared.
    #[inline]
    pub fn intern_text(&mut self, text: Text) -> Arc<str> {
        match text {
            Text::Shared(shared) => shared.clone(),
            Text::Borrowed(text) => self.intern(text),
        }
    }

    /// A region's name without its per-call counters, shared.
    fn region(&mut self, text: Text) -> Arc<str> {
        let name = normalize_region(text.as_str());
        match text {
            Text::Shared(shared) if name.len() == shared.len() => shared.clone(),
            _ => self.intern(name),
        }
    }

    /// A source line, shared with the records that gave the same text.
    pub fn source(&mut self, text: &str) -> SourceLocation {
        match self.sources.get(text) {
            Some(location) => location.clone(),
            None => {
                if self.sources.len() >= SHARED_TEXTS {
                    self.sources.clear();
                }
                let location = SourceLocation::parse(text);
                self.sources.insert(text.to_string(), location.clone());
                location
            }
        }
    }

    /// A `frame_line` record: what the capture found one return address of a module to be at exit.
    fn source_line(&mut self, raw: &RawRecord) -> Result<RecordedLine, Problem> {
        let module = raw.path.as_deref().ok_or_else(|| Problem::malformed("frame_line without `path`"))?;
        let address = raw.addr.ok_or_else(|| Problem::malformed("frame_line without `addr`"))?.0;
        let depth = raw.depth.unwrap_or(0);
        if depth > MAX_FRAME_LINE_DEPTH {
            return Err(Problem::malformed(format!("frame_line `depth` {depth}, past {MAX_FRAME_LINE_DEPTH}")));
        }
        let location = raw.src.as_deref().map(|src| self.source(src));
        Ok(RecordedLine {
            module: self.intern(module),
            address,
            depth,
            function: raw.name.as_deref().map(|name| self.intern(name)),
            file: location.as_ref().map(|l| l.file.clone()),
            line: location.and_then(|l| l.line),
            offset: raw.offset,
        })
    }

    /// Turns a record of a known kind into what it means: an entity, a frame boundary, or an operation.
    fn convert(&mut self, line: u64, kind: RecordKind, raw: &RawRecord, out: &mut Batch) -> Result<(), Problem> {
        self.counters.bump(Counter::JsonRecords, 1);
        // Records that are no thread's call: they introduce no thread.
        match kind {
            RecordKind::CaptureStats => {
                // What the capture cost the program, said once per process at exit.
                let (Some(calls), Some(ns)) = (raw.calls, raw.callback_ns) else {
                    return Err(Problem::malformed("capture_stats needs `calls` and `callback_ns`"));
                };
                self.closed = true;
                self.counters.bump(Counter::CaptureRecordedCalls, calls);
                self.counters.bump(Counter::CaptureCallbackNs, ns);
                // Older captures counted their set-up into `callback_ns` and wrote no `setup_ns`.
                if let Some(setup) = raw.setup_ns {
                    self.counters.bump(Counter::CaptureSetupNs, setup);
                }
                return Ok(());
            }
            RecordKind::RangeBegin | RecordKind::RangeEnd => {
                let process = self.process(raw.pid);
                let index = raw
                    .id
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| Problem::malformed(format!("a {kind} record without its range's number `id`")))?;
                out.push(Ok(match kind {
                    RecordKind::RangeBegin => {
                        TraceRecord::RangeBegin { process, index, name: raw.name.as_deref().map(|n| self.intern(n)) }
                    }
                    _ => TraceRecord::RangeEnd { process, index },
                }));
                return Ok(());
            }
            RecordKind::Module => {
                let process = self.process(raw.pid);
                return self.native.module(process, raw);
            }
            RecordKind::Callsite => {
                let process = self.process(raw.pid);
                self.native.call_site(process, raw)?;
                self.counters.bump(Counter::JsonCallSites, 1);
                return Ok(());
            }
            RecordKind::FrameLine => {
                out.push(Ok(TraceRecord::FrameLine(self.source_line(raw)?)));
                return Ok(());
            }
            RecordKind::HostWatch => return self.host_watch(raw),
            RecordKind::GpuTime => {
                // GPU start and end of an operation, delivered by CUPTI after the fact: for timelines, not for
                // deciding ordering.
                self.counters.bump(Counter::JsonGpuTimes, 1);
                let (Some(correlation), Some(start_ns), Some(end_ns)) = (raw.corr, raw.gpu_start, raw.gpu_end) else {
                    return Err(Problem::malformed("gpu_time needs `corr`, `gpu_start` and `gpu_end`"));
                };
                if end_ns < start_ns {
                    return Err(Problem::malformed(format!("gpu_end {end_ns} is before gpu_start {start_ns}")));
                }
                out.push(Ok(TraceRecord::GpuTime { correlation, start_ns, end_ns }));
                return Ok(());
            }
            _ => {}
        }
        let (process, thread) = self.caller(raw.pid, raw.thread, out);
        let op = match kind {
            RecordKind::Thread => {
                // Threads appear on first use; a thread record only names one.
                if let Some(Ok(TraceRecord::Thread(info))) = out.last_mut() {
                    if info.id == thread {
                        info.name = raw.name.as_deref().map(str::to_string);
                    }
                }
                return Ok(());
            }
            RecordKind::Header
            | RecordKind::Process
            | RecordKind::CaptureStats
            | RecordKind::GpuTime
            | RecordKind::Module
            | RecordKind::Callsite
            | RecordKind::HostWatch
            | RecordKind::FrameLine
            | RecordKind::RangeBegin
            | RecordKind::RangeEnd => return Ok(()),
            RecordKind::OpBegin | RecordKind::CallBegin => return self.frame_begin(kind, process, thread, raw),
            RecordKind::OpEnd | RecordKind::CallEnd => return self.frame_end(kind, process, thread, raw),
            RecordKind::Stream => {
                let native = self.native_site(line, process, raw.site)?;
                return self.stream_record(process, thread, raw, native, out);
            }
            RecordKind::Event => {
                let native = self.native_site(line, process, raw.site)?;
                return self.event_record(process, raw, native, out);
            }
            RecordKind::Creation => return self.creation_record(process, raw, out),
            RecordKind::HostAccess => self.host_access(process, thread, raw, out)?,
            RecordKind::HostFunc => self.host_func(process, raw)?,
            _ => self.operation(kind, process, raw)?,
        };
        self.issue(line, (process, thread), &CommonFields::of(raw), raw.id, op, out)
    }

    /// A record of one of [`OpFields::KINDS`]: the operation it describes, issued.
    fn common_op(&mut self, line: u64, kind: RecordKind, fields: &OpFields, out: &mut Batch) -> Result<(), Problem> {
        let (process, thread) = self.caller(fields.common.pid, fields.common.thread, out);
        let op = self.common_operation(kind, process, fields)?;
        self.issue(line, (process, thread), &fields.common, None, op, out)
    }

    /// An operation of `caller` (its process and thread), made of a record at `line` with `common` fields, in
    /// issue order into the stages; `host_func` is the record's `id` (a host function's).
    #[inline(always)]
    fn issue(
        &mut self,
        line: u64,
        (process, thread): (ProcessId, ThreadId),
        common: &CommonFields,
        host_func: Option<u64>,
        op: OpKind,
        out: &mut Batch,
    ) -> Result<(), Problem> {
        self.last_host_func = match &op {
            OpKind::HostFunc { .. } => host_func.map(|id| (process, id)),
            OpKind::HostFuncAccess { .. } => self.last_host_func,
            _ => None,
        };
        if let (Some(start), Some(end)) = (common.gpu_start, common.gpu_end) {
            if end < start {
                return Err(Problem::malformed(format!("gpu_end {end} is before gpu_start {start}")));
            }
        }
        let native = self.native_site(line, process, common.site)?;
        let (api, region) = (common.api.map(|a| self.intern_text(a)), common.region.map(|r| self.region(r)));
        let source = common.src.map(|text| self.source(text));
        let seq = self.seq;
        self.seq += 1;
        // Made where it goes (below, see `Stages::passes_straight`): written out there, not captured by a
        // closure, whose captures were copied once more.
        macro_rules! operation {
            ($kind:expr) => {
                Operation {
                    seq,
                    process,
                    thread,
                    host_time_ns: common.time,
                    gpu_start_ns: common.gpu_start,
                    gpu_end_ns: common.gpu_end,
                    correlation_id: common.corr,
                    host_end_ns: common.time_end,
                    api,
                    region,
                    source,
                    native,
                    origin: line,
                    kind: $kind,
                    site_hint: SiteHint::NONE,
                }
            };
        }
        let naming_only = matches!(
            op,
            OpKind::Alloc { alloc_kind: crate::model::AllocKind::PoolBlock, .. }
                | OpKind::Free { free_kind: crate::model::FreeKind::PoolBlock, .. }
        );
        if naming_only || matches!(op, OpKind::HostRelease { .. }) {
            // A caching-allocator block only names memory; it orders nothing, so it need not wait for its op. A
            // host release must not wait for its thread's op either: another thread may acquire it before the
            // op ends. It then releases what the thread knew before the op (the calls the op holds come later),
            // less than it knew, never more.
            self.stages.op_outside_frames(operation!(op));
        } else {
            if matches!(op, OpKind::Kernel { .. }) && self.stages.inside_op(thread) {
                self.counters.bump(Counter::JsonKernelsInFrameworkOps, 1);
            }
            if self.stages.passes_straight(thread, &op) {
                out.push(Ok(TraceRecord::Op(operation!(op))));
            } else {
                self.stages.op(thread, operation!(op));
            }
        }
        Ok(())
    }

    /// The call site a record's `site` names. One that no `callsite` record declared ends a strict reading; a
    /// recording keeps the record without it, counted.
    // Inlined for the records without a site (most): the lookup stays out of line.
    #[inline(always)]
    fn native_site(&mut self, line: u64, process: ProcessId, site: Option<u64>) -> Result<Option<NativeSite>, Problem> {
        match site {
            None => Ok(None),
            Some(id) => self.declared_site(line, process, id),
        }
    }

    /// [`JsonTraceParser::native_site`] of a record that names site `id`.
    fn declared_site(&mut self, line: u64, process: ProcessId, id: u64) -> Result<Option<NativeSite>, Problem> {
        match self.native.site(process, id) {
            Ok(site) => Ok(Some(site)),
            Err(problem) if self.strict => Err(problem),
            Err(problem) => {
                let (path, places) = (&self.path, self.places);
                self.counters.bump_noting(Counter::JsonUnknownCallSites, 1, || {
                    format!("{}:{}: {}", path.display(), places.name(line), problem.message)
                });
                Ok(None)
            }
        }
    }

    fn frame_begin(
        &mut self,
        kind: RecordKind,
        process: ProcessId,
        thread: ThreadId,
        raw: &RawRecord,
    ) -> Result<(), Problem> {
        let frame_kind = if kind == RecordKind::OpBegin { FrameKind::Op } else { FrameKind::Call };
        let facts = self.frame_facts(raw)?;
        if frame_kind == FrameKind::Call && facts.name.is_none() {
            return Err(Problem::malformed(format!("{kind} without `{}`", Field::Name)));
        }
        self.stages.frame_begin(thread, process, frame_kind, facts);
        if frame_kind == FrameKind::Op {
            self.counters.bump(Counter::JsonFrameworkOps, 1);
        } else {
            self.counters.bump(Counter::JsonFrameworkCalls, 1);
        }
        Ok(())
    }

    fn frame_end(
        &mut self,
        kind: RecordKind,
        process: ProcessId,
        thread: ThreadId,
        raw: &RawRecord,
    ) -> Result<(), Problem> {
        let frame_kind = if kind == RecordKind::OpEnd { FrameKind::Op } else { FrameKind::Call };
        let facts = self.frame_facts(raw)?;
        match self.stages.frame_end(thread, process, frame_kind, facts, self.strict) {
            Ok(EndMatch::Innermost) => {}
            Ok(EndMatch::Outer { unended }) => self.counters.bump(Counter::JsonFramesWithoutEnd, unended as u64),
            Ok(EndMatch::OtherThread) => self.counters.bump(Counter::JsonFramesEndedOnOtherThread, 1),
            Err(EndMismatch::NothingOpen) => {
                let opening = frame_kind.opening_record();
                return Err(Problem {
                    kind: ProblemKind::UnmatchedFrameEnd,
                    message: format!("{kind} without an open {opening} on this thread"),
                });
            }
            Err(EndMismatch::WrongKind(open)) => {
                return Err(Problem {
                    kind: ProblemKind::UnmatchedFrameEnd,
                    message: format!("{kind} closes a frame opened by {}", open.opening_record()),
                })
            }
        }
        Ok(())
    }

    fn frame_facts(&mut self, raw: &RawRecord) -> Result<FrameFacts, Problem> {
        let mut accesses = Vec::with_capacity(raw.reads().len() + raw.writes().len());
        read_write_accesses(raw.reads(), raw.writes(), &mut accesses)?;
        let name = raw.name.as_deref().map(|n| self.intern(n));
        let source = raw.src.as_deref().map(|text| self.source(text));
        let process_group = raw.process_group.as_deref().map(|group| self.intern(group));
        Ok(FrameFacts { name, accesses, source, process_group })
    }
}

fn error(path: &Path, places: Places, line: u64, message: impl Into<String>) -> IngestError {
    IngestError::new(path, Some(places.name(line)), message)
}

/// How the reading names a place in its input: a line of a JSON trace, or a record of a binary one (numbered
/// as the lines of its JSON form, with the byte where the record being read starts).
#[derive(Copy, Clone, Debug)]
pub(in crate::ingest) enum Places {
    Lines,
    Records { current: u64, byte: u64 },
}

impl Places {
    pub fn name(self, line: u64) -> String {
        match self {
            Places::Lines => line.to_string(),
            Places::Records { current, byte } if current == line => format!("record {line} (byte {byte})"),
            Places::Records { .. } => format!("record {line}"),
        }
    }
}

/// A record that cannot be taken: the end of a strict reading, a counted skip in a tolerant one.
fn skip(
    path: &Path,
    places: Places,
    strict: bool,
    counters: &mut ImportCounters,
    line: u64,
    problem: Problem,
) -> Result<(), IngestError> {
    if strict {
        return Err(error(path, places, line, problem.message));
    }
    counters.bump_noting(problem.kind.counter(), 1, || {
        format!("{}:{}: {}", path.display(), places.name(line), problem.message)
    });
    Ok(())
}

/// Whether `text` is a JSON object whose `type` is the header's.
fn is_header_object(text: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
    }
    serde_json::from_slice::<Kind>(text).is_ok_and(|k| k.kind == RecordKind::Header.as_str())
}

/// serde_json's message without its own position (the caller says where, in file terms).
fn decode_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    text.rsplit_once(" at line ").map_or(text.clone(), |(message, _)| message.to_string())
}
