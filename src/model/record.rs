//! The unit an ingester hands to the engine.

use std::sync::Arc;

use super::entities::{AnnotatedRange, Creation, EventInfo, GroupStream, JobPlace, StreamInfo, ThreadInfo};
use super::ids::ProcessId;
use super::ops::Operation;
use super::source::RecordedLine;

/// One item of a trace in host issue order: an entity coming into existence, or an operation.
// Operations dominate the stream and are moved by value; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceRecord {
    /// A stream is created. Its clock starts from the creating thread's knowledge (so a stream created after a
    /// device synchronize starts ordered after it).
    Stream(StreamInfo),
    Event(EventInfo),
    Thread(ThreadInfo),
    /// Where a framework created the object wrapping a stream or event declared earlier; names it, orders nothing.
    Created(Creation),
    /// Whose NCCL stream a stream is (a collective of a process group ran on it); names it, orders nothing.
    GroupStream(GroupStream),
    Op(Operation),
    /// When the operation with this correlation id ran on the GPU, learned after the fact (CUPTI activity
    /// records). Ordering does not depend on it; timelines place bars by it.
    GpuTime {
        correlation: u64,
        start_ns: u64,
        end_ns: u64,
    },
    /// The process is one rank of a distributed job (from the trace header): informative, orders nothing.
    Job(JobPlace),
    /// The trace records the host synchronization between its threads (the header says so, as the capture does
    /// when its interposers stood in front of the program's pthread calls): the per-thread host order is exact
    /// and is the default (DESIGN.md, host threads). Comes before every other record of its trace.
    HostSyncRecorded,
    /// A capture range of the process begins (`streamtrace capture --capture-range`, `--delay`): the trace holds
    /// the program's work only inside ranges, and outside them only the state a range needs. Whatever ran
    /// before it is ordered before everything in it (docs/capture.md, capture ranges).
    RangeBegin {
        process: ProcessId,
        /// The range's number in its trace, from 1.
        index: u32,
        /// The NVTX range that was the capture range, when one was.
        name: Option<Arc<str>>,
    },
    /// The capture range `index` of the process ends: its findings are its report's section.
    RangeEnd {
        process: ProcessId,
        index: u32,
    },
    /// A range the program annotated on a host thread (NVTX), for timelines: orders nothing.
    Annotation(AnnotatedRange),
    /// What one return address of a native call site is in the program's source, as the capture found it at
    /// exit: for the symbolizer, after the analysis; orders nothing.
    FrameLine(RecordedLine),
}
