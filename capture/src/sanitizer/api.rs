//! The part of the Compute Sanitizer API the exact-access backend uses (sanitizer.h and the headers it
//! includes, CUDA 13.0): the callback data it reads, declared as the headers lay them out, and the functions,
//! found by name in libsanitizer-public.so, which is loaded by path (`streamtrace capture --exact` finds it,
//! `--sanitizer-lib` overrides). Declarations and loading only.

#![allow(non_snake_case, non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_void};
use std::path::Path;

pub type SanitizerResult = u32;
pub const SANITIZER_SUCCESS: SanitizerResult = 0;

pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;
pub type StreamHandle = *mut c_void;
pub type LaunchHandle = *mut c_void;
pub type SubscriberHandle = *mut c_void;

/// Sanitizer_CallbackDomain.
pub const DOMAIN_DRIVER_API: u32 = 1;
pub const DOMAIN_RESOURCE: u32 = 3;
pub const DOMAIN_LAUNCH: u32 = 5;
pub const DOMAIN_GRAPHS: u32 = 10;

/// Sanitizer_CallbackIdResource.
pub const RESOURCE_CONTEXT_CREATION_FINISHED: u32 = 3;
pub const RESOURCE_MODULE_LOADED: u32 = 9;
/// Sanitizer_CallbackIdLaunch.
pub const LAUNCH_BEGIN: u32 = 1;
/// Sanitizer_CallbackIdGraphs.
pub const GRAPHS_NODE_LAUNCH_BEGIN: u32 = 4;
/// CUgraphNodeType's kernel node.
pub const GRAPH_NODE_KERNEL: u32 = 0;

/// Sanitizer_ApiCallbackSite.
pub const API_EXIT: u32 = 1;

/// Sanitizer_InstructionId: the instructions the patches (capture/patches/exact_access.cu) are called for.
pub const INSTRUCTION_BLOCK_ENTER: u32 = 1;
pub const INSTRUCTION_GLOBAL_MEMORY_ACCESS: u32 = 3;
pub const INSTRUCTION_CUDA_BARRIER: u32 = 13;
pub const INSTRUCTION_MEMCPY_ASYNC: u32 = 14;
pub const INSTRUCTION_BULK_COPY_GLOBAL_TO_SHARED: u32 = 30;
pub const INSTRUCTION_BULK_COPY_SHARED_TO_GLOBAL: u32 = 35;
pub const INSTRUCTION_BULK_REDUCTION_SHARED_TO_GLOBAL: u32 = 37;

/// Sanitizer_CallbackData (driver and runtime API domains).
#[repr(C)]
pub struct CallbackData {
    pub callbackSite: u32,
    pub functionName: *const c_char,
    pub functionParams: *const c_void,
    pub functionReturnValue: *const c_void,
    pub symbolName: *const c_char,
    pub context: CUcontext,
}

/// Sanitizer_ResourceContextData.
#[repr(C)]
pub struct ResourceContextData {
    pub context: CUcontext,
    pub device: i32,
}

/// Sanitizer_ResourceModuleData.
#[repr(C)]
pub struct ResourceModuleData {
    pub context: CUcontext,
    pub module: CUmodule,
    pub cubinSize: usize,
    pub pCubin: *const c_char,
    pub library: *mut c_void,
}

/// Sanitizer_LaunchData.
#[repr(C)]
pub struct LaunchData {
    pub context: CUcontext,
    pub stream: CUstream,
    pub hStream: StreamHandle,
    pub module: CUmodule,
    pub function: CUfunction,
    pub functionName: *const c_char,
    pub gridDim: [u32; 3],
    pub blockDim: [u32; 3],
    pub clusterDim: [u32; 3],
    pub gridId: u64,
    pub hLaunch: LaunchHandle,
    pub device: i32,
    pub apiContext: CUcontext,
    pub apiStream: CUstream,
    pub hApiStream: StreamHandle,
}

/// Sanitizer_GraphNodeLaunchData, as far as a kernel node's launch data (the union's first member).
#[repr(C)]
pub struct GraphNodeLaunchData {
    pub graphExec: *mut c_void,
    pub launchId: u32,
    pub node: *mut c_void,
    pub nodeType: u32,
    pub launchData: LaunchData,
}

pub type Callback = unsafe extern "C" fn(userdata: *mut c_void, domain: u32, cbid: u32, cbdata: *const c_void);

