//! The hand-written JSON trace format (docs/trace-format.md): a header object followed by one JSON object per
//! record, in host issue order. Records are usually one per line, but a record may span lines.
//!
//! Parsing and id mapping run on a background thread that hands batches of model records to the caller, so that
//! reading a large trace overlaps with analyzing it and memory stays bounded by the batch queue.

use std::borrow::Cow;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::background::{Batch, BackgroundReader};
use super::{ImportCounters, IngestError, Severity, BATCH};
use crate::model::{
    Access, AccessMode, AccessRange, AllocId, AllocKind, ContextId, CopyKind, DeviceId, EventId, EventInfo, FreeKind,
    GraphNode, HostSync, OpKind, PointerArg, normalize_region, Operation, ProcessId, QueryTarget, SourceLocation, StreamId, StreamInfo, StreamKind,
    ThreadId, ThreadInfo, TraceRecord,
};

/// The value of the header's `type` field.
pub const HEADER_TYPE: &str = "streamtrace";
/// The format version this reader understands.
pub const FORMAT_VERSION: u32 = 1;

/// Reads a JSON trace on a background thread.
pub struct JsonTraceReader;

impl JsonTraceReader {
    /// Opens `path` and starts parsing it. Fails at once when the file cannot be opened.
    pub fn open(path: &Path) -> Result<BackgroundReader, IngestError> {
        let file = File::open(path).map_err(|e| IngestError::new(path, None, format!("cannot open: {e}")))?;
        let reader = BufReader::with_capacity(1 << 20, file);
        JsonTraceReader::spawn(path.to_path_buf(), reader)
    }

    /// Parses JSON trace text held in memory (tests, generated scenarios).
    pub fn from_text(name: &str, text: String) -> BackgroundReader {
        JsonTraceReader::spawn(PathBuf::from(name), std::io::Cursor::new(text.into_bytes()))
            .expect("a thread for an in-memory trace")
    }

    fn spawn<R: BufRead + Send + 'static>(path: PathBuf, reader: R) -> Result<BackgroundReader, IngestError> {
        BackgroundReader::spawn("json-ingest", "streamtrace JSON", move |tx| {
            let mut parser = JsonTraceParser::new(path);
            let mut batch = Vec::with_capacity(BATCH);
            let mut lines = LineRecords::new(reader);
            loop {
                let outcome = match lines.next_record() {
                    Ok(Some(line)) => loop {
                        // A record may span lines: on running out of text, join the next line and retry.
                        match serde_json::from_slice::<RawRecord>(lines.text()) {
                            Err(e) if e.is_eof() => match lines.append_line() {
                                Ok(true) => continue,
                                Ok(false) => break parser.accept(line, Err(e), &mut batch),
                                Err((at, message)) => break Err(parser.error(at, message)),
                            },
                            decoded => break parser.accept(line, decoded, &mut batch),
                        }
                    },
                    Ok(None) => {
                        parser.finish(&mut batch);
                        break;
                    }
                    Err((line, message)) => Err(parser.error(line, message)),
                };
                if let Err(error) = outcome {
                    batch.push(Err(error));
                    break;
                }
                if batch.len() >= BATCH && tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).is_err() {
                    return parser.counters;
                }
            }
            let _ = tx.send(batch);
            parser.counters
        })
    }
}

/// Reads the input line by line, skipping blank lines; a record that spans lines is joined on request.
struct LineRecords<R> {
    reader: R,
    buf: Vec<u8>,
    line: u64,
}

impl<R: BufRead> LineRecords<R> {
    fn new(reader: R) -> Self {
        LineRecords { reader, buf: Vec::with_capacity(4096), line: 0 }
    }

    /// Appends the next line to the current text; false at the end of the input.
    fn append_line(&mut self) -> Result<bool, (u64, String)> {
        match self.reader.read_until(b'\n', &mut self.buf) {
            Ok(0) => Ok(false),
            Ok(_) => {
                self.line += 1;
                Ok(true)
            }
            Err(e) => Err((self.line + 1, format!("cannot read: {e}"))),
        }
    }

    /// Starts the next record at the next non-blank line and returns that line's number, or `None` at the end.
    fn next_record(&mut self) -> Result<Option<u64>, (u64, String)> {
        loop {
            self.buf.clear();
            if !self.append_line()? {
                return Ok(None);
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(self.line));
            }
        }
    }

    fn text(&self) -> &[u8] {
        &self.buf
    }
}

