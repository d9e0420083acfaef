//! The parameter blocks CUPTI hands to a driver-API callback (`functionParams`), laid out as in CUPTI's
//! generated_cuda_meta.h. Only the calls streamtrace records are declared. Every field is read, never written,
//! but a host function and its user data, which host_watch/host_funcs.rs may swap for its trampoline's;
//! declarations only (callback.rs reads them), this file touches nothing.

#![allow(non_snake_case, dead_code)]

use std::ffi::c_void;

pub type CUdeviceptr = u64;
pub type Handle = *mut c_void;

/// cuLaunchCooperativeKernel's block: cuLaunchKernel's without `extra`.
#[repr(C)]
pub struct LaunchCooperativeKernel {
    pub f: Handle,
    pub gridDimX: u32,
    pub gridDimY: u32,
    pub gridDimZ: u32,
    pub blockDimX: u32,
    pub blockDimY: u32,
    pub blockDimZ: u32,
    pub sharedMemBytes: u32,
    pub hStream: Handle,
    pub kernelParams: *mut *mut c_void,
}

#[repr(C)]
pub struct LaunchKernel {
    pub launch: LaunchCooperativeKernel,
    pub extra: *mut *mut c_void,
}

/// CUlaunchConfig.
#[repr(C)]
pub struct LaunchConfig {
    pub gridDimX: u32,
    pub gridDimY: u32,
    pub gridDimZ: u32,
    pub blockDimX: u32,
    pub blockDimY: u32,
    pub blockDimZ: u32,
    pub sharedMemBytes: u32,
    pub hStream: Handle,
    pub attrs: *const LaunchAttribute,
    pub numAttrs: u32,
}

/// CUlaunchAttribute: an id and a 64-byte value union, of which only the event-carrying members are read.
#[repr(C)]
pub struct LaunchAttribute {
    pub id: u32,
    pub pad: u32,
    /// `CUlaunchAttributeValue`; for the event attributes its first word is the `CUevent`.
    pub value: [u64; 8],
}

/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: the event fires once every block has triggered (or exited).
pub const LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: u32 = 7;
/// CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: the event fires once every block has begun to run.
pub const LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: u32 = 12;

#[repr(C)]
pub struct LaunchKernelEx {
    pub config: *const LaunchConfig,
    pub f: Handle,
    pub kernelParams: *mut *mut c_void,
    pub extra: *mut *mut c_void,
}

/// cuMemcpy, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuMemcpyDtoD_v2 (and their _ptds forms): dst, src, bytes.
#[repr(C)]
pub struct Memcpy {
    pub dst: u64,
    pub src: u64,
    pub ByteCount: usize,
}

/// The same with a stream: cuMemcpyAsync and the HtoD/DtoH/DtoD async forms.
#[repr(C)]
pub struct MemcpyAsync {
    pub dst: u64,
    pub src: u64,
    pub ByteCount: usize,
    pub hStream: Handle,
}

#[repr(C)]
pub struct MemcpyPeerAsync {
    pub dstDevice: CUdeviceptr,
    pub dstContext: Handle,
    pub srcDevice: CUdeviceptr,
    pub srcContext: Handle,
    pub ByteCount: usize,
    pub hStream: Handle,
}

#[repr(C)]
pub struct MemcpyPeer {
    pub dstDevice: CUdeviceptr,
    pub dstContext: Handle,
    pub srcDevice: CUdeviceptr,
    pub srcContext: Handle,
    pub ByteCount: usize,
}

/// cuMemsetD8/D16/D32 (the value's width differs, its slot is padded to the same place).
#[repr(C)]
pub struct Memset {
    pub dstDevice: CUdeviceptr,
    pub value: u32,
    pub N: usize,
}

#[repr(C)]
pub struct MemsetAsync {
    pub dstDevice: CUdeviceptr,
    pub value: u32,
    pub N: usize,
    pub hStream: Handle,
}

/// cuMemAllocPitch: (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); the block is pitch x Height bytes.
#[repr(C)]
pub struct MemAllocPitch {
    pub dptr: *mut CUdeviceptr,
    pub pPitch: *mut usize,
    pub WidthInBytes: usize,
    pub Height: usize,
    pub ElementSizeBytes: u32,
}

