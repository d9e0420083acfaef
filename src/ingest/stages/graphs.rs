//! CUDA graphs from the calls that build them (DESIGN.md, CUDA graphs). Work issued to a capturing stream does not
//! run: it becomes a node of the graph being captured, after the stream's earlier nodes and whatever the stream
//! waited on inside the capture, or the nodes the program set it to depend on (`cudaStreamUpdateCaptureDependencies`,
//! naming captured nodes by the handles `cudaStreamGetCaptureInfo` gave, or nodes it added to the capture's graph by
//! hand); a stream that waits on an event recorded inside a capture joins it. Graphs built node by node keep the
//! dependencies their calls named. Instantiation fixes a graph as it is then, child graphs flattened in and nodes
//! sorted so that each depends only on earlier ones; exec updates and parameter changes make a new version. A
//! launch becomes one `GraphLaunch` carrying its executable graph, shared by every launch of it, so that the engine
//! remembers what it learned about the graph by the version's key.
//!
//! The one stage of ingest that decides ordering: the dependencies among a graph's nodes, taken from the order
//! of a capture and from the calls that built the graph, are what the engine orders the nodes by (its launch
//! half, one step of the launching stream, is the engine's). Every reader's operations pass through it
//! (`stages`); a trace without graph calls pays one check per operation.
//!
//! State lives as long as the program's graphs and captures do; ops that did not run are dropped here. A child
//! node holds its graph as it was when the node was added, shared rather than copied (a graph changed later is
//! copied then), so that graphs nested deep cost memory linear in their nodes; nesting deeper than
//! [`MAX_NESTING`] levels, or a graph that flattens to more than [`MAX_FLAT_NODES`] nodes, is refused like any
//! graph call that cannot be taken.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::model::{
    Access, AccessMode, AccessRange, AllocId, AllocKind, EventId, FreeKind, GraphBuild, GraphCall, GraphExec,
    GraphNode, HostNodeRun, NodeKind, NodeOrigin, NodeOwner, NodeParams, OpKind, Operation, PointerArg, ProcessId,
    SharedGraph, SourceLocation, StreamId,
};

/// Levels of child graphs a graph may hold. CUDA programs nest a few; the bound makes a trace nesting thousands
/// an error rather than a walk that long.
pub const MAX_NESTING: u32 = 256;

/// Nodes a graph may have once its child graphs are flattened in (each child node runs its graph's nodes, so
/// two child nodes per level double them): a graph launch is one step of the engine, and this many nodes is
/// hundreds of megabytes.
pub const MAX_FLAT_NODES: usize = 1 << 21;

/// Edges between a child graph's leaves and the next child graph's roots above which they meet at one empty node
/// instead of every leaf to every root: the same order, with edges linear in the nodes.
const JOIN_EDGES: usize = 4096;

/// Graph calls that contradict the calls before them (a node not in its graph, a capture ended on a stream that
/// is not capturing, a cycle): the reader decides whether that ends its reading.
#[derive(Debug)]
pub struct GraphProblem(pub String);

impl GraphProblem {
    fn new(message: impl Into<String>) -> GraphProblem {
        GraphProblem(message.into())
    }
}

/// A graph being built, or built: nodes in the order they were added, dependencies by index in that order.
#[derive(Clone, Debug)]
struct Draft {
    build: GraphBuild,
    made_at: Option<SourceLocation>,
    nodes: Vec<DraftNode>,
    by_handle: HashMap<u64, usize>,
    /// Levels of child graphs below this one (0: none).
    depth: u32,
    /// Whether a node of this graph, or of a child graph in it, is a conditional node with bodies: they are
    /// looked up when the graph is instantiated ([`GraphAssembler::with_bodies`]).
    conditionals: bool,
}

#[derive(Clone, Debug)]
struct DraftNode {
    handle: Option<u64>,
    /// `depends_on` holds indexes into the draft's nodes, in any order.
    node: GraphNode,
    /// A child-graph node runs its graph as it was when the node was added (shared until the graph changes).
    child: Option<Arc<Draft>>,
    /// A conditional node's body graphs, by handle: the program fills them after adding the node, so they are
    /// taken as they are when the graph is instantiated.
    bodies: Vec<u64>,
    removed: bool,
}

impl Draft {
    fn new(build: GraphBuild, made_at: Option<SourceLocation>) -> Draft {
        Draft { build, made_at, nodes: Vec::new(), by_handle: HashMap::default(), depth: 0, conditionals: false }
    }

    fn push(&mut self, handle: Option<u64>, node: GraphNode, child: Option<Arc<Draft>>) -> usize {
        self.push_node(handle, node, child, Vec::new())
    }

    fn push_node(
        &mut self,
        handle: Option<u64>,
        node: GraphNode,
        child: Option<Arc<Draft>>,
        bodies: Vec<u64>,
    ) -> usize {
        let index = self.nodes.len();
        if let Some(handle) = handle {
            self.by_handle.insert(handle, index);
        }
        if let Some(child) = &child {
            self.depth = self.depth.max(child.depth + 1);
            self.conditionals |= child.conditionals;
        }
        self.conditionals |= !bodies.is_empty();
        self.nodes.push(DraftNode { handle, node, child, bodies, removed: false });
        index
    }

