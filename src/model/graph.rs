//! CUDA graphs (DESIGN.md, CUDA graphs): the graph API calls a program made, and the executable graphs its launches
//! run. A launch carries its whole graph, shared, so the engine needs no graph bookkeeping of its own.

use std::sync::Arc;

use serde::Serialize;

use super::access::{Access, PointerArg};
use super::ids::{EventId, StreamId, ThreadId};
use super::source::{NativeSite, SourceLocation};

/// What a graph node does, as far as ordering and memory go.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "node", content = "event")]
pub enum NodeKind {
    Kernel,
    Memcpy,
    Memset,
    /// A host function, run by a driver thread once its dependencies are done.
    Host,
    /// Records the event when its dependencies are done.
    EventRecord(EventId),
    /// Its dependents run after the event's last record (as of the launch).
    EventWait(EventId),
    /// Allocates its range for the graph: a write of every byte, like `cudaMallocAsync` (stream-ordered allocation).
    MemAlloc,
    /// Frees its range.
    MemFree,
    Empty,
    /// Runs a body graph when a device-side condition holds: its body is not modelled.
    Conditional,
    /// A node whose memory is not modelled (external semaphores, batched memory operations).
    Other,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Kernel => "kernel",
            NodeKind::Memcpy => "memcpy",
            NodeKind::Memset => "memset",
            NodeKind::Host => "host function",
            NodeKind::EventRecord(_) => "event record",
            NodeKind::EventWait(_) => "event wait",
            NodeKind::MemAlloc => "graph allocation",
            NodeKind::MemFree => "graph free",
            NodeKind::Empty => "empty node",
            NodeKind::Conditional => "conditional",
            NodeKind::Other => "node",
        }
    }
}

/// Where a node was made: the call captured into the graph, or the `cudaGraphAdd*Node` call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeOrigin {
    /// The call's position in host issue order.
    pub seq: u64,
    /// Its line in the input.
    pub origin: u64,
    pub thread: ThreadId,
    /// The stream it was issued to, for a node made by stream capture.
    #[serde(skip)]
    pub stream: Option<StreamId>,
    pub source: Option<SourceLocation>,
    /// The native call site of the capturing or adding call, when the capture recorded one.
    #[serde(skip)]
    pub native: Option<NativeSite>,
    /// The framework op it belongs to (tier T2) or the annotated region it was issued in.
    pub region: Option<Arc<str>>,
}

/// One node of a graph: what it touches and which earlier nodes it depends on (indexes into its graph's nodes;
/// a node depends only on nodes before it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphNode {
    pub name: String,
    pub kind: NodeKind,
    /// Byte ranges known exactly (memcpy and memset nodes, tier T2 ops, hand-written traces).
    pub accesses: Vec<Access>,
    /// Pointer-valued kernel parameters (tier T1), matched to live allocations at each launch.
    pub pointers: Vec<PointerArg>,
    pub depends_on: Vec<usize>,
    pub made_at: Option<NodeOrigin>,
}

impl GraphNode {
    /// A kernel-like node that touches `accesses` (hand-written graphs).
    pub fn with_accesses(name: String, accesses: Vec<Access>, depends_on: Vec<usize>) -> GraphNode {
        GraphNode { name, kind: NodeKind::Kernel, accesses, pointers: Vec::new(), depends_on, made_at: None }
    }

    /// What reports call the node: its framework op when it has one, else its name.
    pub fn label(&self) -> &str {
        self.made_at.as_ref().and_then(|m| m.region.as_deref()).unwrap_or(&self.name)
    }
}

/// A graph host node's run in one launch (DESIGN.md, host functions): the loads and stores the capture saw it make,
/// with the node's index in the launched graph when the trace names the node (a captured host node's handle is
/// not in the trace: its run is then the launch's alone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostNodeRun {
    pub node: Option<usize>,
    /// The host function's name.
    pub name: Arc<str>,
    pub accesses: Vec<Access>,
}

/// How a graph came to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphBuild {
    /// Stream capture: its nodes were issued to capturing streams, and dependencies come from stream order and
    /// event waits inside the capture.
    Captured,
    /// `cudaGraphAdd*Node` calls, with the dependencies they named.
    Explicit,
    /// Written out node by node in a hand-written trace.
    Inline,
}

/// An executable graph as one launch runs it: every node, child graphs flattened in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphExec {
    /// Unique per executable graph and version of its parameters: what the engine remembers a graph's inner
    /// races by.
    pub key: u64,
    pub name: String,
    pub build: GraphBuild,
    /// Where the graph was captured or instantiated.
    pub made_at: Option<SourceLocation>,
    pub nodes: Vec<GraphNode>,
}

impl GraphExec {
    /// Whether any node touches memory the trace knows of.
    pub fn has_addresses(&self) -> bool {
        self.nodes.iter().any(|n| !n.accesses.is_empty() || !n.pointers.is_empty())
    }
}

/// A shared executable graph: every launch of it holds the same one.
pub type SharedGraph = Arc<GraphExec>;

/// The parameters a node is added or updated with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeParams {
    pub kind: NodeKind,
    pub name: Option<Arc<str>>,
    pub accesses: Vec<Access>,
    pub pointers: Vec<PointerArg>,
    /// The graph a child-graph node runs.
    pub child: Option<u64>,
    /// The body graphs a conditional node runs (none for other nodes), declared with the node.
    pub bodies: Vec<u64>,
}

/// Whose node an update changes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NodeOwner {
    /// A graph: later instantiations see the change.
    Graph(u64),
    /// An executable graph: its later launches see the change.
    Exec(u64),
}

/// One call of the graph API, by the handles the program used. The reader turns these into graph launches
/// (ingest/graphs); the engine never sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphCall {
    CaptureBegin {
        stream: StreamId,
        into: Option<u64>,
    },
    CaptureEnd {
        stream: StreamId,
        graph: Option<u64>,
    },
    /// `cudaStreamGetCaptureInfo` on a capturing stream: the graph being captured, and the handles of the nodes
    /// the stream's next captured work would depend on; each none when the program did not ask for it.
    CaptureInfo {
        stream: StreamId,
        graph: Option<u64>,
        deps: Option<Vec<u64>>,
    },
    /// `cudaStreamUpdateCaptureDependencies`: the stream's next captured work depends on `deps` only.
    SetCaptureDependencies {
        stream: StreamId,
        deps: Vec<u64>,
    },
    /// The same, adding `deps` to what it depends on.
    AddCaptureDependencies {
        stream: StreamId,
        deps: Vec<u64>,
    },
    Create {
        graph: u64,
    },
    AddNode {
        graph: u64,
        node: u64,
        deps: Vec<u64>,
        params: NodeParams,
    },
    AddDependencies {
        graph: u64,
        node: u64,
        deps: Vec<u64>,
    },
    RemoveDependencies {
        graph: u64,
        node: u64,
        deps: Vec<u64>,
    },
    UpdateNode {
        owner: NodeOwner,
        node: u64,
        params: NodeParams,
    },
    DestroyNode {
        graph: u64,
        node: u64,
    },
    Clone {
        graph: u64,
        original: u64,
    },
    Instantiate {
        graph: u64,
        exec: u64,
    },
    ExecUpdate {
        exec: u64,
        graph: u64,
    },
    Destroy {
        graph: u64,
    },
    ExecDestroy {
        exec: u64,
    },
    Launch {
        exec: u64,
        stream: StreamId,
    },
}
