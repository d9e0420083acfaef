//! The driver-API callback ids streamtrace enables (cupti_driver_cbid.h). Only these are enabled: a PyTorch
//! start-up makes thousands of calls streamtrace has no use for. Constants and predicates; touches nothing.

pub const CU_CTX_SYNCHRONIZE: u32 = 17;
pub const CU_MEM_FREE_HOST: u32 = 38;
pub const CU_MEM_HOST_ALLOC: u32 = 39;
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
pub const CU_MEMCPY_PTDS: u32 = 408;
pub const CU_MEMSET_D8_V2_PTDS: u32 = 411;
pub const CU_MEMSET_D32_V2_PTDS: u32 = 413;
pub const CU_MEMCPY_ASYNC_PTSZ: u32 = 418;
pub const CU_MEMCPY_HTOD_ASYNC_V2_PTSZ: u32 = 421;
pub const CU_MEMCPY_DTOH_ASYNC_V2_PTSZ: u32 = 422;
pub const CU_MEMCPY_DTOD_ASYNC_V2_PTSZ: u32 = 423;
pub const CU_MEMCPY_PEER_ASYNC_PTSZ: u32 = 426;
pub const CU_MEMSET_D8_ASYNC_PTSZ: u32 = 428;
pub const CU_MEMSET_D32_ASYNC_PTSZ: u32 = 430;
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

/// Every id above: the set the capture subscribes to.
pub const ENABLED: &[u32] = &[
    CU_CTX_SYNCHRONIZE, CU_MEM_FREE_HOST, CU_MEM_HOST_ALLOC, CU_EVENT_RECORD, CU_EVENT_QUERY, CU_EVENT_SYNCHRONIZE,
    CU_STREAM_CREATE, CU_STREAM_QUERY, CU_STREAM_SYNCHRONIZE, CU_MEMSET_D8_ASYNC, CU_MEMSET_D16_ASYNC,
    CU_MEMSET_D32_ASYNC, CU_MEM_ALLOC_V2, CU_MEM_FREE_V2, CU_MEMSET_D8_V2, CU_MEMSET_D16_V2, CU_MEMSET_D32_V2,
    CU_MEMCPY_HTOD_V2, CU_MEMCPY_HTOD_ASYNC_V2, CU_MEMCPY_DTOH_V2, CU_MEMCPY_DTOH_ASYNC_V2, CU_MEMCPY_DTOD_V2,
    CU_MEMCPY_DTOD_ASYNC_V2, CU_MEM_ALLOC_HOST_V2, CU_STREAM_WAIT_EVENT, CU_MEMCPY, CU_MEMCPY_ASYNC, CU_LAUNCH_KERNEL,
    CU_MEMCPY_PEER, CU_MEMCPY_PEER_ASYNC, CU_STREAM_CREATE_WITH_PRIORITY, CU_MEM_ALLOC_MANAGED,
    CU_MEMCPY_HTOD_V2_PTDS, CU_MEMCPY_DTOH_V2_PTDS, CU_MEMCPY_DTOD_V2_PTDS, CU_MEMCPY_PTDS, CU_MEMSET_D8_V2_PTDS,
    CU_MEMSET_D32_V2_PTDS, CU_MEMCPY_ASYNC_PTSZ, CU_MEMCPY_HTOD_ASYNC_V2_PTSZ, CU_MEMCPY_DTOH_ASYNC_V2_PTSZ,
    CU_MEMCPY_DTOD_ASYNC_V2_PTSZ, CU_MEMCPY_PEER_ASYNC_PTSZ, CU_MEMSET_D8_ASYNC_PTSZ, CU_MEMSET_D32_ASYNC_PTSZ,
    CU_STREAM_WAIT_EVENT_PTSZ, CU_STREAM_QUERY_PTSZ, CU_STREAM_SYNCHRONIZE_PTSZ, CU_EVENT_RECORD_PTSZ,
    CU_LAUNCH_KERNEL_PTSZ, CU_LAUNCH_COOPERATIVE_KERNEL, CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ, CU_GRAPH_LAUNCH,
    CU_GRAPH_LAUNCH_PTSZ, CU_MEM_MAP, CU_MEM_UNMAP, CU_EVENT_RECORD_WITH_FLAGS, CU_EVENT_RECORD_WITH_FLAGS_PTSZ,
    CU_MEM_ALLOC_ASYNC, CU_MEM_ALLOC_ASYNC_PTSZ, CU_MEM_FREE_ASYNC, CU_MEM_FREE_ASYNC_PTSZ,
    CU_MEM_ALLOC_FROM_POOL_ASYNC, CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ, CU_LAUNCH_KERNEL_EX, CU_LAUNCH_KERNEL_EX_PTSZ,
    CU_CTX_SYNCHRONIZE_V2, CU_MEM_HOST_REGISTER, CU_MEM_HOST_REGISTER_V2, CU_MEM_HOST_UNREGISTER,
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
            | CU_MEMSET_D8_V2_PTDS
            | CU_MEMSET_D32_V2_PTDS
            | CU_MEMCPY_ASYNC_PTSZ
            | CU_MEMCPY_HTOD_ASYNC_V2_PTSZ
            | CU_MEMCPY_DTOH_ASYNC_V2_PTSZ
            | CU_MEMCPY_DTOD_ASYNC_V2_PTSZ
            | CU_MEMCPY_PEER_ASYNC_PTSZ
            | CU_MEMSET_D8_ASYNC_PTSZ
            | CU_MEMSET_D32_ASYNC_PTSZ
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
    )
}

/// Calls that block the host until GPU work is done.
pub fn is_synchronization(cbid: u32) -> bool {
    matches!(cbid, CU_CTX_SYNCHRONIZE | CU_CTX_SYNCHRONIZE_V2 | CU_STREAM_SYNCHRONIZE | CU_STREAM_SYNCHRONIZE_PTSZ | CU_EVENT_SYNCHRONIZE)
}

/// Calls recorded when they return (their result or out-parameters matter); every other call is recorded when
/// it is made.
pub fn recorded_at_exit(cbid: u32) -> bool {
    matches!(
        cbid,
        CU_STREAM_QUERY
            | CU_STREAM_QUERY_PTSZ
            | CU_EVENT_QUERY
            | CU_STREAM_CREATE
            | CU_STREAM_CREATE_WITH_PRIORITY
            | CU_MEM_ALLOC_V2
            | CU_MEM_ALLOC_MANAGED
            | CU_MEM_ALLOC_ASYNC
            | CU_MEM_ALLOC_ASYNC_PTSZ
            | CU_MEM_ALLOC_FROM_POOL_ASYNC
            | CU_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ
            | CU_MEM_HOST_ALLOC
            | CU_MEM_ALLOC_HOST_V2
            | CU_MEM_HOST_REGISTER
            | CU_MEM_HOST_REGISTER_V2
            | CU_MEM_MAP
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_recorded_at_exit_are_subscribed() {
        for id in 0..1024 {
            if recorded_at_exit(id) {
                assert!(ENABLED.contains(&id), "cbid {id} is recorded at exit but not subscribed");
            }
        }
    }
}