/// The copies of a cuMemcpyBatchAsync: dsts[i] <- srcs[i] of sizes[i] bytes, `count` of them, and their
/// attributes.
#[repr(C)]
pub struct MemcpyBatchArrays {
    pub dsts: *const CUdeviceptr,
    pub srcs: *const CUdeviceptr,
    pub sizes: *const usize,
    pub count: usize,
    pub attrs: *const c_void,
    pub attrsIdxs: *const usize,
    pub numAttrs: usize,
}

/// cuMemcpyBatchAsync (CUDA 12.8): the copies, an index for the failing one, and the stream.
#[repr(C)]
pub struct MemcpyBatch {
    pub copies: MemcpyBatchArrays,
    pub failIdx: *mut usize,
    pub hStream: Handle,
}

/// cuMemcpyBatchAsync_v2 (CUDA 13): the same without the failing index.
#[repr(C)]
pub struct MemcpyBatchV2 {
    pub copies: MemcpyBatchArrays,
    pub hStream: Handle,
}

/// CUDA_MEMCPY2D: a pitched copy of `Height` rows of `WidthInBytes`.
#[repr(C)]
pub struct Memcpy2D {
    pub srcXInBytes: usize,
    pub srcY: usize,
    pub srcMemoryType: u32,
    pub srcHost: *const c_void,
    pub srcDevice: CUdeviceptr,
    pub srcArray: Handle,
    pub srcPitch: usize,
    pub dstXInBytes: usize,
    pub dstY: usize,
    pub dstMemoryType: u32,
    pub dstHost: *mut c_void,
    pub dstDevice: CUdeviceptr,
    pub dstArray: Handle,
    pub dstPitch: usize,
    pub WidthInBytes: usize,
    pub Height: usize,
}

/// CUDA_MEMCPY3D: `Depth` slices of `Height` rows of `WidthInBytes`, slices `srcHeight`/`dstHeight` rows apart.
#[repr(C)]
pub struct Memcpy3D {
    pub srcXInBytes: usize,
    pub srcY: usize,
    pub srcZ: usize,
    pub srcLOD: usize,
    pub srcMemoryType: u32,
    pub srcHost: *const c_void,
    pub srcDevice: CUdeviceptr,
    pub srcArray: Handle,
    pub reserved0: *mut c_void,
    pub srcPitch: usize,
    pub srcHeight: usize,
    pub dstXInBytes: usize,
    pub dstY: usize,
    pub dstZ: usize,
    pub dstLOD: usize,
    pub dstMemoryType: u32,
    pub dstHost: *mut c_void,
    pub dstDevice: CUdeviceptr,
    pub dstArray: Handle,
    pub reserved1: *mut c_void,
    pub dstPitch: usize,
    pub dstHeight: usize,
    pub WidthInBytes: usize,
    pub Height: usize,
    pub Depth: usize,
}

/// CUDA_MEMCPY3D_BATCH_OP: a pitched copy between two operands (a pointer with its row length and layer height
/// in bytes, or an array) of `extent` (width in bytes).
pub type Memcpy3DBatchOp = cudarc::driver::sys::CUDA_MEMCPY3D_BATCH_OP;

/// cuMemcpy3DBatchAsync (CUDA 12.8): the operations, an index for the failing one, flags and the stream.
#[repr(C)]
pub struct Memcpy3DBatch {
    pub numOps: usize,
    pub opList: *const Memcpy3DBatchOp,
    pub failIdx: *mut usize,
    pub flags: u64,
    pub hStream: Handle,
}

/// cuMemcpy3DBatchAsync_v2 (CUDA 13): the same without the failing index.
#[repr(C)]
pub struct Memcpy3DBatchV2 {
    pub numOps: usize,
    pub opList: *const Memcpy3DBatchOp,
    pub flags: u64,
    pub hStream: Handle,
}

/// cuMemcpy2D/3D (and Unaligned): the descriptor.
#[repr(C)]
pub struct PitchedCopy<T> {
    pub pCopy: *const T,
}

