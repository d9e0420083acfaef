//! The driver-API callback ids streamtrace enables (cupti_driver_cbid.h). Only these are enabled: a PyTorch
//! start-up makes thousands of calls streamtrace has no use for. Constants and predicates; touches nothing.

pub const CU_CTX_SYNCHRONIZE: u32 = 17;
pub const CU_MEM_FREE_HOST: u32 = 38;
pub const CU_MEM_HOST_ALLOC: u32 = 39;
pub const CU_EVENT_CREATE: u32 = 118;
pub const CU_EVENT_RECORD: u32 = 119;
pub const CU_EVENT_QUERY: u32 = 120;
pub const CU_EVENT_SYNCHRONIZE: u32 = 121;
pub const CU_STREAM_CREATE: u32 = 124;
pub const CU_STREAM_QUERY: u32 = 125;
pub const CU_STREAM_SYNCHRONIZE: u32 = 126;
pub const CU_MEMSET_D8_ASYNC: u32 = 216;
pub const CU_MEMSET_D16_ASYNC: u32 = 218;
pub const CU_MEMSET_D32_ASYNC: u32 = 220;
pub const CU_MEM_ALLOC_V2: u32 = 243;
pub const CU_MEM_ALLOC_PITCH_V2: u32 = 244;
pub const CU_MEM_FREE_V2: u32 = 245;
pub const CU_MEMSET_D8_V2: u32 = 249;
pub const CU_MEMSET_D16_V2: u32 = 250;
pub const CU_MEMSET_D32_V2: u32 = 251;
pub const CU_MEMCPY_HTOD_V2: u32 = 276;
pub const CU_MEMCPY_HTOD_ASYNC_V2: u32 = 277;
pub const CU_MEMCPY_DTOH_V2: u32 = 278;
pub const CU_MEMCPY_DTOH_ASYNC_V2: u32 = 279;
pub const CU_MEMCPY_DTOD_V2: u32 = 280;
pub const CU_MEMCPY_DTOD_ASYNC_V2: u32 = 281;
pub const CU_MEMSET_D2D8_ASYNC: u32 = 222;
pub const CU_MEMSET_D2D16_ASYNC: u32 = 224;
pub const CU_MEMSET_D2D32_ASYNC: u32 = 226;
pub const CU_MEMSET_D2D8_V2: u32 = 252;
pub const CU_MEMSET_D2D16_V2: u32 = 253;
pub const CU_MEMSET_D2D32_V2: u32 = 254;
pub const CU_MEMCPY_2D_V2: u32 = 287;
pub const CU_MEMCPY_2D_UNALIGNED_V2: u32 = 288;
pub const CU_MEMCPY_2D_ASYNC_V2: u32 = 289;
pub const CU_MEMCPY_3D_V2: u32 = 290;
pub const CU_MEMCPY_3D_ASYNC_V2: u32 = 291;
pub const CU_MEM_ALLOC_HOST_V2: u32 = 294;
pub const CU_MEM_HOST_REGISTER: u32 = 301;
pub const CU_MEM_HOST_UNREGISTER: u32 = 302;
pub const CU_STREAM_WAIT_EVENT: u32 = 295;
pub const CU_MEMCPY: u32 = 305;
pub const CU_MEMCPY_ASYNC: u32 = 306;
pub const CU_LAUNCH_KERNEL: u32 = 307;
pub const CU_MEMCPY_PEER: u32 = 318;
pub const CU_MEMCPY_PEER_ASYNC: u32 = 319;
pub const CU_STREAM_CREATE_WITH_PRIORITY: u32 = 367;
pub const CU_MEM_ALLOC_MANAGED: u32 = 371;
pub const CU_MEM_HOST_REGISTER_V2: u32 = 379;
pub const CU_MEMCPY_HTOD_V2_PTDS: u32 = 397;
pub const CU_MEMCPY_DTOH_V2_PTDS: u32 = 398;
pub const CU_MEMCPY_DTOD_V2_PTDS: u32 = 399;
pub const CU_MEMCPY_2D_V2_PTDS: u32 = 405;
pub const CU_MEMCPY_2D_UNALIGNED_V2_PTDS: u32 = 406;
pub const CU_MEMCPY_3D_V2_PTDS: u32 = 407;
pub const CU_MEMCPY_PTDS: u32 = 408;
pub const CU_MEMCPY_PEER_PTDS: u32 = 409;
pub const CU_MEMSET_D8_V2_PTDS: u32 = 411;
pub const CU_MEMSET_D16_V2_PTDS: u32 = 412;
pub const CU_MEMSET_D32_V2_PTDS: u32 = 413;
pub const CU_MEMSET_D2D8_V2_PTDS: u32 = 414;
pub const CU_MEMSET_D2D16_V2_PTDS: u32 = 415;
pub const CU_MEMSET_D2D32_V2_PTDS: u32 = 416;
pub const CU_MEMCPY_ASYNC_PTSZ: u32 = 418;
pub const CU_MEMCPY_HTOD_ASYNC_V2_PTSZ: u32 = 421;
pub const CU_MEMCPY_DTOH_ASYNC_V2_PTSZ: u32 = 422;
pub const CU_MEMCPY_DTOD_ASYNC_V2_PTSZ: u32 = 423;
pub const CU_MEMCPY_PEER_ASYNC_PTSZ: u32 = 426;
pub const CU_MEMCPY_2D_ASYNC_V2_PTSZ: u32 = 424;
pub const CU_MEMCPY_3D_ASYNC_V2_PTSZ: u32 = 425;
pub const CU_MEMSET_D8_ASYNC_PTSZ: u32 = 428;
pub const CU_MEMSET_D16_ASYNC_PTSZ: u32 = 429;
pub const CU_MEMSET_D32_ASYNC_PTSZ: u32 = 430;
pub const CU_MEMSET_D2D8_ASYNC_PTSZ: u32 = 431;
pub const CU_MEMSET_D2D16_ASYNC_PTSZ: u32 = 432;
pub const CU_MEMSET_D2D32_ASYNC_PTSZ: u32 = 433;
pub const CU_STREAM_WAIT_EVENT_PTSZ: u32 = 436;
pub const CU_STREAM_QUERY_PTSZ: u32 = 439;
pub const CU_STREAM_SYNCHRONIZE_PTSZ: u32 = 440;
pub const CU_EVENT_RECORD_PTSZ: u32 = 441;
pub const CU_LAUNCH_KERNEL_PTSZ: u32 = 442;
pub const CU_LAUNCH_COOPERATIVE_KERNEL: u32 = 477;
pub const CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ: u32 = 478;
pub const CU_GRAPH_LAUNCH: u32 = 514;
pub const CU_GRAPH_LAUNCH_PTSZ: u32 = 515;
pub const CU_MEM_MAP: u32 = 551;
pub const CU_MEM_UNMAP: u32 = 552;
pub const CU_EVENT_RECORD_WITH_FLAGS: u32 = 587;
pub const CU_EVENT_RECORD_WITH_FLAGS_PTSZ: u32 = 588;
pub const CU_MEM_ALLOC_ASYNC: u32 = 598;
pub const CU_MEM_ALLOC_ASYNC_PTSZ: u32 = 599;
pub const CU_MEM_FREE_ASYNC: u32 = 600;
pub const CU_MEM_FREE_ASYNC_PTSZ: u32 = 601;
pub const CU_MEM_ALLOC_FROM_POOL_ASYNC: u32 = 611;
pub const CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ: u32 = 612;
pub const CU_LAUNCH_KERNEL_EX: u32 = 652;
pub const CU_LAUNCH_KERNEL_EX_PTSZ: u32 = 653;
pub const CU_CTX_SYNCHRONIZE_V2: u32 = 800;

