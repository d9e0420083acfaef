//! What the call table (calls.rs) says of each driver call, as closed sets: when it is recorded, what its null
//! stream means, what becomes of it outside a capture range, and what a handler shared by several calls needs
//! to know of it. Plain values below the table, the handlers and the call's parameter block, which all use them.

use streamtrace_format::{AllocKind, CopyKind};

/// When a call is recorded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum When {
    /// When it is made: its parameters say everything.
    Entry,
    /// When it returns, whatever it returned (a query's result is the record).
    Exit,
    /// When it returns successfully: what it made is written through its out-parameters.
    ExitOk,
}

/// What a null stream handle of the call means.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StreamForm {
    /// The legacy default stream.
    Legacy,
    /// The calling thread's default stream (`_ptsz` / `_ptds` forms).
    PerThread,
}

/// Which parameter a typed graph node call (`cuGraphAdd*Node`, the node setters) passes after its common ones.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NodeWord {
    /// CUDA_KERNEL_NODE_PARAMS (first version).
    Kernel,
    /// CUDA_KERNEL_NODE_PARAMS_v2.
    KernelV2,
    Memcpy,
    Memset,
    Host,
    Empty,
    /// The child graph's handle.
    Child,
    /// The event's handle.
    EventRecord,
    EventWait,
    MemAlloc,
    /// The address freed.
    MemFree,
    /// A CUgraphNodeParams, whose type says what it holds.
    Generic,
    /// A node capture does not model (external semaphores, batch memory operations).
    Other,
}

/// What becomes of a call made outside a capture range (ranges.rs), when the capture records in ranges.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OutsideRanges {
    /// Recorded as in a range: what it makes is state a later range needs (streams, events, allocations,
    /// graphs), or it moves the ranges themselves.
    Recorded,
    /// Handled but not written: the state notes what a later range needs of it (an event's last stream).
    Noted,
    /// Not looked at: work of the program, which the trace holds only in ranges.
    Skipped,
}

/// What a handler shared by several calls needs to know of one of them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    None,
    /// A copy's direction as the call names it.
    Copy(CopyKind),
    /// A set's element width in bytes.
    Width(u64),
    /// The kind of block an allocation call makes.
    Alloc(AllocKind),
    /// cuStreamCreateWithPriority: the block has a priority.
    WithPriority,
    /// The host waits in the call for GPU work (a forked child writes its records there).
    HostWait,
    Node(NodeWord),
    /// cuStreamGetCaptureInfo, the `_v2` form or the `_v3` one with edge data.
    CaptureInfo {
        edges: bool,
    },
    /// cuStreamUpdateCaptureDependencies, the first form or the `_v2` one with edge data.
    CaptureUpdate {
        edges: bool,
    },
    /// Graph edges added or removed, by the first or the `_v2` (edge data) form.
    Edges {
        added: bool,
        v2: bool,
    },
}
