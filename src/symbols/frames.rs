//! Which frame of a native call site is the program's own: the CUDA stack under the call (driver, CUPTI, the
//! runtime, whether shared or linked into the program as `cudart_static`, and the launch stubs nvcc writes)
//! is never it; frameworks and system libraries (PyTorch, CPython, the C and C++ runtimes) are it only when no
//! frame of the program's own code is there. Decided from the module's file name and the frame's function and
//! source file. Pure.

/// What a symbolized frame is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FrameClass {
    /// CUDA's own code under the call: never shown.
    Cuda,
    /// A framework or system library: shown only when no frame is the program's.
    Library,
    /// The program's own code (an executable, a C++ extension).
    Program,
}

/// Modules of the CUDA stack, by file name prefix.
const CUDA_MODULES: &[&str] = &["libcuda.so", "libcupti.so", "libcudart.so", "libstreamtrace_capture"];
/// Frameworks and system libraries, by file name prefix.
const LIBRARY_MODULES: &[&str] = &[
    "libtorch", "libc10", "libcaffe2", "libshm", "libnccl", "libcublas", "libcudnn", "libpython", "python",
    "libstdc++", "libc.so", "libc-", "libm.so", "ld-linux", "libgcc_s", "libpthread", "libgomp", "linux-vdso",
];

/// What a frame is from its module's file name alone, when that says it: CUDA's or a library's.
pub fn module_class(module_path: Option<&str>) -> Option<FrameClass> {
    let module = module_path.map(|p| p.rsplit('/').next().unwrap_or(p)).unwrap_or("");
    if CUDA_MODULES.iter().any(|prefix| module.starts_with(prefix)) {
        return Some(FrameClass::Cuda);
    }
    LIBRARY_MODULES.iter().any(|prefix| module.starts_with(prefix)).then_some(FrameClass::Library)
}

pub fn classify(module_path: Option<&str>, function: Option<&str>, file: Option<&str>) -> FrameClass {
    if let Some(FrameClass::Cuda) = module_class(module_path) {
        return FrameClass::Cuda;
    }
    if function.is_some_and(is_cuda_runtime_function) || file.is_some_and(is_cuda_header_or_stub) {
        return FrameClass::Cuda;
    }
    if module_class(module_path).is_some() {
        return FrameClass::Library;
    }
    FrameClass::Program
}

/// The CUDA runtime's functions as linked into a program (`cudaLaunchKernel`, `cudart::...`, `__cudart123`),
/// the launch stubs nvcc generates (`__device_stub__Z4stepPf`) and the runtime's inline templates
/// (`cudaLaunchKernel<char>`).
fn is_cuda_runtime_function(function: &str) -> bool {
    let name = function.trim_start_matches("::");
    let api = name.strip_prefix("cuda").is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()));
    api || ["__cuda", "cudart::", "__device_stub__", "libcudart"].iter().any(|prefix| name.starts_with(prefix))
}

/// CUDA's headers (the runtime's inline launch templates) and nvcc's generated stub files.
fn is_cuda_header_or_stub(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    file.contains("/cuda/include/")
        || file.contains("/cuda/targets/")
        || file.contains("/cuda-") && file.contains("/include/")
        || name.starts_with("cuda_runtime")
        || name.ends_with(".stub.c")
        || name.ends_with(".cudafe1.stub.c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cuda_stack_is_never_the_program() {
        assert_eq!(classify(Some("/usr/lib/x86_64-linux-gnu/libcuda.so.1"), None, None), FrameClass::Cuda);
        assert_eq!(classify(Some("/app/run"), Some("cudaLaunchKernel"), None), FrameClass::Cuda);
        assert_eq!(classify(Some("/app/run"), Some("cudart::cudaApiLaunchKernel(void const*)"), None), FrameClass::Cuda);
        assert_eq!(classify(Some("/app/run"), Some("__cudart803"), None), FrameClass::Cuda);
        assert_eq!(classify(Some("/app/run"), Some("__device_stub__Z4stepPfPKfi(float*, float const*, int)"), None), FrameClass::Cuda);
        assert_eq!(classify(Some("/app/run"), Some("cudaError cudaLaunchKernel<char>(char const*)"), Some("/usr/local/cuda/include/cuda_runtime.h")), FrameClass::Cuda);
        assert_eq!(classify(Some("/app/run"), Some("f"), Some("/tmp/tmpxft_0001_00000000-6_x.cudafe1.stub.c")), FrameClass::Cuda);
    }

    #[test]
    fn programs_come_before_libraries() {
        assert_eq!(classify(Some("/app/run"), Some("main"), Some("/src/pipeline.cu")), FrameClass::Program);
        assert_eq!(classify(Some("/app/run"), Some("cudaish_helper"), None), FrameClass::Program, "not an API name");
        assert_eq!(classify(Some("/venv/torch/lib/libtorch_cuda.so"), Some("at::native::add_kernel"), None), FrameClass::Library);
        assert_eq!(classify(Some("/usr/lib/x86_64-linux-gnu/libc.so.6"), Some("__libc_start_call_main"), None), FrameClass::Library);
        assert_eq!(classify(Some("/venv/ext/my_ops.cpython-312-x86_64-linux-gnu.so"), Some("launch_fused"), None), FrameClass::Program);
        assert_eq!(classify(None, None, None), FrameClass::Program);
    }
}