    /// Levels of child graphs below this one, and whether a conditional node is among them, counted again
    /// (after a child node changed or went).
    fn recount_depth(&mut self) {
        let live = || self.nodes.iter().filter(|n| !n.removed);
        self.depth = live().filter_map(|n| n.child.as_ref()).map(|c| c.depth + 1).max().unwrap_or(0);
        self.conditionals = live().any(|n| !n.bodies.is_empty() || n.child.as_ref().is_some_and(|c| c.conditionals));
    }

    /// Names a node by the handle the program learned for it (a captured node, through
    /// `cudaStreamGetCaptureInfo`).
    fn name(&mut self, index: usize, handle: u64) {
        self.nodes[index].handle = Some(handle);
        self.by_handle.insert(handle, index);
    }

    fn index_of(&self, node: u64) -> Result<usize, GraphProblem> {
        self.by_handle
            .get(&node)
            .copied()
            .filter(|&i| !self.nodes[i].removed)
            .ok_or_else(|| GraphProblem::new(format!("graph node {node:#x} is not in its graph")))
    }

    /// A draft of an executable graph's nodes (a graph launched inside a capture runs as a child node).
    fn of_exec(graph: &GraphExec) -> Draft {
        let mut draft = Draft::new(graph.build, graph.made_at.clone());
        for node in &graph.nodes {
            draft.push(None, node.clone(), None);
        }
        draft
    }
}

/// A stream capture in progress: the graph it builds and, per stream taking part, the nodes the stream's next
/// node will depend on.
struct Capture {
    process: ProcessId,
    draft: Draft,
    frontier: HashMap<StreamId, Vec<usize>>,
}

/// An executable graph: its current version, and where each node the program holds a handle to went.
struct Instance {
    graph: SharedGraph,
    by_handle: HashMap<u64, usize>,
}

/// A node as a captured operation makes it: kind, accesses, pointer arguments, name, and the graph a child node
/// runs.
type CapturedNode = (NodeKind, Vec<Access>, Vec<PointerArg>, String, Option<Arc<Draft>>);

/// A graph host node's run announced before its launch: the node's handle, its function's name, and what the
/// run touched so far.
struct AnnouncedRun {
    node: u64,
    name: Arc<str>,
    accesses: Vec<Access>,
}

/// What the trace's graph calls have built so far.
#[derive(Default)]
pub struct GraphAssembler {
    next_key: u64,
    /// Hand-written `graph` records, shared when a trace writes the same graph again.
    inline: HashMap<String, Vec<SharedGraph>>,
    /// Shared with the child nodes that run them: changed through `Arc::make_mut`, which copies a shared one.
    graphs: HashMap<(ProcessId, u64), Arc<Draft>>,
    execs: HashMap<(ProcessId, u64), Instance>,
    captures: HashMap<u32, Capture>,
    next_capture: u32,
    capturing: HashMap<StreamId, u32>,
    /// The graphs being captured, by the handle the program knows each by (`cudaStreamGetCaptureInfo`, or the
    /// graph a capture into a graph fills): a graph call naming one changes its capture.
    capture_graphs: HashMap<(ProcessId, u64), u32>,
    /// Events recorded inside a capture: the capture and the nodes a wait on them joins.
    captured_events: HashMap<EventId, (u32, Vec<usize>)>,
    /// Blocks a capture allocated (`cudaMallocAsync` on a capturing stream): what a free node of theirs frees.
    /// A block leaves when a free outside any capture frees it.
    captured_blocks: HashMap<AllocId, AccessRange>,
    /// Graph host nodes' runs announced on a stream for the launch that follows there (`host_func` records
    /// with `node`).
    host_runs: HashMap<(ProcessId, StreamId), Vec<AnnouncedRun>>,
    /// Captures that ended without a graph (failed or invalidated).
    pub failed_captures: u64,
    /// Operations that became graph nodes instead of running.
    pub captured_ops: u64,
}

impl GraphAssembler {
    /// A hand-written graph launch's graph: the same one again when the trace already launched one like it.
    pub fn inline(&mut self, name: String, nodes: Vec<GraphNode>) -> SharedGraph {
        let seen = self.inline.entry(name.clone()).or_default();
        if let Some(graph) = seen.iter().find(|g| g.nodes == nodes) {
            return graph.clone();
        }
        self.next_key += 1;
        let graph = Arc::new(GraphExec { key: self.next_key, name, build: GraphBuild::Inline, made_at: None, nodes });
        seen.push(graph.clone());
        graph
    }

    /// Whether an operation of `kind` needs the assembler: a graph call, a graph host node's run, or anything
    /// while a capture is open.
    #[inline]
    pub fn wants(&self, kind: &OpKind) -> bool {
        matches!(
            kind,
            OpKind::GraphCall(_)
                | OpKind::HostFunc { graph_node: Some(_), .. }
                | OpKind::HostFuncAccess { graph_node: Some(_), .. }
        ) || !self.capturing.is_empty()
    }

