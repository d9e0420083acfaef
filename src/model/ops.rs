//! Operations: what the host asked CUDA to do, one per API call, and the memory each one touches.

use std::sync::Arc;

use serde::Serialize;
pub use streamtrace_format::{Coverage, Unseen};

use super::access::{Access, PointerArg};
use super::entities::{AllocKind, FreeKind};
use super::graph::{GraphCall, HostNodeRun, SharedGraph};
use super::ids::{AllocId, ContextId, DeviceId, EventId, ProcessId, StreamId, ThreadId};
use super::range::AccessRange;
use super::source::{NativeSite, SourceLocation};

/// A region name without its per-call counters: `aten::mul, seq = 12, op_id = 7` -> `aten::mul`.
pub fn normalize_region(text: &str) -> &str {
    let mut end = text.len();
    while let Some(comma) = text[..end].rfind(", ") {
        let field = &text[comma + 2..end];
        let is_counter = field.split_once(" = ").is_some_and(|(key, value)| {
            !key.is_empty()
                && key.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !value.is_empty()
                && value.chars().all(|c| c.is_ascii_digit())
        });
        if !is_counter {
            break;
        }
        end = comma;
    }
    &text[..end]
}

/// Whether a kernel is NCCL's (a collective's or point-to-point transfer's): NCCL names all its kernels so
/// (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`, `ncclKernel_...`).
pub fn is_nccl_kernel(name: &str) -> bool {
    name.starts_with("nccl")
}

/// The kind of memory a copy or set touches: whether a non-Async call makes the host wait depends on it
/// (DESIGN.md, blocking APIs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    Device,
    /// Ordinary host memory: a copy from it is staged by the driver.
    Pageable,
    /// Page-locked host memory.
    Pinned,
    Managed,
    /// The trace does not say (an nsys export that did not record it, a `cudaMemcpyDefault` copy).
    Unknown,
}

impl MemoryKind {
    /// Host memory, as the blocking rules see it.
    pub fn is_host(self) -> bool {
        matches!(self, MemoryKind::Pageable | MemoryKind::Pinned)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Device => "device",
            MemoryKind::Pageable => "pageable",
            MemoryKind::Pinned => "pinned",
            MemoryKind::Managed => "managed",
            MemoryKind::Unknown => "unknown",
        }
    }
}

/// The direction of a copy, as CUDA names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CopyKind {
    HtoD,
    DtoH,
    DtoD,
    HtoH,
    PtoP,
    Default,
}

impl CopyKind {
    /// The memory a copy of this direction reads and writes, when the trace does not say: host memory taken
    /// as pageable (plain `malloc`), and unknown for `cudaMemcpyDefault`, whose direction the pointers decide.
    pub fn default_memory(self) -> (MemoryKind, MemoryKind) {
        use MemoryKind::{Device, Pageable, Unknown};
        match self {
            CopyKind::HtoD => (Pageable, Device),
            CopyKind::DtoH => (Device, Pageable),
            CopyKind::DtoD | CopyKind::PtoP => (Device, Device),
            CopyKind::HtoH => (Pageable, Pageable),
            CopyKind::Default => (Unknown, Unknown),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CopyKind::HtoD => "HtoD",
            CopyKind::DtoH => "DtoH",
            CopyKind::DtoD => "DtoD",
            CopyKind::HtoH => "HtoH",
            CopyKind::PtoP => "PtoP",
            CopyKind::Default => "Default",
        }
    }

    /// How a copy of this direction is named where an operation's name is shown: `memcpy HtoD`.
    pub fn op_name(self) -> &'static str {
        match self {
            CopyKind::HtoD => "memcpy HtoD",
            CopyKind::DtoH => "memcpy DtoH",
            CopyKind::DtoD => "memcpy DtoD",
            CopyKind::HtoH => "memcpy HtoH",
            CopyKind::PtoP => "memcpy PtoP",
            CopyKind::Default => "memcpy Default",
        }
    }
}

/// What a host synchronization waits for (DESIGN.md, host synchronization).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "on", content = "id")]
pub enum HostSync {
    /// `cudaStreamSynchronize`: everything issued on the stream so far.
    Stream(StreamId),
    /// `cudaEventSynchronize`: the event's last recorded snapshot, not the stream's later work.
    Event(EventId),
    /// `cudaDeviceSynchronize`: every stream of the device in the calling process.
    Device(DeviceId),
    /// `cuCtxSynchronize`: every stream of the context.
    Context(ContextId),
}

