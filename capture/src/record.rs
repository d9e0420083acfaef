//! What the capture writes: one record of the streamtrace trace format (docs/trace-format.md) per call, in the
//! binary encoding or as a JSON line (`TraceWriter`). Records are built on the application's threads (cheap, no
//! I/O) and formatted on the writer thread.

use std::sync::Arc;

use streamtrace_format::{
    push_number, AccessFlag, AllocKind, ByteRuns, CopyKind, Coverage, FaultKind, Field, FieldSink, FreeKind,
    MemoryKind, RecordKind, StreamKind, TraceWriter, Unseen, WatchState,
};

use crate::args::PointerArg;
pub use crate::graph_record::{GraphRecord, NodeBody, NodeOwner};
pub use crate::kernel_name::KernelName;

/// Byte ranges a launch is known to touch: its reads then its writes are `runs[first_run..]` of the batch. They
/// are what the exact-access backend saw (`seen`: how much of the launch that is, and whether its pointer words
/// count too), or what a library's API says its kernels touch (NCCL's buffers, nccl.rs; `seen` None: the
/// pointer words count as always).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KnownAccesses {
    pub first_run: u32,
    pub reads: u32,
    pub writes: u32,
    pub seen: Option<Seen>,
}

/// How much of a launch the exact-access backend saw.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub coverage: Coverage,
    pub unseen: Option<Unseen>,
}

/// Where and when a call was made.
#[derive(Copy, Clone, Debug)]
pub struct Call {
    pub tid: u64,
    pub time_ns: u64,
    pub correlation: u32,
    /// The id of its native call site (sites.rs), 0 when none was found.
    pub site: u32,
}

#[derive(Clone, Debug)]
pub enum SyncTarget {
    Stream(u64),
    Event(u64),
    Context(u32),
}

