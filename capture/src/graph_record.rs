//! The records of stream capture and the graph API, by the program's own handles: what the analyzer
//! needs to rebuild each executable graph and know which work ran only at its launches. Built on the
//! application's threads, formatted on the writer thread, like every record.

use streamtrace_format::{AccessFlag, Field, FieldSink, NodeKind, RecordKind};

use crate::args::PointerArg;
use crate::kernel_name::KernelName;

/// What a node does and touches.
#[derive(Clone, Debug)]
pub enum NodeBody {
    /// A kernel node: the function declared by the `Function` record `function`, with its pointer words at
    /// `pointers[first_pointer..first_pointer + pointer_count]` of the batch (as a launch has them).
    Kernel { function: u32, first_pointer: u32, pointer_count: u32 },
    /// A copy node: each side as `(first byte, extent)`, absent for a CUDA array.
    Copy { from: Option<(u64, u64)>, to: Option<(u64, u64)> },
    /// A set node's rows, as `(first byte, extent)`.
    Set { to: (u64, u64) },
    /// An event record or wait node.
    Event { kind: NodeKind, event: u64 },
    /// A child-graph node running `graph`.
    Child { graph: u64 },
    /// A graph allocation or free of `(first byte, bytes)`.
    Memory { kind: NodeKind, range: (u64, u64) },
    /// A conditional node and the body graphs the driver made with it.
    Conditional { bodies: Box<[u64]> },
    /// A node that touches no memory the capture knows of (host, empty, conditional, ...).
    Plain(NodeKind),
}

/// Whose node a parameter change is for.
#[derive(Copy, Clone, Debug)]
pub enum NodeOwner {
    Graph(u64),
    Exec(u64),
}

#[derive(Clone, Debug)]
pub enum GraphRecord {
    CaptureBegin {
        stream: u64,
        into: Option<u64>,
    },
    /// `graph` is none when the capture failed or was invalidated.
    CaptureEnd {
        stream: u64,
        graph: Option<u64>,
    },
    /// What cuStreamGetCaptureInfo told the program of a capturing stream: the graph being captured and the
    /// nodes the stream's next captured work would depend on, each when the program asked for it.
    CaptureInfo {
        stream: u64,
        graph: Option<u64>,
        deps: Option<Box<[u64]>>,
    },
    /// cuStreamUpdateCaptureDependencies: the stream's next captured work depends on `deps` only (`set`) or on
    /// them as well.
    CaptureDependencies {
        stream: u64,
        deps: Box<[u64]>,
        set: bool,
    },
    Create {
        graph: u64,
    },
    /// `deps` are the node handles it depends on.
    Node {
        graph: u64,
        node: u64,
        deps: Box<[u64]>,
        body: NodeBody,
    },
    NodeUpdate {
        owner: NodeOwner,
        node: u64,
        body: NodeBody,
    },
    Dependencies {
        graph: u64,
        node: u64,
        deps: Box<[u64]>,
        added: bool,
    },
    NodeDestroy {
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
        stream: u64,
    },
}

impl GraphRecord {
    pub fn kind(&self) -> RecordKind {
        match self {
            GraphRecord::CaptureBegin { .. } => RecordKind::CaptureBegin,
            GraphRecord::CaptureEnd { .. } => RecordKind::CaptureEnd,
            GraphRecord::CaptureInfo { .. } => RecordKind::CaptureInfo,
            GraphRecord::CaptureDependencies { set: true, .. } => RecordKind::CaptureDepsSet,
            GraphRecord::CaptureDependencies { set: false, .. } => RecordKind::CaptureDepsAdd,
            GraphRecord::Create { .. } => RecordKind::GraphCreate,
            GraphRecord::Node { .. } => RecordKind::GraphNode,
            GraphRecord::NodeUpdate { .. } => RecordKind::GraphNodeUpdate,
            GraphRecord::Dependencies { added: true, .. } => RecordKind::GraphDepAdd,
            GraphRecord::Dependencies { added: false, .. } => RecordKind::GraphDepRemove,
            GraphRecord::NodeDestroy { .. } => RecordKind::GraphNodeDestroy,
            GraphRecord::Clone { .. } => RecordKind::GraphClone,
            GraphRecord::Instantiate { .. } => RecordKind::GraphInstantiate,
            GraphRecord::ExecUpdate { .. } => RecordKind::GraphExecUpdate,
            GraphRecord::Destroy { .. } => RecordKind::GraphDestroy,
            GraphRecord::ExecDestroy { .. } => RecordKind::GraphExecDestroy,
            GraphRecord::Launch { .. } => RecordKind::GraphLaunch,
        }
    }