/// What a `cudaStreamQuery` / `cudaEventQuery` asked about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "on", content = "id")]
pub enum QueryTarget {
    Stream(StreamId),
    Event(EventId),
}

/// How much of a launch the exact-access capture (tier T3) saw: with `Exact` its `accesses` are all it touched;
/// with `ExactAndArguments` its pointer arguments' blocks stand for what it may have touched unseen; with
/// `Arguments` only those (`unseen` says why).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExactCoverage {
    #[serde(serialize_with = "as_name")]
    pub coverage: Coverage,
    #[serde(serialize_with = "as_optional_name")]
    pub unseen: Option<Unseen>,
}

impl ExactCoverage {
    /// Whether the launch's recorded ranges are bytes it touched (rather than none at all).
    pub fn saw_accesses(&self) -> bool {
        self.coverage != Coverage::Arguments
    }
}

fn as_name<S: serde::Serializer>(coverage: &Coverage, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(coverage.as_str())
}

fn as_optional_name<S: serde::Serializer>(unseen: &Option<Unseen>, s: S) -> Result<S::Ok, S::Error> {
    match unseen {
        Some(unseen) => s.serialize_str(unseen.as_str()),
        None => s.serialize_none(),
    }
}

/// What one API call did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum OpKind {
    Kernel {
        stream: StreamId,
        name: Arc<str>,
        /// Byte ranges known exactly (tier T2, hand-written traces).
        accesses: Vec<Access>,
        /// Pointer-valued arguments (tier T1): each one that falls in a live allocation accesses that whole block.
        pointers: Vec<PointerArg>,
        /// What the exact-access capture saw of the launch (tier T3); None for every other trace.
        exact: Option<ExactCoverage>,
    },
    Memcpy {
        stream: StreamId,
        copy: CopyKind,
        bytes: u64,
        src: Option<AccessRange>,
        dst: Option<AccessRange>,
        /// The non-Async form (`cudaMemcpy`): whether the host waits for it depends on the memory on both sides
        /// (DESIGN.md, blocking APIs).
        synchronous: bool,
        src_memory: MemoryKind,
        dst_memory: MemoryKind,
    },
    Memset {
        stream: StreamId,
        bytes: u64,
        dst: Option<AccessRange>,
        synchronous: bool,
        dst_memory: MemoryKind,
    },
    EventRecord {
        event: EventId,
        stream: StreamId,
    },
    StreamWait {
        stream: StreamId,
        event: EventId,
    },
    /// A stream wait whose event record the trace does not hold (an nsys export without event records): it
    /// orders nothing here, and the report says so rather than guessing the recording stream.
    StreamWaitUnknownRecord {
        stream: StreamId,
        event: u64,
    },
    HostSync(HostSync),
    /// A stream or event query; only a successful one (`ready`) orders anything.
    Query {
        target: QueryTarget,
        ready: bool,
    },
    Alloc {
        alloc: AllocId,
        /// The id the trace gave the block.
        handle: u64,
        range: AccessRange,
        alloc_kind: AllocKind,
        /// The stream of a stream-ordered allocation, or the one a pool block was handed out on.
        stream: Option<StreamId>,
        label: Option<String>,
    },
    Free {
        alloc: AllocId,
        free_kind: FreeKind,
        /// The stream of a stream-ordered free.
        stream: Option<StreamId>,
    },
    /// A graph launch: every node of `graph` runs, as one step of `stream`.
    GraphLaunch {
        stream: StreamId,
        graph: SharedGraph,
        /// What its host nodes touched in this launch (empty but for a capture that saw their faults).
        host_runs: Box<[HostNodeRun]>,
    },
    /// A call that builds graphs (stream capture, the explicit graph API): what it means is worked out by the
    /// reader, which turns launches into `GraphLaunch`; it is no operation that runs.
    /// Boxed: rare, and larger than any other kind, which every operation would otherwise be sized for.
    #[serde(skip)]
    GraphCall(Box<GraphCall>),
    /// The host thread itself reads or writes memory the GPU also touches (pinned host memory): a framework op
    /// on a CPU tensor, `.numpy()`, `.item()`. `lane` is the thread's host-access lane (a stream of kind
    /// `HostThread`), which holds its place among the streams' accesses.
    HostAccess {
        lane: StreamId,
        name: Arc<str>,
        accesses: Vec<Access>,
    },
    /// The thread releases what it knows into a host synchronization object (DESIGN.md, host threads: an unlock, a
    /// post, a thread's creation or end, as the capture's interposers saw it); `object` is the trace's id.
    HostRelease {
        object: u64,
    },
    /// The thread acquires what was released into the object (a lock, a wait, a join).
    HostAcquire {
        object: u64,
    },
    /// A host function enqueued on `stream` (`cudaLaunchHostFunc`, `cudaStreamAddCallback`): a driver thread
    /// runs it once the stream's earlier work is done, and the stream's later work waits for it; `accesses`
    /// are the loads and stores it makes there (DESIGN.md, host functions).
    HostFunc {
        stream: StreamId,
        name: Arc<str>,
        accesses: Vec<Access>,
        /// The trace's id for it, which the thread that runs it acquires as `host_func_object(id)`.
        id: Option<u64>,
        /// A graph host node's run in the graph launch that follows on `stream`: the node's handle. Its
        /// accesses go with that launch (the graphs stage moves them there), at the node's place in the graph.
        graph_node: Option<u64>,
    },
    /// More of what the host function just before it on `stream` touched, learned from a fault inside it
    /// (`host_access` with `host_func`): part of that function's place in the stream. Enqueued by nobody: the
    /// thread that recorded it is the driver's.
    HostFuncAccess {
        stream: StreamId,
        name: Arc<str>,
        accesses: Vec<Access>,
        /// As its host function's.
        graph_node: Option<u64>,
    },
}

