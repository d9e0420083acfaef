//! Stream capture and the graph API as records: which stream starts or stops capturing, what the program asks
//! of a capture (its graph, the nodes its stream depends on) and sets there, every node
//! added with its dependencies and what it touches (kernel nodes scanned like launches), edges added and
//! removed, parameter changes of graphs and executable graphs, instantiation, update and destruction. Launches
//! are recorded with the other launches. Every call here is recorded when it returns (calls.rs): the handles
//! it makes are out-parameters, and a call that failed made nothing, except a capture's end: the capture is
//! over either way.

use std::ffi::c_void;

use streamtrace_format::NodeKind;

use crate::call_kinds::{Detail, NodeWord};
use crate::driver_call::{CallContext, DriverCall};
use crate::graph_params::*;
use crate::graph_record::{GraphRecord, NodeBody, NodeOwner};
use crate::host_watch::{self, graph_host_nodes};
use crate::params::{Handle, HostNodeParams, Memcpy3D, OneHandle};
use crate::pitched::{pitched_extent, PitchedCopyShape};
use crate::process_state::ProcessState;
use crate::record::{Call, Record};

/// The most dependencies or edges one call is believed to pass: the injected library must not read far into
/// the program's memory on a malformed call.
const MAX_LIST: usize = 1 << 16;

fn emit(state: &mut ProcessState, cx: &CallContext, graph: GraphRecord, api: &'static str) {
    state.emit(cx.call, Record::Graph { graph, api })
}

/// The node parameter word of a typed call (calls.rs).
fn node_word(data: &DriverCall<'_>) -> NodeWord {
    match data.detail {
        Detail::Node(word) => word,
        _ => NodeWord::Other,
    }
}