/// A byte address: a JSON number or a string in hex (`"0x7f00"`) or decimal.
#[derive(Copy, Clone, Debug)]
struct Address(u64);

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AddressVisitor;
        impl Visitor<'_> for AddressVisitor {
            type Value = Address;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an address: a non-negative integer or a string like \"0x7f0000\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Address, E> {
                Ok(Address(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Address, E> {
                u64::try_from(v).map(Address).map_err(|_| E::custom(format!("negative address {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Address, E> {
                let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(hex) if hex.contains('_') => u64::from_str_radix(&hex.replace('_', ""), 16),
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse(),
                };
                parsed.map(Address).map_err(|_| E::custom(format!("`{v}` is not an address")))
            }
        }
        d.deserialize_any(AddressVisitor)
    }
}

/// `[address, "r" | "w"]`: a pointer argument of a kernel.
#[derive(Deserialize, Debug)]
struct RawPointer<'a>(Address, #[serde(borrow)] Cow<'a, str>);

/// `[address, size]`.
#[derive(Deserialize, Debug, Clone, Copy)]
struct RawRange(Address, Address);

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawGraphNode<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    reads: Vec<RawRange>,
    #[serde(default)]
    writes: Vec<RawRange>,
    #[serde(default)]
    deps: Vec<usize>,
    #[allow(dead_code)]
    comment: Option<serde_json::Value>,
}

/// Every field any record type may carry; which ones a type needs is checked after parsing, so that a missing
/// field gets a message naming the record type.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawRecord<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    // header
    version: Option<u32>,
    // common
    pid: Option<u64>,
    thread: Option<u64>,
    time: Option<u64>,
    gpu_start: Option<u64>,
    // capture_stats
    calls: Option<u64>,
    callback_ns: Option<u64>,
    gpu_end: Option<u64>,
    corr: Option<u64>,
    time_end: Option<u64>,
    #[serde(borrow)]
    api: Option<Cow<'a, str>>,
    #[serde(borrow)]
    region: Option<Cow<'a, str>>,
    #[serde(borrow)]
    src: Option<Cow<'a, str>>,
    #[allow(dead_code)]
    comment: Option<serde_json::Value>,
    // entities
    id: Option<u64>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "flags")]
    stream_kind: Option<Cow<'a, str>>,
    priority: Option<i32>,
    device: Option<u64>,
    context: Option<u64>,
    // operations
    stream: Option<u64>,
    event: Option<u64>,
    #[serde(default)]
    reads: Vec<RawRange>,
    #[serde(default)]
    writes: Vec<RawRange>,
    #[serde(default, borrow)]
    pointers: Vec<RawPointer<'a>>,
    #[serde(borrow)]
    copy: Option<Cow<'a, str>>,
    from: Option<RawRange>,
    to: Option<RawRange>,
    bytes: Option<u64>,
    sync: Option<bool>,
    ready: Option<bool>,
    addr: Option<Address>,
    size: Option<Address>,
    #[serde(borrow)]
    alloc_kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    free_kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    label: Option<Cow<'a, str>>,
    #[serde(borrow)]
    nodes: Option<Vec<RawGraphNode<'a>>>,
}

/// Maps the handles of one process-scoped namespace (streams, events) to dense ids.
struct HandleMap<Id> {
    ids: HashMap<(ProcessId, u64), Id>,
}

impl<Id> Default for HandleMap<Id> {
    fn default() -> Self {
        HandleMap { ids: HashMap::default() }
    }
}

impl<Id: Copy> HandleMap<Id> {
    fn get(&self, process: ProcessId, handle: u64) -> Option<Id> {
        self.ids.get(&(process, handle)).copied()
    }
}

/// The stateful part of reading: the header check, id mapping and the validation of references.
struct JsonTraceParser {
    path: PathBuf,
    counters: ImportCounters,
    seen_header: bool,
    seq: u64,
    processes: HashMap<u64, ProcessId>,
    threads: HashMap<(ProcessId, u64), ThreadId>,
    streams: HandleMap<StreamId>,
    events: HandleMap<EventId>,
    allocs: HandleMap<AllocId>,
    next_stream: u32,
    next_event: u32,
    next_alloc: u32,
    devices: HashMap<(ProcessId, u64), DeviceId>,
    contexts: HashMap<(ProcessId, u64), ContextId>,
    names: HashSet<Arc<str>>,
    sources: HashMap<String, SourceLocation>,
    /// Framework operations and calls open on each thread (tier T2), innermost last.
    open_ops: HashMap<ThreadId, Vec<FrameworkFrame>>,
    /// Caching-allocator blocks (`pool_block`), whose ids are their own namespace.
    blocks: HandleMap<AllocId>,
}

/// What a framework frame is.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum FrameKind {
    /// A framework operation (a PyTorch op) between `op_begin` and `op_end`. Its name, source line and whole
    /// read and write sets (outputs included) may come only with `op_end`, so the operations issued inside it
    /// are held until then; its kernels then take those exact extents instead of their pointer arguments.
    Op,
    /// A framework call that orders streams or the host (`Event.record`, `Stream.wait_stream`...) between
    /// `call_begin` and `call_end`. Its name and line come first; the CUDA calls inside take them as they pass.
    Call,
}

impl FrameKind {
    /// The record type that opens a frame of this kind.
    fn opening_record(self) -> &'static str {
        match self {
            FrameKind::Op => "op_begin",
            FrameKind::Call => "call_begin",
        }
    }
}