impl OpKind {
    /// The stream this operation is enqueued on, for operations that run on a stream.
    pub fn stream(&self) -> Option<StreamId> {
        match self {
            OpKind::Kernel { stream, .. }
            | OpKind::Memcpy { stream, .. }
            | OpKind::Memset { stream, .. }
            | OpKind::EventRecord { stream, .. }
            | OpKind::StreamWait { stream, .. }
            | OpKind::StreamWaitUnknownRecord { stream, .. }
            | OpKind::GraphLaunch { stream, .. } => Some(*stream),
            OpKind::HostAccess { lane, .. } => Some(*lane),
            OpKind::HostFunc { stream, .. } | OpKind::HostFuncAccess { stream, .. } => Some(*stream),
            // A pool block is handed out by the host-side allocator, not enqueued on its stream.
            OpKind::Alloc { alloc_kind: AllocKind::PoolBlock, .. } => None,
            OpKind::Alloc { stream, .. } | OpKind::Free { stream, .. } => *stream,
            OpKind::HostSync(_)
            | OpKind::Query { .. }
            | OpKind::GraphCall(_)
            | OpKind::HostRelease { .. }
            | OpKind::HostAcquire { .. } => None,
        }
    }

    /// A short class name for reports and grouping ("kernel", "memcpy", ...).
    pub fn class(&self) -> &'static str {
        match self {
            OpKind::Kernel { .. } => "kernel",
            OpKind::Memcpy { .. } => "memcpy",
            OpKind::Memset { .. } => "memset",
            OpKind::EventRecord { .. } => "event record",
            OpKind::StreamWait { .. } | OpKind::StreamWaitUnknownRecord { .. } => "stream wait",
            OpKind::HostSync(_) => "host sync",
            OpKind::Query { .. } => "query",
            OpKind::Alloc { .. } => "alloc",
            OpKind::Free { .. } => "free",
            OpKind::GraphLaunch { .. } => "graph launch",
            OpKind::GraphCall(_) => "graph call",
            OpKind::HostAccess { .. } => "host access",
            OpKind::HostRelease { .. } => "host release",
            OpKind::HostAcquire { .. } => "host acquire",
            OpKind::HostFunc { .. } => "host function",
            OpKind::HostFuncAccess { .. } => "host function access",
        }
    }

    /// Whether the host thread that issued it enqueued it on its stream: everything on a stream but a host
    /// function's own access, which the driver's thread made inside the function's step.
    pub fn enqueued(&self) -> bool {
        self.stream().is_some() && !matches!(self, OpKind::HostFuncAccess { .. })
    }
}