#[derive(Clone, Debug)]
pub enum Record {
    Stream {
        handle: u64,
        kind: StreamKind,
        priority: Option<i32>,
        context: u32,
        device: Option<u32>,
    },
    Event {
        handle: u64,
    },
    /// A launch of the kernel declared by the `Function` record `function`; its pointer words are
    /// `pointers[first_pointer..first_pointer + pointer_count]` of the batch (no allocation per launch).
    Kernel {
        stream: u64,
        function: u32,
        first_pointer: u32,
        pointer_count: u32,
        api: &'static str,
        /// What it is known to touch besides its pointer words: what the exact-access backend saw, or the
        /// buffers of the NCCL call it carries out.
        known: Option<KnownAccesses>,
    },
    /// Names kernel `index` for the writer, which keeps the names across batches; writes no line.
    Function {
        index: u32,
        name: Arc<str>,
    },
    /// `memory`: what the source and the destination are (pageable or pinned host, device, managed), which
    /// decides whether the call makes the host wait.
    Memcpy {
        stream: u64,
        copy: CopyKind,
        src: u64,
        dst: u64,
        bytes: u64,
        synchronous: bool,
        memory: (MemoryKind, MemoryKind),
        api: &'static str,
    },
    Memset {
        stream: u64,
        dst: u64,
        bytes: u64,
        synchronous: bool,
        memory: MemoryKind,
        api: &'static str,
    },
    /// A 2D or 3D copy: each side as `(first byte, extent)`, absent for a CUDA array (no address).
    PitchedMemcpy {
        stream: u64,
        copy: CopyKind,
        from: Option<(u64, u64)>,
        to: Option<(u64, u64)>,
        synchronous: bool,
        memory: (MemoryKind, MemoryKind),
        api: &'static str,
    },
    /// An event takes the stream's clock: `cuEventRecord`, or a launch attribute that names an event.
    EventRecord {
        event: u64,
        stream: u64,
        api: &'static str,
    },
    Wait {
        stream: u64,
        event: u64,
        api: &'static str,
    },
    Sync {
        target: SyncTarget,
        api: &'static str,
    },
    Query {
        target: SyncTarget,
        ready: bool,
        api: &'static str,
    },
    Alloc {
        id: u64,
        address: u64,
        bytes: u64,
        kind: AllocKind,
        stream: Option<u64>,
        /// How findings name the block where its kind does not say enough (memory another process exported).
        label: Option<&'static str>,
        api: &'static str,
    },
    Free {
        id: u64,
        kind: FreeKind,
        stream: Option<u64>,
        api: &'static str,
    },
    /// Stream capture and the graph API, by the program's handles.
    Graph {
        graph: GraphRecord,
        api: &'static str,
    },
    GpuTime {
        correlation: u32,
        start: u64,
        end: u64,
    },
    /// At exit: the driver calls recorded in this process, the time the callback spent on them, and apart from
    /// it the one-time set-up (cost.rs).
    CaptureStats {
        calls: u64,
        callback_ns: u64,
        setup_ns: u64,
    },
    /// A record written by a framework hook (the PyTorch bootstrap): one JSON object, passed through with the
    /// calling thread's id added. Its text is `len` bytes from `start` of its batch's `framework_text`
    /// ([`Batch::push_raw`]).
    Raw {
        start: u32,
        len: u32,
    },
    /// A framework operation (a PyTorch op) begins on the calling thread; its `op_end` record, sent through
    /// `Raw`, says what it was.
    OpBegin,
    /// A loaded module that call sites point into (sites.rs).
    Module {
        path: Arc<str>,
        bias: u64,
        start: u64,
        size: u64,
        build_id: Option<Arc<str>>,
    },
    /// A native call site's return addresses, innermost first, and for a call a Python program made outside
    /// any framework op the Python line that made it (python_line.rs).
    Callsite {
        id: u32,
        frames: Arc<[u64]>,
        python_line: Option<Arc<str>>,
    },
    /// At exit: one of the functions a return address of a module sits in, with its line (frame_lines.rs).
    FrameLine {
        path: Arc<str>,
        /// As the file states it.
        address: u64,
        depth: u32,
        function: Option<Arc<str>>,
        /// `file:line`.
        source: Option<String>,
        offset: Option<u64>,
    },
    /// The calling thread releases what it knows under `object`, a snapshot id of the capture's own
    /// (host_sync/): written where a thread that learned something since its last release releases a program's
    /// lock, posts a semaphore, creates a thread or ends.
    HostRelease {
        object: u64,
        api: &'static str,
    },
    /// The calling thread acquires the snapshot `object` another thread released: written before the thread's
    /// next record after the lock, wait or join that acquired it (host_sync/).
    HostAcquire {
        object: u64,
        api: &'static str,
    },
    /// The host's own load or store of memory the GPU also touches, seen from a fault (host_watch/): `bytes`
    /// from `address`. `host_func`: the id of the host function that made it on a driver thread (0: the
    /// recording thread itself).
    HostAccess {
        address: u64,
        bytes: u64,
        write: bool,
        fault: FaultKind,
        host_func: u64,
    },
    /// A host function enqueued on `stream` (`cuLaunchHostFunc`, `cuStreamAddCallback`; DESIGN.md, host functions),
    /// named by `id` for the accesses it makes; `name` is its symbol. `node`: the graph node (handle) whose run in
    /// the `graph_launch` that follows this is (0: none).
    HostFunc {
        stream: u64,
        id: u64,
        name: Arc<str>,
        node: u64,
        api: &'static str,
    },
    /// At exit: what the host watch did and saw (host_watch/).
    HostWatch {
        guard: WatchState,
        managed: WatchState,
        windows: u64,
        faults: u64,
        dropped: u64,
        ignored: u64,
    },
    /// A capture range begins (ranges.rs): the `index`th of this trace, with the NVTX range's name when an
    /// NVTX range started it.
    RangeBegin {
        index: u32,
        name: Option<Arc<str>>,
    },
    /// The capture range `index` ends.
    RangeEnd {
        index: u32,
    },
}