struct FrameworkFrame {
    kind: FrameKind,
    name: Option<Arc<str>>,
    accesses: Vec<Access>,
    source: Option<SourceLocation>,
    held: Vec<Operation>,
}

impl JsonTraceParser {
    fn new(path: PathBuf) -> Self {
        JsonTraceParser {
            path,
            counters: ImportCounters::default(),
            seen_header: false,
            seq: 0,
            processes: HashMap::default(),
            threads: HashMap::default(),
            streams: HandleMap::default(),
            events: HandleMap::default(),
            allocs: HandleMap::default(),
            next_stream: 0,
            next_event: 0,
            next_alloc: 0,
            devices: HashMap::default(),
            contexts: HashMap::default(),
            names: HashSet::default(),
            sources: HashMap::default(),
            open_ops: HashMap::default(),
            blocks: HandleMap::default(),
        }
    }

    fn error(&self, line: u64, message: impl Into<String>) -> IngestError {
        IngestError::new(&self.path, Some(format!("{line}")), message)
    }

    fn finish(&mut self, out: &mut Batch) {
        // Ops still open at the end (the program died inside one): their kernels keep their pointer arguments.
        let mut held: Vec<Operation> = self.open_ops.drain().flat_map(|(_, frames)| frames).flat_map(|f| f.held).collect();
        held.sort_by_key(|op| op.seq);
        out.extend(held.into_iter().map(|op| Ok(TraceRecord::Op(op))));
        if !self.seen_header {
            out.push(Err(IngestError::new(
                &self.path,
                None,
                "empty: a streamtrace JSON trace starts with a header record {\"type\": \"streamtrace\", \"version\": 1}",
            )));
        }
    }

