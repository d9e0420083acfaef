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
use streamtrace_format::{Field, Producer, RecordKind, FORMAT_VERSION};

use super::frames::{EndMatch, EndMismatch, FrameFacts, FrameKind, OpenFrames};
use super::graphs::GraphAssembler;
use super::native::NativeSites;
use super::raw::{without_unknown_fields, RawRecord};
use super::Batch;
use crate::ingest::{Counter, ImportCounters, IngestError};
use crate::model::{
    normalize_region, AllocId, ContextId, DeviceId, EventId, JobPlace, NativeSite, OpKind, Operation, ProcessId,
    SourceLocation, StreamId, ThreadId, ThreadInfo, TraceRecord,
};
use std::borrow::Cow;
use std::path::PathBuf;

/// Maps the handles of one process-scoped namespace (streams, events, allocations) to dense ids.
pub(super) struct HandleMap<Id> {
    pub ids: HashMap<(ProcessId, u64), Id>,
}

impl<Id> Default for HandleMap<Id> {
    fn default() -> Self {
        HandleMap { ids: HashMap::default() }
    }
}

impl<Id: Copy> HandleMap<Id> {
    pub fn get(&self, process: ProcessId, handle: u64) -> Option<Id> {
        self.ids.get(&(process, handle)).copied()
    }
}

/// Why a record could not be taken, and under which counter a recording's reading counts it.
#[derive(Debug)]
pub(super) struct Problem {
    pub kind: ProblemKind,
    pub message: String,
}

#[derive(Copy, Clone, Debug)]
pub(super) enum ProblemKind {
    /// Not valid JSON, or a value of the wrong type or out of range.
    Malformed,
    /// A record type this build does not know.
    UnknownKind,
    /// It refers to what the trace before it never introduced (an undeclared stream, a block not live), or
    /// declares again what exists.
    Inconsistent,
    /// An `op_end` or `call_end` with no open op or call to end.
    UnmatchedFrameEnd,
}

impl ProblemKind {
    /// The import counter a recording's reading counts a skipped record under.
    fn counter(self) -> Counter {
        match self {
            ProblemKind::Malformed => Counter::JsonSkippedMalformed,
            ProblemKind::UnknownKind => Counter::JsonSkippedUnknownKind,
            ProblemKind::Inconsistent => Counter::JsonSkippedInconsistent,
            ProblemKind::UnmatchedFrameEnd => Counter::JsonSkippedUnmatchedFrameEnds,
        }
    }
}

impl Problem {
    pub fn malformed(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Malformed, message: message.into() }
    }

    pub fn inconsistent(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Inconsistent, message: message.into() }
    }
}

pub(super) struct JsonTraceParser {
    pub path: PathBuf,
    pub counters: ImportCounters,
    seen_header: bool,
    /// Strict (hand-written, generated) or tolerant (a recording); see the module doc.
    strict: bool,
    pub seq: u64,
    processes: HashMap<u64, ProcessId>,
    threads: HashMap<(ProcessId, u64), ThreadId>,
    pub streams: HandleMap<StreamId>,
    pub events: HandleMap<EventId>,
    pub allocs: HandleMap<AllocId>,
    /// Caching-allocator blocks (`pool_block`), whose ids are their own namespace.
    pub blocks: HandleMap<AllocId>,
    pub next_stream: u32,
    pub next_event: u32,
    pub next_alloc: u32,
    pub devices: HashMap<(ProcessId, u64), DeviceId>,
    pub contexts: HashMap<(ProcessId, u64), ContextId>,
    names: HashSet<Arc<str>>,
    sources: HashMap<String, SourceLocation>,
    pub frames: OpenFrames,
    /// Each host thread's host-access lane, declared at its first host access.
    pub host_lanes: HashMap<ThreadId, StreamId>,
    /// Stream capture and the graph API: what graph each launch runs.
    pub graphs: GraphAssembler,
    /// Modules and call sites declared so far.
    native: NativeSites,
}