/// One API call as the host issued it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// Position in host issue order, counted from 0 over all operations of the trace.
    pub seq: u64,
    pub process: ProcessId,
    pub thread: ThreadId,
    /// Host time of the call in nanoseconds, when known.
    pub host_time_ns: Option<u64>,
    pub gpu_start_ns: Option<u64>,
    pub gpu_end_ns: Option<u64>,
    pub correlation_id: Option<u64>,
    /// Host time the call returned, when known (how long a synchronization blocked the host).
    pub host_end_ns: Option<u64>,
    /// The API function, when the trace names it (`cudaStreamSynchronize`, `cuLaunchKernel`, ...).
    pub api: Option<Arc<str>>,
    /// The innermost annotated region (an NVTX range) open on the calling thread, with per-call counters such
    /// as `op_id = 7` removed so that every iteration of a loop names the same region.
    pub region: Option<Arc<str>>,
    pub source: Option<SourceLocation>,
    /// The native call site it was issued from, when the capture recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeSite>,
    /// Where in the input this operation came from (a line, a row id), for messages.
    pub origin: u64,
    pub kind: OpKind,
    /// The reader's name for the operation's site, where one was given (`hb::site_hints`): not part of what the
    /// operation is, only a shortcut to its site.
    #[serde(skip)]
    pub site_hint: SiteHint,
}

/// A number the reader's thread gives the site of an operation of a hot loop (a kernel launch, a copy, a set),
/// the same for operations whose sites are the same, so that the engine finds the site by it instead of hashing
/// and comparing the site's parts (`hb::site_hints` gives and reads them). [`SiteHint::NONE`]: none given.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SiteHint(pub u32);

impl SiteHint {
    pub const NONE: SiteHint = SiteHint(0);
    /// Bits of the number; the round the numbering is in takes the bits above.
    const NUMBER_BITS: u32 = 24;
    /// The largest number a hint holds.
    pub const MAX_NUMBER: u32 = (1 << SiteHint::NUMBER_BITS) - 1;

    /// The hint numbered `number` (1 to [`SiteHint::MAX_NUMBER`]) in round `round` (kept modulo 256: a reader
    /// hands over every round, in order).
    pub fn new(round: u32, number: u32) -> SiteHint {
        SiteHint(
            (round % (1 << (32 - SiteHint::NUMBER_BITS))) << SiteHint::NUMBER_BITS | (number & SiteHint::MAX_NUMBER),
        )
    }

    pub fn round(self) -> u32 {
        self.0 >> SiteHint::NUMBER_BITS
    }

    pub fn number(self) -> u32 {
        self.0 & SiteHint::MAX_NUMBER
    }
}

#[cfg(test)]
impl Operation {
    /// An operation of `kind` with nothing else known (process 0, thread 0, first in issue order): what unit
    /// tests start from, setting the fields they care about with struct update syntax.
    pub(crate) fn plain(kind: OpKind) -> Operation {
        Operation {
            seq: 0,
            process: ProcessId(0),
            thread: ThreadId(0),
            host_time_ns: None,
            gpu_start_ns: None,
            gpu_end_ns: None,
            correlation_id: None,
            host_end_ns: None,
            api: None,
            region: None,
            source: None,
            native: None,
            origin: 0,
            kind,
            site_hint: SiteHint::NONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_counters_are_dropped() {
        assert_eq!(normalize_region("aten::mul, seq = 12, op_id = 7"), "aten::mul");
        assert_eq!(normalize_region("forward, layer 3"), "forward, layer 3");
        assert_eq!(normalize_region("plain"), "plain");
    }

    /// Every operation is moved from the reader into its batch and sized for its largest kind: a rare kind
    /// grown big (a graph call's node, 152 bytes unboxed) would make every kernel's move that much longer. (The
    /// site hint took 8 of these bytes; it took a twelfth off the 10 M-operation benchmark's time.)
    #[test]
    fn operations_stay_small() {
        assert!(std::mem::size_of::<OpKind>() <= 80, "{}", std::mem::size_of::<OpKind>());
        assert!(std::mem::size_of::<Operation>() <= 280, "{}", std::mem::size_of::<Operation>());
    }

    #[test]
    fn a_copys_name_is_memcpy_and_its_direction() {
        use CopyKind::*;
        for copy in [HtoD, DtoH, DtoD, HtoH, PtoP, Default] {
            assert_eq!(copy.op_name(), format!("memcpy {}", copy.as_str()));
        }
    }
}