    /// Takes one operation in issue order: the operation to hand on (a launch made whole), or none when it
    /// built a graph instead of running.
    pub fn take(&mut self, mut op: Operation) -> Result<Option<Operation>, GraphProblem> {
        if let OpKind::GraphCall(call) = &op.kind {
            return self.call(&op, call);
        }
        if let Some(keep) = self.host_node_run(&mut op) {
            return Ok(keep.then_some(op));
        }
        let Some(stream) = op.kind.stream() else { return Ok(Some(op)) };
        let Some(&capture) = self.capturing.get(&stream) else {
            match op.kind {
                OpKind::StreamWait { stream, event } => {
                    if let Some((capture, frontier)) = self.captured_events.get(&event).cloned() {
                        // Waiting on an event recorded inside a capture pulls the stream into that capture.
                        self.join(capture, stream, &frontier);
                        return Ok(None);
                    }
                }
                // Recorded again outside the capture: a wait on it now waits for that record.
                OpKind::EventRecord { event, .. } => {
                    self.captured_events.remove(&event);
                }
                // A graph's block freed outside the graph: its memory is the pool's again.
                OpKind::Free { alloc, .. } => {
                    self.captured_blocks.remove(&alloc);
                }
                _ => {}
            }
            return Ok(Some(op));
        };
        self.captured(capture, stream, op)
    }

    /// A graph host node's run, announced before its launch, and what it touched: the accesses go with the
    /// launch that follows on its stream, at the node's place in the graph (host functions inside graphs); the
    /// announcing `host_func` stays a step of its stream. Whether to hand the operation on; None for any other operation
    /// (and for a run on a capturing stream, whose node runs at the launches of the graph being captured).
    fn host_node_run(&mut self, op: &mut Operation) -> Option<bool> {
        let key = (op.process, op.kind.stream()?);
        if self.capturing.contains_key(&key.1) {
            return None;
        }
        match &mut op.kind {
            OpKind::HostFunc { name, accesses, graph_node: Some(node), .. } => {
                let run = AnnouncedRun { node: *node, name: name.clone(), accesses: std::mem::take(accesses) };
                self.host_runs.entry(key).or_default().push(run);
                Some(true)
            }
            OpKind::HostFuncAccess { accesses, graph_node: Some(_), .. } => {
                let run = self.host_runs.get_mut(&key).and_then(|runs| runs.last_mut())?;
                run.accesses.append(accesses);
                Some(false)
            }
            _ => None,
        }
    }

    fn join(&mut self, capture: u32, stream: StreamId, frontier: &[usize]) {
        let Some(open) = self.captures.get_mut(&capture) else { return };
        let mine = open.frontier.entry(stream).or_default();
        for &node in frontier {
            if !mine.contains(&node) {
                mine.push(node);
            }
        }
        self.capturing.insert(stream, capture);
    }

    /// An operation issued to a capturing stream.
    fn captured(&mut self, capture: u32, stream: StreamId, op: Operation) -> Result<Option<Operation>, GraphProblem> {
        let (kind, accesses, pointers, name, child) = match &op.kind {
            OpKind::Kernel { name, accesses, pointers, .. } => {
                (NodeKind::Kernel, accesses.clone(), pointers.clone(), name.to_string(), None)
            }
            OpKind::Memcpy { src, dst, .. } => {
                let mut accesses: Vec<Access> = src.iter().map(|r| Access::plain(*r, AccessMode::Read)).collect();
                accesses.extend(dst.iter().map(|r| Access::plain(*r, AccessMode::Write)));
                (NodeKind::Memcpy, accesses, Vec::new(), "memcpy".to_string(), None)
            }
            OpKind::Memset { dst, .. } => {
                let accesses = dst.iter().map(|r| Access::plain(*r, AccessMode::Write)).collect();
                (NodeKind::Memset, accesses, Vec::new(), "memset".to_string(), None)
            }
            OpKind::GraphLaunch { graph, .. } => {
                (NodeKind::Empty, Vec::new(), Vec::new(), graph.name.clone(), Some(Arc::new(Draft::of_exec(graph))))
            }
            // A host function launched into a capture is a host node: it runs at each launch of the graph.
            OpKind::HostFunc { name, accesses, .. } => {
                (NodeKind::Host, accesses.clone(), Vec::new(), name.to_string(), None)
            }
            OpKind::EventRecord { event, .. } => {
                let frontier =
                    self.captures.get(&capture).and_then(|c| c.frontier.get(&stream)).cloned().unwrap_or_default();
                self.captured_events.insert(*event, (capture, frontier));
                self.captured_ops += 1;
                return Ok(None);
            }
            OpKind::StreamWait { event, .. } => {
                if let Some((from, frontier)) = self.captured_events.get(event).cloned() {
                    if from == capture {
                        self.join(capture, stream, &frontier);
                        self.captured_ops += 1;
                        return Ok(None);
                    }
                }
                // An event recorded outside the capture: the graph waits for it at each launch.
                (NodeKind::EventWait(*event), Vec::new(), Vec::new(), "event wait".to_string(), None)
            }
            OpKind::StreamWaitUnknownRecord { .. } => {
                self.captured_ops += 1;
                return Ok(None);
            }
            // A stream-ordered allocation in a capture is the graph's allocation node: its address is assigned
            // now (the block is named from here on, with no access), and the graph writes it where the node runs,
            // at each launch.
            OpKind::Alloc { alloc, range, alloc_kind: AllocKind::StreamOrdered, .. } => {
                self.captured_blocks.insert(*alloc, *range);
                let accesses = vec![Access::plain(*range, AccessMode::Write)];
                let name = "cudaMallocAsync".to_string();
                let mut named = op.clone();
                if let OpKind::Alloc { stream, .. } = &mut named.kind {
                    *stream = None;
                }
                self.push_node(capture, stream, &op, (NodeKind::MemAlloc, accesses, Vec::new(), name, None));
                return Ok(Some(named));
            }
            // Its free in the capture is the graph's free node: the block stays the graph's between launches.
            OpKind::Free { alloc, free_kind: FreeKind::StreamOrdered, .. }
                if self.captured_blocks.contains_key(alloc) =>
            {
                let range = self.captured_blocks[alloc];
                let accesses = vec![Access::plain(range, AccessMode::Write)];
                (NodeKind::MemFree, accesses, Vec::new(), "cudaFreeAsync".to_string(), None)
            }
            // Other allocations, frees and host accesses keep their own meaning.
            _ => return Ok(Some(op)),
        };
        if !self.captures.contains_key(&capture) {
            return Ok(Some(op));
        }
        self.push_node(capture, stream, &op, (kind, accesses, pointers, name, child));
        Ok(None)
    }

