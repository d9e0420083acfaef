//! Every name a trace may contain: record kinds, the fields each kind may carry, and the values of the
//! enumerated fields. A name is spelled here once; writers take it from here and the reader parses through here.

use std::fmt;

/// A name the trace gave that this vocabulary does not have, with what it could have been.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownName {
    /// What was being named (`stream_kind`, `record type`).
    pub what: &'static str,
    pub found: String,
    pub expected: &'static [&'static str],
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} `{}` (expected ", self.what, self.found)?;
        for (i, name) in self.expected.iter().enumerate() {
            let separator = match i {
                0 => "",
                i if i + 1 == self.expected.len() => " or ",
                _ => ", ",
            };
            write!(f, "{separator}{name}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownName {}

/// Declares a set of names: an enum whose variants are spelled `$text` in the trace, with `as_str`, `parse` and
/// the list of all of them.
macro_rules! names {
    ($(#[$doc:meta])* $name:ident, $what:literal {
        $($(#[$variant_doc:meta])* $variant:ident = $text:literal),+ $(,)?
    }) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_doc])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Every spelling, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];
            /// Every spelling as a JSON object key that follows an earlier one (`,"name":`), in declaration
            /// order: writers append these without building them per record.
            pub const KEYS: &'static [&'static str] = &[$(concat!(",\"", $text, "\":")),+];

            /// How the trace spells it.
            #[inline]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value the trace spelled `text`.
            pub fn parse(text: &str) -> Result<$name, UnknownName> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownName { what: $what, found: text.to_string(), expected: $name::NAMES }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names!(
    /// The `type` of a record.
    RecordKind, "record type" {
        /// The first record of every trace: `{"type": "streamtrace", "version": 1}`.
        Header = "streamtrace",
        Stream = "stream",
        Event = "event",
        /// Names a host thread.
        Thread = "thread",
        /// Names a process (informative only).
        Process = "process",
        Kernel = "kernel",
        Memcpy = "memcpy",
        Memset = "memset",
        /// `cudaEventRecord`.
        Record = "record",
        /// `cudaStreamWaitEvent`.
        Wait = "wait",
        Sync = "sync",
        Query = "query",
        Alloc = "alloc",
        Free = "free",
        /// A graph launch with its nodes inline (hand-written traces): one step of its stream.
        Graph = "graph",
        /// A stream starts capturing work into a graph (`cudaStreamBeginCapture`, `torch.cuda.graph`): what is
        /// issued to it, and to streams that join by waiting on an event recorded in it, becomes nodes.
        CaptureBegin = "capture_begin",
        /// The capture that `stream` began ends; `graph` is the graph it made (absent when it failed).
        CaptureEnd = "capture_end",
        /// `cudaGraphCreate`: an empty graph, for nodes added explicitly.
        GraphCreate = "graph_create",
        /// `cudaGraphAdd*Node`: a node added to `graph`, after the nodes `deps` names.
        GraphNode = "graph_node",
        /// `cudaGraphAddDependencies`: `node` now also depends on `deps`.
        GraphDepAdd = "graph_dep_add",
        /// `cudaGraphRemoveDependencies`: `node` no longer depends on `deps`.
        GraphDepRemove = "graph_dep_remove",
        /// New parameters of a node: of a graph (`cudaGraph*NodeSetParams`, later instantiations see them) or
        /// of an executable graph (`cudaGraphExec*NodeSetParams`, its next launches see them).
        GraphNodeUpdate = "graph_node_update",
        /// `cudaGraphDestroyNode`.
        GraphNodeDestroy = "graph_node_destroy",
        /// `cudaGraphClone`: `graph` is a copy of `original`.
        GraphClone = "graph_clone",
        /// `cudaGraphInstantiate` (every form): `exec` runs `graph` as it is now.
        GraphInstantiate = "graph_instantiate",
        /// `cudaGraphExecUpdate`: `exec` takes the parameters of `graph`'s nodes.
        GraphExecUpdate = "graph_exec_update",
        GraphDestroy = "graph_destroy",
        GraphExecDestroy = "graph_exec_destroy",
        /// `cudaGraphLaunch`: every node of `exec` runs, as one step of `stream`.
        GraphLaunch = "graph_launch",
        /// A GPU start and end delivered after the fact.
        GpuTime = "gpu_time",
        /// What the capture cost, at exit.
        CaptureStats = "capture_stats",
        /// A framework operation (a PyTorch op) starts on a thread (tier T2).
        OpBegin = "op_begin",
        OpEnd = "op_end",
        /// A framework call that orders streams or the host starts (`Event.record`, ...).
        CallBegin = "call_begin",
        CallEnd = "call_end",
        /// The host thread reads or writes host memory the GPU also touches (pinned, registered or managed):
        /// a framework op on a CPU tensor there, `.numpy()`, `.item()` (tier T2).
        HostAccess = "host_access",
        /// A host function enqueued on a stream (`cudaLaunchHostFunc`, `cudaStreamAddCallback`): it runs on a
        /// driver thread once the stream's earlier work is done, and the stream's later work waits for it
        /// (DESIGN.md, host functions in a stream). `id` names it for the `host_access` records of what it touched.
        HostFunc = "host_func",
        /// At exit: what the capture's watch on the host's own accesses saw and could see (pinned buffers
        /// guarded while in flight, CPU page faults on managed memory), for the report to say.
        HostWatch = "host_watch",
        /// Where a framework created the object wrapping a stream or event declared earlier (tier T2: the
        /// Python line of `torch.cuda.Stream()`, and its text as `label`): names it, orders nothing.
        Creation = "creation",
        /// A loaded binary (executable or shared library) that native call sites point into: its path, load
        /// bias, mapped range and build id, written before the first call site that needs it.
        Module = "module",
        /// A native call site: the return addresses of the calling frames, innermost first; records name it
        /// by id in their `site` field.
        Callsite = "callsite",
        /// At exit, where the binaries were: what one return address of a module's call sites is in the
        /// program's source, one record per function the call sits in (inlined ones first, `depth` 0 the
        /// innermost), so that a trace read on another machine names `file:line in function` without the
        /// binary there. Records of one address share `path` and `addr` (the address as the file states it,
        /// the load bias taken off).
        FrameLine = "frame_line",
        /// The thread releases what it knows into the host synchronization object `object` (DESIGN.md rule 10;
        /// ThreadSanitizer's release): the object's clock joins the thread's host clock.
        HostRelease = "host_release",
        /// The thread acquires what was released into `object`: its host clock joins the object's clock.
        HostAcquire = "host_acquire",
        /// A capture range begins (`streamtrace capture --capture-range`, `--delay`): the records up to its
        /// `range_end` are the program's work in it; outside ranges a trace holds only what the analysis of a
        /// range needs (streams, events, allocations, graphs: docs/capture.md).
        RangeBegin = "range_begin",
        /// The capture range `id` ends.
        RangeEnd = "range_end",
        /// `cudaStreamGetCaptureInfo` on a capturing stream: `graph` is the graph being captured (nodes the
        /// program adds to it by hand go into the capture), `deps` the nodes the stream's next captured work
        /// would depend on, by the handles the driver gave them. Either is absent when the program did not ask.
        CaptureInfo = "capture_info",
        /// `cudaStreamUpdateCaptureDependencies` with `cudaStreamSetCaptureDependencies`: the stream's next
        /// captured work depends on the nodes `deps` names, and on nothing else.
        CaptureDepsSet = "capture_deps_set",
        /// The same with `cudaStreamAddCaptureDependencies`: on the nodes `deps` names as well.
        CaptureDepsAdd = "capture_deps_add",
    }
);

names!(
    /// A field of a record.
    Field, "field" {
        Type = "type",
        Version = "version",
        /// Header: who wrote the trace (see [`Producer`]).
        Producer = "producer",
        /// Header: the process's rank in a distributed job (torchrun's `RANK`).
        Rank = "rank",
        /// Header: its rank on its host (`LOCAL_RANK`).
        LocalRank = "local_rank",
        /// Header: the processes of the job (`WORLD_SIZE`).
        WorldSize = "world_size",
        /// Header: `true` when the trace records every host synchronization between the process's threads that
        /// the capture can see (`host_release` / `host_acquire`): their per-thread order is then exact.
        HostSync = "host_sync",
        Comment = "comment",
        Pid = "pid",
        Thread = "thread",
        Time = "time",
        TimeEnd = "time_end",
        GpuStart = "gpu_start",
        GpuEnd = "gpu_end",
        Corr = "corr",
        Api = "api",
        Region = "region",
        Src = "src",
        Id = "id",
        Name = "name",
        StreamKind = "stream_kind",
        Priority = "priority",
        Device = "device",
        Context = "context",
        Stream = "stream",
        Event = "event",
        Reads = "reads",
        Writes = "writes",
        Pointers = "pointers",
        Copy = "copy",
        /// The kind of memory a copy reads (see [`MemoryKind`]).
        FromMemory = "from_memory",
        /// The kind of memory a copy or set writes.
        ToMemory = "to_memory",
        From = "from",
        To = "to",
        Bytes = "bytes",
        Sync = "sync",
        Ready = "ready",
        Addr = "addr",
        Size = "size",
        AllocKind = "alloc_kind",
        FreeKind = "free_kind",
        Label = "label",
        Nodes = "nodes",
        Deps = "deps",
        Calls = "calls",
        CallbackNs = "callback_ns",
        /// A graph's handle.
        Graph = "graph",
        /// An executable (instantiated) graph's handle.
        Exec = "exec",
        /// A graph node's handle.
        Node = "node",
        /// What a graph node does (see [`NodeKind`]).
        NodeKind = "node_kind",
        /// The graph a child-graph node runs.
        Child = "child",
        /// The graph a clone copies.
        Original = "original",
        /// `capture_stats`: the one-time set-up, apart from the calls' cost.
        SetupNs = "setup_ns",
        /// The id of the `callsite` record that says where the call was made from (native frames).
        Site = "site",
        /// A call site's return addresses, innermost first.
        Frames = "frames",
        /// A module's file.
        Path = "path",
        /// A module's load bias: what was added to the addresses its file states (0 for a fixed executable).
        Base = "base",
        /// A module's GNU build id, in hex: symbolizing checks that the file read is the one that was loaded.
        BuildId = "build_id",
        /// `frame_line`: which of the functions an address sits in (0: the innermost, inlined one).
        Depth = "depth",
        /// `frame_line` from a symbol table only: how far past the function's start the address is.
        Offset = "offset",
        /// A kernel launch recorded by the exact-access backend (`--exact`): how much of what it touched its
        /// `reads` and `writes` show (see [`Coverage`]).
        Coverage = "coverage",
        /// Why a kernel of an exact-access capture keeps its pointer arguments (see [`Unseen`]).
        Unseen = "unseen",
        /// `op_end` of a collective or point-to-point op (PyTorch's c10d): the process group as the user knows
        /// it, its description (`default_pg`, `new_group(group_desc=...)`) or else `group` and its name.
        ProcessGroup = "process_group",
        /// `host_release` / `host_acquire`: the host synchronization object (any integer; the capture names
        /// each snapshot of a thread's knowledge it releases with a number of its own).
        Object = "object",
        /// `host_access`: the `id` of the `host_func` whose function made the access, on a driver thread: the
        /// access happens at that function's place in its stream, not at the recording thread's clock.
        HostFunc = "host_func",
        /// `host_access` recorded by the capture from a fault (see [`FaultKind`]) rather than by a framework.
        Fault = "fault",
        /// `host_watch`: whether pinned and registered buffers were guarded while GPU work on them was in
        /// flight (see [`WatchState`]).
        Guard = "guard",
        /// `host_watch`: whether CPU page faults on managed memory were asked of CUPTI (see [`WatchState`]).
        Managed = "managed",
        /// `host_watch`: the in-flight windows in which a buffer was guarded.
        Windows = "windows",
        /// `host_watch`: the faults recorded as host accesses.
        Faults = "faults",
        /// `host_watch`: host accesses seen but not recorded (the fault queue was full, or a host function's
        /// record was written before the function ran).
        Dropped = "dropped",
        /// `host_watch`: faults that were the driver's own (inside a CUDA call, or in the driver's code).
        Ignored = "ignored",
        /// Header: the trace was recorded in capture ranges, started by this trigger (see [`RangeTrigger`]):
        /// only what lies between a `range_begin` and its `range_end` is the program's work.
        Ranges = "ranges",
        /// The body graphs of a conditional node (the driver makes them with the node): one for IF and WHILE,
        /// two for IF with ELSE, one per case for SWITCH.
        Bodies = "bodies",
    }
);

impl Field {
    /// The field as it follows an earlier one in a JSON object: `,"name":`.
    #[inline]
    pub fn key(self) -> &'static str {
        Field::KEYS[self as usize]
    }
}

/// Fields every record but the header may carry: where and when the call was made.
pub const COMMON_FIELDS: &[Field] = &[
    Field::Pid,
    Field::Thread,
    Field::Time,
    Field::TimeEnd,
    Field::GpuStart,
    Field::GpuEnd,
    Field::Corr,
    Field::Api,
    Field::Region,
    Field::Src,
    Field::Site,
    Field::Comment,
];

/// The shapes of one item of a `reads` or `writes` list (kernels, framework ops, host accesses, graph nodes).
///
/// A plain range is `[first byte, length]`. A strided view (tier T2: a tensor that is not contiguous) is
/// `[first byte, length, element size, [[size, stride], ...]]`: `first byte` is the address of element 0 (the
/// storage offset included), `length` the view's extent from its first to one past its last byte (what a reader
/// that ignores the view would take), then the element size in bytes and one `[size, stride]` pair per
/// dimension, outermost first, strides in elements (as `tensor.stride()` gives them). Strides are never negative
/// (a writer falls back to the plain extent); a stride of 0 (an expanded dimension) covers the same bytes again.
pub mod access_range {
    /// Items of a plain range.
    pub const PLAIN_ITEMS: usize = 2;
    /// Items of a strided view.
    pub const VIEW_ITEMS: usize = 4;
    /// The most dimensions a view may list (PyTorch's own limit is lower).
    pub const MAX_VIEW_DIMS: usize = 64;
}

/// Fields of one node of a `graph` record's `nodes` list.
pub const GRAPH_NODE_FIELDS: &[Field] = &[Field::Name, Field::Reads, Field::Writes, Field::Deps, Field::Comment];

/// A set of fields, one bit each: which fields a record carries, or may carry.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet(u128);

impl FieldSet {
    pub const EMPTY: FieldSet = FieldSet(0);

    pub const fn of(fields: &[Field]) -> FieldSet {
        let mut bits = 0u128;
        let mut i = 0;
        while i < fields.len() {
            bits |= 1 << fields[i] as u32;
            i += 1;
        }
        FieldSet(bits)
    }

    pub const fn with(self, field: Field) -> FieldSet {
        FieldSet(self.0 | 1 << field as u32)
    }

    pub const fn union(self, other: FieldSet) -> FieldSet {
        FieldSet(self.0 | other.0)
    }

    pub const fn contains(self, field: Field) -> bool {
        self.0 & (1 << field as u32) != 0
    }

    /// The fields of `self` that `allowed` does not hold.
    pub const fn outside(self, allowed: FieldSet) -> FieldSet {
        FieldSet(self.0 & !allowed.0)
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Field> {
        // The empty set, which a reader asks about for nearly every record, without walking every field.
        let fields = if self.is_empty() { &[][..] } else { Field::ALL };
        fields.iter().copied().filter(move |field| self.contains(*field))
    }
}

// One bit per field.
const _: () = assert!(Field::ALL.len() <= 128);

/// The fields each record kind may carry, `type` and the common fields included, by kind.
static ALLOWED_FIELDS: [FieldSet; RecordKind::ALL.len()] = {
    let mut sets = [FieldSet::EMPTY; RecordKind::ALL.len()];
    let mut i = 0;
    while i < RecordKind::ALL.len() {
        let kind = RecordKind::ALL[i];
        let mut set = FieldSet::of(kind.fields()).with(Field::Type);
        if !matches!(kind, RecordKind::Header) {
            set = set.union(FieldSet::of(COMMON_FIELDS));
        }
        sets[i] = set;
        i += 1;
    }
    sets
};

impl RecordKind {
    /// The fields a record of this kind may carry besides `type` and [`COMMON_FIELDS`].
    pub const fn fields(self) -> &'static [Field] {
        use Field as F;
        match self {
            RecordKind::Header => {
                &[F::Version, F::Producer, F::Rank, F::LocalRank, F::WorldSize, F::HostSync, F::Ranges, F::Comment]
            }
            RecordKind::Stream => &[F::Id, F::StreamKind, F::Priority, F::Device, F::Context],
            RecordKind::Event => &[F::Id],
            RecordKind::Thread | RecordKind::Process => &[F::Name],
            RecordKind::Kernel => &[F::Stream, F::Name, F::Reads, F::Writes, F::Pointers, F::Coverage, F::Unseen],
            RecordKind::Memcpy => &[F::Stream, F::Copy, F::From, F::To, F::FromMemory, F::ToMemory, F::Bytes, F::Sync],
            RecordKind::Memset => &[F::Stream, F::To, F::ToMemory, F::Bytes, F::Sync],
            RecordKind::Record | RecordKind::Wait => &[F::Stream, F::Event],
            RecordKind::Sync => &[F::Stream, F::Event, F::Device, F::Context],
            RecordKind::Query => &[F::Stream, F::Event, F::Ready],
            RecordKind::Alloc => &[F::Id, F::Addr, F::Size, F::AllocKind, F::Stream, F::Label, F::Name],
            RecordKind::Free => &[F::Id, F::FreeKind, F::Stream],
            RecordKind::Graph => &[F::Stream, F::Name, F::Nodes],
            RecordKind::CaptureBegin | RecordKind::CaptureEnd => &[F::Stream, F::Graph],
            RecordKind::GraphCreate | RecordKind::GraphDestroy => &[F::Graph],
            RecordKind::GraphNode => &[
                F::Graph,
                F::Node,
                F::NodeKind,
                F::Deps,
                F::Name,
                F::Reads,
                F::Writes,
                F::Pointers,
                F::Event,
                F::Child,
                F::Bodies,
            ],
            RecordKind::GraphNodeUpdate => &[
                F::Graph,
                F::Exec,
                F::Node,
                F::NodeKind,
                F::Name,
                F::Reads,
                F::Writes,
                F::Pointers,
                F::Event,
                F::Child,
            ],
            RecordKind::GraphDepAdd | RecordKind::GraphDepRemove => &[F::Graph, F::Node, F::Deps],
            RecordKind::GraphNodeDestroy => &[F::Graph, F::Node],
            RecordKind::GraphClone => &[F::Graph, F::Original],
            RecordKind::GraphInstantiate | RecordKind::GraphExecUpdate => &[F::Graph, F::Exec],
            RecordKind::GraphExecDestroy => &[F::Exec],
            RecordKind::GraphLaunch => &[F::Exec, F::Stream, F::Name],
            RecordKind::GpuTime => &[],
            RecordKind::CaptureStats => &[F::Calls, F::CallbackNs, F::SetupNs],
            RecordKind::OpBegin => &[F::Name, F::Reads, F::Writes],
            RecordKind::OpEnd => &[F::Name, F::Reads, F::Writes, F::ProcessGroup],
            RecordKind::CallBegin => &[F::Name],
            RecordKind::CallEnd => &[],
            RecordKind::HostAccess => &[F::Name, F::Reads, F::Writes, F::HostFunc, F::Fault],
            RecordKind::HostFunc => &[F::Stream, F::Id, F::Name, F::Reads, F::Writes, F::Node],
            RecordKind::HostWatch => &[F::Guard, F::Managed, F::Windows, F::Faults, F::Dropped, F::Ignored],
            RecordKind::Creation => &[F::Stream, F::Event, F::Label],
            RecordKind::Module => &[F::Path, F::Base, F::Addr, F::Size, F::BuildId],
            RecordKind::Callsite => &[F::Id, F::Frames],
            RecordKind::FrameLine => &[F::Path, F::Addr, F::Depth, F::Name, F::Offset],
            RecordKind::HostRelease | RecordKind::HostAcquire => &[F::Object],
            RecordKind::RangeBegin => &[F::Id, F::Name],
            RecordKind::RangeEnd => &[F::Id],
            RecordKind::CaptureInfo => &[F::Stream, F::Graph, F::Deps],
            RecordKind::CaptureDepsSet | RecordKind::CaptureDepsAdd => &[F::Stream, F::Deps],
        }
    }

    /// Every field a record of this kind may carry.
    pub fn allowed_fields(self) -> FieldSet {
        ALLOWED_FIELDS[self as usize]
    }

    /// Whether a record of this kind may carry `field`.
    pub fn allows(self, field: Field) -> bool {
        self.allowed_fields().contains(field)
    }
}

names!(
    /// Who wrote a trace, said by the header's `producer`. A trace without one was written by hand or by a
    /// generator.
    Producer, "producer" {
        /// `streamtrace capture`: a recording of a live program, which the reader takes as it is (an
        /// inconsistency inside it is counted and skipped, not fatal).
        Capture = "capture",
    }
);

names!(
    /// What starts and ends the capture ranges of a trace (the header's `ranges`), in Nsight Systems' words.
    RangeTrigger, "range trigger" {
        /// `cudaProfilerStart` / `cudaProfilerStop` (`torch.cuda.profiler.start()` / `stop()`).
        ProfilerApi = "cudaProfilerApi",
        /// An NVTX range of a given name (push/pop or start/end; `torch.cuda.nvtx.range`).
        Nvtx = "nvtx",
        /// Time since the program started (`--delay`, `--duration`).
        Time = "time",
    }
);

names!(
    /// How a stream takes part in the legacy default stream's implicit synchronization.
    StreamKind, "stream_kind" {
        LegacyDefault = "legacy_default",
        PerThreadDefault = "per_thread_default",
        Blocking = "blocking",
        NonBlocking = "non_blocking",
    }
);

// Written out: the names! macro derives one fixed set of traits for every enum.
#[allow(clippy::derivable_impls)]
impl Default for StreamKind {
    fn default() -> Self {
        StreamKind::Blocking
    }
}

names!(
    /// The direction of a copy, as the API call named it.
    CopyKind, "copy kind" {
        HtoD = "HtoD",
        DtoH = "DtoH",
        DtoD = "DtoD",
        HtoH = "HtoH",
        PtoP = "PtoP",
        Default = "Default",
    }
);

names!(
    /// The kind of memory a copy or set touches, which decides whether a non-Async call makes the host wait
    /// (CUDA's "API synchronization behavior"; DESIGN.md, blocking APIs).
    MemoryKind, "memory kind" {
        Device = "device",
        /// Ordinary host memory (`malloc`, the stack): copies from it are staged by the driver.
        Pageable = "pageable",
        /// Page-locked host memory (`cudaHostAlloc`, `cudaMallocHost`, `cudaHostRegister`).
        Pinned = "pinned",
        /// `cudaMallocManaged`.
        Managed = "managed",
    }
);

names!(
    /// How a block of memory came to be.
    AllocKind, "alloc_kind" {
        Device = "device",
        StreamOrdered = "stream_ordered",
        VirtualMap = "virtual_map",
        Host = "host",
        Managed = "managed",
        PoolBlock = "pool_block",
    }
);

// Written out: the names! macro derives one fixed set of traits for every enum.
#[allow(clippy::derivable_impls)]
impl Default for AllocKind {
    fn default() -> Self {
        AllocKind::Device
    }
}

names!(
    /// How a block of memory ends.
    FreeKind, "free_kind" {
        Synchronous = "synchronous",
        StreamOrdered = "stream_ordered",
        VirtualUnmap = "virtual_unmap",
        Host = "host",
        PoolBlock = "pool_block",
    }
);

// Written out: the names! macro derives one fixed set of traits for every enum.
#[allow(clippy::derivable_impls)]
impl Default for FreeKind {
    fn default() -> Self {
        FreeKind::Synchronous
    }
}

names!(
    /// How much of what a kernel touched its record's `reads` and `writes` show. A kernel record without the
    /// field is tier T1 (its pointer arguments stand for their whole blocks) or hand-written.
    Coverage, "coverage" {
        /// Every byte the launch read or wrote, at 32-byte granules (tier T3): the ranges alone are its accesses.
        Exact = "exact",
        /// The bytes the launch was seen to touch, and its pointer arguments' blocks for what it may have touched
        /// unseen (see `unseen`): both are its accesses.
        ExactAndArguments = "exact_and_arguments",
        /// Its pointer arguments' blocks only (tier T1; see `unseen`).
        Arguments = "arguments",
    }
);

names!(
    /// Why the exact-access backend could not see every access of a kernel.
    Unseen, "unseen" {
        /// It used an asynchronous barrier, as tensor-map (TMA) copies do, which no patch sees.
        AsyncCopies = "async_copies",
        /// It touched more memory than its launch's table holds.
        TableFull = "table_full",
        /// Its code was not instrumented (no block of it reported).
        NotInstrumented = "not_instrumented",
        /// `--exact-kernels` did not select it.
        NotSelected = "not_selected",
        /// Its launch was captured into a graph or is a graph's node: graph launches keep tier T1.
        GraphNode = "graph_node",
        /// Its accesses could not be read back (a failed launch, or no memory for its table).
        NotReadBack = "not_read_back",
    }
);

names!(
    /// What a graph node does.
    NodeKind, "node_kind" {
        Kernel = "kernel",
        Memcpy = "memcpy",
        Memset = "memset",
        /// A host function: runs on a CPU thread of the driver when its dependencies are done.
        Host = "host",
        /// Runs the graph `child` (copied into the node when it was added).
        Child = "child",
        /// Records `event` when its dependencies are done.
        EventRecord = "event_record",
        /// Waits for `event`'s last record before its dependents run.
        EventWait = "event_wait",
        /// Allocates `writes`' range for the graph (`cudaGraphAddMemAllocNode`).
        MemAlloc = "mem_alloc",
        /// Frees the range in `writes`.
        MemFree = "mem_free",
        /// Orders only.
        Empty = "empty",
        /// Runs its body graphs (`bodies`) as a condition set on the device says: an IF or SWITCH node one of
        /// them or none, a WHILE node its body as long as the condition holds, each run after the last.
        Conditional = "conditional",
        /// A node kind whose memory streamtrace does not model (external semaphores, batched memory ops).
        Other = "other",
    }
);

names!(
    /// How the capture saw a host access of a native program (`host_access`'s `fault`).
    FaultKind, "fault kind" {
        /// The first load or store of a pinned or registered buffer whose pages the capture protected while a
        /// copy or kernel on it was in flight: exact address, read or write, thread and native call site.
        Guard = "guard",
        /// A CPU page fault on managed memory that CUPTI reported: the page, the time and the faulting
        /// instruction; not the thread (the capture names the one that last issued work) nor read or write
        /// (taken as a read).
        Managed = "managed",
    }
);

names!(
    /// Whether one of the capture's host watches ran (`host_watch`'s `guard` and `managed`).
    WatchState, "watch state" {
        On = "on",
        /// Not asked for: `--no-host-watch`, a Python program (whose observers report host accesses), or
        /// the capture library not preloaded (the signal handlers could not be kept first).
        Off = "off",
        /// Asked for, refused by the system (CUPTI, the driver or the kernel); the capture said why.
        Unsupported = "unsupported",
    }
);

names!(
    /// How a kernel's pointer argument may touch memory: `[address, "r" | "w"]`.
    AccessFlag, "pointer access" {
        Read = "r",
        Write = "w",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back() {
        for kind in RecordKind::ALL {
            assert_eq!(RecordKind::parse(kind.as_str()), Ok(*kind));
        }
        for field in Field::ALL {
            assert_eq!(Field::parse(field.as_str()), Ok(*field));
            assert_eq!(field.key(), format!(",\"{}\":", field.as_str()), "key of {field:?}");
        }
        for kind in StreamKind::ALL {
            assert_eq!(StreamKind::parse(kind.as_str()), Ok(*kind));
        }
    }

    #[test]
    fn unknown_names_say_what_was_expected() {
        let error = StreamKind::parse("green").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown stream_kind `green` (expected legacy_default, per_thread_default, blocking or non_blocking)"
        );
    }

    #[test]
    fn fields_belong_to_their_kinds() {
        assert!(RecordKind::Kernel.allows(Field::Pointers));
        assert!(RecordKind::Kernel.allows(Field::Thread));
        assert!(!RecordKind::Memcpy.allows(Field::Reads), "a copy's ranges are `from` and `to`");
        assert!(!RecordKind::Memset.allows(Field::Writes));
        assert!(!RecordKind::Kernel.allows(Field::From));
        assert!(!RecordKind::Header.allows(Field::Thread));
        assert!(RecordKind::OpEnd.allows(Field::ProcessGroup), "a c10d op says its group when it ends");
        assert!(!RecordKind::OpBegin.allows(Field::ProcessGroup));
        for kind in RecordKind::ALL {
            assert!(kind.allows(Field::Type));
            let mut seen = kind.fields().to_vec();
            seen.sort_by_key(|f| *f as usize);
            seen.dedup();
            assert_eq!(seen.len(), kind.fields().len(), "{kind:?} lists a field twice");
        }
    }
}
