//! The long-lived things a trace talks about: streams, events, host threads and allocations.

use serde::Serialize;

use super::ids::{AllocId, ContextId, DeviceId, EventId, ProcessId, StreamId, ThreadId};
use super::range::AccessRange;
use super::source::{NativeSite, SourceLocation};

/// How a stream takes part in the legacy default stream's implicit synchronization (DESIGN.md, the legacy default
/// stream).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamKind {
    /// Handle 0 without per-thread default streams: a barrier against every blocking stream of its context.
    LegacyDefault,
    /// `cudaStreamPerThread`: behaves as a blocking stream.
    PerThreadDefault,
    /// Created with `cudaStreamDefault`: synchronizes with the legacy default stream.
    Blocking,
    /// Created with `cudaStreamNonBlocking`: takes no part in the legacy default stream's barrier.
    NonBlocking,
    /// Not a CUDA stream: a host thread's own reads and writes of memory the GPU also touches (pinned host
    /// memory), kept as a lane of their own so that they are checked like a stream's accesses.
    HostThread,
}

impl StreamKind {
    /// Whether the legacy default stream of the same context orders this stream.
    pub fn syncs_with_legacy_default(self) -> bool {
        matches!(self, StreamKind::PerThreadDefault | StreamKind::Blocking)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::LegacyDefault => "legacy default",
            StreamKind::PerThreadDefault => "per-thread default",
            StreamKind::Blocking => "blocking",
            StreamKind::NonBlocking => "non-blocking",
            StreamKind::HostThread => "host thread",
        }
    }
}

/// A stream as created by the program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamInfo {
    pub id: StreamId,
    /// The handle or number the trace used for it; shown to the user.
    pub handle: u64,
    pub kind: StreamKind,
    pub priority: Option<i32>,
    pub process: ProcessId,
    pub device: DeviceId,
    /// The device's number as the trace gave it (the CUDA device index), for people; `device` numbers the
    /// devices of the whole trace densely.
    pub gpu: u32,
    pub context: ContextId,
    /// The host thread that created it; `None` for streams that exist from the start (default streams).
    pub created_by: Option<ThreadId>,
    /// Where in the program it was created, when the trace says (the stream record's source: a hand-written
    /// `src`, a native call site, symbolized once the analysis is done). A framework's own line for it arrives
    /// later, as a [`Creation`].
    pub source: Option<SourceLocation>,
    /// The native call site that created it, when the capture recorded one (its declaration's `site`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeSite>,
}

/// Where the traced process stands in a distributed job (the trace header's `rank`, `local_rank` and
/// `world_size`, from torchrun's environment): reports label its findings with it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobPlace {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
}

/// An event as created by the program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventInfo {
    pub id: EventId,
    pub handle: u64,
    pub process: ProcessId,
    /// Where in the program it was created, when the trace says (as for [`StreamInfo::source`]).
    pub source: Option<SourceLocation>,
    /// The native call site that created it, when the capture recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeSite>,
}

/// A stream or an event, by id.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "of", content = "id")]
pub enum Entity {
    Stream(StreamId),
    Event(EventId),
}

/// Where a framework object wrapping a stream or an event was created in the program (tier T2: the Python line
/// of `side = torch.cuda.Stream()`), learned after the CUDA entity was declared: PyTorch creates its pool of
/// streams at the first request and hands one out at each `torch.cuda.Stream()`, and creates an event's CUDA
/// event at its first record. It orders nothing; reports name the entity by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creation {
    pub entity: Entity,
    pub source: SourceLocation,
    /// The text of that source line, as the program spelled it, when the framework gave it.
    pub text: Option<std::sync::Arc<str>>,
}

/// A framework's collective or point-to-point op of a process group (tier T2: a PyTorch c10d op, whose
/// `op_end` names the group) launched NCCL's kernels on a stream: that stream is the group's NCCL stream.
/// It orders nothing; reports name the stream by its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStream {
    pub stream: StreamId,
    /// The group as the program knows it (`default_pg`, or `group 1` for one without a description).
    pub group: std::sync::Arc<str>,
}

/// A host thread, with the id the trace gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadInfo {
    pub id: ThreadId,
    pub process: ProcessId,
    pub tid: u64,
    pub name: Option<String>,
}

/// How a block of memory came to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocKind {
    /// `cudaMalloc` / `cuMemAlloc`: ordered by the host, not by any stream.
    Device,
    /// `cudaMallocAsync` / `cuMemAllocFromPoolAsync`: a write of the whole block on its stream (DESIGN.md,
    /// stream-ordered allocation).
    StreamOrdered,
    /// `cuMemMap` of a virtual-memory range (PyTorch's expandable segments).
    VirtualMap,
    /// Pinned or mapped host memory (`cudaHostAlloc`, `cudaMallocHost`).
    Host,
    /// `cudaMallocManaged`.
    Managed,
    /// A block a framework's caching allocator (PyTorch's) hands out inside one of its segments: it names the
    /// memory of one tensor and orders nothing. Its stream is the one it was handed out on.
    PoolBlock,
}

impl AllocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AllocKind::Device => "cudaMalloc",
            AllocKind::StreamOrdered => "cudaMallocAsync",
            AllocKind::VirtualMap => "cuMemMap",
            AllocKind::Host => "host",
            AllocKind::Managed => "managed",
            AllocKind::PoolBlock => "caching-allocator block",
        }
    }
}

/// How a block of memory ends.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FreeKind {
    /// `cudaFree` / `cuMemFree`: synchronizes the device before freeing (DESIGN.md, blocking APIs).
    Synchronous,
    /// `cudaFreeAsync`: a write of the whole block on its stream; later unordered accesses are use-after-free.
    StreamOrdered,
    /// `cuMemUnmap`: ends the mapping at once, without synchronizing anything.
    VirtualUnmap,
    /// `cudaFreeHost`: synchronizes the device, like `cudaFree`.
    Host,
    /// A caching-allocator block given back to its pool: nothing happens on the device, and the accesses made
    /// to its memory stay in the shadow (forgetting them is how a reuse of the block goes unseen).
    PoolBlock,
}

/// One lifetime of a block of memory.
#[derive(Clone, Debug, Serialize)]
pub struct Allocation {
    pub id: AllocId,
    /// The handle the trace gave it, if any; otherwise the dense id.
    pub handle: u64,
    pub process: ProcessId,
    pub range: AccessRange,
    pub kind: AllocKind,
    /// A label, such as the tensor or buffer name, when the trace has one.
    pub label: Option<String>,
    /// Where it was allocated, when known.
    pub source: Option<SourceLocation>,
    /// The native call site of the allocation, when the capture recorded one.
    #[serde(skip)]
    pub native: Option<NativeSite>,
}

/// A range a program annotated on one of its host threads (an NVTX push/pop or start/end range, as an nsys export
/// holds them), with its whole text: timelines draw it; it orders nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AnnotatedRange {
    pub process: ProcessId,
    pub thread: ThreadId,
    /// Host times, on the clock of the trace's GPU times.
    pub start_ns: u64,
    pub end_ns: u64,
    pub text: std::sync::Arc<str>,
}