impl JsonTraceParser {
    pub fn new(path: PathBuf) -> Self {
        JsonTraceParser {
            path,
            counters: ImportCounters::default(),
            seen_header: false,
            strict: true,
            seq: 0,
            processes: HashMap::default(),
            threads: HashMap::default(),
            streams: HandleMap::default(),
            events: HandleMap::default(),
            allocs: HandleMap::default(),
            blocks: HandleMap::default(),
            next_stream: 0,
            next_event: 0,
            next_alloc: 0,
            devices: HashMap::default(),
            contexts: HashMap::default(),
            names: HashSet::default(),
            sources: HashMap::default(),
            frames: OpenFrames::default(),
            host_lanes: HashMap::default(),
            graphs: GraphAssembler::default(),
            native: NativeSites::default(),
        }
    }

    pub fn error(&self, line: u64, message: impl Into<String>) -> IngestError {
        IngestError::new(&self.path, Some(format!("{line}")), message)
    }

    pub fn finish(&mut self, out: &mut Batch) {
        let start = out.len();
        let open = self.frames.finish(out);
        if let Err(error) = self.assemble_graphs(start, out) {
            out.push(Err(error));
        }
        self.counters.bump(Counter::GraphsCapturedOps, self.graphs.captured_ops);
        self.counters.bump(Counter::GraphsFailedCaptures, self.graphs.failed_captures);
        self.counters.bump(Counter::JsonFramesLeftOpen, open);
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
        decoded: Result<RawRecord, serde_json::Error>,
        out: &mut Batch,
    ) -> Result<(), IngestError> {
        let cleaned: serde_json::Value;
        let raw = match decoded {
            Ok(raw) => raw,
            Err(e) if self.strict || !self.seen_header => return Err(self.decode_error(line, &e)),
            Err(e) => {
                // A recording: a newer capture may have written fields this build does not know.
                let Some((value, dropped)) = without_unknown_fields(text).filter(|(_, dropped)| !dropped.is_empty())
                else {
                    return self.skip(line, Problem::malformed(decode_message(&e)));
                };
                cleaned = value;
                match RawRecord::deserialize(&cleaned) {
                    Ok(raw) => {
                        let path = &self.path;
                        self.counters.bump_noting(Counter::JsonDroppedUnknownFields, dropped.len() as u64, || {
                            format!("{}:{line}: field `{}`", path.display(), dropped[0])
                        });
                        raw
                    }
                    Err(e) => return self.skip(line, Problem::malformed(e.to_string())),
                }
            }
        };
        if !self.seen_header {
            return self.header(line, &raw, out);
        }
        let kind = match RecordKind::parse(&raw.kind) {
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
            let path = &self.path;
            self.counters.bump_noting(Counter::JsonIgnoredForeignFields, foreign.iter().count() as u64, || {
                format!("{}:{line}: {message}", path.display())
            });
        }
        let start = out.len();
        match self.convert(line, kind, raw, out) {
            Ok(()) => self.assemble_graphs(start, out),
            Err(problem) => self.skip(line, problem),
        }
    }

    /// Passes the operations from `out[start..]` through the graph assembler: work issued to capturing streams
    /// becomes graph nodes, graph calls build graphs, and launches carry their graphs. A trace without graphs
    /// pays one check per record.
    fn assemble_graphs(&mut self, start: usize, out: &mut Batch) -> Result<(), IngestError> {
        let wanted =
            |item: &Result<TraceRecord, IngestError>| matches!(item, Ok(TraceRecord::Op(op)) if self.graphs.wants(op));
        if !out[start..].iter().any(wanted) {
            return Ok(());
        }
        let items: Vec<_> = out.drain(start..).collect();
        for item in items {
            let Ok(TraceRecord::Op(op)) = item else {
                out.push(item);
                continue;
            };
            let line = op.origin;
            match self.graphs.take(op) {
                Ok(Some(op)) => out.push(Ok(TraceRecord::Op(op))),
                Ok(None) => {}
                Err(problem) => self.skip(line, problem)?,
            }
        }
        Ok(())
    }

    /// A record that cannot be taken: the end of a strict reading, a counted skip in a tolerant one.
    fn skip(&mut self, line: u64, problem: Problem) -> Result<(), IngestError> {
        if self.strict {
            return Err(self.error(line, problem.message));
        }
        let path = &self.path;
        self.counters
            .bump_noting(problem.kind.counter(), 1, || format!("{}:{line}: {}", path.display(), problem.message));
        Ok(())
    }