/// cuMemcpy2DAsync/3DAsync: the descriptor and the stream.
#[repr(C)]
pub struct PitchedCopyAsync<T> {
    pub pCopy: *const T,
    pub hStream: Handle,
}

/// cuMemsetD2D8/16/32: (dstDevice, dstPitch, value padded, Width in elements, Height).
#[repr(C)]
pub struct Memset2D {
    pub dstDevice: CUdeviceptr,
    pub dstPitch: usize,
    pub value: u32,
    pub Width: usize,
    pub Height: usize,
}

/// The Async forms of cuMemsetD2D*: the same and the stream.
#[repr(C)]
pub struct Memset2DAsync {
    pub set: Memset2D,
    pub hStream: Handle,
}

#[repr(C)]
pub struct EventRecord {
    pub hEvent: Handle,
    pub hStream: Handle,
}

#[repr(C)]
pub struct StreamWaitEvent {
    pub hStream: Handle,
    pub hEvent: Handle,
    pub Flags: u32,
}

/// cuStreamWriteValue32/64 and cuStreamWaitValue32/64, and their `_v2` forms: the value's width differs, not
/// where the stream and the address lie.
#[repr(C)]
pub struct StreamValueOp {
    pub stream: Handle,
    pub addr: u64,
}

#[repr(C)]
pub struct StreamBatchMemOp {
    pub stream: Handle,
    pub count: u32,
    pub paramArray: *const BatchMemOpParams,
}

/// One CUstreamBatchMemOpParams (a 48-byte union): a wait's and a write's address follows the operation.
#[repr(C)]
pub struct BatchMemOpParams {
    pub operation: u32,
    pub address: u64,
    pub rest: [u64; 4],
}

/// CUstreamBatchMemOpType's waits and writes.
pub const MEM_OP_WAIT_VALUE_32: u32 = 1;
pub const MEM_OP_WRITE_VALUE_32: u32 = 2;
pub const MEM_OP_WAIT_VALUE_64: u32 = 4;
pub const MEM_OP_WRITE_VALUE_64: u32 = 5;

#[repr(C)]
pub struct OneHandle {
    pub handle: Handle,
}

#[repr(C)]
pub struct StreamCreate {
    pub phStream: *mut Handle,
    pub Flags: u32,
    /// Only in cuStreamCreateWithPriority's block.
    pub priority: i32,
}

/// cuEventCreate: where the new event goes, and its flags.
#[repr(C)]
pub struct EventCreate {
    pub phEvent: *mut Handle,
    pub Flags: u32,
}

#[repr(C)]
pub struct MemAlloc {
    pub dptr: *mut CUdeviceptr,
    pub bytesize: usize,
}

#[repr(C)]
pub struct MemAllocAsync {
    pub dptr: *mut CUdeviceptr,
    pub bytesize: usize,
    pub hStream: Handle,
}

#[repr(C)]
pub struct MemAllocFromPoolAsync {
    pub dptr: *mut CUdeviceptr,
    pub bytesize: usize,
    pub pool: Handle,
    pub hStream: Handle,
}

#[repr(C)]
pub struct MemFree {
    pub dptr: CUdeviceptr,
}

#[repr(C)]
pub struct MemFreeAsync {
    pub dptr: CUdeviceptr,
    pub hStream: Handle,
}

/// cuIpcOpenMemHandle (both versions) and cuMemPoolImportPointer start with the out-parameter of the mapped
/// address; what follows (the handle by value, the pool and export data) is not read.
#[repr(C)]
pub struct ImportedPointer {
    pub pdptr: *mut CUdeviceptr,
}

#[repr(C)]
pub struct MemMap {
    pub ptr: CUdeviceptr,
    pub size: usize,
}

#[repr(C)]
pub struct MemHostAlloc {
    pub pp: *mut *mut c_void,
    pub bytesize: usize,
}

/// cuMemHostRegister (both versions): (p, bytesize, Flags).
#[repr(C)]
pub struct MemHostRegister {
    pub p: *mut c_void,
    pub bytesize: usize,
    pub Flags: u32,
}

#[repr(C)]
pub struct GraphLaunch {
    pub hGraph: Handle,
    pub hStream: Handle,
}