/// Every cuStreamBeginCapture form.
pub fn begin_capture(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: every cuStreamBeginCapture form's block starts with the stream: BeginCapture.
    let Some(p) = (unsafe { data.params::<BeginCapture>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    emit(state, cx, GraphRecord::CaptureBegin { stream, into: None }, "cuStreamBeginCapture");
}

pub fn begin_capture_to_graph(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamBeginCaptureToGraph's block starts (hStream, hGraph): BeginCaptureToGraph.
    let Some(p) = (unsafe { data.params::<BeginCaptureToGraph>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    state.capturing_into.insert(stream, p.hGraph as u64);
    let record = GraphRecord::CaptureBegin { stream, into: Some(p.hGraph as u64) };
    emit(state, cx, record, "cuStreamBeginCaptureToGraph");
    // The nodes of the graph the captured work starts after, as cuStreamUpdateCaptureDependencies sets them.
    // Safety: the call's own array of `numDependencies` nodes (`handles` checks null and the count).
    let deps = unsafe { handles(p.dependencies, p.numDependencies) };
    if !deps.is_empty() {
        let record = GraphRecord::CaptureDependencies { stream, deps: deps.into(), set: true };
        emit(state, cx, record, "cuStreamBeginCaptureToGraph");
    }
}

/// Recorded whether or not it succeeded: the capture is over either way.
pub fn end_capture(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamEndCapture's block is EndCapture.
    let Some(p) = (unsafe { data.params::<EndCapture>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    let into = state.capturing_into.remove(&stream);
    // Safety: written by the driver when the call succeeded; null-checked. A capture into a graph the program
    // has may pass no out-pointer (conditional bodies are filled so): its graph is the one it captured into.
    let graph = match data.succeeded() {
        true => unsafe { p.phGraph.as_ref() }.map(|g| *g as u64).filter(|&g| g != 0).or(into),
        false => None,
    };
    emit(state, cx, GraphRecord::CaptureEnd { stream, graph }, "cuStreamEndCapture");
}

/// What a cuStreamGetCaptureInfo call told the program of a capturing stream, as (stream handle, graph, node
/// handles): none for a stream that is not capturing, or when the program asked for neither the graph nor the
/// nodes (NCCL asks at every collective, PyTorch around its captures).
///
/// # Safety
/// `data` is a cuStreamGetCaptureInfo_v2 or _v3 call (its detail says which) that has returned.
unsafe fn capture_info_of(data: &DriverCall<'_>) -> Option<(Handle, Option<u64>, Option<Vec<u64>>)> {
    if !data.succeeded() {
        return None;
    }
    let (stream, status, graph, deps, count) = match data.detail {
        // Safety: the _v3 block is CaptureInfoWithEdges.
        Detail::CaptureInfo { edges: true } => unsafe { data.params::<CaptureInfoWithEdges>() }
            .map(|p| (p.hStream, p.captureStatus_out, p.graph_out, p.dependencies_out, p.numDependencies_out))?,
        // Safety: the _v2 block is CaptureInfo.
        Detail::CaptureInfo { edges: false } => unsafe { data.params::<CaptureInfo>() }
            .map(|p| (p.hStream, p.captureStatus_out, p.graph_out, p.dependencies_out, p.numDependencies_out))?,
        _ => return None,
    };
    // Safety (all three): out-pointers the driver wrote through, as the call succeeded; null-checked.
    if unsafe { status.as_ref() } != Some(&CAPTURE_STATUS_ACTIVE) {
        return None;
    }
    let graph = unsafe { graph.as_ref() }.map(|g| *g as u64).filter(|&g| g != 0);
    let deps = match unsafe { (deps.as_ref(), count.as_ref()) } {
        // Safety: the driver's array of `count` nodes, valid until the program's next call on the stream.
        (Some(&list), Some(&count)) if count <= MAX_LIST && (count == 0 || !list.is_null()) => {
            Some(unsafe { handles(list, count) })
        }
        _ => None,
    };
    (graph.is_some() || deps.is_some()).then_some((stream, graph, deps))
}

/// Whether a call is worth its stack walk and the state's lock: a capture-information call only when it has
/// something to record (asked on every NCCL collective, mostly of streams that are not capturing).
pub fn records_anything(data: &DriverCall<'_>) -> bool {
    match data.detail {
        // Safety: the detail comes from the call table, which gives it to cuStreamGetCaptureInfo_v2/_v3 only.
        Detail::CaptureInfo { .. } => unsafe { capture_info_of(data) }.is_some(),
        _ => true,
    }
}

/// cuStreamGetCaptureInfo_v2 and _v3 of a capturing stream: the graph being captured (nodes added to it by hand
/// join the capture) and the handles of the nodes the stream's next work depends on, which name captured nodes.
pub fn capture_info(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the table gives this handler the cuStreamGetCaptureInfo forms, at exit.
    let Some((stream, graph, deps)) = (unsafe { capture_info_of(data) }) else { return };
    let stream = state.stream(cx, stream);
    // Captured nodes named now are the graph's: a parameter change of one names its graph.
    if let (Some(graph), Some(deps)) = (graph, &deps) {
        for &node in deps {
            state.graph_of_node.insert(node, graph);
        }
    }
    let record = GraphRecord::CaptureInfo { stream, graph, deps: deps.map(Vec::into_boxed_slice) };
    emit(state, cx, record, "cuStreamGetCaptureInfo");
}

/// cuStreamUpdateCaptureDependencies, both forms: the stream's next captured work depends on the nodes named,
/// instead of (CU_STREAM_SET_CAPTURE_DEPENDENCIES) or as well as what it depended on.
pub fn update_capture_dependencies(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    let update = match data.detail {
        // Safety: the _v2 block is UpdateCaptureDependenciesWithEdges.
        Detail::CaptureUpdate { edges: true } => unsafe { data.params::<UpdateCaptureDependenciesWithEdges>() }
            .map(|p| (p.hStream, p.dependencies, p.numDependencies, p.flags)),
        // Safety: the first form's block is UpdateCaptureDependencies.
        Detail::CaptureUpdate { edges: false } => unsafe { data.params::<UpdateCaptureDependencies>() }
            .map(|p| (p.hStream, p.dependencies, p.numDependencies, p.flags)),
        _ => None,
    };
    let Some((stream, list, count, flags)) = update else { return };
    if count > MAX_LIST || (list.is_null() && count > 0) {
        return;
    }
    // Safety: the program's array of `count` nodes (the call succeeded with it).
    let deps = unsafe { handles(list, count) }.into_boxed_slice();
    let stream = state.stream(cx, stream);
    let record = GraphRecord::CaptureDependencies { stream, deps, set: flags == SET_CAPTURE_DEPENDENCIES };
    emit(state, cx, record, "cuStreamUpdateCaptureDependencies");
}

pub fn create(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphCreate's block starts with the new graph's out-pointer: GraphOut.
    let Some(p) = (unsafe { data.params::<GraphOut>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the graph; null-checked.
    let Some(graph) = (unsafe { p.phGraph.as_ref() }).map(|g| *g as u64) else { return };
    emit(state, cx, GraphRecord::Create { graph }, "cuGraphCreate");
}

pub fn clone(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphClone's block is (phGraphClone, originalGraph): GraphOut.
    let Some(p) = (unsafe { data.params::<GraphOut>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the graph; null-checked.
    let Some(graph) = (unsafe { p.phGraph.as_ref() }).map(|g| *g as u64) else { return };
    emit(state, cx, GraphRecord::Clone { graph, original: p.other as u64 }, "cuGraphClone");
}

/// cuGraphAddNode_v2 and _v3: a generic node with edge data.
pub fn add_node_with_edges(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphAddNode_v2/_v3's block is AddNodeWithEdges.
    let Some(p) = (unsafe { data.params::<AddNodeWithEdges>() }) else { return };
    // Safety: the program's node parameters, valid while the call runs; null-checked.
    let Some(params) = (unsafe { p.nodeParams.as_ref() }) else { return };
    // Safety: as above.
    let body = unsafe { generic_body(state, cx.call, params) };
    // Safety: the dependency array of `numDependencies` handles.
    let deps = unsafe { handles(p.dependencies, p.numDependencies) };
    add_node_record(state, cx.call, p.phGraphNode, p.hGraph, deps, body, "cuGraphAddNode");
}

/// Every cuGraphAdd*Node but the edge-data forms.
pub fn add_node(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: every cuGraphAdd*Node but the edge-data forms starts (phGraphNode, hGraph, dependencies,
    // numDependencies) and then its own parameters, each one word: AddNode<*const c_void>.
    let Some(p) = (unsafe { data.params::<AddNode<*const c_void>>() }) else { return };
    // Safety: the word after the common fields is the node's parameter of the kind calls.rs names.
    let body = unsafe { word_body(state, cx.call, node_word(data), p.rest) };
    // Safety: the dependency array of `numDependencies` handles.
    let deps = unsafe { handles(p.dependencies, p.numDependencies) };
    add_node_record(state, cx.call, p.phGraphNode, p.hGraph, deps, body, "cuGraphAdd*Node");
}

/// cuGraphAddDependencies and cuGraphRemoveDependencies, both versions.
pub fn dependencies(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    let Detail::Edges { added, v2 } = data.detail else { return };
    let edges = if v2 {
        // Safety: the _v2 block is DependenciesWithEdges.
        unsafe { data.params::<DependenciesWithEdges>() }.map(|p| (p.hGraph, p.from, p.to, p.numDependencies))
    } else {
        // Safety: the first version's block is Dependencies.
        unsafe { data.params::<Dependencies>() }.map(|p| (p.hGraph, p.from, p.to, p.numDependencies))
    };
    let Some((graph, from, to, count)) = edges else { return };
    // Safety: both arrays hold `count` handles (the call succeeded with them).
    let (from, to) = unsafe { (handles(from, count), handles(to, count)) };
    for (from, to) in from.into_iter().zip(to) {
        let record = GraphRecord::Dependencies { graph: graph as u64, node: to, deps: Box::new([from]), added };
        emit(state, cx, record, if added { "cuGraphAddDependencies" } else { "cuGraphRemoveDependencies" });
    }
}

/// The graph-side node setters (cuGraph*NodeSetParams, cuGraphEvent*NodeSetEvent).
pub fn set_node(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the graph-side setters' blocks are (hNode, one parameter word): NodeSet<*const c_void>.
    let Some(p) = (unsafe { data.params::<NodeSet<*const c_void>>() }) else { return };
    let node = p.hNode as u64;
    // Nodes of captured graphs were never added through the API: their graph is not known here.
    let Some(&graph) = state.graph_of_node.get(&node) else { return };
    // Safety: the parameter word is the setter's pointer or handle of the kind calls.rs names.
    let body = unsafe { word_body(state, cx.call, node_word(data), p.params) };
    emit(state, cx, GraphRecord::NodeUpdate { owner: NodeOwner::Graph(graph), node, body }, "cuGraph*NodeSetParams");
}

/// The executable-graph node setters (cuGraphExec*NodeSetParams, cuGraphExecEvent*NodeSetEvent).
pub fn set_exec_node(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: the executable-graph setters' blocks are (hGraphExec, hNode, one parameter word).
    let Some(p) = (unsafe { data.params::<ExecNodeSet<*const c_void>>() }) else { return };
    // Safety: the parameter word is the setter's pointer or handle of the kind calls.rs names.
    let body = unsafe { word_body(state, cx.call, node_word(data), p.params) };
    let record = GraphRecord::NodeUpdate { owner: NodeOwner::Exec(p.hGraphExec as u64), node: p.hNode as u64, body };
    emit(state, cx, record, "cuGraphExec*NodeSetParams");
    if node_word(data) == NodeWord::Generic {
        // Safety: a generic setter's word is the program's CUgraphNodeParams, null-checked.
        if let Some(params) = unsafe { (p.params as *const NodeParams).as_ref() } {
            if params.node_type == NODE_HOST {
                // Safety: a host node's union starts as CUDA_HOST_NODE_PARAMS (v2 adds a word after them).
                let host = unsafe { &*(params.params.as_ptr() as *const HostNodeParams) };
                // Safety: the exit of the program's successful call with these arguments.
                unsafe { graph_host_nodes::exec_node_set(p.hGraphExec, p.hNode, host.fn_, host.userData) };
            }
        }
    }
}

pub fn destroy_node(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphDestroyNode's block is its node handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    let node = p.handle as u64;
    if let Some(graph) = state.graph_of_node.remove(&node) {
        emit(state, cx, GraphRecord::NodeDestroy { graph, node }, "cuGraphDestroyNode");
    }
}

/// Every instantiation form.
pub fn instantiate(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: every instantiation form starts (phGraphExec, hGraph): Instantiate.
    let Some(p) = (unsafe { data.params::<Instantiate>() }) else { return };
    // Safety: the call succeeded, so the driver wrote the executable graph; null-checked.
    let Some(exec) = (unsafe { p.phGraphExec.as_ref() }).map(|e| *e as u64) else { return };
    emit(state, cx, GraphRecord::Instantiate { graph: p.hGraph as u64, exec }, "cuGraphInstantiate");
    if host_watch::wrap_host_funcs() {
        // Safety: the exit of a successful instantiation of this graph into this executable graph.
        unsafe { graph_host_nodes::instantiated(p.hGraph, exec as Handle) };
    }
}

pub fn exec_update(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: both versions start (hGraphExec, hGraph): ExecUpdate.
    let Some(p) = (unsafe { data.params::<ExecUpdate>() }) else { return };
    let record = GraphRecord::ExecUpdate { exec: p.hGraphExec as u64, graph: p.hGraph as u64 };
    emit(state, cx, record, "cuGraphExecUpdate");
    // The update gave its host nodes the program's parameters again.
    graph_host_nodes::forget(p.hGraphExec as u64);
}

pub fn destroy(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphDestroy's block is its graph handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    let graph = p.handle as u64;
    state.graph_of_node.retain(|_, g| *g != graph);
    emit(state, cx, GraphRecord::Destroy { graph }, "cuGraphDestroy");
}

pub fn exec_destroy(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphExecDestroy's block is its executable graph's handle.
    let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return };
    emit(state, cx, GraphRecord::ExecDestroy { exec: p.handle as u64 }, "cuGraphExecDestroy");
    graph_host_nodes::forget(p.handle as u64);
}

fn add_node_record(
    state: &mut ProcessState,
    call: Call,
    out: *mut Handle,
    graph: Handle,
    deps: Vec<u64>,
    body: NodeBody,
    api: &'static str,
) {
    // Safety: the call succeeded, so the driver wrote the new node through `out`; null-checked.
    let Some(node) = (unsafe { out.as_ref() }).map(|n| *n as u64) else { return };
    let graph = graph as u64;
    state.graph_of_node.insert(node, graph);
    // A conditional node's bodies are graphs the driver made with it: declared first, so that what the program
    // builds into them stands even where the node itself cannot be taken (a node added to a capturing stream's
    // graph, whose handle the trace does not name).
    if let NodeBody::Conditional { bodies } = &body {
        for &body in bodies.iter() {
            state.emit(call, Record::Graph { graph: GraphRecord::Create { graph: body }, api });
        }
    }
    state.emit(
        call,
        Record::Graph { graph: GraphRecord::Node { graph, node, deps: deps.into_boxed_slice(), body }, api },
    );
}

/// `count` handles from `list`; none when it is null or the count is past belief.
///
/// # Safety
/// `list` is null or holds `count` readable handles.
unsafe fn handles(list: *const Handle, count: usize) -> Vec<u64> {
    if list.is_null() || count > MAX_LIST {
        return Vec::new();
    }
    // Safety: `i < count` entries are readable (the caller's promise).
    (0..count).map(|i| unsafe { *list.add(i) } as u64).collect()
}

/// The node a typed graph call (`cuGraphAdd*Node`, a node setter) describes with its parameter word.
///
/// # Safety
/// `word` is the parameter of kind `kind` the call passes (a pointer to its node parameters, a handle, or an
/// address), valid while the call runs.
unsafe fn word_body(state: &mut ProcessState, call: Call, kind: NodeWord, word: *const c_void) -> NodeBody {
    match kind {
        // Safety (kernels, copies, sets, generic nodes): `word` points to the parameters `kind` names.
        NodeWord::Kernel => unsafe { kernel_body(state, call, word as *const KernelNodeParams, false) },
        NodeWord::KernelV2 => unsafe { kernel_body(state, call, word as *const KernelNodeParams, true) },
        NodeWord::Memcpy => unsafe { copy_body(state, word as *const Memcpy3D) },
        NodeWord::Memset => unsafe { set_body(word as *const MemsetNodeParams) },
        NodeWord::Child => NodeBody::Child { graph: word as u64 },
        NodeWord::EventRecord => event_node(state, call, NodeKind::EventRecord, word as u64),
        NodeWord::EventWait => event_node(state, call, NodeKind::EventWait, word as u64),
        NodeWord::MemAlloc => {
            // Safety: the allocation's parameters; the driver wrote `dptr` (the call succeeded).
            match unsafe { (word as *const MemAllocNodeParams).as_ref() } {
                Some(a) => graph_alloc(state, a),
                None => NodeBody::Plain(NodeKind::Other),
            }
        }
        NodeWord::MemFree => graph_free(state, word as u64),
        NodeWord::Host => NodeBody::Plain(NodeKind::Host),
        NodeWord::Empty => NodeBody::Plain(NodeKind::Empty),
        NodeWord::Generic => unsafe { generic_body(state, call, word as *const NodeParams) },
        NodeWord::Other => NodeBody::Plain(NodeKind::Other),
    }
}

/// A CUgraphNodeParams's node; an unknown one when `params` is null.
///
/// # Safety
/// `params` is null or the program's CUgraphNodeParams, whose pointers are valid while the call runs.
unsafe fn generic_body(state: &mut ProcessState, call: Call, params: *const NodeParams) -> NodeBody {
    // Safety: the caller's promise; null-checked.
    let Some(params) = (unsafe { params.as_ref() }) else { return NodeBody::Plain(NodeKind::Other) };
    let union = params.params.as_ptr() as *const c_void;
    let first = params.params[0];
    match params.node_type {
        // Safety (both): the union holds the node type's own struct, from its start.
        NODE_KERNEL => unsafe { kernel_body(state, call, union as *const KernelNodeParams, true) },
        NODE_MEMCPY => unsafe { copy_body(state, &(*(union as *const MemcpyNodeParams)).copyParams) },
        // Safety: CUDA_MEMSET_NODE_PARAMS_v2 starts as the first version.
        NODE_MEMSET => unsafe { set_body(union as *const MemsetNodeParams) },
        NODE_HOST => NodeBody::Plain(NodeKind::Host),
        NODE_GRAPH => NodeBody::Child { graph: first },
        NODE_EMPTY => NodeBody::Plain(NodeKind::Empty),
        NODE_WAIT_EVENT => event_node(state, call, NodeKind::EventWait, first),
        NODE_EVENT_RECORD => event_node(state, call, NodeKind::EventRecord, first),
        NODE_MEM_ALLOC => {
            // Safety: CUDA_MEM_ALLOC_NODE_PARAMS_v2 starts as the first version.
            graph_alloc(state, unsafe { &*(union as *const MemAllocNodeParams) })
        }
        NODE_MEM_FREE => graph_free(state, first),
        // Safety: the union holds CUDA_CONDITIONAL_NODE_PARAMS, whose body graphs the driver wrote.
        NODE_CONDITIONAL => unsafe { conditional_body(params) },
        _ => NodeBody::Plain(NodeKind::Other),
    }
}

/// The body graphs a conditional node holds at most, as far as the capture believes a call.
const MAX_BODIES: usize = 1 << 10;

/// A conditional node with its body graphs: CUDA_CONDITIONAL_NODE_PARAMS is (handle: u64, type: u32, size: u32,
/// phGraph_out: CUgraph*, ctx), and the driver writes `size` body graphs through `phGraph_out` (one for IF and
/// WHILE, two for IF with ELSE, one per case for SWITCH).
///
/// # Safety
/// `params` holds the conditional node's parameters of a call that succeeded.
unsafe fn conditional_body(params: &NodeParams) -> NodeBody {
    let size = (params.params[1] >> 32) as usize;
    let out = params.params[2] as *const Handle;
    if out.is_null() || size > MAX_BODIES {
        return NodeBody::Plain(NodeKind::Conditional);
    }
    // Safety: the driver wrote `size` graphs there (the caller's promise).
    let bodies = (0..size).map(|i| unsafe { *out.add(i) } as u64).filter(|&g| g != 0).collect();
    NodeBody::Conditional { bodies }
}

/// An event record or wait node, its event declared on first sight.
fn event_node(state: &mut ProcessState, call: Call, kind: NodeKind, event: u64) -> NodeBody {
    NodeBody::Event { kind, event: state.event(call, event) }
}

/// A graph allocation node; its size is kept for the node that frees it, which names only the address.
fn graph_alloc(state: &mut ProcessState, alloc: &MemAllocNodeParams) -> NodeBody {
    let bytes = alloc.bytesize as u64;
    state.graph_allocs.insert(alloc.dptr, bytes);
    NodeBody::Memory { kind: NodeKind::MemAlloc, range: (alloc.dptr, bytes) }
}

fn graph_free(state: &mut ProcessState, address: u64) -> NodeBody {
    let bytes = state.graph_allocs.get(&address).copied().unwrap_or(1);
    NodeBody::Memory { kind: NodeKind::MemFree, range: (address, bytes) }
}

/// A kernel node: its function's layout and its pointer arguments, scanned like a launch's.
///
/// # Safety
/// `params` is null or the node's kernel parameters (with `kern` and `ctx` when `v2`), whose argument arrays are
/// valid while the call runs.
unsafe fn kernel_body(state: &mut ProcessState, call: Call, params: *const KernelNodeParams, v2: bool) -> NodeBody {
    // Safety: the caller's promise; null-checked.
    let Some(p) = (unsafe { params.as_ref() }) else { return NodeBody::Plain(NodeKind::Kernel) };
    // The runtime may give a library kernel (`kern`) instead of a function.
    // Safety: the v2 layout extends the first version's.
    let handle = if p.func.is_null() && v2 { unsafe { (*(params as *const KernelNodeParamsV2)).kern } } else { p.func };
    if handle.is_null() {
        return NodeBody::Plain(NodeKind::Kernel);
    }
    // Safety: the node's own argument arrays for kernel `handle`.
    unsafe { state.kernel_body(call, handle, p.kernelParams, p.extra) }
}

/// A copy node's two sides.
///
/// # Safety
/// `copy` is null or the node's CUDA_MEMCPY3D.
unsafe fn copy_body(state: &ProcessState, copy: *const Memcpy3D) -> NodeBody {
    // Safety: the caller's promise; null-checked.
    let Some(copy) = (unsafe { copy.as_ref() }) else { return NodeBody::Plain(NodeKind::Memcpy) };
    let shape = PitchedCopyShape::of_3d(copy);
    NodeBody::Copy { from: state.pitched_side(&shape.src).0, to: state.pitched_side(&shape.dst).0 }
}

/// A set node's rows.
///
/// # Safety
/// `set` is null or the node's CUDA_MEMSET_NODE_PARAMS.
unsafe fn set_body(set: *const MemsetNodeParams) -> NodeBody {
    // Safety: the caller's promise; null-checked.
    let Some(s) = (unsafe { set.as_ref() }) else { return NodeBody::Plain(NodeKind::Memset) };
    let row = (s.width as u64).saturating_mul(u64::from(s.elementSize));
    NodeBody::Set { to: (s.dst, pitched_extent(s.pitch, row, s.height, 1, 0)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::Handler;
    use crate::live_capture_tests::{capture_on, trace_lines_of, with_state};
    use crate::origin::thread_id;

    /// Calls `handler` at the exit of a call that succeeded with `block`, on the legacy stream of context 7.
    fn returned(handler: Handler, detail: Detail, block: *const c_void) {
        let result = 0i32;
        with_state(|state, call| {
            // Safety: `block` is the layout `detail` names, alive for the call; `result` lives past it.
            let data = unsafe { DriverCall::new(detail, block, true, &result) };
            if records_anything(&data) {
                handler(state, &CallContext::new(call, 7, None, false), &data);
            }
        });
    }

    #[test]
    fn capture_dependency_calls_record_what_the_driver_said_and_the_program_set_and_began_with() {
        capture_on();
        let nodes = [0x161usize as Handle, 0x162usize as Handle];
        // A capture into a graph the program has, after one of its nodes.
        let begin = BeginCaptureToGraph {
            hStream: std::ptr::null_mut(),
            hGraph: 0x100usize as Handle,
            dependencies: nodes.as_ptr(),
            dependencyData: std::ptr::null(),
            numDependencies: 1,
        };
        returned(begin_capture_to_graph, Detail::None, &begin as *const _ as *const c_void);
        let (mut status, mut graph, mut list, mut count) =
            (CAPTURE_STATUS_ACTIVE, 0x100usize as Handle, nodes.as_ptr(), 2);
        let mut info = CaptureInfoWithEdges {
            hStream: std::ptr::null_mut(),
            captureStatus_out: &mut status,
            id_out: std::ptr::null_mut(),
            graph_out: &mut graph,
            dependencies_out: &mut list,
            edgeData_out: std::ptr::null_mut(),
            numDependencies_out: &mut count,
        };
        let v3 = Detail::CaptureInfo { edges: true };
        returned(capture_info, v3, &info as *const _ as *const c_void);
        // Asked for the graph only; then for neither (a status query: nothing to record).
        info.dependencies_out = std::ptr::null_mut();
        returned(capture_info, v3, &info as *const _ as *const c_void);
        info.graph_out = std::ptr::null_mut();
        returned(capture_info, v3, &info as *const _ as *const c_void);
        // A stream that is not capturing: nothing either.
        let mut idle = 0u32;
        let (mut graph, mut list) = (0x100usize as Handle, nodes.as_ptr());
        let v2 = CaptureInfo {
            hStream: std::ptr::null_mut(),
            captureStatus_out: &mut idle,
            id_out: std::ptr::null_mut(),
            graph_out: &mut graph,
            dependencies_out: &mut list,
            numDependencies_out: &mut count,
        };
        returned(capture_info, Detail::CaptureInfo { edges: false }, &v2 as *const _ as *const c_void);
        let set = UpdateCaptureDependenciesWithEdges {
            hStream: std::ptr::null_mut(),
            dependencies: nodes[1..].as_ptr(),
            dependencyData: std::ptr::null(),
            numDependencies: 1,
            flags: SET_CAPTURE_DEPENDENCIES,
        };
        returned(update_capture_dependencies, Detail::CaptureUpdate { edges: true }, &set as *const _ as *const c_void);
        let add = UpdateCaptureDependencies {
            hStream: std::ptr::null_mut(),
            dependencies: nodes.as_ptr(),
            numDependencies: 2,
            flags: 0,
        };
        returned(
            update_capture_dependencies,
            Detail::CaptureUpdate { edges: false },
            &add as *const _ as *const c_void,
        );

        let lines: Vec<String> = trace_lines_of(&[thread_id()])
            .into_iter()
            .filter(|v| v["type"].as_str().is_some_and(|t| t.starts_with("capture_")))
            .map(|v| format!("{} stream {} graph {} deps {}", v["type"], v["stream"], v["graph"], v["deps"]))
            .collect();
        assert_eq!(
            lines,
            [
                r#""capture_begin" stream 7 graph 256 deps null"#,
                r#""capture_deps_set" stream 7 graph null deps [353]"#,
                r#""capture_info" stream 7 graph 256 deps [353,354]"#,
                r#""capture_info" stream 7 graph 256 deps null"#,
                r#""capture_deps_set" stream 7 graph null deps [354]"#,
                r#""capture_deps_add" stream 7 graph null deps [353,354]"#,
            ]
        );
        // The nodes named are the graph's: a parameter change of one is recorded with its graph.
        with_state(|state, _| assert_eq!(state.graph_of_node.get(&0x161), Some(&0x100)));
    }
}