/// Stream capture and the graph API (DESIGN.md, CUDA graphs).
pub const CU_STREAM_BEGIN_CAPTURE: u32 = 495;
pub const CU_STREAM_BEGIN_CAPTURE_PTSZ: u32 = 496;
pub const CU_STREAM_END_CAPTURE: u32 = 497;
pub const CU_STREAM_END_CAPTURE_PTSZ: u32 = 498;
pub const CU_GRAPH_CREATE: u32 = 501;
pub const CU_GRAPH_ADD_KERNEL_NODE: u32 = 502;
pub const CU_GRAPH_ADD_MEMCPY_NODE: u32 = 504;
pub const CU_GRAPH_ADD_MEMSET_NODE: u32 = 506;
pub const CU_GRAPH_MEMSET_NODE_SET_PARAMS: u32 = 508;
pub const CU_GRAPH_INSTANTIATE: u32 = 513;
pub const CU_GRAPH_EXEC_DESTROY: u32 = 516;
pub const CU_GRAPH_DESTROY: u32 = 517;
pub const CU_GRAPH_ADD_DEPENDENCIES: u32 = 518;
pub const CU_GRAPH_REMOVE_DEPENDENCIES: u32 = 519;
pub const CU_GRAPH_MEMCPY_NODE_SET_PARAMS: u32 = 520;
pub const CU_GRAPH_KERNEL_NODE_SET_PARAMS: u32 = 521;
pub const CU_GRAPH_DESTROY_NODE: u32 = 522;
pub const CU_GRAPH_CLONE: u32 = 523;
pub const CU_GRAPH_ADD_CHILD_GRAPH_NODE: u32 = 525;
pub const CU_GRAPH_ADD_EMPTY_NODE: u32 = 526;
pub const CU_GRAPH_ADD_HOST_NODE: u32 = 530;
pub const CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS: u32 = 538;
pub const CU_STREAM_BEGIN_CAPTURE_V2: u32 = 539;
pub const CU_STREAM_BEGIN_CAPTURE_V2_PTSZ: u32 = 540;
pub const CU_GRAPH_EXEC_UPDATE: u32 = 561;
pub const CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS: u32 = 562;
pub const CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS: u32 = 563;
pub const CU_GRAPH_INSTANTIATE_V2: u32 = 578;
pub const CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS: u32 = 586;
pub const CU_GRAPH_ADD_EVENT_RECORD_NODE: u32 = 589;
pub const CU_GRAPH_ADD_EVENT_WAIT_NODE: u32 = 590;
pub const CU_GRAPH_EVENT_RECORD_NODE_SET_EVENT: u32 = 593;
pub const CU_GRAPH_EVENT_WAIT_NODE_SET_EVENT: u32 = 594;
pub const CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT: u32 = 595;
pub const CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT: u32 = 596;
pub const CU_GRAPH_ADD_EXT_SEMAS_SIGNAL_NODE: u32 = 618;
pub const CU_GRAPH_ADD_EXT_SEMAS_WAIT_NODE: u32 = 621;
pub const CU_GRAPH_ADD_MEM_ALLOC_NODE: u32 = 638;
pub const CU_GRAPH_ADD_MEM_FREE_NODE: u32 = 639;
pub const CU_GRAPH_INSTANTIATE_WITH_FLAGS: u32 = 643;
pub const CU_GRAPH_INSTANTIATE_WITH_PARAMS: u32 = 656;
pub const CU_GRAPH_INSTANTIATE_WITH_PARAMS_PTSZ: u32 = 657;
pub const CU_GRAPH_ADD_BATCH_MEM_OP_NODE: u32 = 669;
pub const CU_GRAPH_ADD_KERNEL_NODE_V2: u32 = 689;
pub const CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2: u32 = 691;
pub const CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2: u32 = 692;
pub const CU_GRAPH_EXEC_UPDATE_V2: u32 = 696;
pub const CU_GRAPH_ADD_NODE: u32 = 712;
pub const CU_GRAPH_NODE_SET_PARAMS: u32 = 713;
pub const CU_GRAPH_EXEC_NODE_SET_PARAMS: u32 = 714;
pub const CU_STREAM_BEGIN_CAPTURE_TO_GRAPH: u32 = 720;
pub const CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ: u32 = 721;
pub const CU_GRAPH_ADD_NODE_V2: u32 = 723;
pub const CU_GRAPH_ADD_DEPENDENCIES_V2: u32 = 727;
pub const CU_GRAPH_REMOVE_DEPENDENCIES_V2: u32 = 728;
pub const CU_GRAPH_ADD_NODE_V3: u32 = 863;
pub const CU_GRAPH_NODE_SET_PARAMS_V2: u32 = 864;