    /// Adds a node made by `op` on the capturing `stream`, after the nodes the stream's work so far ended in.
    fn push_node(&mut self, capture: u32, stream: StreamId, op: &Operation, node: CapturedNode) {
        let (kind, accesses, pointers, name, child) = node;
        let Some(open) = self.captures.get_mut(&capture) else { return };
        let depends_on = open.frontier.get(&stream).cloned().unwrap_or_default();
        let made_at = NodeOrigin {
            seq: op.seq,
            origin: op.origin,
            thread: op.thread,
            stream: Some(stream),
            source: op.source.clone(),
            native: op.native.clone(),
            region: op.region.clone(),
        };
        let node = GraphNode { name, kind, accesses, pointers, depends_on, made_at: Some(made_at) };
        let index = open.draft.push(None, node, child);
        open.frontier.insert(stream, vec![index]);
        self.captured_ops += 1;
    }

    fn call(&mut self, op: &Operation, call: &GraphCall) -> Result<Option<Operation>, GraphProblem> {
        let process = op.process;
        match call {
            GraphCall::CaptureBegin { stream, into } => {
                if self.capturing.contains_key(stream) {
                    return Err(GraphProblem::new("a capture begins on a stream that is already capturing"));
                }
                let draft = match into {
                    Some(graph) => Draft::clone(self.draft(process, *graph)?),
                    None => Draft::new(GraphBuild::Captured, op.source.clone()),
                };
                let id = self.next_capture;
                self.next_capture += 1;
                let mut frontier = HashMap::default();
                frontier.insert(*stream, Vec::new());
                self.captures.insert(id, Capture { process, draft, frontier });
                self.capturing.insert(*stream, id);
                if let Some(graph) = into {
                    self.capture_graphs.insert((process, *graph), id);
                }
            }
            GraphCall::CaptureEnd { stream, graph } => {
                let id = self
                    .capturing
                    .get(stream)
                    .copied()
                    .ok_or_else(|| GraphProblem::new("a capture ends on a stream that is not capturing"))?;
                let Some(capture) = self.captures.remove(&id) else { return Ok(None) };
                self.capturing.retain(|_, c| *c != id);
                self.captured_events.retain(|_, (c, _)| *c != id);
                self.capture_graphs.retain(|_, c| *c != id);
                match graph {
                    Some(graph) => {
                        self.graphs.insert((capture.process, *graph), Arc::new(capture.draft));
                    }
                    None => self.failed_captures += 1,
                }
            }
            GraphCall::CaptureInfo { stream, graph, deps } => {
                let id = self.capture_of(*stream)?;
                if let Some(graph) = graph {
                    self.capture_graphs.insert((process, *graph), id);
                }
                if let (Some(handles), Some(capture)) = (deps, self.captures.get_mut(&id)) {
                    let frontier = capture.frontier.get(stream).map_or(&[][..], Vec::as_slice);
                    name_frontier(&mut capture.draft, frontier, handles)?;
                }
            }
            GraphCall::SetCaptureDependencies { stream, deps } | GraphCall::AddCaptureDependencies { stream, deps } => {
                let id = self.capture_of(*stream)?;
                let Some(capture) = self.captures.get_mut(&id) else { return Ok(None) };
                let nodes = deps.iter().map(|d| capture.draft.index_of(*d)).collect::<Result<Vec<_>, _>>()?;
                let frontier = capture.frontier.entry(*stream).or_default();
                if matches!(call, GraphCall::SetCaptureDependencies { .. }) {
                    frontier.clear();
                }
                for node in nodes {
                    if !frontier.contains(&node) {
                        frontier.push(node);
                    }
                }
            }
            GraphCall::Create { graph } => {
                self.graphs.insert((process, *graph), Arc::new(Draft::new(GraphBuild::Explicit, op.source.clone())));
            }
            GraphCall::AddNode { graph, node, deps, params } => {
                let child = self.child_graph(process, params.child)?;
                let made_at = NodeOrigin {
                    seq: op.seq,
                    origin: op.origin,
                    thread: op.thread,
                    stream: None,
                    source: op.source.clone(),
                    native: op.native.clone(),
                    region: op.region.clone(),
                };
                let draft = self.draft_mut(process, *graph)?;
                if draft.index_of(*node).is_ok() {
                    return Err(GraphProblem::new(format!("graph node {node:#x} is added to graph {graph:#x} twice")));
                }
                let depends_on = deps.iter().map(|d| draft.index_of(*d)).collect::<Result<Vec<_>, _>>()?;
                let name = params.name.as_deref().map_or_else(|| params.kind.as_str().to_string(), str::to_string);
                let new_node = GraphNode {
                    name,
                    kind: params.kind,
                    accesses: params.accesses.clone(),
                    pointers: params.pointers.clone(),
                    depends_on,
                    made_at: Some(made_at),
                };
                draft.push_node(Some(*node), new_node, child, params.bodies.clone());
                // The driver makes a conditional node's body graphs with it: empty, filled by the program later
                // (nodes added to them, or a capture into them). A recording declares them just before.
                for body in &params.bodies {
                    let made = || Arc::new(Draft::new(GraphBuild::Explicit, op.source.clone()));
                    self.graphs.entry((process, *body)).or_insert_with(made);
                }
            }
            GraphCall::AddDependencies { graph, node, deps } | GraphCall::RemoveDependencies { graph, node, deps } => {
                let adding = matches!(call, GraphCall::AddDependencies { .. });
                let draft = self.draft_mut(process, *graph)?;
                let to = draft.index_of(*node)?;
                for dep in deps {
                    let from = draft.index_of(*dep)?;
                    let list = &mut draft.nodes[to].node.depends_on;
                    if adding && !list.contains(&from) {
                        list.push(from);
                    } else if !adding {
                        list.retain(|&d| d != from);
                    }
                }
            }
            GraphCall::UpdateNode { owner: NodeOwner::Graph(graph), node, params } => {
                let child = self.child_graph(process, params.child)?;
                let draft = self.draft_mut(process, *graph)?;
                let index = draft.index_of(*node)?;
                let entry = &mut draft.nodes[index];
                apply_params(&mut entry.node, params);
                if child.is_some() {
                    entry.child = child;
                    draft.recount_depth();
                }
            }
            GraphCall::UpdateNode { owner: NodeOwner::Exec(exec), node, params } => {
                let key = self.next_key + 1;
                let instance = self.instance_mut(process, *exec)?;
                let index = *instance.by_handle.get(node).ok_or_else(|| {
                    GraphProblem::new(format!("graph node {node:#x} is not in executable graph {exec:#x}"))
                })?;
                let mut graph = GraphExec::clone(&instance.graph);
                apply_params(&mut graph.nodes[index], params);
                graph.key = key;
                instance.graph = Arc::new(graph);
                self.next_key = key;
            }
            GraphCall::DestroyNode { graph, node } => {
                let draft = self.draft_mut(process, *graph)?;
                let index = draft.index_of(*node)?;
                draft.nodes[index].removed = true;
                for other in &mut draft.nodes {
                    other.node.depends_on.retain(|&d| d != index);
                }
                if draft.nodes[index].child.is_some() {
                    draft.recount_depth();
                }
            }
            GraphCall::Clone { graph, original } => {
                let copy = self.draft(process, *original)?.clone();
                self.graphs.insert((process, *graph), copy);
            }
            GraphCall::Instantiate { graph, exec } => {
                let name = self.graph_name(process, *graph)?;
                let instance = self.instantiate(process, *graph, name)?;
                self.execs.insert((process, *exec), instance);
            }
            GraphCall::ExecUpdate { exec, graph } => {
                let name = self.instance_mut(process, *exec)?.graph.name.clone();
                let instance = self.instantiate(process, *graph, name)?;
                self.execs.insert((process, *exec), instance);
            }
            GraphCall::Destroy { graph } => {
                self.graphs.remove(&(process, *graph));
            }
            GraphCall::ExecDestroy { exec } => {
                self.execs.remove(&(process, *exec));
            }
            GraphCall::Launch { exec, stream } => {
                let runs = self.host_runs.remove(&(process, *stream)).unwrap_or_default();
                let instance = self.instance_mut(process, *exec)?;
                let graph = instance.graph.clone();
                let host_runs = (runs.into_iter())
                    .map(|run| {
                        let index = instance.by_handle.get(&run.node).copied();
                        let node = index.filter(|&i| graph.nodes.get(i).is_some_and(|n| n.kind == NodeKind::Host));
                        HostNodeRun { node, name: run.name, accesses: run.accesses }
                    })
                    .collect();
                let kind = OpKind::GraphLaunch { stream: *stream, graph, host_runs };
                let launch = Operation { kind, ..op.clone() };
                // A graph launched into a capture is a child node of the captured graph.
                return match self.capturing.get(stream) {
                    Some(&capture) => self.captured(capture, *stream, launch),
                    None => Ok(Some(launch)),
                };
            }
        }
        Ok(None)
    }

