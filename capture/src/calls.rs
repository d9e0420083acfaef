//! The driver calls capture records, one line each: its id (cupti_driver_cbid.h, which the Sanitizer API's
//! sanitizer_driver_cbid.h numbers alike), its name, when it is recorded (at entry, at exit, or at exit when it
//! succeeded: the handles it made are out-parameters), whether a null stream means the legacy default stream
//! or the calling thread's (the `_ptsz` / `_ptds` forms), the handler that records it (handlers/), and what the
//! handler needs to know of this particular call, and what becomes of it outside a capture range. Both capture
//! backends subscribe to exactly these ids and dispatch through [`spec_of`]. Declarations and lookups only.
//!
//! Left out on purpose: `cuGraphUpload` (it moves a graph's own data to the device in stream order and touches
//! no memory of the program). The first `cuStreamGetCaptureInfo` (no graph, no dependencies: what PyTorch asks
//! on every allocation) is not subscribed to; its `_v2` and `_v3` are, and record only what the program asked for.

use streamtrace_format::{AllocKind, CopyKind};

use crate::call_kinds::{Detail, NodeWord, OutsideRanges, StreamForm, When};
use crate::driver_call::{CallContext, DriverCall};
use crate::handlers::{copies, graphs, host_funcs, launches, memory, profiler, sets, sync};
use crate::process_state::ProcessState;