impl Record {
    /// Whether the calling thread may know more after this call than before it, in the analyzer's host clock
    /// (DESIGN.md rules 5, 6 and 12): a host synchronization, a successful query, a copy, set or free that makes
    /// the host wait, a host access, another thread's snapshot. Only then does its next release need a new
    /// snapshot (host_sync/, which keeps count of acquired snapshots itself). Every record kind is named: a new
    /// one must say.
    pub fn teaches_the_host(&self) -> bool {
        match self {
            Record::Sync { .. } | Record::HostAcquire { .. } | Record::HostAccess { .. } => true,
            Record::Query { ready, .. } => *ready,
            Record::Memcpy { synchronous, memory, .. } | Record::PitchedMemcpy { synchronous, memory, .. } => {
                // The Async forms wait for themselves when they write pageable memory or copy host to host.
                let host = |m: MemoryKind| matches!(m, MemoryKind::Pageable | MemoryKind::Pinned);
                *synchronous || memory.1 == MemoryKind::Pageable || host(memory.0) && host(memory.1)
            }
            Record::Memset { synchronous, .. } => *synchronous,
            Record::Free { kind, .. } => matches!(kind, FreeKind::Synchronous | FreeKind::Host),
            // Enqueues, declarations and what the capture says of itself.
            Record::Stream { .. }
            | Record::Event { .. }
            | Record::Kernel { .. }
            | Record::Function { .. }
            | Record::EventRecord { .. }
            | Record::Wait { .. }
            | Record::Alloc { .. }
            | Record::Graph { .. }
            | Record::GpuTime { .. }
            | Record::CaptureStats { .. }
            | Record::OpBegin
            | Record::Module { .. }
            | Record::Callsite { .. }
            | Record::FrameLine { .. }
            | Record::HostRelease { .. }
            | Record::HostFunc { .. }
            | Record::HostWatch { .. }
            | Record::RangeBegin { .. }
            | Record::RangeEnd { .. } => false,
            // A framework record's text decides (`framework_record_teaches`).
            Record::Raw { .. } => false,
        }
    }
}

/// Whether a framework record (one JSON object, `Batch::push_raw`) tells its thread something: of what the
/// PyTorch observers write, only the host thread's own loads and stores of pinned memory (`host_access`) are
/// in the host clock. Any text that names the kind counts.
pub fn framework_record_teaches(text: &str) -> bool {
    text.contains(RecordKind::HostAccess.as_str())
}

/// One record with its call, ready to format.
#[derive(Clone, Debug)]
pub struct Entry {
    pub call: Call,
    pub record: Record,
}

/// Records waiting for the writer, in call order, with the pointer words their kernel launches refer to.
#[derive(Debug, Default)]
pub struct Batch {
    pub entries: Vec<Entry>,
    pub pointers: Vec<PointerArg>,
    /// The byte runs of the launches whose accesses are known ([`KnownAccesses`]).
    pub runs: Vec<ByteRuns>,
    /// The text of the framework hooks' records, one after another: a PyTorch op makes one or more, and an
    /// allocation each would cost the op's thread a malloc and the writer thread a free into its arena.
    framework_text: String,
}

impl Batch {
    pub fn with_capacity(entries: usize) -> Batch {
        Batch {
            entries: Vec::with_capacity(entries),
            pointers: Vec::with_capacity(entries * 2),
            runs: Vec::new(),
            framework_text: String::new(),
        }
    }

    pub fn push(&mut self, call: Call, record: Record) {
        self.entries.push(Entry { call, record });
    }

    /// A framework hook's record: one JSON object (a PyTorch op's `op_end`), written with the calling thread's
    /// id added. None when the batch's text would pass 4 GiB (not believed of 100 ms of records).
    pub fn push_raw(&mut self, call: Call, text: &str) -> Option<()> {
        let start = u32::try_from(self.framework_text.len()).ok()?;
        let len = u32::try_from(text.len()).ok()?;
        start.checked_add(len)?;
        self.framework_text.push_str(text);
        self.push(call, Record::Raw { start, len });
        Some(())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.pointers.clear();
        self.runs.clear();
        self.framework_text.clear();
    }

    /// Appends every record to `out`. `names` holds the kernel names declared so far, with their text escaped
    /// for JSON once (this batch's `Function` records join it): a launch copies its kernel's name, often
    /// hundreds of bytes of template arguments, as it is. `scratch` is room for a framework record's text.
    pub fn write_records(&self, names: &mut Vec<KernelName>, out: &mut TraceWriter, scratch: &mut String) {
        for entry in &self.entries {
            match &entry.record {
                Record::Function { index, name } => {
                    let index = *index as usize;
                    if names.len() <= index {
                        names.resize(index + 1, KernelName::unnamed());
                    }
                    names[index] = KernelName::new(name.clone());
                }
                Record::Raw { start, len } => {
                    // The hook's object with the thread in front.
                    let text = self.framework_text.get(*start as usize..(*start + *len) as usize).unwrap_or("{}");
                    let fields = text.trim_start().strip_prefix('{').unwrap_or(text);
                    scratch.clear();
                    scratch.push_str("{\"thread\":");
                    push_number(scratch, entry.call.tid);
                    scratch.push(',');
                    scratch.push_str(fields);
                    out.json_record(scratch);
                }
                record => {
                    // Every field the capture writes is in its kind's layout (tested): none is refused.
                    out.record(record.kind(), |line| entry.write_fields(line, self, names));
                }
            }
        }
    }
}

