//! Host functions enqueued on streams (`cuLaunchHostFunc`, `cuStreamAddCallback`): each is a `host_func`
//! record on its stream, and, while the host watch guards pinned memory, its function is wrapped so that a
//! fault inside it is known as its access (host_watch/host_funcs.rs).

use crate::driver_call::{CallContext, DriverCall};
use crate::graph_params::ExecNodeSet;
use crate::host_watch::{self, graph_host_nodes, host_funcs};
use crate::params::{HostNodeParams, LaunchHostFunc, StreamAddCallback};
use crate::process_state::ProcessState;
use crate::record::Record;

pub fn launch(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuLaunchHostFunc's block is LaunchHostFunc.
    let block = unsafe { data.params_mut::<LaunchHostFunc>() };
    // Safety: the block (null is checked), read at the call's entry.
    let Some(handle) = (unsafe { block.as_ref() }).map(|p| p.hStream) else { return };
    let stream = state.stream(cx, handle);
    // Safety: the call's own block, at its entry.
    let (id, name) = unsafe { host_funcs::launch(block, host_watch::wrap_host_funcs(), cx.per_thread) };
    state.emit(cx.call, Record::HostFunc { stream, id, name, node: 0, api: "cuLaunchHostFunc" });
}

pub fn stream_callback(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuStreamAddCallback's block is StreamAddCallback.
    let block = unsafe { data.params_mut::<StreamAddCallback>() };
    // Safety: the block (null is checked), read at the call's entry.
    let Some(handle) = (unsafe { block.as_ref() }).map(|p| p.hStream) else { return };
    let stream = state.stream(cx, handle);
    // Safety: the call's own block, at its entry.
    let (id, name) = unsafe { host_funcs::add_callback(block, host_watch::wrap_host_funcs(), cx.per_thread) };
    state.emit(cx.call, Record::HostFunc { stream, id, name, node: 0, api: "cuStreamAddCallback" });
}

/// cuGraphExecHostNodeSetParams, after it succeeded: a wrapped node takes the program's new function and data
/// into its box and the trampoline again (host_watch/graph_host_nodes.rs).
pub fn exec_node_set(_state: &mut ProcessState, _cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: its block is (hGraphExec, hNode, nodeParams).
    let Some(p) = (unsafe { data.params::<ExecNodeSet<*const HostNodeParams>>() }) else { return };
    // Safety: the program's parameters, null-checked, read during the call's exit callback.
    let Some(params) = (unsafe { p.params.as_ref() }) else { return };
    // Safety: the exit of the program's successful call with these arguments.
    unsafe { graph_host_nodes::exec_node_set(p.hGraphExec, p.hNode, params.fn_, params.userData) };
}