/// The graph calls, each recorded when it returns (the handles it made are out-parameters), but launches.
pub const GRAPH_CALLS: &[u32] = &[
    CU_STREAM_BEGIN_CAPTURE,
    CU_STREAM_BEGIN_CAPTURE_PTSZ,
    CU_STREAM_END_CAPTURE,
    CU_STREAM_END_CAPTURE_PTSZ,
    CU_GRAPH_CREATE,
    CU_GRAPH_ADD_KERNEL_NODE,
    CU_GRAPH_ADD_MEMCPY_NODE,
    CU_GRAPH_ADD_MEMSET_NODE,
    CU_GRAPH_MEMSET_NODE_SET_PARAMS,
    CU_GRAPH_INSTANTIATE,
    CU_GRAPH_EXEC_DESTROY,
    CU_GRAPH_DESTROY,
    CU_GRAPH_ADD_DEPENDENCIES,
    CU_GRAPH_REMOVE_DEPENDENCIES,
    CU_GRAPH_MEMCPY_NODE_SET_PARAMS,
    CU_GRAPH_KERNEL_NODE_SET_PARAMS,
    CU_GRAPH_DESTROY_NODE,
    CU_GRAPH_CLONE,
    CU_GRAPH_ADD_CHILD_GRAPH_NODE,
    CU_GRAPH_ADD_EMPTY_NODE,
    CU_GRAPH_ADD_HOST_NODE,
    CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS,
    CU_STREAM_BEGIN_CAPTURE_V2,
    CU_STREAM_BEGIN_CAPTURE_V2_PTSZ,
    CU_GRAPH_EXEC_UPDATE,
    CU_GRAPH_EXEC_MEMCPY_NODE_SET_PARAMS,
    CU_GRAPH_EXEC_MEMSET_NODE_SET_PARAMS,
    CU_GRAPH_INSTANTIATE_V2,
    CU_GRAPH_EXEC_CHILD_GRAPH_NODE_SET_PARAMS,
    CU_GRAPH_ADD_EVENT_RECORD_NODE,
    CU_GRAPH_ADD_EVENT_WAIT_NODE,
    CU_GRAPH_EVENT_RECORD_NODE_SET_EVENT,
    CU_GRAPH_EVENT_WAIT_NODE_SET_EVENT,
    CU_GRAPH_EXEC_EVENT_RECORD_NODE_SET_EVENT,
    CU_GRAPH_EXEC_EVENT_WAIT_NODE_SET_EVENT,
    CU_GRAPH_ADD_EXT_SEMAS_SIGNAL_NODE,
    CU_GRAPH_ADD_EXT_SEMAS_WAIT_NODE,
    CU_GRAPH_ADD_MEM_ALLOC_NODE,
    CU_GRAPH_ADD_MEM_FREE_NODE,
    CU_GRAPH_INSTANTIATE_WITH_FLAGS,
    CU_GRAPH_INSTANTIATE_WITH_PARAMS,
    CU_GRAPH_INSTANTIATE_WITH_PARAMS_PTSZ,
    CU_GRAPH_ADD_BATCH_MEM_OP_NODE,
    CU_GRAPH_ADD_KERNEL_NODE_V2,
    CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2,
    CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2,
    CU_GRAPH_EXEC_UPDATE_V2,
    CU_GRAPH_ADD_NODE,
    CU_GRAPH_NODE_SET_PARAMS,
    CU_GRAPH_EXEC_NODE_SET_PARAMS,
    CU_STREAM_BEGIN_CAPTURE_TO_GRAPH,
    CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ,
    CU_GRAPH_ADD_NODE_V2,
    CU_GRAPH_ADD_DEPENDENCIES_V2,
    CU_GRAPH_REMOVE_DEPENDENCIES_V2,
    CU_GRAPH_ADD_NODE_V3,
    CU_GRAPH_NODE_SET_PARAMS_V2,
];