/// The fields every recorded call carries: the thread, host time and correlation id, and the API called.
fn common(line: &mut impl FieldSink, call: &Call, api: Option<&str>) {
    line.number(Field::Thread, call.tid).number(Field::Time, call.time_ns).number(Field::Corr, call.correlation);
    if let Some(api) = api {
        line.name(Field::Api, api);
    }
    site(line, call);
}

/// The call's native call site, when one was found.
fn site(line: &mut impl FieldSink, call: &Call) {
    if call.site != 0 {
        line.number(Field::Site, call.site);
    }
}

impl Record {
    /// The kind of record this is written as (a `Function` or `Raw` is not written through this).
    fn kind(&self) -> RecordKind {
        match self {
            Record::Stream { .. } => RecordKind::Stream,
            Record::Event { .. } => RecordKind::Event,
            Record::Kernel { .. } => RecordKind::Kernel,
            Record::Memcpy { .. } | Record::PitchedMemcpy { .. } => RecordKind::Memcpy,
            Record::Memset { .. } => RecordKind::Memset,
            Record::EventRecord { .. } => RecordKind::Record,
            Record::Wait { .. } => RecordKind::Wait,
            Record::Sync { .. } => RecordKind::Sync,
            Record::Query { .. } => RecordKind::Query,
            Record::Alloc { .. } => RecordKind::Alloc,
            Record::Free { .. } => RecordKind::Free,
            Record::Graph { graph, .. } => graph.kind(),
            Record::GpuTime { .. } => RecordKind::GpuTime,
            Record::CaptureStats { .. } => RecordKind::CaptureStats,
            Record::OpBegin | Record::Raw { .. } => RecordKind::OpBegin,
            Record::Module { .. } => RecordKind::Module,
            Record::Callsite { .. } => RecordKind::Callsite,
            Record::FrameLine { .. } => RecordKind::FrameLine,
            Record::HostRelease { .. } => RecordKind::HostRelease,
            Record::HostAcquire { .. } => RecordKind::HostAcquire,
            Record::HostAccess { .. } => RecordKind::HostAccess,
            Record::HostFunc { .. } => RecordKind::HostFunc,
            Record::HostWatch { .. } => RecordKind::HostWatch,
            Record::RangeBegin { .. } => RecordKind::RangeBegin,
            Record::RangeEnd { .. } => RecordKind::RangeEnd,
            Record::Function { .. } => RecordKind::Kernel,
        }
    }
}