/// cuLaunchHostFunc's block.
#[repr(C)]
pub struct LaunchHostFunc {
    pub hStream: Handle,
    pub fn_: Option<unsafe extern "C" fn(*mut c_void)>,
    pub userData: *mut c_void,
}

/// CUDA_HOST_NODE_PARAMS: a host node's function and data.
#[repr(C)]
pub struct HostNodeParams {
    pub fn_: Option<unsafe extern "C" fn(*mut c_void)>,
    pub userData: *mut c_void,
}

/// cuStreamAddCallback's block.
#[repr(C)]
pub struct StreamAddCallback {
    pub hStream: Handle,
    pub callback: Option<unsafe extern "C" fn(Handle, i32, *mut c_void)>,
    pub userData: *mut c_void,
    pub flags: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(offset_of!(LaunchKernel, launch.sharedMemBytes), 32);
        assert_eq!(offset_of!(LaunchKernel, launch.hStream), 40);
        assert_eq!(offset_of!(LaunchKernel, launch.kernelParams), 48);
        assert_eq!(offset_of!(LaunchConfig, hStream), 32);
        // cuda.h: CUlaunchConfig's attrs and numAttrs follow the stream; a CUlaunchAttribute is 72 bytes.
        assert_eq!(offset_of!(LaunchConfig, attrs), 40);
        assert_eq!(offset_of!(LaunchConfig, numAttrs), 48);
        assert_eq!(std::mem::size_of::<LaunchAttribute>(), 72);
        assert_eq!(offset_of!(LaunchAttribute, value), 8);
        assert_eq!(offset_of!(MemcpyAsync, hStream), 24);
        assert_eq!(offset_of!(MemsetAsync, N), 16);
        assert_eq!(offset_of!(MemsetAsync, hStream), 24);
        assert_eq!(offset_of!(StreamWaitEvent, Flags), 16);
        assert_eq!(offset_of!(MemcpyPeerAsync, hStream), 40);
        assert_eq!(offset_of!(MemAllocFromPoolAsync, hStream), 24);
        // cuda.h: CUDA_MEMCPY2D is 128 bytes, CUDA_MEMCPY3D 200; cuMemsetD2D8Async's params end with the stream.
        assert_eq!(std::mem::size_of::<Memcpy2D>(), 128);
        assert_eq!(offset_of!(Memcpy2D, dstXInBytes), 56);
        assert_eq!(offset_of!(Memcpy2D, WidthInBytes), 112);
        assert_eq!(std::mem::size_of::<Memcpy3D>(), 200);
        assert_eq!(offset_of!(Memcpy3D, dstXInBytes), 88);
        assert_eq!(offset_of!(Memcpy3D, WidthInBytes), 176);
        assert_eq!(offset_of!(Memset2D, Width), 24);
        assert_eq!(offset_of!(Memset2DAsync, hStream), 40);
        assert_eq!(offset_of!(MemcpyBatch, hStream), 64);
        assert_eq!(std::mem::size_of::<LaunchCooperativeKernel>(), 56);
        assert_eq!(offset_of!(LaunchKernel, extra), 56);
        assert_eq!(offset_of!(MemcpyBatchV2, hStream), 56);
        assert_eq!(offset_of!(Memcpy3DBatch, hStream), 32);
        assert_eq!(offset_of!(Memcpy3DBatchV2, hStream), 24);
        // cuMemcpy3DPeer's descriptor is read as CUDA_MEMCPY3D: the same words, the contexts in the reserved ones.
        use cudarc::driver::sys::CUDA_MEMCPY3D_PEER as Peer;
        assert_eq!(std::mem::size_of::<Peer>(), std::mem::size_of::<Memcpy3D>());
        assert_eq!(offset_of!(Peer, srcContext), offset_of!(Memcpy3D, reserved0));
        assert_eq!(offset_of!(Peer, dstContext), offset_of!(Memcpy3D, reserved1));
        assert_eq!(offset_of!(Peer, dstDevice), offset_of!(Memcpy3D, dstDevice));
        assert_eq!(offset_of!(Peer, Depth), offset_of!(Memcpy3D, Depth));
    }
}