/// Records one call into the state.
pub type Handler = fn(&mut ProcessState, &CallContext, &DriverCall<'_>);

/// One recorded driver call.
#[derive(Copy, Clone)]
pub struct CallSpec {
    pub id: u32,
    pub name: &'static str,
    pub when: When,
    pub stream: StreamForm,
    pub handler: Handler,
    pub outside: OutsideRanges,
    pub detail: Detail,
}

impl CallSpec {
    /// Whether the call is recorded at exit (else at entry).
    pub fn at_exit(&self) -> bool {
        self.when != When::Entry
    }

    /// Whether the host waits in it for GPU work.
    pub fn host_waits(&self) -> bool {
        self.detail == Detail::HostWait
    }
}

macro_rules! calls {
    ($($name:ident = $id:literal, $text:literal, $when:ident, $form:ident, $handler:path, $outside:ident, $detail:expr;)+) => {
        $(pub const $name: u32 = $id;)+

        /// Every recorded call.
        pub const CALLS: &[CallSpec] = &[$(CallSpec {
            id: $id,
            name: $text,
            when: When::$when,
            stream: StreamForm::$form,
            handler: $handler,
            outside: OutsideRanges::$outside,
            detail: { use Detail::*; $detail },
        }),+];
    };
}

calls! {
    CU_CTX_SYNCHRONIZE = 17, "cuCtxSynchronize", Entry, Legacy, sync::context_synchronize, Skipped, HostWait;
    CU_MEM_FREE_HOST = 38, "cuMemFreeHost", Entry, Legacy, memory::free_host, Recorded, None;
    CU_MEM_HOST_ALLOC = 39, "cuMemHostAlloc", ExitOk, Legacy, memory::host_alloc, Recorded, None;
    CU_EVENT_CREATE = 118, "cuEventCreate", ExitOk, Legacy, sync::event_create, Recorded, None;
    CU_EVENT_RECORD = 119, "cuEventRecord", Entry, Legacy, sync::event_record, Noted, None;
    CU_EVENT_QUERY = 120, "cuEventQuery", Exit, Legacy, sync::event_query, Skipped, None;
    CU_EVENT_SYNCHRONIZE = 121, "cuEventSynchronize", Entry, Legacy, sync::event_synchronize, Skipped, HostWait;
    CU_STREAM_CREATE = 124, "cuStreamCreate", ExitOk, Legacy, sync::stream_create, Recorded, None;
    CU_STREAM_QUERY = 125, "cuStreamQuery", Exit, Legacy, sync::stream_query, Skipped, None;
    CU_STREAM_SYNCHRONIZE = 126, "cuStreamSynchronize", Entry, Legacy, sync::stream_synchronize, Skipped, HostWait;
    CU_MEMSET_D8_ASYNC = 216, "cuMemsetD8Async", Entry, Legacy, sets::set_async, Skipped, Width(1);
    CU_MEMSET_D16_ASYNC = 218, "cuMemsetD16Async", Entry, Legacy, sets::set_async, Skipped, Width(2);
    CU_MEMSET_D32_ASYNC = 220, "cuMemsetD32Async", Entry, Legacy, sets::set_async, Skipped, Width(4);
    CU_MEMSET_D2D8_ASYNC = 222, "cuMemsetD2D8Async", Entry, Legacy, sets::set_2d_async, Skipped, Width(1);
    CU_MEMSET_D2D16_ASYNC = 224, "cuMemsetD2D16Async", Entry, Legacy, sets::set_2d_async, Skipped, Width(2);
    CU_MEMSET_D2D32_ASYNC = 226, "cuMemsetD2D32Async", Entry, Legacy, sets::set_2d_async, Skipped, Width(4);
    CU_MEM_ALLOC_V2 = 243, "cuMemAlloc_v2", ExitOk, Legacy, memory::alloc, Recorded, Alloc(AllocKind::Device);
    CU_MEM_ALLOC_PITCH_V2 = 244, "cuMemAllocPitch_v2", ExitOk, Legacy, memory::alloc_pitch, Recorded, None;
    CU_MEM_FREE_V2 = 245, "cuMemFree_v2", Entry, Legacy, memory::free, Recorded, None;
    CU_MEMSET_D8_V2 = 249, "cuMemsetD8_v2", Entry, Legacy, sets::set, Skipped, Width(1);
    CU_MEMSET_D16_V2 = 250, "cuMemsetD16_v2", Entry, Legacy, sets::set, Skipped, Width(2);
    CU_MEMSET_D32_V2 = 251, "cuMemsetD32_v2", Entry, Legacy, sets::set, Skipped, Width(4);
    CU_MEMSET_D2D8_V2 = 252, "cuMemsetD2D8_v2", Entry, Legacy, sets::set_2d, Skipped, Width(1);
    CU_MEMSET_D2D16_V2 = 253, "cuMemsetD2D16_v2", Entry, Legacy, sets::set_2d, Skipped, Width(2);
    CU_MEMSET_D2D32_V2 = 254, "cuMemsetD2D32_v2", Entry, Legacy, sets::set_2d, Skipped, Width(4);
    CU_MEMCPY_HTOD_V2 = 276, "cuMemcpyHtoD_v2", Entry, Legacy, copies::copy, Skipped, Copy(CopyKind::HtoD);
    CU_MEMCPY_HTOD_ASYNC_V2 = 277, "cuMemcpyHtoDAsync_v2", Entry, Legacy, copies::copy_async, Skipped, Copy(CopyKind::HtoD);
    CU_MEMCPY_DTOH_V2 = 278, "cuMemcpyDtoH_v2", Entry, Legacy, copies::copy, Skipped, Copy(CopyKind::DtoH);
    CU_MEMCPY_DTOH_ASYNC_V2 = 279, "cuMemcpyDtoHAsync_v2", Entry, Legacy, copies::copy_async, Skipped, Copy(CopyKind::DtoH);
    CU_MEMCPY_DTOD_V2 = 280, "cuMemcpyDtoD_v2", Entry, Legacy, copies::copy, Skipped, Copy(CopyKind::DtoD);
    CU_MEMCPY_DTOD_ASYNC_V2 = 281, "cuMemcpyDtoDAsync_v2", Entry, Legacy, copies::copy_async, Skipped, Copy(CopyKind::DtoD);
    CU_MEMCPY_2D_V2 = 287, "cuMemcpy2D_v2", Entry, Legacy, copies::copy_2d, Skipped, None;
    CU_MEMCPY_2D_UNALIGNED_V2 = 288, "cuMemcpy2DUnaligned_v2", Entry, Legacy, copies::copy_2d, Skipped, None;
    CU_MEMCPY_2D_ASYNC_V2 = 289, "cuMemcpy2DAsync_v2", Entry, Legacy, copies::copy_2d_async, Skipped, None;
    CU_MEMCPY_3D_V2 = 290, "cuMemcpy3D_v2", Entry, Legacy, copies::copy_3d, Skipped, None;
    CU_MEMCPY_3D_ASYNC_V2 = 291, "cuMemcpy3DAsync_v2", Entry, Legacy, copies::copy_3d_async, Skipped, None;
    CU_MEM_ALLOC_HOST_V2 = 294, "cuMemAllocHost_v2", ExitOk, Legacy, memory::host_alloc, Recorded, None;
    CU_STREAM_WAIT_EVENT = 295, "cuStreamWaitEvent", Entry, Legacy, sync::wait_event, Skipped, None;
    CU_MEM_HOST_REGISTER = 301, "cuMemHostRegister", ExitOk, Legacy, memory::host_register, Recorded, None;
    CU_MEM_HOST_UNREGISTER = 302, "cuMemHostUnregister", Entry, Legacy, memory::host_unregister, Recorded, None;
    CU_MEMCPY = 305, "cuMemcpy", Entry, Legacy, copies::copy, Skipped, Copy(CopyKind::Default);
    CU_MEMCPY_ASYNC = 306, "cuMemcpyAsync", Entry, Legacy, copies::copy_async, Skipped, Copy(CopyKind::Default);
    CU_LAUNCH_KERNEL = 307, "cuLaunchKernel", Entry, Legacy, launches::kernel, Skipped, None;
    CU_PROFILER_START = 308, "cuProfilerStart", Entry, Legacy, profiler::start, Recorded, None;
    CU_PROFILER_STOP = 309, "cuProfilerStop", Entry, Legacy, profiler::stop, Recorded, None;
    CU_MEMCPY_PEER = 318, "cuMemcpyPeer", Entry, Legacy, copies::peer_copy, Skipped, None;
    CU_MEMCPY_PEER_ASYNC = 319, "cuMemcpyPeerAsync", Entry, Legacy, copies::peer_copy_async, Skipped, None;
    CU_MEMCPY_3D_PEER = 320, "cuMemcpy3DPeer", Entry, Legacy, copies::copy_3d_peer, Skipped, None;
    CU_MEMCPY_3D_PEER_ASYNC = 321, "cuMemcpy3DPeerAsync", Entry, Legacy, copies::copy_3d_peer_async, Skipped, None;
    CU_IPC_OPEN_MEM_HANDLE = 329, "cuIpcOpenMemHandle", ExitOk, Legacy, memory::ipc_open, Recorded, None;
    CU_IPC_CLOSE_MEM_HANDLE = 330, "cuIpcCloseMemHandle", Entry, Legacy, memory::ipc_close, Recorded, None;
    CU_STREAM_ADD_CALLBACK = 346, "cuStreamAddCallback", Entry, Legacy, host_funcs::stream_callback, Skipped, None;
    CU_STREAM_CREATE_WITH_PRIORITY = 367, "cuStreamCreateWithPriority", ExitOk, Legacy, sync::stream_create, Recorded, WithPriority;
    CU_MEM_ALLOC_MANAGED = 371, "cuMemAllocManaged", ExitOk, Legacy, memory::alloc, Recorded, Alloc(AllocKind::Managed);
    CU_MEM_HOST_REGISTER_V2 = 379, "cuMemHostRegister_v2", ExitOk, Legacy, memory::host_register, Recorded, None;
    CU_MEMCPY_HTOD_V2_PTDS = 397, "cuMemcpyHtoD_v2_ptds", Entry, PerThread, copies::copy, Skipped, Copy(CopyKind::HtoD);
    CU_MEMCPY_DTOH_V2_PTDS = 398, "cuMemcpyDtoH_v2_ptds", Entry, PerThread, copies::copy, Skipped, Copy(CopyKind::DtoH);
    CU_MEMCPY_DTOD_V2_PTDS = 399, "cuMemcpyDtoD_v2_ptds", Entry, PerThread, copies::copy, Skipped, Copy(CopyKind::DtoD);
    CU_MEMCPY_2D_V2_PTDS = 405, "cuMemcpy2D_v2_ptds", Entry, PerThread, copies::copy_2d, Skipped, None;
    CU_MEMCPY_2D_UNALIGNED_V2_PTDS = 406, "cuMemcpy2DUnaligned_v2_ptds", Entry, PerThread, copies::copy_2d, Skipped, None;
    CU_MEMCPY_3D_V2_PTDS = 407, "cuMemcpy3D_v2_ptds", Entry, PerThread, copies::copy_3d, Skipped, None;
    CU_MEMCPY_PTDS = 408, "cuMemcpy_ptds", Entry, PerThread, copies::copy, Skipped, Copy(CopyKind::Default);
    CU_MEMCPY_PEER_PTDS = 409, "cuMemcpyPeer_ptds", Entry, PerThread, copies::peer_copy, Skipped, None;
    CU_MEMCPY_3D_PEER_PTDS = 410, "cuMemcpy3DPeer_ptds", Entry, PerThread, copies::copy_3d_peer, Skipped, None;
    CU_MEMSET_D8_V2_PTDS = 411, "cuMemsetD8_v2_ptds", Entry, PerThread, sets::set, Skipped, Width(1);
    CU_MEMSET_D16_V2_PTDS = 412, "cuMemsetD16_v2_ptds", Entry, PerThread, sets::set, Skipped, Width(2);
    CU_MEMSET_D32_V2_PTDS = 413, "cuMemsetD32_v2_ptds", Entry, PerThread, sets::set, Skipped, Width(4);
    CU_MEMSET_D2D8_V2_PTDS = 414, "cuMemsetD2D8_v2_ptds", Entry, PerThread, sets::set_2d, Skipped, Width(1);
    CU_MEMSET_D2D16_V2_PTDS = 415, "cuMemsetD2D16_v2_ptds", Entry, PerThread, sets::set_2d, Skipped, Width(2);
    CU_MEMSET_D2D32_V2_PTDS = 416, "cuMemsetD2D32_v2_ptds", Entry, PerThread, sets::set_2d, Skipped, Width(4);
    CU_MEMCPY_ASYNC_PTSZ = 418, "cuMemcpyAsync_ptsz", Entry, PerThread, copies::copy_async, Skipped, Copy(CopyKind::Default);
    CU_MEMCPY_HTOD_ASYNC_V2_PTSZ = 421, "cuMemcpyHtoDAsync_v2_ptsz", Entry, PerThread, copies::copy_async, Skipped, Copy(CopyKind::HtoD);
    CU_MEMCPY_DTOH_ASYNC_V2_PTSZ = 422, "cuMemcpyDtoHAsync_v2_ptsz", Entry, PerThread, copies::copy_async, Skipped, Copy(CopyKind::DtoH);
    CU_MEMCPY_DTOD_ASYNC_V2_PTSZ = 423, "cuMemcpyDtoDAsync_v2_ptsz", Entry, PerThread, copies::copy_async, Skipped, Copy(CopyKind::DtoD);
    CU_MEMCPY_2D_ASYNC_V2_PTSZ = 424, "cuMemcpy2DAsync_v2_ptsz", Entry, PerThread, copies::copy_2d_async, Skipped, None;
    CU_MEMCPY_3D_ASYNC_V2_PTSZ = 425, "cuMemcpy3DAsync_v2_ptsz", Entry, PerThread, copies::copy_3d_async, Skipped, None;
    CU_MEMCPY_PEER_ASYNC_PTSZ = 426, "cuMemcpyPeerAsync_ptsz", Entry, PerThread, copies::peer_copy_async, Skipped, None;
    CU_MEMCPY_3D_PEER_ASYNC_PTSZ = 427, "cuMemcpy3DPeerAsync_ptsz", Entry, PerThread, copies::copy_3d_peer_async, Skipped, None;
    CU_MEMSET_D8_ASYNC_PTSZ = 428, "cuMemsetD8Async_ptsz", Entry, PerThread, sets::set_async, Skipped, Width(1);
    CU_MEMSET_D16_ASYNC_PTSZ = 429, "cuMemsetD16Async_ptsz", Entry, PerThread, sets::set_async, Skipped, Width(2);
    CU_MEMSET_D32_ASYNC_PTSZ = 430, "cuMemsetD32Async_ptsz", Entry, PerThread, sets::set_async, Skipped, Width(4);
    CU_MEMSET_D2D8_ASYNC_PTSZ = 431, "cuMemsetD2D8Async_ptsz", Entry, PerThread, sets::set_2d_async, Skipped, Width(1);
    CU_MEMSET_D2D16_ASYNC_PTSZ = 432, "cuMemsetD2D16Async_ptsz", Entry, PerThread, sets::set_2d_async, Skipped, Width(2);
    CU_MEMSET_D2D32_ASYNC_PTSZ = 433, "cuMemsetD2D32Async_ptsz", Entry, PerThread, sets::set_2d_async, Skipped, Width(4);
    CU_STREAM_WAIT_EVENT_PTSZ = 436, "cuStreamWaitEvent_ptsz", Entry, PerThread, sync::wait_event, Skipped, None;
    CU_STREAM_ADD_CALLBACK_PTSZ = 437, "cuStreamAddCallback_ptsz", Entry, PerThread, host_funcs::stream_callback, Skipped, None;
    CU_STREAM_QUERY_PTSZ = 439, "cuStreamQuery_ptsz", Exit, PerThread, sync::stream_query, Skipped, None;
    CU_STREAM_SYNCHRONIZE_PTSZ = 440, "cuStreamSynchronize_ptsz", Entry, PerThread, sync::stream_synchronize, Skipped, HostWait;
    CU_EVENT_RECORD_PTSZ = 441, "cuEventRecord_ptsz", Entry, PerThread, sync::event_record, Noted, None;
    CU_LAUNCH_KERNEL_PTSZ = 442, "cuLaunchKernel_ptsz", Entry, PerThread, launches::kernel, Skipped, None;
    CU_STREAM_WAIT_VALUE_32 = 458, "cuStreamWaitValue32", Entry, Legacy, sync::value_wait, Skipped, None;
    CU_STREAM_WAIT_VALUE_32_PTSZ = 459, "cuStreamWaitValue32_ptsz", Entry, PerThread, sync::value_wait, Skipped, None;
    CU_STREAM_WRITE_VALUE_32 = 460, "cuStreamWriteValue32", Entry, Legacy, sync::value_write, Noted, None;
    CU_STREAM_WRITE_VALUE_32_PTSZ = 461, "cuStreamWriteValue32_ptsz", Entry, PerThread, sync::value_write, Noted, None;
    CU_STREAM_BATCH_MEM_OP = 462, "cuStreamBatchMemOp", Entry, Legacy, sync::batch_mem_ops, Noted, None;
    CU_STREAM_BATCH_MEM_OP_PTSZ = 463, "cuStreamBatchMemOp_ptsz", Entry, PerThread, sync::batch_mem_ops, Noted, None;
    CU_STREAM_WAIT_VALUE_64 = 473, "cuStreamWaitValue64", Entry, Legacy, sync::value_wait, Skipped, None;
    CU_STREAM_WAIT_VALUE_64_PTSZ = 474, "cuStreamWaitValue64_ptsz", Entry, PerThread, sync::value_wait, Skipped, None;
    CU_STREAM_WRITE_VALUE_64 = 475, "cuStreamWriteValue64", Entry, Legacy, sync::value_write, Noted, None;
    CU_STREAM_WRITE_VALUE_64_PTSZ = 476, "cuStreamWriteValue64_ptsz", Entry, PerThread, sync::value_write, Noted, None;
    CU_LAUNCH_COOPERATIVE_KERNEL = 477, "cuLaunchCooperativeKernel", Entry, Legacy, launches::cooperative_kernel, Skipped, None;
    CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ = 478, "cuLaunchCooperativeKernel_ptsz", Entry, PerThread, launches::cooperative_kernel, Skipped, None;
    CU_STREAM_BEGIN_CAPTURE = 495, "cuStreamBeginCapture", ExitOk, Legacy, graphs::begin_capture, Recorded, None;
    CU_STREAM_BEGIN_CAPTURE_PTSZ = 496, "cuStreamBeginCapture_ptsz", ExitOk, PerThread, graphs::begin_capture, Recorded, None;
    CU_STREAM_END_CAPTURE = 497, "cuStreamEndCapture", Exit, Legacy, graphs::end_capture, Recorded, None;
    CU_STREAM_END_CAPTURE_PTSZ = 498, "cuStreamEndCapture_ptsz", Exit, PerThread, graphs::end_capture, Recorded, None;
    CU_GRAPH_CREATE = 501, "cuGraphCreate", ExitOk, Legacy, graphs::create, Recorded, None;
    CU_GRAPH_ADD_KERNEL_NODE = 502, "cuGraphAddKernelNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Kernel);
    CU_GRAPH_ADD_MEMCPY_NODE = 504, "cuGraphAddMemcpyNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Memcpy);
    CU_GRAPH_ADD_MEMSET_NODE = 506, "cuGraphAddMemsetNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Memset);
    CU_GRAPH_MEMSET_NODE_SET_PARAMS = 508, "cuGraphMemsetNodeSetParams", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::Memset);
    CU_GRAPH_INSTANTIATE = 513, "cuGraphInstantiate", ExitOk, Legacy, graphs::instantiate, Recorded, None;
    CU_GRAPH_LAUNCH = 514, "cuGraphLaunch", Entry, Legacy, launches::graph_launch, Skipped, None;
    CU_GRAPH_LAUNCH_PTSZ = 515, "cuGraphLaunch_ptsz", Entry, PerThread, launches::graph_launch, Skipped, None;
    CU_GRAPH_EXEC_DESTROY = 516, "cuGraphExecDestroy", ExitOk, Legacy, graphs::exec_destroy, Recorded, None;
    CU_GRAPH_DESTROY = 517, "cuGraphDestroy", ExitOk, Legacy, graphs::destroy, Recorded, None;
    CU_GRAPH_ADD_DEPENDENCIES = 518, "cuGraphAddDependencies", ExitOk, Legacy, graphs::dependencies, Recorded, Edges { added: true, v2: false };
    CU_GRAPH_REMOVE_DEPENDENCIES = 519, "cuGraphRemoveDependencies", ExitOk, Legacy, graphs::dependencies, Recorded, Edges { added: false, v2: false };
    CU_GRAPH_MEMCPY_NODE_SET_PARAMS = 520, "cuGraphMemcpyNodeSetParams", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::Memcpy);
    CU_GRAPH_KERNEL_NODE_SET_PARAMS = 521, "cuGraphKernelNodeSetParams", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::Kernel);
    CU_GRAPH_DESTROY_NODE = 522, "cuGraphDestroyNode", ExitOk, Legacy, graphs::destroy_node, Recorded, None;
    CU_GRAPH_CLONE = 523, "cuGraphClone", ExitOk, Legacy, graphs::clone, Recorded, None;
    CU_GRAPH_ADD_CHILD_GRAPH_NODE = 525, "cuGraphAddChildGraphNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Child);
    CU_GRAPH_ADD_EMPTY_NODE = 526, "cuGraphAddEmptyNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Empty);
    CU_LAUNCH_HOST_FUNC = 527, "cuLaunchHostFunc", Entry, Legacy, host_funcs::launch, Skipped, None;
    CU_LAUNCH_HOST_FUNC_PTSZ = 528, "cuLaunchHostFunc_ptsz", Entry, PerThread, host_funcs::launch, Skipped, None;
    CU_GRAPH_ADD_HOST_NODE = 530, "cuGraphAddHostNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Host);
    CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS = 538, "cuGraphExecKernelNodeSetParams", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::Kernel);
    CU_STREAM_BEGIN_CAPTURE_V2 = 539, "cuStreamBeginCapture_v2", ExitOk, Legacy, graphs::begin_capture, Recorded, None;
    CU_STREAM_BEGIN_CAPTURE_V2_PTSZ = 540, "cuStreamBeginCapture_v2_ptsz", ExitOk, PerThread, graphs::begin_capture, Recorded, None;
    CU_MEM_MAP = 551, "cuMemMap", ExitOk, Legacy, memory::map, Recorded, None;
    CU_MEM_UNMAP = 552, "cuMemUnmap", Entry, Legacy, memory::unmap, Recorded, None;
    CU_GRAPH_EXEC_UPDATE = 561, "cuGraphExecUpdate", ExitOk, Legacy, graphs::exec_update, Recorded, None;
    CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS = 562, "cuGraphExecMemcpyNodeSetParams", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::Memcpy);
    CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS = 563, "cuGraphExecMemsetNodeSetParams", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::Memset);
    CU_GRAPH_EXEC_HOST_NODE_SET_PARAMS = 564, "cuGraphExecHostNodeSetParams", ExitOk, Legacy, host_funcs::exec_node_set, Recorded, None;
    CU_IPC_OPEN_MEM_HANDLE_V2 = 567, "cuIpcOpenMemHandle_v2", ExitOk, Legacy, memory::ipc_open, Recorded, None;
    CU_GRAPH_INSTANTIATE_V2 = 578, "cuGraphInstantiate_v2", ExitOk, Legacy, graphs::instantiate, Recorded, None;
    CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS = 586, "cuGraphExecChildGraphNodeSetParams", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::Child);
    CU_EVENT_RECORD_WITH_FLAGS = 587, "cuEventRecordWithFlags", Entry, Legacy, sync::event_record, Noted, None;
    CU_EVENT_RECORD_WITH_FLAGS_PTSZ = 588, "cuEventRecordWithFlags_ptsz", Entry, PerThread, sync::event_record, Noted, None;
    CU_GRAPH_ADD_EVENT_RECORD_NODE = 589, "cuGraphAddEventRecordNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::EventRecord);
    CU_GRAPH_ADD_EVENT_WAIT_NODE = 590, "cuGraphAddEventWaitNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::EventWait);
    CU_GRAPH_EVENT_RECORD_NODE_SET_EVENT = 593, "cuGraphEventRecordNodeSetEvent", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::EventRecord);
    CU_GRAPH_EVENT_WAIT_NODE_SET_EVENT = 594, "cuGraphEventWaitNodeSetEvent", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::EventWait);
    CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT = 595, "cuGraphExecEventRecordNodeSetEvent", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::EventRecord);
    CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT = 596, "cuGraphExecEventWaitNodeSetEvent", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::EventWait);
    CU_MEM_ALLOC_ASYNC = 598, "cuMemAllocAsync", ExitOk, Legacy, memory::alloc_async, Recorded, None;
    CU_MEM_ALLOC_ASYNC_PTSZ = 599, "cuMemAllocAsync_ptsz", ExitOk, PerThread, memory::alloc_async, Recorded, None;
    CU_MEM_FREE_ASYNC = 600, "cuMemFreeAsync", Entry, Legacy, memory::free_async, Recorded, None;
    CU_MEM_FREE_ASYNC_PTSZ = 601, "cuMemFreeAsync_ptsz", Entry, PerThread, memory::free_async, Recorded, None;
    CU_MEM_ALLOC_FROM_POOL_ASYNC = 611, "cuMemAllocFromPoolAsync", ExitOk, Legacy, memory::alloc_from_pool_async, Recorded, None;
    CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ = 612, "cuMemAllocFromPoolAsync_ptsz", ExitOk, PerThread, memory::alloc_from_pool_async, Recorded, None;
    CU_MEM_POOL_IMPORT_POINTER = 616, "cuMemPoolImportPointer", ExitOk, Legacy, memory::pool_import, Recorded, None;
    CU_GRAPH_ADD_EXT_SEMAS_SIGNAL_NODE = 618, "cuGraphAddExternalSemaphoresSignalNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Other);
    CU_GRAPH_ADD_EXT_SEMAS_WAIT_NODE = 621, "cuGraphAddExternalSemaphoresWaitNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Other);
    CU_STREAM_GET_CAPTURE_INFO_V2 = 629, "cuStreamGetCaptureInfo_v2", ExitOk, Legacy, graphs::capture_info, Recorded, CaptureInfo { edges: false };
    CU_STREAM_GET_CAPTURE_INFO_V2_PTSZ = 630, "cuStreamGetCaptureInfo_v2_ptsz", ExitOk, PerThread, graphs::capture_info, Recorded, CaptureInfo { edges: false };
    CU_STREAM_UPDATE_CAPTURE_DEPENDENCIES = 631, "cuStreamUpdateCaptureDependencies", ExitOk, Legacy, graphs::update_capture_dependencies, Recorded, CaptureUpdate { edges: false };
    CU_STREAM_UPDATE_CAPTURE_DEPENDENCIES_PTSZ = 632, "cuStreamUpdateCaptureDependencies_ptsz", ExitOk, PerThread, graphs::update_capture_dependencies, Recorded, CaptureUpdate { edges: false };
    CU_GRAPH_ADD_MEM_ALLOC_NODE = 638, "cuGraphAddMemAllocNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::MemAlloc);
    CU_GRAPH_ADD_MEM_FREE_NODE = 639, "cuGraphAddMemFreeNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::MemFree);
    CU_GRAPH_INSTANTIATE_WITH_FLAGS = 643, "cuGraphInstantiateWithFlags", ExitOk, Legacy, graphs::instantiate, Recorded, None;
    CU_LAUNCH_KERNEL_EX = 652, "cuLaunchKernelEx", Entry, Legacy, launches::kernel_ex, Skipped, None;
    CU_LAUNCH_KERNEL_EX_PTSZ = 653, "cuLaunchKernelEx_ptsz", Entry, PerThread, launches::kernel_ex, Skipped, None;
    CU_GRAPH_INSTANTIATE_WITH_PARAMS = 656, "cuGraphInstantiateWithParams", ExitOk, Legacy, graphs::instantiate, Recorded, None;
    CU_GRAPH_INSTANTIATE_WITH_PARAMS_PTSZ = 657, "cuGraphInstantiateWithParams_ptsz", ExitOk, PerThread, graphs::instantiate, Recorded, None;
    CU_STREAM_WAIT_VALUE_32_V2 = 659, "cuStreamWaitValue32_v2", Entry, Legacy, sync::value_wait, Skipped, None;
    CU_STREAM_WAIT_VALUE_32_V2_PTSZ = 660, "cuStreamWaitValue32_v2_ptsz", Entry, PerThread, sync::value_wait, Skipped, None;
    CU_STREAM_WAIT_VALUE_64_V2 = 661, "cuStreamWaitValue64_v2", Entry, Legacy, sync::value_wait, Skipped, None;
    CU_STREAM_WAIT_VALUE_64_V2_PTSZ = 662, "cuStreamWaitValue64_v2_ptsz", Entry, PerThread, sync::value_wait, Skipped, None;
    CU_STREAM_WRITE_VALUE_32_V2 = 663, "cuStreamWriteValue32_v2", Entry, Legacy, sync::value_write, Noted, None;
    CU_STREAM_WRITE_VALUE_32_V2_PTSZ = 664, "cuStreamWriteValue32_v2_ptsz", Entry, PerThread, sync::value_write, Noted, None;
    CU_STREAM_WRITE_VALUE_64_V2 = 665, "cuStreamWriteValue64_v2", Entry, Legacy, sync::value_write, Noted, None;
    CU_STREAM_WRITE_VALUE_64_V2_PTSZ = 666, "cuStreamWriteValue64_v2_ptsz", Entry, PerThread, sync::value_write, Noted, None;
    CU_STREAM_BATCH_MEM_OP_V2 = 667, "cuStreamBatchMemOp_v2", Entry, Legacy, sync::batch_mem_ops, Noted, None;
    CU_STREAM_BATCH_MEM_OP_V2_PTSZ = 668, "cuStreamBatchMemOp_v2_ptsz", Entry, PerThread, sync::batch_mem_ops, Noted, None;
    CU_GRAPH_ADD_BATCH_MEM_OP_NODE = 669, "cuGraphAddBatchMemOpNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Other);
    CU_GRAPH_ADD_KERNEL_NODE_V2 = 689, "cuGraphAddKernelNode_v2", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::KernelV2);
    CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2 = 691, "cuGraphKernelNodeSetParams_v2", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::KernelV2);
    CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2 = 692, "cuGraphExecKernelNodeSetParams_v2", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::KernelV2);
    CU_GRAPH_EXEC_UPDATE_V2 = 696, "cuGraphExecUpdate_v2", ExitOk, Legacy, graphs::exec_update, Recorded, None;
    CU_GRAPH_ADD_NODE = 712, "cuGraphAddNode", ExitOk, Legacy, graphs::add_node, Recorded, Node(NodeWord::Generic);
    CU_GRAPH_NODE_SET_PARAMS = 713, "cuGraphNodeSetParams", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::Generic);
    CU_GRAPH_EXEC_NODE_SET_PARAMS = 714, "cuGraphExecNodeSetParams", ExitOk, Legacy, graphs::set_exec_node, Recorded, Node(NodeWord::Generic);
    CU_STREAM_BEGIN_CAPTURE_TO_GRAPH = 720, "cuStreamBeginCaptureToGraph", ExitOk, Legacy, graphs::begin_capture_to_graph, Recorded, None;
    CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ = 721, "cuStreamBeginCaptureToGraph_ptsz", ExitOk, PerThread, graphs::begin_capture_to_graph, Recorded, None;
    CU_GRAPH_ADD_NODE_V2 = 723, "cuGraphAddNode_v2", ExitOk, Legacy, graphs::add_node_with_edges, Recorded, None;
    CU_GRAPH_ADD_DEPENDENCIES_V2 = 727, "cuGraphAddDependencies_v2", ExitOk, Legacy, graphs::dependencies, Recorded, Edges { added: true, v2: true };
    CU_GRAPH_REMOVE_DEPENDENCIES_V2 = 728, "cuGraphRemoveDependencies_v2", ExitOk, Legacy, graphs::dependencies, Recorded, Edges { added: false, v2: true };
    CU_STREAM_GET_CAPTURE_INFO_V3 = 729, "cuStreamGetCaptureInfo_v3", ExitOk, Legacy, graphs::capture_info, Recorded, CaptureInfo { edges: true };
    CU_STREAM_GET_CAPTURE_INFO_V3_PTSZ = 730, "cuStreamGetCaptureInfo_v3_ptsz", ExitOk, PerThread, graphs::capture_info, Recorded, CaptureInfo { edges: true };
    CU_STREAM_UPDATE_CAPTURE_DEPENDENCIES_V2 = 731, "cuStreamUpdateCaptureDependencies_v2", ExitOk, Legacy, graphs::update_capture_dependencies, Recorded, CaptureUpdate { edges: true };
    CU_STREAM_UPDATE_CAPTURE_DEPENDENCIES_V2_PTSZ = 732, "cuStreamUpdateCaptureDependencies_v2_ptsz", ExitOk, PerThread, graphs::update_capture_dependencies, Recorded, CaptureUpdate { edges: true };
    CU_MEMCPY_BATCH_ASYNC = 776, "cuMemcpyBatchAsync", Entry, Legacy, copies::batch_copy, Skipped, None;
    CU_MEMCPY_BATCH_ASYNC_PTSZ = 777, "cuMemcpyBatchAsync_ptsz", Entry, PerThread, copies::batch_copy, Skipped, None;
    CU_MEMCPY_3D_BATCH_ASYNC = 778, "cuMemcpy3DBatchAsync", Entry, Legacy, copies::batch_copy_3d, Skipped, None;
    CU_MEMCPY_3D_BATCH_ASYNC_PTSZ = 779, "cuMemcpy3DBatchAsync_ptsz", Entry, PerThread, copies::batch_copy_3d, Skipped, None;
    CU_MEMCPY_BATCH_ASYNC_V2 = 796, "cuMemcpyBatchAsync_v2", Entry, Legacy, copies::batch_copy_v2, Skipped, None;
    CU_MEMCPY_BATCH_ASYNC_V2_PTSZ = 797, "cuMemcpyBatchAsync_v2_ptsz", Entry, PerThread, copies::batch_copy_v2, Skipped, None;
    CU_MEMCPY_3D_BATCH_ASYNC_V2 = 798, "cuMemcpy3DBatchAsync_v2", Entry, Legacy, copies::batch_copy_3d_v2, Skipped, None;
    CU_MEMCPY_3D_BATCH_ASYNC_V2_PTSZ = 799, "cuMemcpy3DBatchAsync_v2_ptsz", Entry, PerThread, copies::batch_copy_3d_v2, Skipped, None;
    CU_CTX_SYNCHRONIZE_V2 = 800, "cuCtxSynchronize_v2", Entry, Legacy, sync::context_synchronize, Skipped, HostWait;
    CU_GRAPH_ADD_NODE_V3 = 863, "cuGraphAddNode_v3", ExitOk, Legacy, graphs::add_node_with_edges, Recorded, None;
    CU_GRAPH_NODE_SET_PARAMS_V2 = 864, "cuGraphNodeSetParams_v2", ExitOk, Legacy, graphs::set_node, Recorded, Node(NodeWord::Generic);
}