impl Entry {
    /// The record's fields; `batch` holds its pointer words and `names` its kernel's name.
    fn write_fields(&self, line: &mut impl FieldSink, batch: &Batch, names: &[KernelName]) {
        let call = &self.call;
        match &self.record {
            Record::Stream { handle, kind, priority, context, device } => {
                line.number(Field::Id, *handle).name(Field::StreamKind, kind.as_str()).number(Field::Context, *context);
                if let Some(p) = priority {
                    line.number(Field::Priority, *p);
                }
                if let Some(d) = device {
                    line.number(Field::Device, *d);
                }
                line.number(Field::Thread, call.tid);
                site(line, call);
            }
            Record::Event { handle } => {
                line.number(Field::Id, *handle).number(Field::Thread, call.tid);
                site(line, call);
            }
            Record::Kernel { stream, function, first_pointer, pointer_count, api, known } => {
                let first = *first_pointer as usize;
                let pointers = batch.pointers.get(first..first + *pointer_count as usize).unwrap_or(&[]);
                let unnamed = KernelName::unnamed();
                let name = names.get(*function as usize).unwrap_or(&unnamed);
                line.number(Field::Stream, *stream).escaped(Field::Name, &name.name, &name.escaped);
                // An exact launch's pointer words count only where its coverage says the ranges are not all.
                if !matches!(known, Some(KnownAccesses { seen: Some(Seen { coverage: Coverage::Exact, .. }), .. })) {
                    line.pointers(
                        Field::Pointers,
                        pointers
                            .iter()
                            .map(|p| (p.address, if p.writes { AccessFlag::Write } else { AccessFlag::Read })),
                    );
                }
                if let Some(e) = known {
                    let start = e.first_run as usize;
                    let (reads, writes) = (e.reads as usize, e.writes as usize);
                    let runs = batch.runs.get(start..start + reads + writes).unwrap_or(&[]);
                    line.runs(Field::Reads, runs.iter().take(reads).copied())
                        .runs(Field::Writes, runs.iter().skip(reads).copied());
                    if let Some(seen) = e.seen {
                        line.name(Field::Coverage, seen.coverage.as_str());
                        if let Some(unseen) = seen.unseen {
                            line.name(Field::Unseen, unseen.as_str());
                        }
                    }
                }
                common(line, call, Some(api));
            }
            Record::Memcpy { stream, copy, src, dst, bytes, synchronous, memory: (from, to), api } => {
                line.number(Field::Stream, *stream)
                    .name(Field::Copy, copy.as_str())
                    .range(Field::From, *src, *bytes)
                    .range(Field::To, *dst, *bytes)
                    .name(Field::FromMemory, from.as_str())
                    .name(Field::ToMemory, to.as_str())
                    .boolean(Field::Sync, *synchronous);
                common(line, call, Some(api));
            }
            Record::PitchedMemcpy { stream, copy, from, to, synchronous, memory: (from_memory, to_memory), api } => {
                line.number(Field::Stream, *stream).name(Field::Copy, copy.as_str());
                if let Some((address, extent)) = from {
                    line.range(Field::From, *address, *extent);
                }
                if let Some((address, extent)) = to {
                    line.range(Field::To, *address, *extent);
                }
                line.name(Field::FromMemory, from_memory.as_str())
                    .name(Field::ToMemory, to_memory.as_str())
                    .boolean(Field::Sync, *synchronous);
                common(line, call, Some(api));
            }
            Record::Memset { stream, dst, bytes, synchronous, memory, api } => {
                line.number(Field::Stream, *stream)
                    .range(Field::To, *dst, *bytes)
                    .name(Field::ToMemory, memory.as_str())
                    .boolean(Field::Sync, *synchronous);
                common(line, call, Some(api));
            }
            Record::EventRecord { event, stream, api } => {
                line.number(Field::Event, *event).number(Field::Stream, *stream);
                common(line, call, Some(api));
            }
            Record::Wait { stream, event, api } => {
                line.number(Field::Stream, *stream).number(Field::Event, *event);
                common(line, call, Some(api));
            }
            Record::Sync { target, api } | Record::Query { target, api, .. } => {
                match target {
                    SyncTarget::Stream(s) => line.number(Field::Stream, *s),
                    SyncTarget::Event(e) => line.number(Field::Event, *e),
                    SyncTarget::Context(c) => line.number(Field::Context, *c),
                };
                if let Record::Query { ready, .. } = &self.record {
                    line.boolean(Field::Ready, *ready);
                }
                common(line, call, Some(api));
            }
            Record::Alloc { id, address, bytes, kind, stream, label, api } => {
                line.number(Field::Id, *id)
                    .address(Field::Addr, *address)
                    .number(Field::Size, *bytes)
                    .name(Field::AllocKind, kind.as_str());
                if let Some(s) = stream {
                    line.number(Field::Stream, *s);
                }
                if let Some(label) = label {
                    line.string(Field::Label, label);
                }
                common(line, call, Some(api));
            }
            Record::Free { id, kind, stream, api } => {
                line.number(Field::Id, *id).name(Field::FreeKind, kind.as_str());
                if let Some(s) = stream {
                    line.number(Field::Stream, *s);
                }
                common(line, call, Some(api));
            }
            Record::Graph { graph, api } => {
                graph.write_fields(line, &batch.pointers, names);
                common(line, call, Some(api));
            }
            Record::OpBegin => {
                line.number(Field::Thread, call.tid);
            }
            Record::CaptureStats { calls, callback_ns, setup_ns } => {
                line.number(Field::Calls, *calls)
                    .number(Field::CallbackNs, *callback_ns)
                    .number(Field::SetupNs, *setup_ns);
            }
            Record::Module { path, bias, start, size, build_id } => {
                line.string(Field::Path, path)
                    .address(Field::Base, *bias)
                    .address(Field::Addr, *start)
                    .number(Field::Size, *size);
                if let Some(id) = build_id {
                    line.string(Field::BuildId, id);
                }
            }
            Record::Callsite { id, frames, python_line } => {
                line.number(Field::Id, *id).addresses(Field::Frames, frames.iter().copied());
                if let Some(python_line) = python_line {
                    line.string(Field::Src, python_line);
                }
            }
            Record::FrameLine { path, address, depth, function, source, offset } => {
                line.string(Field::Path, path).address(Field::Addr, *address).number(Field::Depth, *depth);
                if let Some(function) = function {
                    line.string(Field::Name, function);
                }
                if let Some(source) = source {
                    line.string(Field::Src, source);
                }
                if let Some(offset) = offset {
                    line.number(Field::Offset, *offset);
                }
            }
            Record::HostRelease { object, api } | Record::HostAcquire { object, api } => {
                line.number(Field::Object, *object)
                    .number(Field::Thread, call.tid)
                    .number(Field::Time, call.time_ns)
                    .name(Field::Api, api);
            }
            Record::HostAccess { address, bytes, write, fault, host_func } => {
                let (name, field) = if *write { ("host write", Field::Writes) } else { ("host read", Field::Reads) };
                line.name(Field::Name, name).ranges(field, [(*address, *bytes)]).name(Field::Fault, fault.as_str());
                if *host_func != 0 {
                    line.number(Field::HostFunc, *host_func);
                }
                common(line, call, None);
            }
            Record::HostFunc { stream, id, name, node, api } => {
                line.number(Field::Stream, *stream).number(Field::Id, *id).string(Field::Name, name);
                if *node != 0 {
                    line.number(Field::Node, *node);
                }
                common(line, call, Some(api));
            }
            Record::HostWatch { guard, managed, windows, faults, dropped, ignored } => {
                line.name(Field::Guard, guard.as_str())
                    .name(Field::Managed, managed.as_str())
                    .number(Field::Windows, *windows)
                    .number(Field::Faults, *faults)
                    .number(Field::Dropped, *dropped)
                    .number(Field::Ignored, *ignored);
            }
            Record::GpuTime { correlation, start, end } => {
                line.number(Field::Corr, *correlation).number(Field::GpuStart, *start).number(Field::GpuEnd, *end);
            }
            Record::RangeBegin { index, name } => {
                line.number(Field::Id, *index);
                if let Some(name) = name {
                    line.string(Field::Name, name);
                }
                common(line, call, None);
            }
            Record::RangeEnd { index } => {
                line.number(Field::Id, *index);
                common(line, call, None);
            }
            // Written by write_records itself.
            Record::Function { .. } | Record::Raw { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Call {
        Call { tid: 7, time_ns: 100, correlation: 3, site: 0 }
    }

    /// The batch as JSON lines.
    fn json_lines(batch: &Batch) -> String {
        let mut out = TraceWriter::new(streamtrace_format::TraceEncoding::Json);
        batch.write_records(&mut Vec::new(), &mut out, &mut String::new());
        String::from_utf8(out.bytes().to_vec()).expect("text")
    }

    #[test]
    fn a_conditional_node_names_its_bodies_in_json_and_binary() {
        use crate::graph_record::{GraphRecord, NodeBody};
        let mut batch = Batch::default();
        let body = NodeBody::Conditional { bodies: Box::new([0x70, 0x71]) };
        let node = GraphRecord::Node { graph: 0x60, node: 0x61, deps: Box::new([]), body };
        batch.push(call(), Record::Graph { graph: node, api: "cuGraphAddNode" });
        let line: serde_json::Value = serde_json::from_str(json_lines(&batch).trim()).expect("JSON");
        assert_eq!(
            (line["node_kind"].as_str(), &line["bodies"]),
            (Some("conditional"), &serde_json::json!([112, 113]))
        );
        let mut binary = TraceWriter::new(streamtrace_format::TraceEncoding::Binary);
        batch.write_records(&mut Vec::new(), &mut binary, &mut String::new());
        let bytes = binary.bytes();
        assert!(!bytes.is_empty());
        // In graph_node's layout, not embedded as a JSON frame (which a field outside the layout would need).
        assert!(!bytes.windows(8).any(|w| w == b"\"bodies\""), "no JSON frame");
    }

    /// A block mapped from another process (cuIpcOpenMemHandle) carries the name findings give it, in both
    /// encodings; a block of the process's own carries none.
    #[test]
    fn an_imported_block_is_labelled_and_an_own_block_is_not() {
        let mut batch = Batch::default();
        let alloc = |id, label| Record::Alloc {
            id,
            address: 0x7000_0000 * id,
            bytes: 4096,
            kind: AllocKind::Device,
            stream: None,
            label,
            api: "cuIpcOpenMemHandle",
        };
        batch.push(call(), alloc(1, Some("imported from another process")));
        batch.push(call(), alloc(2, None));
        let text = json_lines(&batch);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
        assert_eq!(lines[0]["label"], "imported from another process");
        assert!(lines[1].get("label").is_none(), "{}", lines[1]);
        let mut binary = TraceWriter::new(streamtrace_format::TraceEncoding::Binary);
        batch.write_records(&mut Vec::new(), &mut binary, &mut String::new());
        let bytes = binary.bytes();
        assert!(bytes.windows(29).any(|w| w == b"imported from another process"), "the label's string");
        assert!(!bytes.windows(8).any(|w| w == b"\"label\""), "in the alloc layout, not a JSON frame");
    }

    #[test]
    fn kernel_line_is_valid_json_with_escaped_name() {
        let mut batch = Batch::default();
        batch.push(call(), Record::Function { index: 0, name: Arc::from("k<\"x\\y\">(float const*)") });
        batch
            .pointers
            .extend([PointerArg { address: 0x9999, writes: true }, PointerArg { address: 0x1000, writes: false }]);
        batch.push(
            call(),
            Record::Kernel {
                stream: 5,
                function: 0,
                first_pointer: 1,
                pointer_count: 1,
                api: "cuLaunchKernel",
                known: None,
            },
        );
        let line = json_lines(&batch);
        assert_eq!(line.lines().count(), 1, "a function declaration writes no line");
        let value: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(value["name"], "k<\"x\\y\">(float const*)");
        assert_eq!(value["pointers"][0][0], "0x1000");
        assert_eq!(value["pointers"][0][1], "r");
        assert_eq!(value["pointers"].as_array().map(Vec::len), Some(1));
        assert_eq!(value["thread"], 7);
    }

    #[test]
    fn an_exact_launch_writes_its_runs_and_its_arguments_only_where_the_runs_are_not_all() {
        let mut batch = Batch::default();
        batch.push(call(), Record::Function { index: 0, name: Arc::from("scale") });
        batch.pointers.push(PointerArg { address: 0x7000_0000, writes: true });
        batch.runs.extend([
            ByteRuns { first: 0x7000_0000, len: 4096, step: 0, count: 1 },
            ByteRuns { first: 0x7000_2000, len: 32, step: 64, count: 3 },
        ]);
        let launch = |coverage, unseen| Record::Kernel {
            stream: 5,
            function: 0,
            first_pointer: 0,
            pointer_count: 1,
            api: "cuLaunchKernel",
            known: Some(KnownAccesses { first_run: 0, reads: 1, writes: 1, seen: Some(Seen { coverage, unseen }) }),
        };
        batch.push(call(), launch(Coverage::Exact, None));
        batch.push(call(), launch(Coverage::ExactAndArguments, Some(Unseen::AsyncCopies)));
        // Ranges a library's API gives (NCCL's buffers): written beside the pointer words, with no coverage.
        batch.push(
            call(),
            Record::Kernel {
                stream: 5,
                function: 0,
                first_pointer: 0,
                pointer_count: 1,
                api: "cuLaunchKernelEx",
                known: Some(KnownAccesses { first_run: 0, reads: 1, writes: 1, seen: None }),
            },
        );
        let text = json_lines(&batch);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines[0]["coverage"], "exact");
        assert_eq!(lines[0]["reads"], serde_json::json!([["0x70000000", 4096]]));
        assert_eq!(lines[0]["writes"], serde_json::json!([["0x70002000", 160, 32, [[3, 2], [1, 1]]]]));
        assert!(lines[0].get("pointers").is_none(), "exact ranges are all it touched");
        assert_eq!(lines[1]["coverage"], "exact_and_arguments");
        assert_eq!(lines[1]["unseen"], "async_copies");
        assert_eq!(lines[1]["pointers"][0][0], "0x70000000");
        assert_eq!(lines[2]["reads"], serde_json::json!([["0x70000000", 4096]]));
        assert!(lines[2].get("coverage").is_none() && lines[2].get("unseen").is_none());
        assert_eq!(lines[2]["pointers"][0][0], "0x70000000");
    }

    #[test]
    fn query_and_sync_lines() {
        let mut batch = Batch::default();
        batch.push(call(), Record::Query { target: SyncTarget::Event(9), ready: true, api: "cuEventQuery" });
        batch.push(call(), Record::Sync { target: SyncTarget::Context(1), api: "cuCtxSynchronize" });
        let line = json_lines(&batch);
        let lines: Vec<serde_json::Value> = line.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines[0]["type"], "query");
        assert_eq!(lines[0]["ready"], true);
        assert_eq!(lines[1]["context"], 1);
    }

    #[test]
    fn call_sites_and_their_modules() {
        let mut batch = Batch::default();
        let path: Arc<str> = Arc::from("/opt/app \"x\"/run");
        batch.push(
            call(),
            Record::Module { path, bias: 0x5000, start: 0x5000, size: 0x2000, build_id: Some("ab12".into()) },
        );
        batch.push(call(), Record::Callsite { id: 1, frames: Arc::from(&[0x5123u64, 0x5456][..]), python_line: None });
        batch.push(Call { site: 1, ..call() }, Record::Wait { stream: 5, event: 9, api: "cuStreamWaitEvent" });
        batch.push(Call { site: 1, ..call() }, Record::Event { handle: 9 });
        let text = json_lines(&batch);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines[0]["type"], "module");
        assert_eq!(lines[0]["path"], "/opt/app \"x\"/run");
        assert_eq!(
            (lines[0]["base"].as_str(), lines[0]["addr"].as_str(), lines[0]["size"].as_u64()),
            (Some("0x5000"), Some("0x5000"), Some(0x2000))
        );
        assert_eq!(lines[0]["build_id"], "ab12");
        assert_eq!(lines[1]["frames"], serde_json::json!(["0x5123", "0x5456"]));
        assert_eq!(lines[2]["site"], 1);
        assert_eq!(lines[3]["site"], 1);
        assert!(text.lines().take(2).all(|l| !l.contains("\"site\"")));
    }

