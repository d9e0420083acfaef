//! What a kernel handle's parameters look like: its demangled name, each parameter's offset and size, and which
//! parameters are `const T*`. Looked up once per handle through the driver (its name and parameter queries,
//! the only thing this file touches) and cached by state.rs.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use cudarc::driver::sys as cu;

use crate::signature::{is_pointer_to_const, parameter_types};

/// One kernel's parameter layout.
#[derive(Debug)]
pub struct FunctionInfo {
    pub name: Arc<str>,
    /// (offset, size, read_only) for each parameter.
    pub params: Vec<(usize, usize, bool)>,
}

/// Launches from the CUDA runtime pass CUkernel handles, Triton and module users CUfunctions; each takes its
/// own query (CAPTURE-NOTES.md). Tries the function form first, then the kernel form.
pub fn describe(handle: *mut c_void) -> FunctionInfo {
    let mangled = name_of(handle).unwrap_or_else(|| "kernel".to_string());
    let name: Arc<str> = Arc::from(demangle(&mangled).as_str());
    let types: Vec<String> = parameter_types(&name).into_iter().map(str::to_string).collect();
    let mut params = Vec::new();
    for index in 0..4096usize {
        let Some((offset, size)) = param_info(handle, index) else { break };
        let read_only = types.get(index).is_some_and(|t| is_pointer_to_const(t));
        params.push((offset, size, read_only));
    }
    FunctionInfo { name, params }
}

fn name_of(handle: *mut c_void) -> Option<String> {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // Safety: the driver writes a pointer to a string it owns; the handle came from the launch being traced, and
    // one of the wrong kind returns an error code.
    let function_named = unsafe { cu::cuFuncGetName(&mut name, handle as cu::CUfunction) } == cu::CUresult::CUDA_SUCCESS;
    // Safety: as above, for the CUkernel form.
    let ok = function_named || unsafe { cu::cuKernelGetName(&mut name, handle as cu::CUkernel) } == cu::CUresult::CUDA_SUCCESS;
    if !ok || name.is_null() {
        return None;
    }
    // Safety: a non-null name from the driver is a NUL-terminated string that lives as long as the module.
    Some(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
}

fn param_info(handle: *mut c_void, index: usize) -> Option<(usize, usize)> {
    let (mut offset, mut size) = (0usize, 0usize);
    // Safety: out-pointers to locals; an invalid index or handle returns an error code.
    let function_param = unsafe { cu::cuFuncGetParamInfo(handle as cu::CUfunction, index, &mut offset, &mut size) }
        == cu::CUresult::CUDA_SUCCESS;
    // Safety: as above, for the CUkernel form.
    let ok = function_param
        || unsafe { cu::cuKernelGetParamInfo(handle as cu::CUkernel, index, &mut offset, &mut size) } == cu::CUresult::CUDA_SUCCESS;
    ok.then_some((offset, size))
}

/// The demangled form of an Itanium-mangled name; the name itself when it is not mangled (extern "C").
pub fn demangle(mangled: &str) -> String {
    cpp_demangle::Symbol::new(mangled)
        .ok()
        .and_then(|symbol| symbol.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| mangled.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_const_pointer_parameters() {
        let name = demangle("_Z12add_parallelPKfS0_Pfi");
        assert_eq!(name, "add_parallel(float const*, float const*, float*, int)");
        let types = parameter_types(&name);
        let read_only: Vec<bool> = types.iter().map(|t| is_pointer_to_const(t)).collect();
        assert_eq!(read_only, vec![true, true, false, false]);
        assert_eq!(demangle("triton_kernel"), "triton_kernel");
    }
}