/// Every id above but the graph calls: the set the capture subscribes to, with `GRAPH_CALLS`.
pub const CU_MEMCPY_BATCH_ASYNC: u32 = 776;
pub const CU_MEMCPY_BATCH_ASYNC_PTSZ: u32 = 777;
pub const CU_MEMCPY_BATCH_ASYNC_V2: u32 = 796;
pub const CU_MEMCPY_BATCH_ASYNC_V2_PTSZ: u32 = 797;

pub const ENABLED: &[u32] = &[
    CU_CTX_SYNCHRONIZE,
    CU_MEM_FREE_HOST,
    CU_MEM_HOST_ALLOC,
    CU_EVENT_RECORD,
    CU_EVENT_QUERY,
    CU_EVENT_SYNCHRONIZE,
    CU_STREAM_CREATE,
    CU_STREAM_QUERY,
    CU_STREAM_SYNCHRONIZE,
    CU_MEMSET_D8_ASYNC,
    CU_MEMSET_D16_ASYNC,
    CU_MEMSET_D32_ASYNC,
    CU_MEM_ALLOC_V2,
    CU_MEM_FREE_V2,
    CU_MEMSET_D8_V2,
    CU_MEMSET_D16_V2,
    CU_MEMSET_D32_V2,
    CU_MEMCPY_HTOD_V2,
    CU_MEMCPY_HTOD_ASYNC_V2,
    CU_MEMCPY_DTOH_V2,
    CU_MEMCPY_DTOH_ASYNC_V2,
    CU_MEMCPY_DTOD_V2,
    CU_MEMCPY_DTOD_ASYNC_V2,
    CU_MEM_ALLOC_HOST_V2,
    CU_STREAM_WAIT_EVENT,
    CU_MEMCPY,
    CU_MEMCPY_ASYNC,
    CU_LAUNCH_KERNEL,
    CU_MEMCPY_PEER,
    CU_MEMCPY_PEER_ASYNC,
    CU_STREAM_CREATE_WITH_PRIORITY,
    CU_MEM_ALLOC_MANAGED,
    CU_MEMCPY_HTOD_V2_PTDS,
    CU_MEMCPY_DTOH_V2_PTDS,
    CU_MEMCPY_DTOD_V2_PTDS,
    CU_MEMCPY_PTDS,
    CU_MEMSET_D8_V2_PTDS,
    CU_MEMSET_D32_V2_PTDS,
    CU_MEMCPY_ASYNC_PTSZ,
    CU_MEMCPY_HTOD_ASYNC_V2_PTSZ,
    CU_MEMCPY_DTOH_ASYNC_V2_PTSZ,
    CU_MEMCPY_DTOD_ASYNC_V2_PTSZ,
    CU_MEMCPY_PEER_ASYNC_PTSZ,
    CU_MEMSET_D8_ASYNC_PTSZ,
    CU_MEMSET_D32_ASYNC_PTSZ,
    CU_STREAM_WAIT_EVENT_PTSZ,
    CU_STREAM_QUERY_PTSZ,
    CU_STREAM_SYNCHRONIZE_PTSZ,
    CU_EVENT_RECORD_PTSZ,
    CU_LAUNCH_KERNEL_PTSZ,
    CU_LAUNCH_COOPERATIVE_KERNEL,
    CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ,
    CU_GRAPH_LAUNCH,
    CU_GRAPH_LAUNCH_PTSZ,
    CU_MEM_MAP,
    CU_MEM_UNMAP,
    CU_EVENT_RECORD_WITH_FLAGS,
    CU_EVENT_RECORD_WITH_FLAGS_PTSZ,
    CU_MEM_ALLOC_ASYNC,
    CU_MEM_ALLOC_ASYNC_PTSZ,
    CU_MEM_FREE_ASYNC,
    CU_MEM_FREE_ASYNC_PTSZ,
    CU_MEM_ALLOC_FROM_POOL_ASYNC,
    CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ,
    CU_LAUNCH_KERNEL_EX,
    CU_LAUNCH_KERNEL_EX_PTSZ,
    CU_CTX_SYNCHRONIZE_V2,
    CU_MEM_HOST_REGISTER,
    CU_MEM_HOST_REGISTER_V2,
    CU_MEM_HOST_UNREGISTER,
    CU_MEM_ALLOC_PITCH_V2,
    CU_MEMCPY_2D_V2,
    CU_MEMCPY_2D_UNALIGNED_V2,
    CU_MEMCPY_2D_ASYNC_V2,
    CU_MEMCPY_3D_V2,
    CU_MEMCPY_3D_ASYNC_V2,
    CU_MEMCPY_2D_V2_PTDS,
    CU_MEMCPY_2D_UNALIGNED_V2_PTDS,
    CU_MEMCPY_3D_V2_PTDS,
    CU_MEMCPY_2D_ASYNC_V2_PTSZ,
    CU_MEMCPY_3D_ASYNC_V2_PTSZ,
    CU_MEMSET_D2D8_V2,
    CU_MEMSET_D2D16_V2,
    CU_MEMSET_D2D32_V2,
    CU_MEMSET_D2D8_ASYNC,
    CU_MEMSET_D2D16_ASYNC,
    CU_MEMSET_D2D32_ASYNC,
    CU_MEMSET_D2D8_V2_PTDS,
    CU_MEMSET_D2D16_V2_PTDS,
    CU_MEMSET_D2D32_V2_PTDS,
    CU_MEMSET_D2D8_ASYNC_PTSZ,
    CU_MEMSET_D2D16_ASYNC_PTSZ,
    CU_MEMSET_D2D32_ASYNC_PTSZ,
    CU_MEMCPY_BATCH_ASYNC,
    CU_MEMCPY_BATCH_ASYNC_PTSZ,
    CU_MEMCPY_BATCH_ASYNC_V2,
    CU_MEMCPY_BATCH_ASYNC_V2_PTSZ,
    CU_MEMCPY_PEER_PTDS,
    CU_MEMSET_D16_V2_PTDS,
    CU_MEMSET_D16_ASYNC_PTSZ,
    CU_EVENT_CREATE,
];