    #[test]
    fn host_watch_lines() {
        let mut batch = Batch::default();
        let access =
            Record::HostAccess { address: 0x7000, bytes: 1, write: true, fault: FaultKind::Guard, host_func: 4 };
        batch.push(Call { site: 2, ..call() }, access);
        batch.push(
            call(),
            Record::HostFunc { stream: 5, id: 4, name: Arc::from("consume(void*)"), node: 0, api: "cuLaunchHostFunc" },
        );
        let watch = Record::HostWatch {
            guard: WatchState::On,
            managed: WatchState::Unsupported,
            windows: 9,
            faults: 1,
            dropped: 0,
            ignored: 2,
        };
        batch.push(call(), watch);
        let text = json_lines(&batch);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines[0]["type"], "host_access");
        assert_eq!(lines[0]["writes"], serde_json::json!([["0x7000", 1]]));
        assert_eq!((lines[0]["fault"].as_str(), lines[0]["host_func"].as_u64()), (Some("guard"), Some(4)));
        assert_eq!((lines[0]["site"].as_u64(), lines[0]["thread"].as_u64()), (Some(2), Some(7)));
        assert_eq!((lines[1]["type"].as_str(), lines[1]["id"].as_u64()), (Some("host_func"), Some(4)));
        assert_eq!(lines[1]["name"], "consume(void*)");
        assert_eq!((lines[2]["guard"].as_str(), lines[2]["managed"].as_str()), (Some("on"), Some("unsupported")));
    }

    #[test]
    fn framework_records_take_the_calling_thread() {
        let mut batch = Batch::default();
        batch.push(call(), Record::OpBegin);
        batch.push_raw(call(), "{\"type\":\"op_end\",\"name\":\"a\nb\"}").unwrap();
        batch.push_raw(call(), "{\"type\":\"free\",\"id\":3}").unwrap();
        let text = json_lines(&batch);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!((lines[0]["type"].as_str(), lines[0]["thread"].as_u64()), (Some("op_begin"), Some(7)));
        assert_eq!((lines[1]["type"].as_str(), lines[1]["thread"].as_u64()), (Some("op_end"), Some(7)));
        assert_eq!((lines[2]["type"].as_str(), lines[2]["id"].as_u64()), (Some("free"), Some(3)));
    }
}
