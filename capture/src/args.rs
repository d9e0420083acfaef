//! Kernel arguments: which 8-byte words of the parameter buffer may be device pointers.

use std::ffi::c_void;

/// A pointer-sized word found in a kernel's parameters, and whether it may be written through.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PointerArg {
    pub address: u64,
    pub writes: bool,
}

/// The smallest value taken as a possible address: below it are sizes, counts and flags.
const MIN_ADDRESS: u64 = 1 << 16;
/// The largest: user-space virtual addresses stay below 2^57 on x86-64 (5-level paging) and arm64.
const MAX_ADDRESS: u64 = 1 << 57;

/// Scans one parameter's bytes (at its offset in the parameter buffer, for alignment) for words that may be
/// addresses. Struct parameters are scanned too: library kernels pass their pointers inside one large struct.
/// The analyzer keeps only the words that fall in a live allocation. A word already in `out[launch_start..]`
/// (this launch's words so far) is not added twice.
pub fn scan_parameter(bytes: &[u8], offset: usize, read_only: bool, out: &mut Vec<PointerArg>, launch_start: usize) {
    let first = (8 - offset % 8) % 8;
    let mut i = first;
    while i + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        let value = u64::from_le_bytes(word);
        if (MIN_ADDRESS..MAX_ADDRESS).contains(&value) && !out[launch_start..].iter().any(|p| p.address == value) {
            out.push(PointerArg { address: value, writes: !read_only });
        }
        i += 8;
    }
}

/// CU_LAUNCH_PARAM_BUFFER_POINTER and CU_LAUNCH_PARAM_BUFFER_SIZE in a launch's `extra` array.
const LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
const LAUNCH_PARAM_BUFFER_SIZE: usize = 2;

/// Appends to `out` the pointer words of one launch's arguments, each marked read-only when its parameter is
/// `const T*`. `params` is the kernel's layout: (offset, size, read_only) per parameter.
///
/// Safety: `kernel_params` and `extra` are the launch's own arguments, valid for the duration of the call.
pub unsafe fn launch_pointers(params: &[(usize, usize, bool)], kernel_params: *mut *mut c_void, extra: *mut *mut c_void, out: &mut Vec<PointerArg>) {
    let start = out.len();
    if !kernel_params.is_null() {
        for (index, &(offset, size, read_only)) in params.iter().enumerate() {
            let value = *kernel_params.add(index);
            if value.is_null() || size == 0 {
                continue;
            }
            let bytes = std::slice::from_raw_parts(value as *const u8, size);
            scan_parameter(bytes, offset, read_only, out, start);
        }
    } else if !extra.is_null() {
        // The packed form: `extra` holds (key, value) pairs ending with CU_LAUNCH_PARAM_END (0).
        let (mut buffer, mut size) = (std::ptr::null::<u8>(), 0usize);
        let mut i = 0;
        while !(*extra.add(i)).is_null() && i < 64 {
            let key = *extra.add(i) as usize;
            let value = *extra.add(i + 1);
            if key == LAUNCH_PARAM_BUFFER_POINTER {
                buffer = value as *const u8;
            } else if key == LAUNCH_PARAM_BUFFER_SIZE && !value.is_null() {
                size = *(value as *const usize);
            }
            i += 2;
        }
        if !buffer.is_null() && size > 0 {
            for &(offset, psize, read_only) in params {
                if offset + psize <= size {
                    scan_parameter(std::slice::from_raw_parts(buffer.add(offset), psize), offset, read_only, out, start);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_aligned_pointer_words_in_structs() {
        let mut bytes = vec![0u8; 24];
        bytes[0..8].copy_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
        bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
        bytes[16..24].copy_from_slice(&0x7f00_0000_2000u64.to_le_bytes());
        let mut out = Vec::new();
        scan_parameter(&bytes, 0, false, &mut out, 0);
        assert_eq!(out.iter().map(|p| p.address).collect::<Vec<_>>(), vec![0x7f00_0000_1000, 0x7f00_0000_2000]);
        assert!(out.iter().all(|p| p.writes));
    }

    #[test]
    fn honours_alignment_and_read_only() {
        let mut bytes = vec![0u8; 12];
        bytes[4..12].copy_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
        let mut out = Vec::new();
        scan_parameter(&bytes, 4, true, &mut out, 0);
        assert_eq!(out, vec![PointerArg { address: 0x7f00_0000_1000, writes: false }]);
        out.clear();
        scan_parameter(&3u64.to_le_bytes(), 0, false, &mut out, 0);
        assert!(out.is_empty(), "small integers are not addresses");
    }

    #[test]
    fn launch_pointers_reads_both_argument_forms_and_dedups_within_one_launch() {
        let (a, b) = (0x7f00_0000_1000u64, 0x7f00_0000_2000u64);
        let layout = [(0usize, 8usize, true), (8, 8, false), (16, 8, false)];
        let mut out = vec![PointerArg { address: b, writes: false }]; // an earlier launch's word
        let (mut pa, mut pb, mut pb2) = (a, b, b);
        let mut args: Vec<*mut c_void> =
            vec![&mut pa as *mut u64 as *mut c_void, &mut pb as *mut u64 as *mut c_void, &mut pb2 as *mut u64 as *mut c_void];
        // Safety: three parameter pointers to live locals, matching the layout.
        unsafe { launch_pointers(&layout, args.as_mut_ptr(), std::ptr::null_mut(), &mut out) };
        assert_eq!(out[1..], [PointerArg { address: a, writes: false }, PointerArg { address: b, writes: true }]);

        let mut buffer = [0u8; 24];
        buffer[0..8].copy_from_slice(&a.to_le_bytes());
        buffer[16..24].copy_from_slice(&b.to_le_bytes());
        let mut size = buffer.len();
        let mut extra: Vec<*mut c_void> = vec![
            LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
            buffer.as_mut_ptr() as *mut c_void,
            LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
            &mut size as *mut usize as *mut c_void,
            std::ptr::null_mut(),
        ];
        let mut packed = Vec::new();
        // Safety: a packed parameter buffer of the layout's size, ended by CU_LAUNCH_PARAM_END.
        unsafe { launch_pointers(&layout, std::ptr::null_mut(), extra.as_mut_ptr(), &mut packed) };
        assert_eq!(packed, [PointerArg { address: a, writes: false }, PointerArg { address: b, writes: true }]);
    }
}