    fn draft(&self, process: ProcessId, graph: u64) -> Result<&Arc<Draft>, GraphProblem> {
        self.graphs.get(&(process, graph)).ok_or_else(|| unknown_graph(graph))
    }

    /// The capture `stream` takes part in.
    fn capture_of(&self, stream: StreamId) -> Result<u32, GraphProblem> {
        self.capturing.get(&stream).copied().ok_or_else(|| {
            GraphProblem::new("a capture's dependencies are asked for or changed on a stream that is not capturing")
        })
    }

    /// The graph, to change: the capture's while it is being captured, else copied first when a child node still
    /// runs it as it was.
    fn draft_mut(&mut self, process: ProcessId, graph: u64) -> Result<&mut Draft, GraphProblem> {
        if let Some(capture) = self.capture_graphs.get(&(process, graph)).and_then(|id| self.captures.get_mut(id)) {
            return Ok(&mut capture.draft);
        }
        self.graphs.get_mut(&(process, graph)).map(Arc::make_mut).ok_or_else(|| unknown_graph(graph))
    }

    /// The graph a child node added now runs, as it is now; refused when it would nest too deep.
    fn child_graph(&self, process: ProcessId, child: Option<u64>) -> Result<Option<Arc<Draft>>, GraphProblem> {
        let Some(child) = child else { return Ok(None) };
        let draft = self.draft(process, child)?;
        if draft.depth + 1 > MAX_NESTING {
            return Err(GraphProblem::new(format!(
                "graph {child:#x} as a child graph nests child graphs more than {MAX_NESTING} levels deep"
            )));
        }
        Ok(Some(draft.clone()))
    }