/// Whether the call is a per-thread-default-stream form (`_ptsz` / `_ptds`): a null stream handle then means
/// the calling thread's default stream, not the legacy default stream.
pub fn per_thread(cbid: u32) -> bool {
    matches!(
        cbid,
        CU_MEMCPY_HTOD_V2_PTDS
            | CU_MEMCPY_DTOH_V2_PTDS
            | CU_MEMCPY_DTOD_V2_PTDS
            | CU_MEMCPY_PTDS
            | CU_MEMCPY_PEER_PTDS
            | CU_MEMSET_D16_V2_PTDS
            | CU_MEMSET_D16_ASYNC_PTSZ
            | CU_MEMSET_D8_V2_PTDS
            | CU_MEMSET_D32_V2_PTDS
            | CU_MEMCPY_ASYNC_PTSZ
            | CU_MEMCPY_HTOD_ASYNC_V2_PTSZ
            | CU_MEMCPY_DTOH_ASYNC_V2_PTSZ
            | CU_MEMCPY_DTOD_ASYNC_V2_PTSZ
            | CU_MEMCPY_PEER_ASYNC_PTSZ
            | CU_MEMSET_D8_ASYNC_PTSZ
            | CU_MEMSET_D32_ASYNC_PTSZ
            | CU_MEMCPY_2D_V2_PTDS
            | CU_MEMCPY_2D_UNALIGNED_V2_PTDS
            | CU_MEMCPY_3D_V2_PTDS
            | CU_MEMCPY_2D_ASYNC_V2_PTSZ
            | CU_MEMCPY_3D_ASYNC_V2_PTSZ
            | CU_MEMSET_D2D8_V2_PTDS
            | CU_MEMSET_D2D16_V2_PTDS
            | CU_MEMSET_D2D32_V2_PTDS
            | CU_MEMSET_D2D8_ASYNC_PTSZ
            | CU_MEMSET_D2D16_ASYNC_PTSZ
            | CU_MEMSET_D2D32_ASYNC_PTSZ
            | CU_MEMCPY_BATCH_ASYNC_PTSZ
            | CU_MEMCPY_BATCH_ASYNC_V2_PTSZ
            | CU_STREAM_WAIT_EVENT_PTSZ
            | CU_STREAM_QUERY_PTSZ
            | CU_STREAM_SYNCHRONIZE_PTSZ
            | CU_EVENT_RECORD_PTSZ
            | CU_LAUNCH_KERNEL_PTSZ
            | CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ
            | CU_GRAPH_LAUNCH_PTSZ
            | CU_EVENT_RECORD_WITH_FLAGS_PTSZ
            | CU_MEM_ALLOC_ASYNC_PTSZ
            | CU_MEM_FREE_ASYNC_PTSZ
            | CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ
            | CU_LAUNCH_KERNEL_EX_PTSZ
            | CU_STREAM_BEGIN_CAPTURE_PTSZ
            | CU_STREAM_END_CAPTURE_PTSZ
            | CU_STREAM_BEGIN_CAPTURE_V2_PTSZ
            | CU_STREAM_BEGIN_CAPTURE_TO_GRAPH_PTSZ
    )
}

