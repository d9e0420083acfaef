//! The parameter blocks CUPTI hands to a driver-API callback (`functionParams`), laid out as in CUPTI's
//! generated_cuda_meta.h. Only the calls streamtrace records are declared. Every field is read, never written;
//! declarations only (callback.rs reads them), this file touches nothing.

#![allow(non_snake_case, dead_code)]

use std::ffi::c_void;

pub type CUdeviceptr = u64;
pub type Handle = *mut c_void;

#[repr(C)]
pub struct LaunchKernel {
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
    /// Absent from cuLaunchCooperativeKernel's block: never read for it.
    pub extra: *mut *mut c_void,
}

/// The leading fields of CUlaunchConfig.
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
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(offset_of!(LaunchKernel, sharedMemBytes), 32);
        assert_eq!(offset_of!(LaunchKernel, hStream), 40);
        assert_eq!(offset_of!(LaunchKernel, kernelParams), 48);
        assert_eq!(offset_of!(LaunchConfig, hStream), 32);
        assert_eq!(offset_of!(MemcpyAsync, hStream), 24);
        assert_eq!(offset_of!(MemsetAsync, N), 16);
        assert_eq!(offset_of!(MemsetAsync, hStream), 24);
        assert_eq!(offset_of!(StreamWaitEvent, Flags), 16);
        assert_eq!(offset_of!(MemcpyPeerAsync, hStream), 40);
        assert_eq!(offset_of!(MemAllocFromPoolAsync, hStream), 24);
    }
}