    fn instance_mut(&mut self, process: ProcessId, exec: u64) -> Result<&mut Instance, GraphProblem> {
        self.execs.get_mut(&(process, exec)).ok_or_else(|| {
            GraphProblem::new(format!("executable graph {exec:#x} was never instantiated (or was destroyed)"))
        })
    }

    /// What reports call a graph: where it was captured or first built, else its handle.
    fn graph_name(&self, process: ProcessId, graph: u64) -> Result<String, GraphProblem> {
        let draft = self.draft(process, graph)?;
        let how = match draft.build {
            GraphBuild::Captured => "captured",
            GraphBuild::Explicit | GraphBuild::Inline => "built",
        };
        let at =
            draft.made_at.clone().or_else(|| draft.nodes.iter().find_map(|n| n.node.made_at.as_ref()?.source.clone()));
        Ok(match at {
            Some(at) => format!("graph {how} at {at}"),
            None => format!("graph {graph:#x}"),
        })
    }

    fn instantiate(&mut self, process: ProcessId, graph: u64, name: String) -> Result<Instance, GraphProblem> {
        let draft = self.with_bodies(process, self.draft(process, graph)?, 0, &mut HashMap::default())?;
        let (build, made_at) = (draft.build, draft.made_at.clone());
        let mut flat = Flat::default();
        let top = flat.add(&draft)?;
        let (nodes, order) = flat.sorted()?;
        let by_handle =
            top.iter().filter_map(|(handle, entries)| Some(((*handle)?, order[*entries.first()?]))).collect();
        self.next_key += 1;
        let exec = GraphExec { key: self.next_key, name, build, made_at, nodes };
        Ok(Instance { graph: Arc::new(exec), by_handle })
    }
}

/// What CUDA promises of a conditional node (its graph runs its bodies 0 or more times, as the condition the
/// device sets says), as the flattening can take it: each body runs once, inside the node's place, its nodes
/// after the node's dependencies and before its dependents. That covers every run: a WHILE node's iterations run
/// one after the other (the next begins when the last has ended), so the accesses of two iterations are ordered
/// as one run's are to the node's surroundings; an IF node with ELSE, or a SWITCH node, runs one body of several,
/// never two at once, so the bodies are put one after the other (an order that joins nothing else). A body
/// that may not run at all is taken as running: a race it would be in is one that runs may show.
impl GraphAssembler {
    /// `draft` with each conditional node (its own and its child graphs') made a child node running its bodies
    /// one after the other, each as it is now; `draft` itself when it has none. `done` keeps what was made of
    /// each graph already (graphs shared by many child nodes are made once).
    fn with_bodies(
        &self,
        process: ProcessId,
        draft: &Arc<Draft>,
        depth: u32,
        done: &mut HashMap<*const Draft, Arc<Draft>>,
    ) -> Result<Arc<Draft>, GraphProblem> {
        if !draft.conditionals {
            return Ok(draft.clone());
        }
        if depth > MAX_NESTING {
            return Err(GraphProblem::new(format!(
                "child graphs and conditional bodies nest more than {MAX_NESTING} levels deep"
            )));
        }
        if let Some(made) = done.get(&Arc::as_ptr(draft)) {
            return Ok(made.clone());
        }
        let mut made = Draft::clone(draft);
        for node in made.nodes.iter_mut().filter(|n| !n.removed) {
            if let Some(child) = &node.child {
                node.child = Some(self.with_bodies(process, child, depth + 1, done)?);
            }
            let bodies = std::mem::take(&mut node.bodies);
            if bodies.is_empty() {
                continue;
            }
            let mut chain = Draft::new(GraphBuild::Explicit, draft.made_at.clone());
            for (i, body) in bodies.iter().enumerate() {
                let body = self.with_bodies(process, self.draft(process, *body)?, depth + 2, done)?;
                // Each body after the one before (see above).
                let after = i.checked_sub(1).into_iter().collect();
                let step = GraphNode {
                    kind: crate::model::NodeKind::Empty,
                    made_at: node.node.made_at.clone(),
                    ..GraphNode::with_accesses(format!("{} body {i}", node.node.name), Vec::new(), after)
                };
                chain.push(None, step, Some(body));
            }
            node.child = Some(Arc::new(chain));
        }
        made.recount_depth();
        let made = Arc::new(made);
        done.insert(Arc::as_ptr(draft), made.clone());
        Ok(made)
    }
}

