//! Stream capture and the graph API as records: which stream starts or stops capturing, every node
//! added with its dependencies and what it touches (kernel nodes scanned like launches), edges added and
//! removed, parameter changes of graphs and executable graphs, instantiation, update and destruction. Launches
//! are recorded with the other stream calls. Every call here is recorded when it returns: the handles it makes
//! are out-parameters, and a call that failed made nothing.

use std::ffi::c_void;

use streamtrace_format::NodeKind;

use crate::callback::CallData;
use crate::cbid::*;
use crate::graph_params::*;
use crate::graph_record::{GraphRecord, NodeBody, NodeOwner};
use crate::params::{Handle, Memcpy3D, OneHandle};
use crate::pitched::{pitched_extent, PitchedCopyShape};
use crate::record::{Call, Record};
use crate::state::ProcessState;

/// The most dependencies or edges one call is believed to pass: the injected library must not read far into
/// the program's memory on a malformed call.
const MAX_LIST: usize = 1 << 16;

/// Records one graph call; false when `data` is no graph call.
pub fn on_graph_call(state: &mut ProcessState, data: &CallData, call: Call, context: u32, device: Option<u32>) -> bool {
    let cbid = data.cbid();
    if !GRAPH_CALLS.contains(&cbid) {
        return false;
    }
    let ended_capture = matches!(cbid, CU_STREAM_END_CAPTURE | CU_STREAM_END_CAPTURE_PTSZ);
    // A failed call made nothing, except a capture's end: the capture is over either way.
    if !data.succeeded() && !ended_capture {
        return true;
    }
    let pt = per_thread(cbid);
    let emit = |state: &mut ProcessState, graph: GraphRecord, api: &'static str| {
        state.emit(call, Record::Graph { graph, api })
    };
    match cbid {
        CU_STREAM_BEGIN_CAPTURE
        | CU_STREAM_BEGIN_CAPTURE_PTSZ
        | CU_STREAM_BEGIN_CAPTURE_V2
        | CU_STREAM_BEGIN_CAPTURE_V2_PTSZ => {
            // Safety: every cuStreamBeginCapture form's block starts with the stream: BeginCapture.
            let Some(p) = (unsafe { data.params::<BeginCapture>() }) else { return true };
            let stream = state.stream(call, context, device, p.hStream, pt);
            emit(state, GraphRecord::CaptureBegin { stream, into: None }, "cuStreamBeginCapture");
        }
        CU_STREAM_BEGIN_CAPTURE_TO_GRAPH | CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ => {
            // Safety: cuStreamBeginCaptureToGraph's block starts (hStream, hGraph): BeginCaptureToGraph.
            let Some(p) = (unsafe { data.params::<BeginCaptureToGraph>() }) else { return true };
            let stream = state.stream(call, context, device, p.hStream, pt);
            emit(
                state,
                GraphRecord::CaptureBegin { stream, into: Some(p.hGraph as u64) },
                "cuStreamBeginCaptureToGraph",
            );
        }
        CU_STREAM_END_CAPTURE | CU_STREAM_END_CAPTURE_PTSZ => {
            // Safety: cuStreamEndCapture's block is EndCapture.
            let Some(p) = (unsafe { data.params::<EndCapture>() }) else { return true };
            let stream = state.stream(call, context, device, p.hStream, pt);
            // Safety: written by the driver when the call succeeded; null-checked.
            let graph = if data.succeeded() {
                unsafe { p.phGraph.as_ref() }.map(|g| *g as u64).filter(|&g| g != 0)
            } else {
                None
            };
            emit(state, GraphRecord::CaptureEnd { stream, graph }, "cuStreamEndCapture");
        }
        CU_GRAPH_CREATE | CU_GRAPH_CLONE => {
            // Safety: both blocks start with the new graph's out-pointer: GraphOut.
            let Some(p) = (unsafe { data.params::<GraphOut>() }) else { return true };
            // Safety: the call succeeded, so the driver wrote the graph; null-checked.
            let Some(graph) = (unsafe { p.phGraph.as_ref() }).map(|g| *g as u64) else { return true };
            if cbid == CU_GRAPH_CREATE {
                emit(state, GraphRecord::Create { graph }, "cuGraphCreate");
            } else {
                emit(state, GraphRecord::Clone { graph, original: p.other as u64 }, "cuGraphClone");
            }
        }
        CU_GRAPH_ADD_NODE_V2 | CU_GRAPH_ADD_NODE_V3 => {
            // Safety: cuGraphAddNode_v2/_v3's block is AddNodeWithEdges.
            let Some(p) = (unsafe { data.params::<AddNodeWithEdges>() }) else { return true };
            // Safety: the program's node parameters, valid while the call runs; null-checked.
            let Some(params) = (unsafe { p.nodeParams.as_ref() }) else { return true };
            // Safety: as above.
            let body = unsafe { generic_body(state, call, params) };
            // Safety: the dependency array of `numDependencies` handles.
            let deps = unsafe { handles(p.dependencies, p.numDependencies) };
            add_node(state, call, p.phGraphNode, p.hGraph, deps, body, "cuGraphAddNode");
        }
        CU_GRAPH_ADD_KERNEL_NODE
        | CU_GRAPH_ADD_KERNEL_NODE_V2
        | CU_GRAPH_ADD_MEMCPY_NODE
        | CU_GRAPH_ADD_MEMSET_NODE
        | CU_GRAPH_ADD_HOST_NODE
        | CU_GRAPH_ADD_EMPTY_NODE
        | CU_GRAPH_ADD_CHILD_GRAPH_NODE
        | CU_GRAPH_ADD_EVENT_RECORD_NODE
        | CU_GRAPH_ADD_EVENT_WAIT_NODE
        | CU_GRAPH_ADD_MEM_ALLOC_NODE
        | CU_GRAPH_ADD_MEM_FREE_NODE
        | CU_GRAPH_ADD_EXT_SEMAS_SIGNAL_NODE
        | CU_GRAPH_ADD_EXT_SEMAS_WAIT_NODE
        | CU_GRAPH_ADD_BATCH_MEM_OP_NODE
        | CU_GRAPH_ADD_NODE => {
            // Safety: every cuGraphAdd*Node but the edge-data forms starts (phGraphNode, hGraph, dependencies,
            // numDependencies) and then its own parameters, each one word: AddNode<*const c_void>.
            let Some(p) = (unsafe { data.params::<AddNode<*const c_void>>() }) else { return true };
            // Safety: the word after the common fields is the node's parameter (pointer or handle) for `cbid`.
            let body = unsafe { typed_body(state, call, cbid, p.rest) };
            // Safety: the dependency array of `numDependencies` handles.
            let deps = unsafe { handles(p.dependencies, p.numDependencies) };
            add_node(state, call, p.phGraphNode, p.hGraph, deps, body, "cuGraphAdd*Node");
        }
        CU_GRAPH_ADD_DEPENDENCIES
        | CU_GRAPH_REMOVE_DEPENDENCIES
        | CU_GRAPH_ADD_DEPENDENCIES_V2
        | CU_GRAPH_REMOVE_DEPENDENCIES_V2 => {
            let v2 = matches!(cbid, CU_GRAPH_ADD_DEPENDENCIES_V2 | CU_GRAPH_REMOVE_DEPENDENCIES_V2);
            let edges = if v2 {
                // Safety: the _v2 block is DependenciesWithEdges.
                unsafe { data.params::<DependenciesWithEdges>() }.map(|p| (p.hGraph, p.from, p.to, p.numDependencies))
            } else {
                // Safety: the first version's block is Dependencies.
                unsafe { data.params::<Dependencies>() }.map(|p| (p.hGraph, p.from, p.to, p.numDependencies))
            };
            let Some((graph, from, to, count)) = edges else { return true };
            // Safety: both arrays hold `count` handles (the call succeeded with them).
            let (from, to) = unsafe { (handles(from, count), handles(to, count)) };
            let added = matches!(cbid, CU_GRAPH_ADD_DEPENDENCIES | CU_GRAPH_ADD_DEPENDENCIES_V2);
            for (from, to) in from.into_iter().zip(to) {
                let record = GraphRecord::Dependencies { graph: graph as u64, node: to, deps: Box::new([from]), added };
                emit(state, record, if added { "cuGraphAddDependencies" } else { "cuGraphRemoveDependencies" });
            }
        }
        CU_GRAPH_KERNEL_NODE_SET_PARAMS
        | CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2
        | CU_GRAPH_MEMCPY_NODE_SET_PARAMS
        | CU_GRAPH_MEMSET_NODE_SET_PARAMS
        | CU_GRAPH_EVENT_RECORD_NODE_SET_EVENT
        | CU_GRAPH_EVENT_WAIT_NODE_SET_EVENT
        | CU_GRAPH_NODE_SET_PARAMS
        | CU_GRAPH_NODE_SET_PARAMS_V2 => {
            // Safety: the graph-side setters' blocks are (hNode, one parameter word): NodeSet<*const c_void>.
            let Some(p) = (unsafe { data.params::<NodeSet<*const c_void>>() }) else { return true };
            let node = p.hNode as u64;
            // Nodes of captured graphs were never added through the API: their graph is not known here.
            let Some(&graph) = state.graph_of_node.get(&node) else { return true };
            // Safety: the parameter word is the setter's pointer or handle for `cbid`.
            let body = unsafe { setter_body(state, call, cbid, p.params) };
            emit(
                state,
                GraphRecord::NodeUpdate { owner: NodeOwner::Graph(graph), node, body },
                "cuGraph*NodeSetParams",
            );
        }
        CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS
        | CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2
        | CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS
        | CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS
        | CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS
        | CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT
        | CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT
        | CU_GRAPH_EXEC_NODE_SET_PARAMS => {
            // Safety: the executable-graph setters' blocks are (hGraphExec, hNode, one parameter word).
            let Some(p) = (unsafe { data.params::<ExecNodeSet<*const c_void>>() }) else { return true };
            // Safety: the parameter word is the setter's pointer or handle for `cbid`.
            let body = unsafe { setter_body(state, call, cbid, p.params) };
            let record =
                GraphRecord::NodeUpdate { owner: NodeOwner::Exec(p.hGraphExec as u64), node: p.hNode as u64, body };
            emit(state, record, "cuGraphExec*NodeSetParams");
        }
        CU_GRAPH_DESTROY_NODE => {
            // Safety: cuGraphDestroyNode's block is its node handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return true };
            let node = p.handle as u64;
            if let Some(graph) = state.graph_of_node.remove(&node) {
                emit(state, GraphRecord::NodeDestroy { graph, node }, "cuGraphDestroyNode");
            }
        }
        CU_GRAPH_INSTANTIATE
        | CU_GRAPH_INSTANTIATE_V2
        | CU_GRAPH_INSTANTIATE_WITH_FLAGS
        | CU_GRAPH_INSTANTIATE_WITH_PARAMS
        | CU_GRAPH_INSTANTIATE_WITH_PARAMS_PTSZ => {
            // Safety: every instantiation form starts (phGraphExec, hGraph): Instantiate.
            let Some(p) = (unsafe { data.params::<Instantiate>() }) else { return true };
            // Safety: the call succeeded, so the driver wrote the executable graph; null-checked.
            let Some(exec) = (unsafe { p.phGraphExec.as_ref() }).map(|e| *e as u64) else { return true };
            emit(state, GraphRecord::Instantiate { graph: p.hGraph as u64, exec }, "cuGraphInstantiate");
        }
        CU_GRAPH_EXEC_UPDATE | CU_GRAPH_EXEC_UPDATE_V2 => {
            // Safety: both versions start (hGraphExec, hGraph): ExecUpdate.
            let Some(p) = (unsafe { data.params::<ExecUpdate>() }) else { return true };
            emit(
                state,
                GraphRecord::ExecUpdate { exec: p.hGraphExec as u64, graph: p.hGraph as u64 },
                "cuGraphExecUpdate",
            );
        }
        CU_GRAPH_DESTROY => {
            // Safety: cuGraphDestroy's block is its graph handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return true };
            let graph = p.handle as u64;
            state.graph_of_node.retain(|_, g| *g != graph);
            emit(state, GraphRecord::Destroy { graph }, "cuGraphDestroy");
        }
        CU_GRAPH_EXEC_DESTROY => {
            // Safety: cuGraphExecDestroy's block is its executable graph's handle.
            let Some(p) = (unsafe { data.params::<OneHandle>() }) else { return true };
            emit(state, GraphRecord::ExecDestroy { exec: p.handle as u64 }, "cuGraphExecDestroy");
        }
        _ => {}
    }
    true
}

