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
    "libtorch",
    "libc10",
    "libcaffe2",
    "libshm",
    "libnccl",
    "libcublas",
    "libcudnn",
    "libpython",
    "python",
    "libstdc++",
    "libc.so",
    "libc-",
    "libm.so",
    "ld-linux",
    "libgcc_s",
    "libpthread",
    "libgomp",
    "linux-vdso",
    // How CPython calls C: ctypes' foreign calls go through libffi.
    "libffi",
    "libtriton",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libnvrtc",
    "libnvJitLink",
];
/// Frameworks and the interpreter's own extension modules, by a folder of their path (`site-packages` or Debian's
/// `dist-packages`): their file names (`_ctypes.cpython-312-x86_64-linux-gnu.so`, `_kernel.cpython-312-...so`)
/// are shaped like a C++ extension's of the program's own, which is shown.
const LIBRARY_FOLDERS: &[&str] = &[
    "/lib-dynload/",
    "-packages/torch/",
    "-packages/torchvision/",
    "-packages/torchaudio/",
    "-packages/cupy/",
    "-packages/cupyx/",
    "-packages/cupy_backends/",
    "-packages/numba/",
    "-packages/jaxlib/",
    "-packages/jax_plugins/",
    "-packages/triton/",
    // NVIDIA's wheels of the CUDA libraries (cuFFT, cuRAND, cuSPARSE, NVRTC, ...).
    "-packages/nvidia/",
];
/// The C runtime's entry code, linked into every executable.
const STARTUP_FUNCTIONS: &[&str] = &["_start", "__libc_start_main", "__libc_start_call_main", "_init"];

/// What a frame is from its module's file name alone, when that says it: CUDA's or a library's.
pub fn module_class(module_path: Option<&str>) -> Option<FrameClass> {
    let module = module_path.map(|p| p.rsplit('/').next().unwrap_or(p)).unwrap_or("");
    if CUDA_MODULES.iter().any(|prefix| module.starts_with(prefix)) {
        return Some(FrameClass::Cuda);
    }
    let path = module_path.unwrap_or("");
    let library = LIBRARY_MODULES.iter().any(|prefix| module.starts_with(prefix))
        || LIBRARY_FOLDERS.iter().any(|folder| path.contains(folder));
    library.then_some(FrameClass::Library)
}

/// The C runtime's entry code, linked into every executable (`_start`, or `_start+0x25` from a symbol table).
pub fn is_startup_code(function: &str) -> bool {
    let name = function.split('+').next().unwrap_or(function);
    STARTUP_FUNCTIONS.contains(&name)
}

pub fn classify(module_path: Option<&str>, function: Option<&str>, file: Option<&str>) -> FrameClass {
    if let Some(FrameClass::Cuda) = module_class(module_path) {
        return FrameClass::Cuda;
    }
    if function.is_some_and(is_cuda_runtime_function) || file.is_some_and(is_cuda_header_or_stub) {
        return FrameClass::Cuda;
    }
    if module_class(module_path).is_some() || function.is_some_and(is_startup_code) {
        return FrameClass::Library;
    }
    FrameClass::Program
}

/// The kernel a launch stub of nvcc's launches (`__device_stub__Z4stepPf`, or demangled with its parameters
/// `__device_stub__Z4stepPf(float*)` -> `step(float*)`), whose host wrapper calls the stub. A template kernel's
/// stub is called through one more wrapper (`__wrapper__device_stub_step<float>`, nvcc 12.8 and later), which
/// names the kernel as its own caller is named.
pub fn kernel_of_stub(function: &str) -> Option<String> {
    // In a namespace the wrapper is too (`ns::__wrapper__device_stub_step<float>`), and so is the kernel.
    if let Some(at) = function.find(TEMPLATE_STUB_WRAPPER) {
        let namespace = &function[..at];
        return Some(format!("{namespace}{}", &function[at + TEMPLATE_STUB_WRAPPER.len()..]));
    }
    // A stub's name holds its kernel's mangled name, which names the namespace itself.
    let at = function.find("__device_stub__")?;
    let mangled = function[at + "__device_stub__".len()..].split('(').next()?;
    Some(super::demangle(&format!("_{mangled}")))
}

/// What nvcc names the wrapper between a template kernel's host function and its launch stub.
const TEMPLATE_STUB_WRAPPER: &str = "__wrapper__device_stub_";

/// Whether two demangled names are the same function, parameters aside (line tables and symbol tables may spell
/// them differently, and a template's mangled name holds its return type: `void step<float>(float*)`).
pub fn same_function(a: &str, b: &str) -> bool {
    let name = |f: &str| {
        let name = f.split('(').next().unwrap_or(f).trim();
        name.strip_prefix("void ").unwrap_or(name).to_string()
    };
    name(a) == name(b)
}