/// Names the nodes a capturing stream's next work depends on (`frontier`) by the handles the driver gave for them
/// (`handles`, from `cudaStreamGetCaptureInfo`), so that nodes added by hand and dependency updates can name them.
/// Handles named before stand for their own nodes; the others are paired with the nodes not named yet in the
/// order both came (the driver's order of a set is not documented: when several unnamed nodes are asked for at
/// once, which is which is taken from the order). A set of another size than the capture's, or a handle of a node
/// the stream does not depend on, names nothing.
fn name_frontier(draft: &mut Draft, frontier: &[usize], handles: &[u64]) -> Result<(), GraphProblem> {
    let disagree = || {
        GraphProblem::new(format!(
            "the driver's dependencies of a capturing stream ({} nodes) are not the {} the capture's order gives",
            handles.len(),
            frontier.len()
        ))
    };
    if handles.len() != frontier.len() {
        return Err(disagree());
    }
    let mut fresh = Vec::new();
    for &handle in handles {
        match draft.index_of(handle) {
            Ok(index) if frontier.contains(&index) => {}
            Ok(_) => return Err(disagree()),
            Err(_) => fresh.push(handle),
        }
    }
    let unnamed: Vec<usize> = frontier.iter().copied().filter(|&i| draft.nodes[i].handle.is_none()).collect();
    if unnamed.len() != fresh.len() {
        return Err(disagree());
    }
    for (handle, index) in fresh.into_iter().zip(unnamed) {
        draft.name(index, handle);
    }
    Ok(())
}

fn unknown_graph(graph: u64) -> GraphProblem {
    GraphProblem::new(format!("graph {graph:#x} does not exist (never created or captured, or destroyed)"))
}

fn apply_params(node: &mut GraphNode, params: &NodeParams) {
    node.kind = params.kind;
    if let Some(name) = &params.name {
        node.name = name.to_string();
    }
    node.accesses.clone_from(&params.accesses);
    node.pointers.clone_from(&params.pointers);
}

/// A graph's nodes with child graphs flattened in, before sorting: dependencies by flat index.
#[derive(Default)]
struct Flat {
    nodes: Vec<GraphNode>,
}

/// Per node of a draft being flattened: the flat nodes that wait for its dependencies (entries), and those its
/// dependents wait for (exits). A plain node is both; a child node its graph's roots and leaves. None: removed.
type Ends = Option<(Vec<usize>, Vec<usize>)>;

/// A node of the top graph: its handle, and the flat nodes that wait for its dependencies.
type HandleEntries = (Option<u64>, Vec<usize>);

/// A draft being flattened, the nodes before `next` done.
struct Level<'d> {
    draft: &'d Draft,
    next: usize,
    ends: Vec<Ends>,
}

impl Flat {
    /// Adds `top`'s nodes, child graphs flattened in where their nodes stand, walking the levels of child graphs
    /// with a stack of its own (a trace may nest them deep); for each of its nodes, its handle and the flat nodes
    /// that stand for it.
    fn add(&mut self, top: &Draft) -> Result<Vec<HandleEntries>, GraphProblem> {
        let mut levels = vec![Level { draft: top, next: 0, ends: Vec::with_capacity(top.nodes.len()) }];
        loop {
            let depth = levels.len();
            let Some(level) = levels.last_mut() else { unreachable!("the top level is popped last") };
            let draft = level.draft;
            if let Some(entry) = draft.nodes.get(level.next) {
                if entry.removed {
                    level.ends.push(None);
                    level.next += 1;
                    continue;
                }
                if let Some(child) = &entry.child {
                    if depth > MAX_NESTING as usize {
                        return Err(GraphProblem::new(format!(
                            "child graphs nest more than {MAX_NESTING} levels deep"
                        )));
                    }
                    levels.push(Level { draft: child, next: 0, ends: Vec::with_capacity(child.nodes.len()) });
                    continue;
                }
                let index = self.plain(&entry.node)?;
                level.ends.push(Some((vec![index], vec![index])));
                level.next += 1;
                continue;
            }
            // Every node of this level has its flat nodes: its dependencies join them.
            let done = levels.pop().unwrap_or_else(|| unreachable!("a level is on the stack"));
            self.wire(done.draft, &done.ends)?;
            let Some(parent) = levels.last_mut() else {
                let handles = done.draft.nodes.iter().map(|n| n.handle);
                return Ok(handles.zip(done.ends).filter_map(|(handle, ends)| Some((handle, ends?.0))).collect());
            };
            let (roots, leaves) = roots_and_leaves(done.draft, &done.ends);
            let ends = if roots.is_empty() {
                // An empty child graph runs nothing: the node stands for itself.
                let index = self.plain(&parent.draft.nodes[parent.next].node)?;
                (vec![index], vec![index])
            } else {
                (roots, leaves)
            };
            parent.ends.push(Some(ends));
            parent.next += 1;
        }
    }