    /// Takes one decoded record (or the reason it could not be decoded) that starts at `line`.
    fn accept(
        &mut self,
        line: u64,
        decoded: Result<RawRecord, serde_json::Error>,
        out: &mut Batch,
    ) -> Result<(), IngestError> {
        let raw = decoded.map_err(|e| {
            let what = if self.seen_header {
                "malformed record"
            } else {
                "not a trace streamtrace reads (a streamtrace JSON trace, an nsys .sqlite export or an .nsys-rep report): not a streamtrace JSON trace"
            };
            // serde_json counts lines from the start of this record's text; say the position once, in file terms.
            let at = line + e.line().saturating_sub(1) as u64;
            let text = e.to_string();
            let message = text.rsplit_once(" at line ").map_or(text.as_str(), |(m, _)| m);
            self.error(at, format!("{what}: {message} (column {})", e.column()))
        })?;
        if !self.seen_header {
            if raw.kind != HEADER_TYPE {
                return Err(self.error(
                    line,
                    format!(
                        "not a streamtrace JSON trace: the first record must be {{\"type\": \"{HEADER_TYPE}\", \"version\": {FORMAT_VERSION}}}, found type `{}`",
                        raw.kind
                    ),
                ));
            }
            match raw.version {
                Some(FORMAT_VERSION) => {}
                Some(v) => return Err(self.error(line, format!("unsupported format version {v} (this build reads {FORMAT_VERSION})"))),
                None => return Err(self.error(line, "header without `version`")),
            }
            self.seen_header = true;
            return Ok(());
        }
        self.convert(line, raw, out).map_err(|message| self.error(line, message))
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

    fn stream(&self, process: ProcessId, handle: Option<u64>) -> Result<StreamId, String> {
        let handle = handle.ok_or("missing field `stream`")?;
        self.streams.get(process, handle).ok_or_else(|| {
            format!("unknown stream {handle}: declare it first with {{\"type\": \"stream\", \"id\": {handle}, \"stream_kind\": ...}}")
        })
    }

    fn event(&self, process: ProcessId, handle: Option<u64>) -> Result<EventId, String> {
        let handle = handle.ok_or("missing field `event`")?;
        self.events
            .get(process, handle)
            .ok_or_else(|| format!("event {handle} used before it exists: declare it with {{\"type\": \"event\", \"id\": {handle}}}"))
    }

    /// One shared copy of each kernel name: traces repeat a few names millions of times.
    fn intern(&mut self, name: &str) -> Arc<str> {
        match self.names.get(name) {
            Some(interned) => interned.clone(),
            None => {
                let interned: Arc<str> = name.into();
                self.names.insert(interned.clone());
                interned
            }
        }
    }

    fn source(&mut self, text: &str) -> SourceLocation {
        match self.sources.get(text) {
            Some(location) => location.clone(),
            None => {
                let location = SourceLocation::parse(text);
                self.sources.insert(text.to_string(), location.clone());
                location
            }
        }
    }

    fn convert(&mut self, line: u64, raw: RawRecord, out: &mut Batch) -> Result<(), String> {
        let process = self.process(raw.pid);
        let thread = self.thread(process, raw.thread, out);
        self.counters.bump("json.records", Severity::Info, "records read", 1);
        let kind = match &*raw.kind {
            "thread" => {
                // Threads appear on first use; a thread record only names one.
                if let Some(Ok(TraceRecord::Thread(info))) = out.last_mut() {
                    if info.id == thread {
                        info.name = raw.name.map(Cow::into_owned);
                    }
                }
                return Ok(());
            }
            "process" => return Ok(()),
            "op_begin" | "call_begin" => {
                let kind = if raw.kind == "op_begin" { FrameKind::Op } else { FrameKind::Call };
                let mut accesses = Vec::with_capacity(raw.reads.len() + raw.writes.len());
                read_write_accesses(&raw.reads, &raw.writes, &mut accesses)?;
                let name = raw.name.as_deref().map(|n| self.intern(n));
                if kind == FrameKind::Call && name.is_none() {
                    return Err("call_begin without `name`".into());
                }
                let source = raw.src.as_deref().map(|text| self.source(text));
                self.open_ops.entry(thread).or_default().push(FrameworkFrame { kind, name, accesses, source, held: Vec::new() });
                if kind == FrameKind::Op {
                    self.counters.bump("json.framework_ops", Severity::Info, "framework operations (tier T2)", 1);
                } else {
                    self.counters.bump("json.framework_calls", Severity::Info, "framework calls that order streams or the host", 1);
                }
                return Ok(());
            }
            "op_end" | "call_end" => {
                let kind = if raw.kind == "op_end" { FrameKind::Op } else { FrameKind::Call };
                let Some(mut frame) = self.open_ops.get_mut(&thread).and_then(Vec::pop) else {
                    return Err(format!("{} without an open {} on this thread", raw.kind, kind.opening_record()));
                };
                if frame.kind != kind {
                    return Err(format!("{} closes a frame opened by {}", raw.kind, frame.kind.opening_record()));
                }
                // What the op was, its line and its outputs may be known only now.
                read_write_accesses(&raw.reads, &raw.writes, &mut frame.accesses)?;
                if let Some(name) = raw.name.as_deref() {
                    frame.name = Some(self.intern(name));
                }
                if let Some(text) = raw.src.as_deref() {
                    frame.source = Some(self.source(text));
                }
                for mut held in std::mem::take(&mut frame.held) {
                    if let OpKind::Kernel { accesses, pointers, .. } = &mut held.kind {
                        accesses.clone_from(&frame.accesses);
                        pointers.clear();
                    }
                    held.region = held.region.or_else(|| frame.name.clone());
                    held.source = held.source.or_else(|| frame.source.clone());
                    self.place(thread, held, out);
                }
                return Ok(());
            }
            "capture_stats" => {
                // What the capture cost the program, said once per process at exit.
                let (Some(calls), Some(ns)) = (raw.calls, raw.callback_ns) else {
                    return Err("capture_stats needs `calls` and `callback_ns`".into());
                };
                self.counters.bump("capture.recorded_calls", Severity::Info, "driver calls the capture library recorded", calls);
                self.counters.bump("capture.callback_ns", Severity::Info, "nanoseconds the capture library spent recording them, on the program's threads", ns);
                return Ok(());
            }
            "gpu_time" => {
                // GPU start and end of an operation, delivered by CUPTI after the fact: for timelines, not for
                // deciding ordering.
                self.counters.bump("json.gpu_times", Severity::Info, "GPU time records (placed on timelines)", 1);
                let (Some(correlation), Some(start_ns), Some(end_ns)) = (raw.corr, raw.gpu_start, raw.gpu_end) else {
                    return Err("gpu_time needs `corr`, `gpu_start` and `gpu_end`".into());
                };
                out.push(Ok(TraceRecord::GpuTime { correlation, start_ns, end_ns }));
                return Ok(());
            }
            "stream" => {
                let handle = raw.id.ok_or("stream record without `id`")?;
                if self.streams.get(process, handle).is_some() {
                    return Err(format!("stream {handle} declared twice"));
                }
                let kind = match raw.stream_kind.as_deref() {
                    Some("legacy_default") => StreamKind::LegacyDefault,
                    Some("per_thread_default") => StreamKind::PerThreadDefault,
                    Some("blocking") | None => StreamKind::Blocking,
                    Some("non_blocking") => StreamKind::NonBlocking,
                    Some(other) => {
                        return Err(format!(
                            "unknown stream_kind `{other}` (expected legacy_default, per_thread_default, blocking or non_blocking)"
                        ))
                    }
                };
                let id = StreamId(self.next_stream);
                self.next_stream += 1;
                self.streams.ids.insert((process, handle), id);
                let next_device = DeviceId(self.devices.len() as u32);
                let device = *self.devices.entry((process, raw.device.unwrap_or(0))).or_insert(next_device);
                let next_context = ContextId(self.contexts.len() as u32);
                let context = *self.contexts.entry((process, raw.context.unwrap_or(0))).or_insert(next_context);
                let created_by = (kind != StreamKind::LegacyDefault).then_some(thread);
                out.push(Ok(TraceRecord::Stream(StreamInfo {
                    id,
                    handle,
                    kind,
                    priority: raw.priority,
                    process,
                    device,
                    context,
                    created_by,
                })));
                return Ok(());
            }
            "event" => {
                let handle = raw.id.ok_or("event record without `id`")?;
                if self.events.get(process, handle).is_some() {
                    return Err(format!("event {handle} declared twice"));
                }
                let id = EventId(self.next_event);
                self.next_event += 1;
                self.events.ids.insert((process, handle), id);
                out.push(Ok(TraceRecord::Event(EventInfo { id, handle, process })));
                return Ok(());
            }
            "kernel" => {
                let stream = self.stream(process, raw.stream)?;
                let mut accesses = Vec::with_capacity(raw.reads.len() + raw.writes.len());
                read_write_accesses(&raw.reads, &raw.writes, &mut accesses)?;
                let name = self.intern(&raw.name.ok_or("kernel without `name`")?);
                let mut pointers = Vec::with_capacity(raw.pointers.len());
                for RawPointer(address, mode) in &raw.pointers {
                    let mode = match mode.as_ref() {
                        "r" | "read" => AccessMode::Read,
                        "w" | "write" => AccessMode::Write,
                        other => return Err(format!("pointer mode `{other}` (expected \"r\" or \"w\")")),
                    };
                    pointers.push(PointerArg { address: address.0, mode });
                }
                OpKind::Kernel { stream, name, accesses, pointers }
            }
            "memcpy" => {
                let stream = self.stream(process, raw.stream)?;
                let src = raw.from.map(range).transpose()?;
                let dst = raw.to.map(range).transpose()?;
                let bytes = raw.bytes.or(src.map(|r| r.len)).or(dst.map(|r| r.len)).unwrap_or(0);
                let copy = match raw.copy.as_deref() {
                    None | Some("Default") => CopyKind::Default,
                    Some("HtoD") => CopyKind::HtoD,
                    Some("DtoH") => CopyKind::DtoH,
                    Some("DtoD") => CopyKind::DtoD,
                    Some("HtoH") => CopyKind::HtoH,
                    Some("PtoP") => CopyKind::PtoP,
                    Some(other) => return Err(format!("unknown copy kind `{other}` (expected HtoD, DtoH, DtoD, HtoH, PtoP or Default)")),
                };
                OpKind::Memcpy { stream, copy, bytes, src, dst, synchronous: raw.sync.unwrap_or(false) }
            }
            "memset" => {
                let stream = self.stream(process, raw.stream)?;
                let dst = raw.to.map(range).transpose()?;
                let bytes = raw.bytes.or(dst.map(|r| r.len)).unwrap_or(0);
                OpKind::Memset { stream, bytes, dst, synchronous: raw.sync.unwrap_or(false) }
            }
            "record" => OpKind::EventRecord { event: self.event(process, raw.event)?, stream: self.stream(process, raw.stream)? },
            "wait" => OpKind::StreamWait { stream: self.stream(process, raw.stream)?, event: self.event(process, raw.event)? },
            "sync" => OpKind::HostSync(match (raw.stream, raw.event, raw.device, raw.context) {
                (Some(_), None, None, None) => HostSync::Stream(self.stream(process, raw.stream)?),
                (None, Some(_), None, None) => HostSync::Event(self.event(process, raw.event)?),
                (None, None, Some(d), None) => HostSync::Device(
                    *self.devices.get(&(process, d)).ok_or_else(|| format!("device {d} has no streams"))?,
                ),
                (None, None, None, Some(c)) => HostSync::Context(
                    *self.contexts.get(&(process, c)).ok_or_else(|| format!("context {c} has no streams"))?,
                ),
                _ => return Err("a sync record names exactly one of `stream`, `event`, `device` or `context`".into()),
            }),
            "query" => {
                let target = match (raw.stream, raw.event) {
                    (Some(_), None) => QueryTarget::Stream(self.stream(process, raw.stream)?),
                    (None, Some(_)) => QueryTarget::Event(self.event(process, raw.event)?),
                    _ => return Err("a query record names exactly one of `stream` or `event`".into()),
                };
                OpKind::Query { target, ready: raw.ready.ok_or("query without `ready` (true when it returned cudaSuccess)")? }
            }
            "alloc" => {
                let handle = raw.id.ok_or("alloc record without `id`")?;
                let start = raw.addr.ok_or("alloc without `addr`")?.0;
                let size = raw.size.ok_or("alloc without `size`")?.0;
                let range = AccessRange::new(start, size).map_err(|e| e.to_string())?;
                let alloc_kind = match raw.alloc_kind.as_deref() {
                    None | Some("device") => AllocKind::Device,
                    Some("stream_ordered") => AllocKind::StreamOrdered,
                    Some("virtual_map") => AllocKind::VirtualMap,
                    Some("host") => AllocKind::Host,
                    Some("managed") => AllocKind::Managed,
                    Some("pool_block") => AllocKind::PoolBlock,
                    Some(other) => {
                        return Err(format!(
                            "unknown alloc_kind `{other}` (expected device, stream_ordered, virtual_map, host, managed or pool_block)"
                        ))
                    }
                };
                let stream = match alloc_kind {
                    AllocKind::StreamOrdered => Some(self.stream(process, raw.stream)?),
                    // The stream a block was handed out on only describes it: one not yet seen is left out.
                    AllocKind::PoolBlock => raw.stream.and_then(|s| self.streams.get(process, s)),
                    _ => None,
                };
                let ids = if alloc_kind == AllocKind::PoolBlock { &mut self.blocks } else { &mut self.allocs };
                if ids.get(process, handle).is_some() {
                    return Err(format!("allocation {handle} is still live: free it before reusing its id"));
                }
                let alloc = AllocId(self.next_alloc);
                self.next_alloc += 1;
                ids.ids.insert((process, handle), alloc);
                OpKind::Alloc { alloc, handle, range, alloc_kind, stream, label: raw.label.or(raw.name).map(Cow::into_owned) }
            }
            "free" => {
                let handle = raw.id.ok_or("free record without `id`")?;
                let free_kind = match raw.free_kind.as_deref() {
                    None | Some("synchronous") => FreeKind::Synchronous,
                    Some("stream_ordered") => FreeKind::StreamOrdered,
                    Some("virtual_unmap") => FreeKind::VirtualUnmap,
                    Some("host") => FreeKind::Host,
                    Some("pool_block") => FreeKind::PoolBlock,
                    Some(other) => {
                        return Err(format!(
                            "unknown free_kind `{other}` (expected synchronous, stream_ordered, virtual_unmap, host or pool_block)"
                        ))
                    }
                };
                let ids = if free_kind == FreeKind::PoolBlock { &mut self.blocks } else { &mut self.allocs };
                let alloc =
                    ids.ids.remove(&(process, handle)).ok_or_else(|| format!("free of allocation {handle}, which is not live"))?;
                let stream = match free_kind {
                    FreeKind::StreamOrdered => Some(self.stream(process, raw.stream)?),
                    _ => None,
                };
                OpKind::Free { alloc, free_kind, stream }
            }
            "graph" => {
                let stream = self.stream(process, raw.stream)?;
                let raw_nodes = raw.nodes.ok_or("graph without `nodes`")?;
                let mut nodes = Vec::with_capacity(raw_nodes.len());
                for (index, node) in raw_nodes.into_iter().enumerate() {
                    if let Some(&dep) = node.deps.iter().find(|&&d| d >= index) {
                        return Err(format!("graph node {index} depends on node {dep}; a node may depend only on earlier nodes"));
                    }
                    let mut accesses = Vec::new();
                    read_write_accesses(&node.reads, &node.writes, &mut accesses)?;
                    nodes.push(GraphNode {
                        name: node.name.map_or_else(|| format!("node {index}"), Cow::into_owned),
                        accesses,
                        depends_on: node.deps,
                    });
                }
                OpKind::GraphLaunch { stream, name: raw.name.map_or_else(|| "graph".into(), Cow::into_owned), nodes }
            }
            other => {
                return Err(format!(
                    "unknown record type `{other}` (expected stream, event, thread, kernel, memcpy, memset, record, wait, sync, query, alloc, free or graph)"
                ))
            }
        };
        if let (Some(start), Some(end)) = (raw.gpu_start, raw.gpu_end) {
            if end < start {
                return Err(format!("gpu_end {end} is before gpu_start {start}"));
            }
        }
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
            origin: line,
            kind,
        };
        self.seq += 1;
        let naming_only = matches!(op.kind, OpKind::Alloc { alloc_kind: AllocKind::PoolBlock, .. } | OpKind::Free { free_kind: FreeKind::PoolBlock, .. });
        if naming_only {
            // A caching-allocator block only names memory; it orders nothing, so it need not wait for its op.
            out.push(Ok(TraceRecord::Op(op)));
        } else {
            if matches!(op.kind, OpKind::Kernel { .. }) && self.open_ops.get(&thread).is_some_and(|f| f.iter().any(|f| f.kind == FrameKind::Op)) {
                self.counters.bump("json.kernels_in_framework_ops", Severity::Info, "kernels attributed to a framework operation's read and write sets", 1);
            }
            self.place(thread, op, out);
        }
        Ok(())
    }

