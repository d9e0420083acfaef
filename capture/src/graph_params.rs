//! The parameter blocks of stream capture and the graph API calls (CUPTI's generated_cuda_meta.h), and the
//! node parameter structs they point to (cuda.h). Declarations only, like params.rs; graph_calls.rs reads them.

#![allow(non_snake_case, dead_code)]

use std::ffi::c_void;

use crate::params::{CUdeviceptr, Handle, Memcpy3D};

/// cuStreamBeginCapture_v2 (and the first field of cuStreamBeginCapture and cuStreamBeginCaptureToGraph).
#[repr(C)]
pub struct BeginCapture {
    pub hStream: Handle,
}

/// cuStreamBeginCaptureToGraph: (hStream, hGraph, dependencies, dependencyData, numDependencies, mode).
#[repr(C)]
pub struct BeginCaptureToGraph {
    pub hStream: Handle,
    pub hGraph: Handle,
    pub dependencies: *const Handle,
    pub dependencyData: *const c_void,
    pub numDependencies: usize,
}

/// cuStreamEndCapture: (hStream, phGraph).
#[repr(C)]
pub struct EndCapture {
    pub hStream: Handle,
    pub phGraph: *mut Handle,
}

/// cuStreamGetCaptureInfo_v2: what the driver writes through each out-pointer (any may be null: not asked).
#[repr(C)]
pub struct CaptureInfo {
    pub hStream: Handle,
    pub captureStatus_out: *mut u32,
    pub id_out: *mut u64,
    pub graph_out: *mut Handle,
    pub dependencies_out: *mut *const Handle,
    pub numDependencies_out: *mut usize,
}

/// cuStreamGetCaptureInfo_v3: the edge data's out-pointer before the count.
#[repr(C)]
pub struct CaptureInfoWithEdges {
    pub hStream: Handle,
    pub captureStatus_out: *mut u32,
    pub id_out: *mut u64,
    pub graph_out: *mut Handle,
    pub dependencies_out: *mut *const Handle,
    pub edgeData_out: *mut *const c_void,
    pub numDependencies_out: *mut usize,
}

/// CU_STREAM_CAPTURE_STATUS_ACTIVE: the stream is capturing.
pub const CAPTURE_STATUS_ACTIVE: u32 = 1;

/// cuStreamUpdateCaptureDependencies: (hStream, dependencies, numDependencies, flags).
#[repr(C)]
pub struct UpdateCaptureDependencies {
    pub hStream: Handle,
    pub dependencies: *const Handle,
    pub numDependencies: usize,
    pub flags: u32,
}

/// cuStreamUpdateCaptureDependencies_v2: the edge data before the count.
#[repr(C)]
pub struct UpdateCaptureDependenciesWithEdges {
    pub hStream: Handle,
    pub dependencies: *const Handle,
    pub dependencyData: *const c_void,
    pub numDependencies: usize,
    pub flags: u32,
}

/// CU_STREAM_SET_CAPTURE_DEPENDENCIES (CU_STREAM_ADD_CAPTURE_DEPENDENCIES is 0).
pub const SET_CAPTURE_DEPENDENCIES: u32 = 1;

/// cuGraphCreate: (phGraph, flags); cuGraphClone: (phGraphClone, originalGraph).
#[repr(C)]
pub struct GraphOut {
    pub phGraph: *mut Handle,
    pub other: Handle,
}

/// Every cuGraphAdd*Node but cuGraphAddNode_v2: (phGraphNode, hGraph, dependencies, numDependencies) and then
/// the node's own parameters, `T`.
#[repr(C)]
pub struct AddNode<T> {
    pub phGraphNode: *mut Handle,
    pub hGraph: Handle,
    pub dependencies: *const Handle,
    pub numDependencies: usize,
    pub rest: T,
}

/// cuGraphAddNode_v2 / _v3: edge data between the dependencies and their count.
#[repr(C)]
pub struct AddNodeWithEdges {
    pub phGraphNode: *mut Handle,
    pub hGraph: Handle,
    pub dependencies: *const Handle,
    pub dependencyData: *const c_void,
    pub numDependencies: usize,
    pub nodeParams: *const NodeParams,
}

/// CUDA_KERNEL_NODE_PARAMS (v1 ends after `extra`; v2 and v3 add `kern` and `ctx`).
#[repr(C)]
pub struct KernelNodeParams {
    pub func: Handle,
    pub gridDimX: u32,
    pub gridDimY: u32,
    pub gridDimZ: u32,
    pub blockDimX: u32,
    pub blockDimY: u32,
    pub blockDimZ: u32,
    pub sharedMemBytes: u32,
    pub kernelParams: *mut *mut c_void,
    pub extra: *mut *mut c_void,
}

