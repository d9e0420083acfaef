//! The device patches (capture/patches/exact_access.cu, built into exact_access.fatbin by
//! capture/patches/build.sh and embedded here) and which instructions of a loaded module call which of them;
//! and which kernels `--exact-kernels` selects. Touches the Sanitizer API's patching functions.

use std::ffi::{c_void, CStr};

use super::api::*;

/// The fatbin, aligned as the driver wants an image.
#[repr(C, align(16))]
struct Image<T: ?Sized>(T);

static PATCHES: &Image<[u8]> = &Image(*include_bytes!("../../patches/exact_access.fatbin"));

/// Each instruction patched and the device function it calls.
const PATCHED: [(u32, &CStr); 7] = [
    (INSTRUCTION_GLOBAL_MEMORY_ACCESS, c"streamtrace_global_access"),
    (INSTRUCTION_MEMCPY_ASYNC, c"streamtrace_memcpy_async"),
    (INSTRUCTION_BULK_COPY_GLOBAL_TO_SHARED, c"streamtrace_bulk_global_to_shared"),
    (INSTRUCTION_BULK_COPY_SHARED_TO_GLOBAL, c"streamtrace_bulk_shared_to_global"),
    (INSTRUCTION_BULK_REDUCTION_SHARED_TO_GLOBAL, c"streamtrace_bulk_reduce_to_global"),
    (INSTRUCTION_CUDA_BARRIER, c"streamtrace_cuda_barrier"),
    (INSTRUCTION_BLOCK_ENTER, c"streamtrace_block_enter"),
];

/// Loads the patches into `context` (once per context: `first_in_context`) and patches `module`. An error says
/// what failed; the module's kernels then report no block and keep tier T1.
pub fn patch_module(
    api: &Sanitizer,
    context: CUcontext,
    module: CUmodule,
    first_in_context: bool,
) -> Result<(), String> {
    if first_in_context {
        // Safety: the embedded fatbin, which lives as long as the library.
        let result = unsafe { (api.add_patches)(PATCHES.0.as_ptr() as *const c_void, context) };
        if result != SANITIZER_SUCCESS {
            return Err(format!(
                "sanitizerAddPatches failed ({result}): no patch for this GPU in exact_access.fatbin?"
            ));
        }
    }
    for (instruction, function) in PATCHED {
        // Safety: a module the Sanitizer API just reported loaded, and a patch function the fatbin defines.
        let result = unsafe { (api.patch_instructions)(instruction, module, function.as_ptr()) };
        if result != SANITIZER_SUCCESS {
            return Err(format!("sanitizerPatchInstructions({instruction}) failed ({result})"));
        }
    }
    // Safety: as above.
    let result = unsafe { (api.patch_module)(module) };
    if result != SANITIZER_SUCCESS {
        return Err(format!("sanitizerPatchModule failed ({result})"));
    }
    Ok(())
}

/// The kernels `--exact-kernels` names (`STREAMTRACE_EXACT_KERNELS`): comma-separated patterns, `*` matching
/// any text; a pattern without `*` matches a name that contains it. None selects every kernel.
#[derive(Debug, Default)]
pub struct KernelSelection {
    patterns: Option<Vec<String>>,
}

impl KernelSelection {
    pub fn from_list(list: Option<&str>) -> KernelSelection {
        let patterns = list.map(|l| l.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect());
        KernelSelection { patterns }
    }

    /// Whether the kernel named `mangled` (as the launch names it) or `demangled` is instrumented.
    pub fn selects(&self, mangled: &str, demangled: &str) -> bool {
        match &self.patterns {
            None => true,
            Some(patterns) => patterns.iter().any(|p| matches(p, mangled) || matches(p, demangled)),
        }
    }
}

/// Whether `name` matches `pattern` (`*`: any text; no `*`: contained).
fn matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_select_by_substring_or_glob() {
        let selection = KernelSelection::from_list(Some("gemm, *elementwise*float*, scale_kernel"));
        assert!(selection.selects("sm80_xmma_gemm_f32f32", ""));
        assert!(selection.selects("_Z3fooPf", "void at::native::vectorized_elementwise_kernel<4, float>(int)"));
        assert!(selection.selects("_Z12scale_kernelPfi", "scale_kernel(float*, int)"));
        assert!(!selection.selects("_Z6reducePf", "reduce(float*)"));
        assert!(KernelSelection::from_list(None).selects("anything", ""));
    }

    #[test]
    fn a_glob_anchors_at_both_ends() {
        assert!(matches("write_*", "write_slice"));
        assert!(!matches("write_*", "rewrite_slice"));
        assert!(matches("*_slice", "write_slice"));
        assert!(matches("a*b*c", "a-x-b-y-c"));
        assert!(!matches("a*b*c", "a-x-c-y-b"));
        assert!(!matches("ab*ba", "aba"));
    }

    #[test]
    fn the_embedded_patches_were_built_from_the_committed_source() {
        use sha2::Digest;
        let source = include_bytes!("../../patches/exact_access.cu");
        let recorded = include_str!("../../patches/exact_access.cu.sha256").trim();
        let digest: String = sha2::Sha256::digest(source).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(digest, recorded, "exact_access.cu changed: rebuild the fatbin with capture/patches/build.sh");
    }

    #[test]
    fn the_embedded_patches_are_a_fatbin() {
        // A fatbin starts with its magic number 0xBA55ED50, little-endian.
        assert_eq!(&PATCHES.0[..4], &[0x50, 0xED, 0x55, 0xBA]);
        assert_eq!(PATCHES.0.as_ptr() as usize % 16, 0);
    }
}