    /// Hands an operation on: named by the open calls inside the innermost open op of its thread (the
    /// innermost call first) and held by that op, or out when no op is open. Copies and sets keep their own
    /// exact addresses; kernels take an op's sets when it ends.
    fn place(&mut self, thread: ThreadId, mut op: Operation, out: &mut Batch) {
        for frame in self.open_ops.get_mut(&thread).into_iter().flatten().rev() {
            match frame.kind {
                FrameKind::Op => {
                    frame.held.push(op);
                    return;
                }
                FrameKind::Call => {
                    op.region = op.region.or_else(|| frame.name.clone());
                    op.source = op.source.or_else(|| frame.source.clone());
                }
            }
        }
        out.push(Ok(TraceRecord::Op(op)));
    }
}

fn range(raw: RawRange) -> Result<AccessRange, String> {
    AccessRange::new(raw.0 .0, raw.1 .0).map_err(|e| e.to_string())
}

/// A record's `reads` and `writes` lists as accesses.
fn read_write_accesses(reads: &[RawRange], writes: &[RawRange], out: &mut Vec<Access>) -> Result<(), String> {
    for (list, mode) in [(reads, AccessMode::Read), (writes, AccessMode::Write)] {
        for r in list {
            out.push(Access { range: range(*r)?, mode });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Result<Vec<TraceRecord>, IngestError> {
        JsonTraceReader::from_text("t.json", text.to_string()).collect()
    }

    const HEADER: &str = "{\"type\":\"streamtrace\",\"version\":1}\n";

    #[test]
    fn reads_multi_line_records_and_hex_addresses() {
        let text = format!(
            "{HEADER}{{\"type\":\"stream\",\"id\":7,\"stream_kind\":\"non_blocking\"}}\n\n{{\n \"type\": \"kernel\", \"stream\": 7, \"name\": \"k\",\n \"writes\": [[\"0x1000\", 256]]\n}}\n"
        );
        let records = read_all(&text).unwrap();
        let op = records.iter().find_map(|r| match r {
            TraceRecord::Op(op) => Some(op),
            _ => None,
        });
        let op = op.expect("one operation");
        assert_eq!(op.origin, 4);
        match &op.kind {
            OpKind::Kernel { accesses, .. } => {
                assert_eq!(accesses[0].range, AccessRange { start: 0x1000, len: 256 })
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn unknown_stream_names_the_line() {
        let text = format!("{HEADER}{{\"type\":\"kernel\",\"stream\":3,\"name\":\"k\"}}\n");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.starts_with("t.json:2: unknown stream 3"), "{err}");
    }

    #[test]
    fn event_before_declaration_is_an_error() {
        let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"record\",\"stream\":1,\"event\":5}}\n");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.contains("t.json:3: event 5 used before it exists"), "{err}");
    }

    #[test]
    fn overflowing_and_negative_ranges_are_refused() {
        let over = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"reads\":[[\"0xffffffffffffffff\",2]]}}\n");
        assert!(read_all(&over).unwrap_err().to_string().contains("runs past the end"));
        let negative = format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\",\"reads\":[[16,-2]]}}\n");
        let err = read_all(&negative).unwrap_err().to_string();
        assert!(err.contains("t.json:3") && err.contains("negative"), "{err}");
    }

    #[test]
    fn missing_header_and_foreign_json_are_named() {
        let err = read_all("{\"hello\": 1}\n").unwrap_err().to_string();
        assert!(err.contains("not a streamtrace JSON trace"), "{err}");
        let err = read_all("").unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
        let err = read_all("\u{0}\u{1}binary").unwrap_err().to_string();
        assert!(err.contains("not a streamtrace JSON trace"), "{err}");
    }

    #[test]
    fn truncated_record_is_reported_not_hung() {
        let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1,");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.contains("t.json:2: malformed record"), "{err}");
    }

    #[test]
    fn kernels_inside_a_framework_op_take_its_exact_extents() {
        let text = format!(
            "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
             {{\"type\":\"op_begin\",\"thread\":5,\"name\":\"mul_\",\"reads\":[[4096,64]],\"writes\":[],\"src\":\"t.py:3\"}}\n\
             {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
             {{\"type\":\"op_end\",\"thread\":5,\"writes\":[[8192,32]]}}\n"
        );
        let records = read_all(&text).unwrap();
        let kernel = records
            .iter()
            .find_map(|r| match r {
                TraceRecord::Op(op) => Some(op),
                _ => None,
            })
            .expect("the kernel, released at op_end");
        match &kernel.kind {
            OpKind::Kernel { accesses, pointers, .. } => {
                assert!(pointers.is_empty(), "tier T2 replaces the pointer arguments");
                assert_eq!(accesses.len(), 2);
                assert!(accesses.contains(&Access { range: AccessRange { start: 4096, len: 64 }, mode: AccessMode::Read }));
                assert!(accesses.contains(&Access { range: AccessRange { start: 8192, len: 32 }, mode: AccessMode::Write }));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(kernel.region.as_deref(), Some("mul_"));
        assert_eq!(kernel.source.as_ref().map(|s| s.to_string()).as_deref(), Some("t.py:3"));
    }

    #[test]
    fn op_end_without_op_begin_is_an_error() {
        let text = format!("{HEADER}{{\"type\":\"op_end\",\"thread\":5}}\n");
        assert!(read_all(&text).unwrap_err().to_string().contains("op_end without an open op_begin"));
    }

    fn ops(records: &[TraceRecord]) -> Vec<&Operation> {
        records.iter().filter_map(|r| if let TraceRecord::Op(op) = r { Some(op) } else { None }).collect()
    }

    #[test]
    fn an_op_named_only_at_its_end_names_the_copies_it_held() {
        // What the capture's bootstrap writes: a bare op_begin, the op's CUDA calls, then everything at op_end.
        let text = format!(
            "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
             {{\"type\":\"op_begin\",\"thread\":5}}\n\
             {{\"type\":\"memcpy\",\"thread\":5,\"stream\":1,\"from\":[4096,64],\"to\":[8192,64]}}\n\
             {{\"type\":\"alloc\",\"thread\":5,\"id\":1,\"addr\":8192,\"size\":64,\"alloc_kind\":\"pool_block\",\"src\":\"t.py:7\"}}\n\
             {{\"type\":\"op_end\",\"thread\":5,\"name\":\"copy_\",\"reads\":[[4096,64]],\"writes\":[[8192,64]],\"src\":\"t.py:7\"}}\n"
        );
        let records = read_all(&text).unwrap();
        let ops = ops(&records);
        assert_eq!(ops.len(), 2);
        assert!(matches!(ops[0].kind, OpKind::Alloc { alloc_kind: AllocKind::PoolBlock, .. }), "a block is not held: it names memory first");
        assert!(matches!(ops[1].kind, OpKind::Memcpy { .. }), "the copy, released at op_end");
        assert_eq!(ops[1].region.as_deref(), Some("copy_"));
        assert_eq!(ops[1].source.as_ref().and_then(|s| s.line), Some(7));
    }

    #[test]
    fn calls_name_the_cuda_calls_inside_them_as_they_pass() {
        let text = format!(
            "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"event\",\"id\":2}}\n\
             {{\"type\":\"call_begin\",\"thread\":5,\"name\":\"Stream.wait_event\",\"src\":\"t.py:12\"}}\n\
             {{\"type\":\"wait\",\"thread\":5,\"stream\":1,\"event\":2}}\n"
        );
        // Not held: the wait comes out before its call ends (here, never).
        let records = read_all(&text).unwrap();
        let wait = ops(&records)[0];
        assert_eq!(wait.region.as_deref(), Some("Stream.wait_event"));
        assert_eq!(wait.source.as_ref().and_then(|s| s.line), Some(12));
    }

    #[test]
    fn a_call_inside_an_op_names_its_kernel_and_the_op_holds_it() {
        // A custom op written in Python that launches a Triton kernel: the launch bracket sits inside the op.
        let text = format!(
            "{HEADER}{{\"type\":\"stream\",\"id\":1}}\n\
             {{\"type\":\"op_begin\",\"thread\":5}}\n\
             {{\"type\":\"call_begin\",\"thread\":5,\"name\":\"triton k\",\"src\":\"t.py:4\"}}\n\
             {{\"type\":\"kernel\",\"thread\":5,\"stream\":1,\"name\":\"k\",\"pointers\":[[\"0x1000\",\"w\"]]}}\n\
             {{\"type\":\"call_end\",\"thread\":5}}\n\
             {{\"type\":\"op_end\",\"thread\":5,\"name\":\"my_op\",\"writes\":[[4096,64]],\"src\":\"t.py:9\"}}\n"
        );
        let records = read_all(&text).unwrap();
        let kernel = ops(&records)[0];
        assert_eq!(kernel.region.as_deref(), Some("triton k"));
        assert_eq!(kernel.source.as_ref().and_then(|s| s.line), Some(4));
        match &kernel.kind {
            OpKind::Kernel { accesses, pointers, .. } => {
                assert!(pointers.is_empty(), "held by the op, it takes the op's extents");
                assert_eq!(accesses, &[Access { range: AccessRange { start: 4096, len: 64 }, mode: AccessMode::Write }]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn frames_must_close_in_kind() {
        let text = format!("{HEADER}{{\"type\":\"op_begin\",\"thread\":5}}\n{{\"type\":\"call_end\",\"thread\":5}}\n");
        assert!(read_all(&text).unwrap_err().to_string().contains("call_end closes a frame opened by op_begin"));
        let text = format!("{HEADER}{{\"type\":\"call_begin\",\"thread\":5}}\n");
        assert!(read_all(&text).unwrap_err().to_string().contains("call_begin without `name`"));
    }

    #[test]
    fn unknown_field_is_refused() {
        let text = format!("{HEADER}{{\"type\":\"stream\",\"id\":1,\"raeds\":[]}}\n");
        let err = read_all(&text).unwrap_err().to_string();
        assert!(err.contains("unknown field `raeds`"), "{err}");
    }
}
