//! Kernel launches (every form) and graph launches: each one step of its stream.

use crate::driver_call::{CallContext, DriverCall};
use crate::host_watch::graph_host_nodes;
use crate::params::*;
use crate::process_state::ProcessState;
use crate::record::{GraphRecord, Record};

pub fn kernel(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuLaunchKernel's block is LaunchKernel.
    let Some(p) = (unsafe { data.params::<LaunchKernel>() }) else { return };
    let stream = state.stream(cx, p.launch.hStream);
    // Safety: the launch's own argument arrays, valid while the driver is in the call.
    unsafe { state.kernel(cx, stream, p.launch.f, p.launch.kernelParams, p.extra, "cuLaunchKernel") };
}

pub fn cooperative_kernel(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuLaunchCooperativeKernel's block is LaunchCooperativeKernel.
    let Some(p) = (unsafe { data.params::<LaunchCooperativeKernel>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    // Safety: the launch's own parameter array, valid while the driver is in the call.
    unsafe { state.kernel(cx, stream, p.f, p.kernelParams, std::ptr::null_mut(), "cuLaunchCooperativeKernel") };
}

pub fn kernel_ex(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuLaunchKernelEx's block is LaunchKernelEx.
    let Some(p) = (unsafe { data.params::<LaunchKernelEx>() }) else { return };
    // Safety: `config` is null or the launch's CUlaunchConfig, which LaunchConfig declares.
    let Some(config) = (unsafe { p.config.as_ref() }) else { return };
    let stream = state.stream(cx, config.hStream);
    // An event the launch fires (NCCL orders its launches with one) takes the stream's clock before the
    // kernel: it fires when the kernel's blocks have started or triggered, not when they are done.
    // Safety: the launch's own attribute array, valid while the driver is in the call.
    unsafe {
        for_each_launch_event(config, |event, api| {
            let event = state.event(cx.call, event);
            state.emit(cx.call, Record::EventRecord { event, stream, api });
        })
    };
    // Safety: the launch's own argument arrays, valid while the driver is in the call.
    unsafe { state.kernel(cx, stream, p.f, p.kernelParams, p.extra, "cuLaunchKernelEx") };
}

pub fn graph_launch(state: &mut ProcessState, cx: &CallContext, data: &DriverCall<'_>) {
    // Safety: cuGraphLaunch's block is GraphLaunch.
    let Some(p) = (unsafe { data.params::<GraphLaunch>() }) else { return };
    let stream = state.stream(cx, p.hStream);
    // Its wrapped host nodes' runs, each a host function on the launch's stream just before the launch: they
    // run after the stream's earlier work, and the launch's event nodes and later work come after them.
    for (id, name, node) in graph_host_nodes::launched(p.hGraph as u64, p.hStream, cx.per_thread) {
        state.emit(cx.call, Record::HostFunc { stream, id, name, node, api: "cuGraphLaunch" });
    }
    state.emit(
        cx.call,
        Record::Graph { graph: GraphRecord::Launch { exec: p.hGraph as u64, stream }, api: "cuGraphLaunch" },
    );
}

/// Calls `found` with each event a cuLaunchKernelEx launch configuration names in its attributes (a launch
/// completion or programmatic event), and the call that records it. Past `MAX_ATTRS` attributes the count is not
/// believed: the injected library must not read far into the program's memory on a malformed call.
///
/// # Safety
/// `config.attrs` is null or holds `config.numAttrs` readable attributes.
unsafe fn for_each_launch_event(config: &LaunchConfig, mut found: impl FnMut(u64, &'static str)) {
    const MAX_ATTRS: u32 = 64;
    if config.attrs.is_null() || config.numAttrs > MAX_ATTRS {
        return;
    }
    for i in 0..config.numAttrs as usize {
        // Safety: `i < numAttrs` attributes are readable (the caller's promise).
        let attribute = unsafe { &*config.attrs.add(i) };
        let api = match attribute.id {
            LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT => "cuLaunchKernelEx launch completion event",
            LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT => "cuLaunchKernelEx programmatic event",
            _ => continue,
        };
        if attribute.value[0] != 0 {
            found(attribute.value[0], api);
        }
    }
}