    fn decode_error(&self, line: u64, e: &serde_json::Error) -> IngestError {
        let what = if self.seen_header {
            "malformed record"
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
        if job != JobPlace::default() {
            out.push(Ok(TraceRecord::Job(job)));
        }
        Ok(())
    }

    fn process(&mut self, pid: Option<u64>) -> ProcessId {
        let next = ProcessId(self.processes.len() as u32);
        *self.processes.entry(pid.unwrap_or(0)).or_insert(next)
    }

    fn thread(&mut self, process: ProcessId, tid: Option<u64>, out: &mut Batch) -> ThreadId {
        let tid = tid.unwrap_or(1);
        let next = ThreadId(self.threads.len() as u32);
        let id = *self.threads.entry((process, tid)).or_insert(next);
        if id == next {
            out.push(Ok(TraceRecord::Thread(ThreadInfo { id, process, tid, name: None })));
        }
        id
    }

    /// One shared copy of each kernel name: traces repeat a few names millions of times.
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        match self.names.get(name) {
            Some(interned) => interned.clone(),
            None => {
                let interned: Arc<str> = name.into();
                self.names.insert(interned.clone());
                interned
            }
        }
    }

    pub fn source(&mut self, text: &str) -> SourceLocation {
        match self.sources.get(text) {
            Some(location) => location.clone(),
            None => {
                let location = SourceLocation::parse(text);
                self.sources.insert(text.to_string(), location.clone());
                location
            }
        }
    }

    /// Turns a record of a known kind into what it means: an entity, a frame boundary, or an operation.
    fn convert(&mut self, line: u64, kind: RecordKind, raw: RawRecord, out: &mut Batch) -> Result<(), Problem> {
        self.counters.bump(Counter::JsonRecords, 1);
        // Records that are no thread's call: they introduce no thread.
        match kind {
            RecordKind::CaptureStats => {
                // What the capture cost the program, said once per process at exit.
                let (Some(calls), Some(ns)) = (raw.calls, raw.callback_ns) else {
                    return Err(Problem::malformed("capture_stats needs `calls` and `callback_ns`"));
                };
                self.counters.bump(Counter::CaptureRecordedCalls, calls);
                self.counters.bump(Counter::CaptureCallbackNs, ns);
                // Older captures counted their set-up into `callback_ns` and wrote no `setup_ns`.
                if let Some(setup) = raw.setup_ns {
                    self.counters.bump(Counter::CaptureSetupNs, setup);
                }
                return Ok(());
            }
            RecordKind::Module => {
                let process = self.process(raw.pid);
                return self.native.module(process, &raw);
            }
            RecordKind::Callsite => {
                let process = self.process(raw.pid);
                self.native.call_site(process, &raw)?;
                self.counters.bump(Counter::JsonCallSites, 1);
                return Ok(());
            }
            RecordKind::GpuTime => {
                // GPU start and end of an operation, delivered by CUPTI after the fact: for timelines, not for
                // deciding ordering.
                self.counters.bump(Counter::JsonGpuTimes, 1);
                let (Some(correlation), Some(start_ns), Some(end_ns)) = (raw.corr, raw.gpu_start, raw.gpu_end) else {
                    return Err(Problem::malformed("gpu_time needs `corr`, `gpu_start` and `gpu_end`"));
                };
                out.push(Ok(TraceRecord::GpuTime { correlation, start_ns, end_ns }));
                return Ok(());
            }
            _ => {}
        }
        let process = self.process(raw.pid);
        let thread = self.thread(process, raw.thread, out);
        let op = match kind {
            RecordKind::Thread => {
                // Threads appear on first use; a thread record only names one.
                if let Some(Ok(TraceRecord::Thread(info))) = out.last_mut() {
                    if info.id == thread {
                        info.name = raw.name.map(Cow::into_owned);
                    }
                }
                return Ok(());
            }
            RecordKind::Header
            | RecordKind::Process
            | RecordKind::CaptureStats
            | RecordKind::GpuTime
            | RecordKind::Module
            | RecordKind::Callsite => return Ok(()),
            RecordKind::OpBegin | RecordKind::CallBegin => return self.frame_begin(kind, process, thread, raw),
            RecordKind::OpEnd | RecordKind::CallEnd => return self.frame_end(kind, process, thread, raw, out),
            RecordKind::Stream => {
                let native = self.native_site(line, process, &raw)?;
                return self.stream_record(process, thread, &raw, native, out);
            }
            RecordKind::Event => {
                let native = self.native_site(line, process, &raw)?;
                return self.event_record(process, &raw, native, out);
            }
            RecordKind::Creation => return self.creation_record(process, &raw, out),
            RecordKind::HostAccess => self.host_access(process, thread, &raw, out)?,
            _ => self.operation(kind, process, &raw)?,
        };
        if let (Some(start), Some(end)) = (raw.gpu_start, raw.gpu_end) {
            if end < start {
                return Err(Problem::malformed(format!("gpu_end {end} is before gpu_start {start}")));
            }
        }
        let native = self.native_site(line, process, &raw)?;
        let op = Operation {
            seq: self.seq,
            process,
            thread,
            host_time_ns: raw.time,
            gpu_start_ns: raw.gpu_start,
            gpu_end_ns: raw.gpu_end,
            correlation_id: raw.corr,
            host_end_ns: raw.time_end,
            api: raw.api.as_deref().map(|a| self.intern(a)),
            region: raw.region.as_deref().map(|r| self.intern(normalize_region(r))),
            source: raw.src.as_deref().map(|text| self.source(text)),
            native,
            origin: line,
            kind: op,
        };
        self.seq += 1;
        let naming_only = matches!(
            op.kind,
            OpKind::Alloc { alloc_kind: crate::model::AllocKind::PoolBlock, .. }
                | OpKind::Free { free_kind: crate::model::FreeKind::PoolBlock, .. }
        );
        if naming_only {
            // A caching-allocator block only names memory; it orders nothing, so it need not wait for its op.
            out.push(Ok(TraceRecord::Op(op)));
        } else {
            if matches!(op.kind, OpKind::Kernel { .. }) && self.frames.inside_op(thread) {
                self.counters.bump(Counter::JsonKernelsInFrameworkOps, 1);
            }
            self.frames.place(thread, op, out);
        }
        Ok(())
    }