/// Calls that block the host until GPU work is done.
pub fn is_synchronization(cbid: u32) -> bool {
    matches!(
        cbid,
        CU_CTX_SYNCHRONIZE
            | CU_CTX_SYNCHRONIZE_V2
            | CU_STREAM_SYNCHRONIZE
            | CU_STREAM_SYNCHRONIZE_PTSZ
            | CU_EVENT_SYNCHRONIZE
    )
}

/// The calls besides the graph calls recorded when they return (their result or out-parameters matter).
const RECORDED_AT_EXIT: &[u32] = &[
    CU_STREAM_QUERY,
    CU_STREAM_QUERY_PTSZ,
    CU_EVENT_QUERY,
    CU_STREAM_CREATE,
    CU_STREAM_CREATE_WITH_PRIORITY,
    CU_EVENT_CREATE,
    CU_MEM_ALLOC_V2,
    CU_MEM_ALLOC_PITCH_V2,
    CU_MEM_ALLOC_MANAGED,
    CU_MEM_ALLOC_ASYNC,
    CU_MEM_ALLOC_ASYNC_PTSZ,
    CU_MEM_ALLOC_FROM_POOL_ASYNC,
    CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ,
    CU_MEM_HOST_ALLOC,
    CU_MEM_ALLOC_HOST_V2,
    CU_MEM_HOST_REGISTER,
    CU_MEM_HOST_REGISTER_V2,
    CU_MEM_MAP,
];