    /// The record's own fields; `pointers` (the batch's) holds a kernel node's pointer words and `names` its function's name.
    pub fn write_fields(&self, line: &mut impl FieldSink, pointers: &[PointerArg], names: &[KernelName]) {
        match self {
            GraphRecord::CaptureBegin { stream, into: graph } | GraphRecord::CaptureEnd { stream, graph } => {
                line.number(Field::Stream, *stream);
                if let Some(graph) = graph {
                    line.number(Field::Graph, *graph);
                }
            }
            GraphRecord::CaptureInfo { stream, graph, deps } => {
                line.number(Field::Stream, *stream);
                if let Some(graph) = graph {
                    line.number(Field::Graph, *graph);
                }
                if let Some(deps) = deps {
                    line.numbers(Field::Deps, deps.iter().copied());
                }
            }
            GraphRecord::CaptureDependencies { stream, deps, .. } => {
                line.number(Field::Stream, *stream).numbers(Field::Deps, deps.iter().copied());
            }
            GraphRecord::Create { graph } | GraphRecord::Destroy { graph } => {
                line.number(Field::Graph, *graph);
            }
            GraphRecord::Node { graph, node, deps, body } => {
                line.number(Field::Graph, *graph).number(Field::Node, *node).numbers(Field::Deps, deps.iter().copied());
                body.write_fields(line, pointers, names);
            }
            GraphRecord::NodeUpdate { owner, node, body } => {
                match owner {
                    NodeOwner::Graph(graph) => line.number(Field::Graph, *graph),
                    NodeOwner::Exec(exec) => line.number(Field::Exec, *exec),
                };
                line.number(Field::Node, *node);
                body.write_fields(line, pointers, names);
            }
            GraphRecord::Dependencies { graph, node, deps, .. } => {
                line.number(Field::Graph, *graph).number(Field::Node, *node).numbers(Field::Deps, deps.iter().copied());
            }
            GraphRecord::NodeDestroy { graph, node } => {
                line.number(Field::Graph, *graph).number(Field::Node, *node);
            }
            GraphRecord::Clone { graph, original } => {
                line.number(Field::Graph, *graph).number(Field::Original, *original);
            }
            GraphRecord::Instantiate { graph, exec } | GraphRecord::ExecUpdate { exec, graph } => {
                line.number(Field::Graph, *graph).number(Field::Exec, *exec);
            }
            GraphRecord::ExecDestroy { exec } => {
                line.number(Field::Exec, *exec);
            }
            GraphRecord::Launch { exec, stream } => {
                line.number(Field::Exec, *exec).number(Field::Stream, *stream);
            }
        }
    }
}

impl NodeBody {
    fn write_fields(&self, line: &mut impl FieldSink, pointers: &[PointerArg], names: &[KernelName]) {
        match self {
            NodeBody::Kernel { function, first_pointer, pointer_count } => {
                let first = *first_pointer as usize;
                let pointers = pointers.get(first..first + *pointer_count as usize).unwrap_or(&[]);
                let unnamed = KernelName::unnamed();
                let name = names.get(*function as usize).unwrap_or(&unnamed);
                line.name(Field::NodeKind, NodeKind::Kernel.as_str())
                    .escaped(Field::Name, &name.name, &name.escaped)
                    .pointers(
                        Field::Pointers,
                        pointers
                            .iter()
                            .map(|p| (p.address, if p.writes { AccessFlag::Write } else { AccessFlag::Read })),
                    );
            }
            NodeBody::Copy { from, to } => {
                line.name(Field::NodeKind, NodeKind::Memcpy.as_str())
                    .ranges(Field::Reads, from.iter().copied())
                    .ranges(Field::Writes, to.iter().copied());
            }
            NodeBody::Set { to } => {
                line.name(Field::NodeKind, NodeKind::Memset.as_str()).ranges(Field::Writes, [*to]);
            }
            NodeBody::Event { kind, event } => {
                line.name(Field::NodeKind, kind.as_str()).number(Field::Event, *event);
            }
            NodeBody::Child { graph } => {
                line.name(Field::NodeKind, NodeKind::Child.as_str()).number(Field::Child, *graph);
            }
            NodeBody::Memory { kind, range } => {
                line.name(Field::NodeKind, kind.as_str()).ranges(Field::Writes, [*range]);
            }
            NodeBody::Conditional { bodies } => {
                line.name(Field::NodeKind, NodeKind::Conditional.as_str())
                    .numbers(Field::Bodies, bodies.iter().copied());
            }
            NodeBody::Plain(kind) => {
                line.name(Field::NodeKind, kind.as_str());
            }
        }
    }
}