    /// The call site a record's `site` names. One that no `callsite` record declared ends a strict reading; a
    /// recording keeps the record without it, counted.
    fn native_site(&mut self, line: u64, process: ProcessId, raw: &RawRecord) -> Result<Option<NativeSite>, Problem> {
        let Some(id) = raw.site else { return Ok(None) };
        match self.native.site(process, id) {
            Ok(site) => Ok(Some(site)),
            Err(problem) if self.strict => Err(problem),
            Err(problem) => {
                let path = &self.path;
                self.counters.bump_noting(Counter::JsonUnknownCallSites, 1, || {
                    format!("{}:{line}: {}", path.display(), problem.message)
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
        raw: RawRecord,
    ) -> Result<(), Problem> {
        let frame_kind = if kind == RecordKind::OpBegin { FrameKind::Op } else { FrameKind::Call };
        let facts = self.frame_facts(&raw)?;
        if frame_kind == FrameKind::Call && facts.name.is_none() {
            return Err(Problem::malformed(format!("{kind} without `{}`", Field::Name)));
        }
        self.frames.open(thread, process, frame_kind, facts);
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
        raw: RawRecord,
        out: &mut Batch,
    ) -> Result<(), Problem> {
        let frame_kind = if kind == RecordKind::OpEnd { FrameKind::Op } else { FrameKind::Call };
        let facts = self.frame_facts(&raw)?;
        match self.frames.close(thread, process, frame_kind, facts, self.strict, out) {
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
        super::records::read_write_accesses(raw.reads(), raw.writes(), &mut accesses)?;
        let name = raw.name.as_deref().map(|n| self.intern(n));
        let source = raw.src.as_deref().map(|text| self.source(text));
        let process_group = raw.process_group.as_deref().map(|group| self.intern(group));
        Ok(FrameFacts { name, accesses, source, process_group })
    }
}

/// serde_json's message without its own position (the caller says where, in file terms).
fn decode_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    text.rsplit_once(" at line ").map_or(text.clone(), |(message, _)| message.to_string())
}