/// The functions of libsanitizer-public.so, loaded once.
pub struct Sanitizer {
    _library: libloading::Library,
    pub subscribe: unsafe extern "C" fn(*mut SubscriberHandle, Callback, *mut c_void) -> SanitizerResult,
    pub enable_callback: unsafe extern "C" fn(u32, SubscriberHandle, u32, u32) -> SanitizerResult,
    pub enable_domain: unsafe extern "C" fn(u32, SubscriberHandle, u32) -> SanitizerResult,
    pub add_patches: unsafe extern "C" fn(*const c_void, CUcontext) -> SanitizerResult,
    pub patch_instructions: unsafe extern "C" fn(u32, CUmodule, *const c_char) -> SanitizerResult,
    pub patch_module: unsafe extern "C" fn(CUmodule) -> SanitizerResult,
    pub set_launch_callback_data:
        unsafe extern "C" fn(LaunchHandle, CUfunction, StreamHandle, *const c_void) -> SanitizerResult,
    pub alloc: unsafe extern "C" fn(CUcontext, *mut *mut c_void, usize) -> SanitizerResult,
    pub free: unsafe extern "C" fn(CUcontext, *mut c_void) -> SanitizerResult,
    pub memset: unsafe extern "C" fn(*mut c_void, i32, usize, StreamHandle) -> SanitizerResult,
    pub memcpy_host_to_device_async:
        unsafe extern "C" fn(*mut c_void, *mut c_void, usize, StreamHandle) -> SanitizerResult,
    pub memcpy_device_to_host: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, StreamHandle) -> SanitizerResult,
    pub stream_synchronize: unsafe extern "C" fn(StreamHandle) -> SanitizerResult,
}

impl Sanitizer {
    /// Loads the library at `path` and finds every function; an error names what is missing.
    pub fn load(path: &Path) -> Result<Sanitizer, String> {
        // Safety: loading the Sanitizer API runs its initializers, which expect to be loaded into a CUDA
        // process at injection time, as here.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load the Compute Sanitizer library {}: {e}", path.display()))?;
        macro_rules! find {
            ($name:literal) => {
                // Safety: the symbol is the Sanitizer API function of that name, whose C signature the field
                // declares (sanitizer_*.h, CUDA 13.0).
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{} has no {}: {e}", path.display(), $name))?
            };
        }
        Ok(Sanitizer {
            subscribe: find!("sanitizerSubscribe"),
            enable_callback: find!("sanitizerEnableCallback"),
            enable_domain: find!("sanitizerEnableDomain"),
            add_patches: find!("sanitizerAddPatches"),
            patch_instructions: find!("sanitizerPatchInstructions"),
            patch_module: find!("sanitizerPatchModule"),
            set_launch_callback_data: find!("sanitizerSetLaunchCallbackData"),
            alloc: find!("sanitizerAlloc"),
            free: find!("sanitizerFree"),
            memset: find!("sanitizerMemset"),
            memcpy_host_to_device_async: find!("sanitizerMemcpyHostToDeviceAsync"),
            memcpy_device_to_host: find!("sanitizerMemcpyDeviceToHost"),
            stream_synchronize: find!("sanitizerStreamSynchronize"),
            _library: library,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_data_is_laid_out_as_the_headers_say() {
        // Offsets from sanitizer_callbacks.h on x86-64 (gridId follows nine 32-bit dimensions).
        assert_eq!(std::mem::offset_of!(CallbackData, functionParams), 16);
        assert_eq!(std::mem::offset_of!(CallbackData, context), 40);
        assert_eq!(std::mem::offset_of!(LaunchData, gridDim), 48);
        assert_eq!(std::mem::offset_of!(LaunchData, gridId), 88);
        assert_eq!(std::mem::offset_of!(LaunchData, hLaunch), 96);
        assert_eq!(std::mem::offset_of!(LaunchData, hApiStream), 128);
        assert_eq!(std::mem::offset_of!(GraphNodeLaunchData, launchData), 32);
        assert_eq!(std::mem::offset_of!(ResourceModuleData, module), 8);
    }

    #[test]
    fn a_missing_library_is_said_plainly() {
        let error = Sanitizer::load(Path::new("/nonexistent/libsanitizer-public.so")).err().expect("no library");
        assert!(error.contains("cannot load the Compute Sanitizer library /nonexistent"), "{error}");
    }
}