    /// A copy of `node` without its dependencies (wired later, by flat index).
    fn plain(&mut self, node: &GraphNode) -> Result<usize, GraphProblem> {
        if self.nodes.len() >= MAX_FLAT_NODES {
            return Err(GraphProblem::new(format!(
                "the graph has more than {MAX_FLAT_NODES} nodes with its child graphs flattened in"
            )));
        }
        let mut node = node.clone();
        node.depends_on.clear();
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// Makes the entries of each of `draft`'s nodes depend on the exits of its dependencies (through one empty
    /// node where that would be more than [`JOIN_EDGES`] edges).
    fn wire(&mut self, draft: &Draft, ends: &[Ends]) -> Result<(), GraphProblem> {
        for (entry, own) in draft.nodes.iter().zip(ends) {
            let Some((entries, _)) = own else { continue };
            for &dep in &entry.node.depends_on {
                let Some((_, exits)) = ends.get(dep).and_then(Option::as_ref) else { continue };
                let sources = if entries.len() * exits.len() > JOIN_EDGES {
                    let join = self.plain(&GraphNode {
                        kind: crate::model::NodeKind::Empty,
                        ..GraphNode::with_accesses("join".to_string(), Vec::new(), Vec::new())
                    })?;
                    self.nodes[join].depends_on.extend_from_slice(exits);
                    vec![join]
                } else {
                    exits.clone()
                };
                for &e in entries {
                    self.nodes[e].depends_on.extend_from_slice(&sources);
                }
            }
        }
        Ok(())
    }
    /// The nodes in an order where each depends only on earlier ones, as close to the order they were added in as
    /// that allows, and where each flat node went.
    fn sorted(mut self) -> Result<(Vec<GraphNode>, Vec<usize>), GraphProblem> {
        for node in &mut self.nodes {
            node.depends_on.sort_unstable();
            node.depends_on.dedup();
        }
        let count = self.nodes.len();
        let mut waiting: Vec<usize> = self.nodes.iter().map(|n| n.depends_on.len()).collect();
        let mut dependents = vec![Vec::new(); count];
        for (i, node) in self.nodes.iter().enumerate() {
            for &d in &node.depends_on {
                dependents[d].push(i);
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = (0..count).filter(|&i| waiting[i] == 0).map(Reverse).collect();
        let mut order = vec![usize::MAX; count];
        let mut sequence = Vec::with_capacity(count);
        while let Some(Reverse(i)) = ready.pop() {
            order[i] = sequence.len();
            sequence.push(i);
            for &next in &dependents[i] {
                waiting[next] -= 1;
                if waiting[next] == 0 {
                    ready.push(Reverse(next));
                }
            }
        }
        if sequence.len() != count {
            return Err(GraphProblem::new("the graph's dependencies form a cycle"));
        }
        let mut slots: Vec<Option<GraphNode>> = self.nodes.into_iter().map(Some).collect();
        let mut nodes = Vec::with_capacity(count);
        for i in sequence {
            let Some(mut node) = slots[i].take() else { continue };
            node.depends_on = node.depends_on.iter().map(|&d| order[d]).collect();
            node.depends_on.sort_unstable();
            nodes.push(node);
        }
        Ok((nodes, order))
    }
}

/// The flat nodes a flattened child graph starts and ends with: the entries of its nodes that depend on none of
/// its nodes, and the exits of those none of its nodes depend on, in flat order.
fn roots_and_leaves(draft: &Draft, ends: &[Ends]) -> (Vec<usize>, Vec<usize>) {
    let live = |dep: &usize| ends.get(*dep).is_some_and(Option::is_some);
    let mut depended = vec![false; ends.len()];
    for (entry, own) in draft.nodes.iter().zip(ends) {
        if own.is_some() {
            entry.node.depends_on.iter().filter(|d| live(d)).for_each(|&d| depended[d] = true);
        }
    }
    let (mut roots, mut leaves) = (Vec::new(), Vec::new());
    for (i, (entry, own)) in draft.nodes.iter().zip(ends).enumerate() {
        let Some((entries, exits)) = own else { continue };
        if !entry.node.depends_on.iter().any(live) {
            roots.extend_from_slice(entries);
        }
        if !depended[i] {
            leaves.extend_from_slice(exits);
        }
    }
    (roots, leaves)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, deps: Vec<usize>) -> GraphNode {
        GraphNode::with_accesses(name.to_string(), Vec::new(), deps)
    }

    #[test]
    fn flattening_puts_a_child_graph_between_its_node_s_dependencies_and_dependents() {
        let mut child = Draft::new(GraphBuild::Explicit, None);
        child.push(None, node("c0", vec![]), None);
        child.push(None, node("c1", vec![0]), None);
        let mut top = Draft::new(GraphBuild::Explicit, None);
        // Added out of dependency order: `after` first, depending on the child node added later.
        top.push(Some(1), node("after", vec![2]), None);
        top.push(Some(2), node("before", vec![]), None);
        top.push(Some(3), node("child", vec![1]), Some(Arc::new(child)));
        top.nodes[0].node.depends_on = vec![2];
        let mut flat = Flat::default();
        flat.add(&top).expect("flattens");
        let (nodes, _) = flat.sorted().expect("no cycle");
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["before", "c0", "c1", "after"]);
        assert_eq!(nodes[1].depends_on, vec![0]);
        assert_eq!(nodes[3].depends_on, vec![2]);
    }

    #[test]
    fn a_cycle_is_refused() {
        let mut top = Draft::new(GraphBuild::Explicit, None);
        top.push(Some(1), node("a", vec![1]), None);
        top.push(Some(2), node("b", vec![0]), None);
        let mut flat = Flat::default();
        flat.add(&top).expect("flattens");
        assert!(flat.sorted().is_err());
    }
}