/// Ids below this are looked up in `AT_EXIT_BY_ID`; cupti_driver_cbid.h ends under 900.
const ID_LIMIT: usize = 1024;

/// Whether each id is recorded at exit, made at compile time: the callback asks on every driver call, at entry
/// and at exit, and a scan of the lists cost tens of nanoseconds each time.
static AT_EXIT_BY_ID: [bool; ID_LIMIT] = {
    let mut table = [false; ID_LIMIT];
    let mut i = 0;
    while i < GRAPH_CALLS.len() {
        table[GRAPH_CALLS[i] as usize] = true;
        i += 1;
    }
    let mut i = 0;
    while i < RECORDED_AT_EXIT.len() {
        table[RECORDED_AT_EXIT[i] as usize] = true;
        i += 1;
    }
    table
};

/// Calls recorded when they return (their result or out-parameters matter); every other call is recorded when
/// it is made.
pub fn recorded_at_exit(cbid: u32) -> bool {
    AT_EXIT_BY_ID.get(cbid as usize).copied().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_the_lists_say() {
        for id in 0..2 * ID_LIMIT as u32 {
            let listed = GRAPH_CALLS.contains(&id) || RECORDED_AT_EXIT.contains(&id);
            assert_eq!(recorded_at_exit(id), listed, "cbid {id}");
        }
    }

    #[test]
    fn calls_recorded_at_exit_are_subscribed() {
        for id in 0..1024 {
            if recorded_at_exit(id) {
                assert!(
                    ENABLED.contains(&id) || GRAPH_CALLS.contains(&id),
                    "cbid {id} is recorded at exit but not subscribed"
                );
            }
        }
    }
}

#[cfg(test)]
mod graph_tests {
    use super::*;

    #[test]
    fn graph_calls_are_distinct_from_the_other_subscriptions() {
        for id in GRAPH_CALLS {
            assert!(!ENABLED.contains(id), "cbid {id} is listed twice");
        }
    }
}
