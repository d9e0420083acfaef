//! The CUDA runtime linked into the executable (`cudart_static`, what nvcc links by default): where its code
//! lies, from the executable's symbol table. Its functions are named `libcudart_static_<hash>` (CUDA 12 and
//! 13), `__cudart<n>` or `cudart::...` (older runtimes); every pthread call in an nvcc-built program that does
//! not call one itself comes from them. A stripped executable has no symbol table: its runtime's locks then
//! count as the program's (docs/capture.md). Read once, mapped read-only, with the `object` crate; touches
//! /proc/self/exe and the auxiliary vector.

use object::{Object, ObjectSymbol, SymbolKind};

/// The runtime's functions, as sorted, merged `[start, end)` ranges of addresses in this process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CudartStatic {
    ranges: Vec<(usize, usize)>,
}

/// Whether a function of that name is the CUDA runtime's.
fn is_runtime_function(name: &[u8]) -> bool {
    [&b"libcudart_static_"[..], b"__cudart", b"_ZN6cudart"].iter().any(|prefix| name.starts_with(prefix))
}

impl CudartStatic {
    /// The runtime linked into this process's executable (none found: empty).
    pub fn of_executable() -> CudartStatic {
        let Ok(file) = std::fs::File::open("/proc/self/exe") else { return CudartStatic::default() };
        let Ok(len) = file.metadata().map(|m| m.len() as usize) else { return CudartStatic::default() };
        if len == 0 {
            return CudartStatic::default();
        }
        use std::os::fd::AsRawFd;
        // Safety: maps the file read-only and private; unmapped below, and nothing keeps a reference into it.
        let map =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        if map == libc::MAP_FAILED {
            return CudartStatic::default();
        }
        // Safety: `len` bytes just mapped readable.
        let bytes = unsafe { std::slice::from_raw_parts(map as *const u8, len) };
        // Safety: getauxval has no preconditions; AT_ENTRY is where the executable's entry point was loaded.
        let entry = unsafe { libc::getauxval(libc::AT_ENTRY) } as usize;
        let found = CudartStatic::in_elf(bytes, entry);
        // Safety: the mapping made above, no longer used.
        unsafe { libc::munmap(map, len) };
        found
    }

    /// The runtime's functions in the ELF file `bytes`, whose entry point was loaded at `entry`.
    fn in_elf(bytes: &[u8], entry: usize) -> CudartStatic {
        let Ok(file) = object::File::parse(bytes) else { return CudartStatic::default() };
        let bias = entry.wrapping_sub(file.entry() as usize);
        let mut ranges: Vec<(usize, usize)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter(|s| s.name_bytes().is_ok_and(is_runtime_function))
            .map(|s| {
                let start = bias.wrapping_add(s.address() as usize);
                (start, start.saturating_add(s.size() as usize))
            })
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        CudartStatic { ranges: merged }
    }

    /// Whether `address` is in one of the runtime's functions.
    pub fn holds(&self, address: usize) -> bool {
        let after = self.ranges.partition_point(|&(start, _)| start <= address);
        after > 0 && address < self.ranges[after - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_functions_by_name() {
        assert!(is_runtime_function(b"libcudart_static_c593fdb5f4126075b0f5784e96e739e91fea9574"));
        assert!(is_runtime_function(b"__cudart803"));
        assert!(is_runtime_function(b"_ZN6cudart9globalState4lockEv"));
        assert!(!is_runtime_function(b"cudaCheck"), "a program's own function may be named so");
        assert!(!is_runtime_function(b"main"));
    }

    #[test]
    fn ranges_are_looked_up() {
        let runtime = CudartStatic { ranges: vec![(0x1000, 0x1100), (0x2000, 0x2400)] };
        assert!(runtime.holds(0x1000) && runtime.holds(0x10ff) && runtime.holds(0x2300));
        assert!(!runtime.holds(0xfff) && !runtime.holds(0x1100) && !runtime.holds(0x3000));
        assert!(!CudartStatic::default().holds(0x1000));
    }

    #[test]
    fn a_runtime_function_is_found_in_a_built_executable_and_the_programs_are_not() {
        // A program with a function named as cudart_static names its own, built with the C compiler.
        let Some(cc) =
            ["cc", "gcc"].into_iter().find(|c| std::process::Command::new(c).arg("--version").output().is_ok())
        else {
            assert!(std::env::var_os("STREAMTRACE_REQUIRE_CXX").is_none(), "no C compiler");
            return;
        };
        let dir = std::env::temp_dir().join(format!("st-cudart-static-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("app.c");
        std::fs::write(
            &source,
            "#include <pthread.h>\nstatic pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n\
             __attribute__((noinline)) void libcudart_static_0123456789abcdef(void) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }\n\
             int main(void) { libcudart_static_0123456789abcdef(); pthread_mutex_lock(&m); return pthread_mutex_unlock(&m); }\n",
        )
        .unwrap();
        let binary = dir.join("app");
        let built = std::process::Command::new(cc).args(["-O1", "-pthread", "-o"]).arg(&binary).arg(&source).output();
        assert!(built.is_ok_and(|o| o.status.success()), "building app.c");
        let bytes = std::fs::read(&binary).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let address_of = |name: &str| {
            let symbol = file.symbols().find(|s| s.name() == Ok(name)).expect(name);
            (symbol.address() as usize, symbol.size() as usize)
        };
        // As loaded with its entry point where the file says (the bias is what `entry` adds).
        let runtime = CudartStatic::in_elf(&bytes, file.entry() as usize + 0x1000);
        let (function, size) = address_of("libcudart_static_0123456789abcdef");
        assert!(runtime.holds(function + 0x1000) && runtime.holds(function + 0x1000 + size - 1));
        let (main, _) = address_of("main");
        assert!(!runtime.holds(main + 0x1000), "the program's own main");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn this_test_binary_links_no_cuda_runtime() {
        // Read for real: the test binary's own symbol table, which holds no runtime function.
        assert_eq!(CudartStatic::of_executable(), CudartStatic::default());
        assert_eq!(CudartStatic::in_elf(b"not an ELF file", 0), CudartStatic::default());
    }
}