/// The CUDA runtime's functions as linked into a program (`cudaLaunchKernel`, `cudart::...`, `__cudart123`),
/// the launch stubs nvcc generates (`__device_stub__Z4stepPf`) and the runtime's inline templates
/// (`cudaLaunchKernel<char>`).
fn is_cuda_runtime_function(function: &str) -> bool {
    let name = function.trim_start_matches("::");
    let api = name.strip_prefix("cuda").is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()));
    // nvcc's stubs and template wrappers, in a namespace too (`ns::__device_stub__...`).
    let stub = ["__device_stub__", TEMPLATE_STUB_WRAPPER]
        .iter()
        .any(|part| name.starts_with(part) || name.contains(&format!("::{part}")));
    api || stub || ["__cuda", "cudart::", "libcudart"].iter().any(|prefix| name.starts_with(prefix))
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
        assert_eq!(
            classify(Some("/app/run"), Some("cudart::cudaApiLaunchKernel(void const*)"), None),
            FrameClass::Cuda
        );
        assert_eq!(classify(Some("/app/run"), Some("__cudart803"), None), FrameClass::Cuda);
        assert_eq!(
            classify(Some("/app/run"), Some("__device_stub__Z4stepPfPKfi(float*, float const*, int)"), None),
            FrameClass::Cuda
        );
        assert_eq!(
            classify(
                Some("/app/run"),
                Some("cudaError cudaLaunchKernel<char>(char const*)"),
                Some("/usr/local/cuda/include/cuda_runtime.h")
            ),
            FrameClass::Cuda
        );
        assert_eq!(
            classify(Some("/app/run"), Some("f"), Some("/tmp/tmpxft_0001_00000000-6_x.cudafe1.stub.c")),
            FrameClass::Cuda
        );
    }

    #[test]
    fn a_stub_names_its_kernel_as_the_wrapper_is_named() {
        let kernel = kernel_of_stub("__device_stub__Z12write_kernelPfif").expect("a stub");
        assert!(same_function(&kernel, "write_kernel(float*, int, float)"), "{kernel}");
        assert!(!same_function(&kernel, "main"));
        assert_eq!(kernel_of_stub("main"), None);
        // As the line tables name it: the stub is a C++ function, demangled with its parameters.
        let kernel = kernel_of_stub("__device_stub__Z12write_kernelPfif(float*, int, float)").expect("a stub");
        assert!(same_function(&kernel, "write_kernel(float*, int, float)"), "{kernel}");
    }

    #[test]
    fn a_template_kernels_stub_names_it_through_its_wrapper() {
        // llm.c's AdamW kernel built by nvcc 13: stub, then the wrapper, then the host function at the kernel's line.
        let stub = "__device_stub__Z13adamw_kernel3I13__nv_bfloat16S0_EvPT_PfPT0_S3_S3_mlllffffffffj";
        let kernel = kernel_of_stub(stub).expect("a stub");
        let wrapper = "__wrapper__device_stub_adamw_kernel3<__nv_bfloat16, __nv_bfloat16>";
        assert_eq!(classify(Some("/app/train"), Some(wrapper), None), FrameClass::Cuda);
        assert!(same_function(&kernel, "adamw_kernel3<__nv_bfloat16, __nv_bfloat16>"), "{kernel}");
        let after_wrapper = kernel_of_stub(wrapper).expect("the wrapper names its kernel");
        assert!(same_function(&after_wrapper, "adamw_kernel3<__nv_bfloat16, __nv_bfloat16>"));
        assert!(!same_function(&after_wrapper, "adamw_update<__nv_bfloat16, __nv_bfloat16>"));
        // In a namespace.
        let stub = "llm::__device_stub__ZN3llm4stepEPf(float*)";
        assert_eq!(classify(Some("/app/train"), Some(stub), None), FrameClass::Cuda);
        assert!(same_function(&kernel_of_stub(stub).expect("its kernel"), "llm::step(float*)"));
        let wrapper = "llm::__wrapper__device_stub_scale<float>";
        assert_eq!(classify(Some("/app/train"), Some(wrapper), None), FrameClass::Cuda);
        assert!(same_function(&kernel_of_stub(wrapper).expect("its kernel"), "llm::scale<float>"));
    }

    #[test]
    fn programs_come_before_libraries() {
        assert_eq!(classify(Some("/app/run"), Some("main"), Some("/src/pipeline.cu")), FrameClass::Program);
        assert_eq!(classify(Some("/app/run"), Some("cudaish_helper"), None), FrameClass::Program, "not an API name");
        assert_eq!(
            classify(Some("/venv/torch/lib/libtorch_cuda.so"), Some("at::native::add_kernel"), None),
            FrameClass::Library
        );
        assert_eq!(
            classify(Some("/usr/lib/x86_64-linux-gnu/libc.so.6"), Some("__libc_start_call_main"), None),
            FrameClass::Library
        );
        assert_eq!(
            classify(Some("/venv/ext/my_ops.cpython-312-x86_64-linux-gnu.so"), Some("launch_fused"), None),
            FrameClass::Program
        );
        // ctypes' way into a library of the program's own: CPython's module and libffi are glue, not the program.
        let ctypes = "/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so";
        assert_eq!(classify(Some(ctypes), None, None), FrameClass::Library);
        assert_eq!(classify(Some("/usr/lib/x86_64-linux-gnu/libffi.so.8"), None, None), FrameClass::Library);
        let cupy = "/venv/lib/python3.12/site-packages/cupy/_core/core.cpython-312-x86_64-linux-gnu.so";
        assert_eq!(classify(Some(cupy), None, None), FrameClass::Library);
        let ngc_torch = "/usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_python.so";
        assert_eq!(classify(Some(ngc_torch), None, None), FrameClass::Library);
        // A package of the user's own beside them is the program's.
        let own = "/venv/lib/python3.12/site-packages/torch_myops/_C.cpython-312-x86_64-linux-gnu.so";
        assert_eq!(classify(Some(own), Some("launch_fused"), None), FrameClass::Program);
        assert_eq!(classify(Some("/work/scale/libscale.so"), Some("launch_scale_into"), None), FrameClass::Program);
        assert_eq!(classify(None, None, None), FrameClass::Program);
        assert_eq!(classify(Some("/app/run"), Some("_start"), None), FrameClass::Library);
    }
}
