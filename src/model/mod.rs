//! The trace model: what a CUDA program did, in host issue order, independent of where the trace came from.
//!
//! Every ingester (hand-written JSON, nsys exports, our own capture) turns its input into a stream of
//! [`TraceRecord`]s; the happens-before engine consumes that stream one record at a time. Nothing here does I/O.

mod access;
mod entities;
mod exact;
mod graph;
mod ids;
mod ops;
mod range;
mod record;
mod source;
mod view;

pub use access::{Access, AccessMode, PointerArg};
pub use entities::{
    AllocKind, Allocation, AnnotatedRange, Creation, Entity, EventInfo, FreeKind, GroupStream, JobPlace, StreamInfo,
    StreamKind, ThreadInfo,
};
pub use exact::refine_with_extents;
pub use graph::{
    GraphBuild, GraphCall, GraphExec, GraphNode, HostNodeRun, NodeKind, NodeOrigin, NodeOwner, NodeParams, SharedGraph,
};
pub use ids::{AllocId, ContextId, DeviceId, EventId, ProcessId, StreamId, ThreadId};
pub use ops::normalize_region;
pub use ops::{
    is_nccl_kernel, CopyKind, Coverage, ExactCoverage, HostSync, MemoryKind, OpKind, Operation, QueryTarget, SiteHint,
    Unseen,
};
pub use range::{AccessRange, RangeError};
pub use record::TraceRecord;
pub use source::{NativeFrame, NativeModule, NativeSite, RecordedLine, SourceLocation};
pub use view::{ByteDim, ElementDim, StridedView, ViewBytes, ViewError};