fn add_node(
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

/// A typed cuGraphAdd*Node's node, from its parameter word `word`.
///
/// # Safety
/// `word` is the parameter the call `cbid` takes after its dependencies (a pointer to its node parameters, a
/// handle, or an address), valid while the call runs.
unsafe fn typed_body(state: &mut ProcessState, call: Call, cbid: u32, word: *const c_void) -> NodeBody {
    match cbid {
        // Safety: the kernel node parameters of the version `cbid` names.
        CU_GRAPH_ADD_KERNEL_NODE => unsafe { kernel_body(state, call, word as *const KernelNodeParams, false) },
        // Safety: as above.
        CU_GRAPH_ADD_KERNEL_NODE_V2 => unsafe { kernel_body(state, call, word as *const KernelNodeParams, true) },
        // Safety: the copy's CUDA_MEMCPY3D.
        CU_GRAPH_ADD_MEMCPY_NODE => unsafe { copy_body(state, word as *const Memcpy3D) },
        // Safety: the set's CUDA_MEMSET_NODE_PARAMS.
        CU_GRAPH_ADD_MEMSET_NODE => unsafe { set_body(word as *const MemsetNodeParams) },
        CU_GRAPH_ADD_CHILD_GRAPH_NODE => NodeBody::Child { graph: word as u64 },
        CU_GRAPH_ADD_EVENT_RECORD_NODE => event_node(state, call, NodeKind::EventRecord, word as u64),
        CU_GRAPH_ADD_EVENT_WAIT_NODE => event_node(state, call, NodeKind::EventWait, word as u64),
        CU_GRAPH_ADD_MEM_ALLOC_NODE => {
            // Safety: the allocation's parameters; the driver wrote `dptr` (the call succeeded).
            match unsafe { (word as *const MemAllocNodeParams).as_ref() } {
                Some(a) => graph_alloc(state, a),
                None => NodeBody::Plain(NodeKind::Other),
            }
        }
        CU_GRAPH_ADD_MEM_FREE_NODE => graph_free(state, word as u64),
        CU_GRAPH_ADD_HOST_NODE => NodeBody::Plain(NodeKind::Host),
        CU_GRAPH_ADD_EMPTY_NODE => NodeBody::Plain(NodeKind::Empty),
        // Safety: cuGraphAddNode's parameters are a CUgraphNodeParams.
        CU_GRAPH_ADD_NODE => unsafe { generic_body(state, call, word as *const NodeParams) },
        _ => NodeBody::Plain(NodeKind::Other),
    }
}

/// A setter's new parameters as a node body.
///
/// # Safety
/// `word` is the setter's parameter for `cbid` (a pointer to node parameters, or a handle), valid while the
/// call runs.
unsafe fn setter_body(state: &mut ProcessState, call: Call, cbid: u32, word: *const c_void) -> NodeBody {
    // Safety (every arm): `word` is what the setter `cbid` takes.
    match cbid {
        CU_GRAPH_KERNEL_NODE_SET_PARAMS | CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS => unsafe {
            kernel_body(state, call, word as *const KernelNodeParams, false)
        },
        CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2 | CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2 => unsafe {
            kernel_body(state, call, word as *const KernelNodeParams, true)
        },
        CU_GRAPH_MEMCPY_NODE_SET_PARAMS | CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS => unsafe {
            copy_body(state, word as *const Memcpy3D)
        },
        CU_GRAPH_MEMSET_NODE_SET_PARAMS | CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS => unsafe {
            set_body(word as *const MemsetNodeParams)
        },
        CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS => NodeBody::Child { graph: word as u64 },
        CU_GRAPH_EVENT_RECORD_NODE_SET_EVENT | CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT => {
            event_node(state, call, NodeKind::EventRecord, word as u64)
        }
        CU_GRAPH_EVENT_WAIT_NODE_SET_EVENT | CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT => {
            event_node(state, call, NodeKind::EventWait, word as u64)
        }
        CU_GRAPH_NODE_SET_PARAMS | CU_GRAPH_NODE_SET_PARAMS_V2 | CU_GRAPH_EXEC_NODE_SET_PARAMS => unsafe {
            generic_body(state, call, word as *const NodeParams)
        },
        _ => NodeBody::Plain(NodeKind::Other),
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
        NODE_CONDITIONAL => NodeBody::Plain(NodeKind::Conditional),
        _ => NodeBody::Plain(NodeKind::Other),
    }
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