/// CUDA_KERNEL_NODE_PARAMS_v2/_v3: v1 with the library kernel and the context.
#[repr(C)]
pub struct KernelNodeParamsV2 {
    pub v1: KernelNodeParams,
    pub kern: Handle,
    pub ctx: Handle,
}

/// CUDA_MEMSET_NODE_PARAMS: `height` rows of `width` elements of `elementSize` bytes, `pitch` apart.
#[repr(C)]
pub struct MemsetNodeParams {
    pub dst: CUdeviceptr,
    pub pitch: usize,
    pub value: u32,
    pub elementSize: u32,
    pub width: usize,
    pub height: usize,
}

/// CUDA_MEM_ALLOC_NODE_PARAMS: the 88-byte pool properties, the access descriptors, then size and address
/// (the address is written by the driver).
#[repr(C)]
pub struct MemAllocNodeParams {
    pub poolProps: [u64; 11],
    pub accessDescs: *const c_void,
    pub accessDescCount: usize,
    pub bytesize: usize,
    pub dptr: CUdeviceptr,
}

/// CUgraphNodeParams: the node type, padding, then the type's own parameters (a union of 29 words).
#[repr(C)]
pub struct NodeParams {
    pub node_type: u32,
    pub reserved0: [i32; 3],
    pub params: [u64; 29],
    pub reserved2: i64,
}

/// CUDA_MEMCPY_NODE_PARAMS, as CUgraphNodeParams holds it.
#[repr(C)]
pub struct MemcpyNodeParams {
    pub flags: i32,
    pub reserved: i32,
    pub copyCtx: Handle,
    pub copyParams: Memcpy3D,
}

/// CUgraphNodeType.
pub const NODE_KERNEL: u32 = 0;
pub const NODE_MEMCPY: u32 = 1;
pub const NODE_MEMSET: u32 = 2;
pub const NODE_HOST: u32 = 3;
pub const NODE_GRAPH: u32 = 4;
pub const NODE_EMPTY: u32 = 5;
pub const NODE_WAIT_EVENT: u32 = 6;
pub const NODE_EVENT_RECORD: u32 = 7;
pub const NODE_MEM_ALLOC: u32 = 10;
pub const NODE_MEM_FREE: u32 = 11;
pub const NODE_CONDITIONAL: u32 = 13;

/// cuGraphAddDependencies: (hGraph, from, to, numDependencies); the _v2 form puts edge data before the count.
#[repr(C)]
pub struct Dependencies {
    pub hGraph: Handle,
    pub from: *const Handle,
    pub to: *const Handle,
    pub numDependencies: usize,
}

#[repr(C)]
pub struct DependenciesWithEdges {
    pub hGraph: Handle,
    pub from: *const Handle,
    pub to: *const Handle,
    pub edgeData: *const c_void,
    pub numDependencies: usize,
}

/// The graph-side setters: (hNode, params). cuGraphDestroyNode: (hNode).
#[repr(C)]
pub struct NodeSet<T> {
    pub hNode: Handle,
    pub params: T,
}

/// The executable-graph setters: (hGraphExec, hNode, params).
#[repr(C)]
pub struct ExecNodeSet<T> {
    pub hGraphExec: Handle,
    pub hNode: Handle,
    pub params: T,
}

/// Every cuGraphInstantiate form starts (phGraphExec, hGraph).
#[repr(C)]
pub struct Instantiate {
    pub phGraphExec: *mut Handle,
    pub hGraph: Handle,
}

/// cuGraphExecUpdate (both versions) starts (hGraphExec, hGraph).
#[repr(C)]
pub struct ExecUpdate {
    pub hGraphExec: Handle,
    pub hGraph: Handle,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(offset_of!(KernelNodeParams, kernelParams), 40);
        assert_eq!(offset_of!(KernelNodeParamsV2, kern), 56);
        assert_eq!(size_of::<KernelNodeParamsV2>(), 72);
        assert_eq!(offset_of!(MemsetNodeParams, width), 24);
        assert_eq!(size_of::<MemsetNodeParams>(), 40);
        assert_eq!(offset_of!(MemAllocNodeParams, dptr), 112);
        assert_eq!(offset_of!(NodeParams, params), 16);
        assert_eq!(size_of::<NodeParams>(), 256);
        assert_eq!(offset_of!(MemcpyNodeParams, copyParams), 16);
        assert_eq!(offset_of!(AddNode<Handle>, rest), 32);
        assert_eq!(offset_of!(AddNodeWithEdges, nodeParams), 40);
        assert_eq!(offset_of!(DependenciesWithEdges, numDependencies), 32);
        assert_eq!(offset_of!(ExecNodeSet<Handle>, params), 16);
    }
}
