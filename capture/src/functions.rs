//! What a kernel handle's parameters look like: its demangled name, each parameter's offset and size, and which
//! parameters are `const T*`. Looked up once per handle through the driver (its name and parameter queries,
//! the only thing this file touches) and cached by process_state.rs.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
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
/// own query (CAPTURE-NOTES.md). The handle's kind is found by its name query (the form that worked for the
/// last handle first), and its parameters are asked of that form only; a handle neither form names is asked for
/// its first parameter in both.
pub fn describe(handle: *mut c_void) -> FunctionInfo {
    let (mangled, kind) = match name_of(handle) {
        Some((mangled, kind)) => (mangled, Some(kind)),
        None => {
            let kind = [HandleKind::Kernel, HandleKind::Function]
                .into_iter()
                .find(|&kind| param_info(handle, kind, 0).is_some());
            ("kernel".to_string(), kind)
        }
    };
    let name: Arc<str> = Arc::from(demangle(&mangled).as_str());
    let types: Vec<String> = parameter_types(&name).into_iter().map(str::to_string).collect();
    let mut params = Vec::new();
    for index in 0..4096usize {
        let Some((offset, size)) = kind.and_then(|kind| param_info(handle, kind, index)) else { break };
        let read_only = types.get(index).is_some_and(|t| is_pointer_to_const(t));
        params.push((offset, size, read_only));
    }
    FunctionInfo { name, params }
}

/// The two kinds of kernel handle a launch may pass.
#[derive(Copy, Clone, PartialEq, Eq)]
enum HandleKind {
    Function,
    Kernel,
}

/// Whether the last handle named was a CUkernel: a program's launches mostly come from one source, and a query
/// of the wrong form is a failed driver call.
static LAST_WAS_KERNEL: AtomicBool = AtomicBool::new(true);

/// The handle's mangled name and its kind.
fn name_of(handle: *mut c_void) -> Option<(String, HandleKind)> {
    let first = if LAST_WAS_KERNEL.load(Ordering::Relaxed) { HandleKind::Kernel } else { HandleKind::Function };
    let other = if first == HandleKind::Kernel { HandleKind::Function } else { HandleKind::Kernel };
    for kind in [first, other] {
        let mut name: *const std::ffi::c_char = std::ptr::null();
        let named = crate::cost::kernel_layout_query(|| match kind {
            // Safety: the driver writes a pointer to a string it owns; the handle came from the launch being
            // traced, and one of the wrong kind returns an error code.
            HandleKind::Function => unsafe { cu::cuFuncGetName(&mut name, handle as cu::CUfunction) },
            // Safety: as above, for the CUkernel form.
            HandleKind::Kernel => unsafe { cu::cuKernelGetName(&mut name, handle as cu::CUkernel) },
        }) == cu::CUresult::CUDA_SUCCESS;
        if named && !name.is_null() {
            LAST_WAS_KERNEL.store(kind == HandleKind::Kernel, Ordering::Relaxed);
            // Safety: a non-null name from the driver is a NUL-terminated string that lives as long as the module.
            return Some((unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned(), kind));
        }
    }
    None
}

fn param_info(handle: *mut c_void, kind: HandleKind, index: usize) -> Option<(usize, usize)> {
    let (mut offset, mut size) = (0usize, 0usize);
    let found = crate::cost::kernel_layout_query(|| match kind {
        // Safety: out-pointers to locals; an invalid index or handle returns an error code.
        HandleKind::Function => unsafe {
            cu::cuFuncGetParamInfo(handle as cu::CUfunction, index, &mut offset, &mut size)
        },
        // Safety: as above, for the CUkernel form.
        HandleKind::Kernel => unsafe {
            cu::cuKernelGetParamInfo(handle as cu::CUkernel, index, &mut offset, &mut size)
        },
    }) == cu::CUresult::CUDA_SUCCESS;
    found.then_some((offset, size))
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