/// Ids are below this (cupti_driver_cbid.h ends under 900).
pub const ID_LIMIT: usize = 1024;

/// Each id's position in [`CALLS`] plus one (0: not recorded), made at compile time: the callback asks on
/// every driver call, at entry and at exit.
static INDEX: [u16; ID_LIMIT] = {
    let mut index = [0u16; ID_LIMIT];
    let mut i = 0;
    while i < CALLS.len() {
        let id = CALLS[i].id as usize;
        assert!(id < ID_LIMIT && index[id] == 0, "each id below ID_LIMIT, once");
        index[id] = i as u16 + 1;
        i += 1;
    }
    index
};

/// The recorded call with this id.
#[inline]
/// Whether the call `id` launches an executable graph (its exit takes back what a failed launch queued).
pub fn is_graph_launch(id: u32) -> bool {
    matches!(id, CU_GRAPH_LAUNCH | CU_GRAPH_LAUNCH_PTSZ)
}

pub fn spec_of(id: u32) -> Option<&'static CallSpec> {
    match INDEX.get(id as usize) {
        Some(&i) if i > 0 => Some(&CALLS[i as usize - 1]),
        _ => None,
    }
}

/// The driver function's name of a recorded id (`driver call N` for another).
pub fn name_of(id: u32) -> String {
    spec_of(id).map_or_else(|| format!("driver call {id}"), |spec| spec.name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_found_by_its_id() {
        for spec in CALLS {
            assert_eq!(spec_of(spec.id).map(|s| s.name), Some(spec.name));
        }
        assert!(spec_of(0).is_none() && spec_of(ID_LIMIT as u32 + 5).is_none());
    }

    #[test]
    fn per_thread_forms_are_the_ptsz_and_ptds_calls() {
        for spec in CALLS {
            let suffix = spec.name.ends_with("_ptsz") || spec.name.ends_with("_ptds");
            assert_eq!(spec.stream == StreamForm::PerThread, suffix, "{}", spec.name);
        }
    }

    #[test]
    fn what_a_call_makes_is_recorded_when_it_returns() {
        for name in ["cuStreamCreate", "cuEventCreate", "cuMemAlloc_v2", "cuGraphInstantiate", "cuGraphAddKernelNode"] {
            let spec = CALLS.iter().find(|s| s.name == name).expect(name);
            assert_eq!(spec.when, When::ExitOk, "{name}");
        }
        let launch = spec_of(CU_LAUNCH_KERNEL).expect("launches are recorded");
        assert_eq!(launch.when, When::Entry);
    }
}
