//! Kernel arguments: which 8-byte words of the parameter buffer may be device pointers. Reads only the launch's
//! own argument memory, and of a malformed `extra` array no more than a well-formed one would take.

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
/// The analyzer keeps only the words that fall in a live allocation.
pub fn scan_parameter(bytes: &[u8], offset: usize, read_only: bool, out: &mut Vec<PointerArg>) {
    let first = (8 - offset % 8) % 8;
    for word in bytes[first.min(bytes.len())..].chunks_exact(8) {
        let mut value = [0u8; 8];
        value.copy_from_slice(word);
        let value = u64::from_le_bytes(value);
        if (MIN_ADDRESS..MAX_ADDRESS).contains(&value) {
            out.push(PointerArg { address: value, writes: !read_only });
        }
    }
}

/// Launches with at most this many words are deduplicated by searching the words kept so far: no allocation,
/// and faster than a sort for the few words most kernels take.
const FEW_WORDS: usize = 48;

/// Keeps the first of each address among `words[start..]` (one launch's words), in order. A struct of pointer
/// lists (PyTorch's multi-tensor kernels pass hundreds of words) makes a search of the words kept so far for
/// each new one quadratic; those are sorted instead.
fn keep_first_of_each(words: &mut Vec<PointerArg>, start: usize) {
    let launch = &words[start..];
    if launch.len() <= FEW_WORDS {
        let mut kept = start;
        for i in start..words.len() {
            let word = words[i];
            if !words[start..kept].iter().any(|k| k.address == word.address) {
                words[kept] = word;
                kept += 1;
            }
        }
        words.truncate(kept);
        return;
    }
    // Positions by (address, position): the first of each address is the first of its run.
    let mut order: Vec<u32> = (0..launch.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (launch[i as usize].address, i));
    let mut keep = vec![false; launch.len()];
    for (n, &i) in order.iter().enumerate() {
        keep[i as usize] = n == 0 || launch[order[n - 1] as usize].address != launch[i as usize].address;
    }
    let mut kept = start;
    for i in 0..keep.len() {
        if keep[i] {
            words[kept] = words[start + i];
            kept += 1;
        }
    }
    words.truncate(kept);
}

/// The keys of a launch's `extra` array (cuda.h): CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER and
/// CU_LAUNCH_PARAM_BUFFER_SIZE. CUDA defines no others.
const LAUNCH_PARAM_END: usize = 0;
const LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
const LAUNCH_PARAM_BUFFER_SIZE: usize = 2;
/// The most words of an `extra` array read: 31 (key, value) pairs and the END, ten times what the three keys
/// need. An array with no END within them is malformed, and capture reads no further into the program's memory.
const MAX_EXTRA_WORDS: usize = 64;

/// Appends to `out` the pointer words of one launch's arguments, each marked read-only when its parameter is
/// `const T*`, each address once (the first parameter it appears in says whether it is written). `params` is
/// the kernel's layout: (offset, size, read_only) per parameter.
///
/// # Safety
/// `kernel_params` and `extra` are the launch's own arguments, valid for the duration of the call: when
/// `kernel_params` is not null it holds one pointer per parameter of `params`, each to that parameter's bytes;
/// otherwise `extra`, when not null, is readable up to its CU_LAUNCH_PARAM_END or `MAX_EXTRA_WORDS` words,
/// whichever comes first.
pub unsafe fn launch_pointers(
    params: &[(usize, usize, bool)],
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
    out: &mut Vec<PointerArg>,
) {
    let start = out.len();
    if !kernel_params.is_null() {
        for (index, &(offset, size, read_only)) in params.iter().enumerate() {
            // Safety: the caller vouches for one parameter pointer per entry of `params`.
            let value = unsafe { *kernel_params.add(index) };
            if value.is_null() || size == 0 {
                continue;
            }
            // Safety: parameter `index` points to its `size` bytes (the size the driver gave for it).
            let bytes = unsafe { std::slice::from_raw_parts(value as *const u8, size) };
            scan_parameter(bytes, offset, read_only, out);
        }
    } else if !extra.is_null() {
        // Safety: the caller vouches for `extra` up to its END or MAX_EXTRA_WORDS words.
        let Some((buffer, size)) = (unsafe { packed_buffer(extra) }) else { return };
        for &(offset, psize, read_only) in params {
            // Only parameters inside the buffer the launch declares; a layout entry that would overflow is none.
            if offset.checked_add(psize).is_some_and(|end| end <= size) {
                // Safety: `buffer` holds `size` bytes (the launch says so), and [offset, offset + psize) lies in them.
                let bytes = unsafe { std::slice::from_raw_parts(buffer.add(offset), psize) };
                scan_parameter(bytes, offset, read_only, out);
            }
        }
    }
    keep_first_of_each(out, start);
}

/// The packed parameter buffer and its size from a launch's `extra` array: (key, value) pairs ending with
/// CU_LAUNCH_PARAM_END. None when the array names no buffer, no size, or is malformed: no END within
/// `MAX_EXTRA_WORDS` words, a key CUDA does not define, or a value that cannot be a pointer (a null or a small
/// number: the END or a key of a list of odd length). Reading stops there, so a malformed array is never read
/// past what a well-formed one would be.
///
/// # Safety
/// `extra` is readable up to its CU_LAUNCH_PARAM_END or `MAX_EXTRA_WORDS` words, whichever comes first.
unsafe fn packed_buffer(extra: *const *mut c_void) -> Option<(*const u8, usize)> {
    let (mut buffer, mut size) = (None, None);
    let mut i = 0;
    loop {
        if i >= MAX_EXTRA_WORDS {
            return None;
        }
        // Safety: i < MAX_EXTRA_WORDS and no word before it was the END.
        let key = unsafe { extra.add(i).read() } as usize;
        if key == LAUNCH_PARAM_END {
            break;
        }
        if i + 1 >= MAX_EXTRA_WORDS {
            return None;
        }
        // Safety: i + 1 < MAX_EXTRA_WORDS and the word before it, a key, was not the END.
        let value = unsafe { extra.add(i + 1).read() };
        if (value as u64) < MIN_ADDRESS {
            return None;
        }
        match key {
            LAUNCH_PARAM_BUFFER_POINTER => buffer = Some(value as *const u8),
            // Safety: the value of CU_LAUNCH_PARAM_BUFFER_SIZE points to a size_t; it need not be aligned.
            LAUNCH_PARAM_BUFFER_SIZE => size = Some(unsafe { (value as *const usize).read_unaligned() }),
            _ => return None,
        }
        i += 2;
    }
    Some((buffer?, size.filter(|&size| size > 0)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_words_keep_the_first_of_each_address_in_order() {
        let word = |address, writes| PointerArg { address, writes };
        // Words before `start` belong to an earlier launch and stay as they are.
        let mut words = vec![word(0x9000_0000, true)];
        for i in 0..100u64 {
            words.push(word(0x7f00_0000_0000 + (i % 40) * 0x100, i % 3 == 0));
        }
        words.push(word(0x9000_0000, false));
        keep_first_of_each(&mut words, 1);
        assert_eq!(words.len(), 42);
        assert_eq!(words[0], word(0x9000_0000, true));
        for i in 0..40u64 {
            assert_eq!(words[1 + i as usize], word(0x7f00_0000_0000 + i * 0x100, i % 3 == 0), "word {i}");
        }
        assert_eq!(words[41], word(0x9000_0000, false));
    }

    #[test]
    fn finds_aligned_pointer_words_in_structs() {
        let mut bytes = vec![0u8; 24];
        bytes[0..8].copy_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
        bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
        bytes[16..24].copy_from_slice(&0x7f00_0000_2000u64.to_le_bytes());
        let mut out = Vec::new();
        scan_parameter(&bytes, 0, false, &mut out);
        assert_eq!(out.iter().map(|p| p.address).collect::<Vec<_>>(), vec![0x7f00_0000_1000, 0x7f00_0000_2000]);
        assert!(out.iter().all(|p| p.writes));
    }

    #[test]
    fn honours_alignment_and_read_only() {
        let mut bytes = vec![0u8; 12];
        bytes[4..12].copy_from_slice(&0x7f00_0000_1000u64.to_le_bytes());
        let mut out = Vec::new();
        scan_parameter(&bytes, 4, true, &mut out);
        assert_eq!(out, vec![PointerArg { address: 0x7f00_0000_1000, writes: false }]);
        out.clear();
        scan_parameter(&3u64.to_le_bytes(), 0, false, &mut out);
        assert!(out.is_empty(), "small integers are not addresses");
    }

    #[test]
    fn launch_pointers_reads_both_argument_forms_and_dedups_within_one_launch() {
        let (a, b) = (0x7f00_0000_1000u64, 0x7f00_0000_2000u64);
        let layout = [(0usize, 8usize, true), (8, 8, false), (16, 8, false)];
        let mut out = vec![PointerArg { address: b, writes: false }]; // an earlier launch's word
        let (mut pa, mut pb, mut pb2) = (a, b, b);
        let mut args: Vec<*mut c_void> = vec![
            &mut pa as *mut u64 as *mut c_void,
            &mut pb as *mut u64 as *mut c_void,
            &mut pb2 as *mut u64 as *mut c_void,
        ];
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

    /// Bytes placed so that they end where an inaccessible page begins: a read one byte past them faults, so a
    /// test that reads out of bounds dies instead of passing.
    struct BeforeGuardPage {
        map: *mut c_void,
        map_len: usize,
        start: *mut u8,
    }

    impl BeforeGuardPage {
        fn new(bytes: &[u8]) -> BeforeGuardPage {
            // Safety: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
            let data_pages = bytes.len().div_ceil(page).max(1);
            let map_len = (data_pages + 1) * page;
            let (read_write, private_anonymous) =
                (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
            // Safety: a fresh private anonymous mapping; no existing memory is touched.
            let map = unsafe { libc::mmap(std::ptr::null_mut(), map_len, read_write, private_anonymous, -1, 0) };
            assert_ne!(map, libc::MAP_FAILED);
            let guard = (map as usize + data_pages * page) as *mut c_void;
            // Safety: the last page of the mapping just made.
            assert_eq!(unsafe { libc::mprotect(guard, page, libc::PROT_NONE) }, 0);
            let start = (guard as usize - bytes.len()) as *mut u8;
            // Safety: `bytes.len()` writable bytes of the mapping, right before the guard page.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len()) };
            BeforeGuardPage { map, map_len, start }
        }

        /// An `extra` array of these words, ending at the guard page.
        fn words(words: &[*mut c_void]) -> BeforeGuardPage {
            let bytes: Vec<u8> = words.iter().flat_map(|w| (*w as usize).to_ne_bytes()).collect();
            BeforeGuardPage::new(&bytes)
        }
    }

    impl Drop for BeforeGuardPage {
        fn drop(&mut self) {
            // Safety: the mapping made in `new`, unmapped once.
            unsafe { libc::munmap(self.map, self.map_len) };
        }
    }

    const POINTER: *mut c_void = LAUNCH_PARAM_BUFFER_POINTER as *mut c_void;
    const SIZE: *mut c_void = LAUNCH_PARAM_BUFFER_SIZE as *mut c_void;
    const END: *mut c_void = std::ptr::null_mut();
    const LAYOUT: [(usize, usize, bool); 3] = [(0, 8, true), (8, 8, false), (16, 8, false)];
    const A: u64 = 0x7f00_0000_1000;
    const B: u64 = 0x7f00_0000_2000;

    /// A 24-byte packed parameter buffer of LAYOUT (A, 7, B), ending at a guard page.
    fn packed_arguments() -> BeforeGuardPage {
        let mut buffer = [0u8; 24];
        buffer[0..8].copy_from_slice(&A.to_le_bytes());
        buffer[8..16].copy_from_slice(&7u64.to_le_bytes());
        buffer[16..24].copy_from_slice(&B.to_le_bytes());
        BeforeGuardPage::new(&buffer)
    }

    /// The pointer words `launch_pointers` finds for LAYOUT through this `extra` array.
    fn from_extra(extra: &BeforeGuardPage) -> Vec<PointerArg> {
        let mut out = Vec::new();
        // Safety: the array ends at a guard page: a read past it faults rather than passes.
        unsafe { launch_pointers(&LAYOUT, std::ptr::null_mut(), extra.start as *mut *mut c_void, &mut out) };
        out
    }

    #[test]
    fn a_well_formed_extra_at_a_page_end_is_read_to_its_end_and_no_further() {
        let buffer = packed_arguments();
        let mut size = 24usize;
        let extra = BeforeGuardPage::words(&[
            POINTER,
            buffer.start as *mut c_void,
            SIZE,
            &mut size as *mut usize as *mut c_void,
            END,
        ]);
        assert_eq!(
            from_extra(&extra),
            [PointerArg { address: A, writes: false }, PointerArg { address: B, writes: true }]
        );
    }

    #[test]
    fn an_extra_without_end_is_read_for_at_most_64_words() {
        let buffer = packed_arguments();
        let mut size = 24usize;
        let size_at = &mut size as *mut usize as *mut c_void;
        // 32 well-formed pairs and no END: the 64th word is the last one read.
        let words: Vec<*mut c_void> = (0..32)
            .flat_map(|i| if i % 2 == 0 { [POINTER, buffer.start as *mut c_void] } else { [SIZE, size_at] })
            .collect();
        assert_eq!(words.len(), MAX_EXTRA_WORDS);
        assert!(
            from_extra(&BeforeGuardPage::words(&words)).is_empty(),
            "no END: malformed, nothing read from the buffer"
        );
    }

    #[test]
    fn the_end_may_be_the_last_of_the_64_words_and_no_later() {
        let buffer = packed_arguments();
        let mut size = 24usize;
        let size_at = &mut size as *mut usize as *mut c_void;
        let mut words: Vec<*mut c_void> = (0..31)
            .flat_map(|i| if i % 2 == 0 { [POINTER, buffer.start as *mut c_void] } else { [SIZE, size_at] })
            .collect();
        words.push(END);
        assert_eq!(words.len(), MAX_EXTRA_WORDS - 1, "the END at index 62, the last key slot");
        assert_eq!(from_extra(&BeforeGuardPage::words(&words)).len(), 2);
        // One pair more puts the END at index 64, past the bound: malformed, and word 64 is never read.
        words.pop();
        words.extend([POINTER, buffer.start as *mut c_void]);
        assert!(from_extra(&BeforeGuardPage::words(&words)).is_empty());
    }

    #[test]
    fn an_extra_of_odd_length_is_not_read_past_its_end() {
        let buffer = packed_arguments();
        let mut size = 24usize;
        let size_at = &mut size as *mut usize as *mut c_void;
        // A key whose value slot holds the END: the word after it is past the array.
        assert!(from_extra(&BeforeGuardPage::words(&[POINTER, buffer.start as *mut c_void, SIZE, END])).is_empty());
        // A key missing in front: every value slot holds a key, and the END sits in a value slot.
        assert!(from_extra(&BeforeGuardPage::words(&[POINTER, SIZE, size_at, END])).is_empty());
    }

    #[test]
    fn a_size_without_a_pointer_or_a_pointer_without_a_size_reads_nothing() {
        let buffer = packed_arguments();
        let mut size = 24usize;
        assert!(from_extra(&BeforeGuardPage::words(&[SIZE, &mut size as *mut usize as *mut c_void, END])).is_empty());
        assert!(from_extra(&BeforeGuardPage::words(&[POINTER, buffer.start as *mut c_void, END])).is_empty());
        let mut zero = 0usize;
        let extra = BeforeGuardPage::words(&[
            POINTER,
            buffer.start as *mut c_void,
            SIZE,
            &mut zero as *mut usize as *mut c_void,
            END,
        ]);
        assert!(from_extra(&extra).is_empty());
    }

    #[test]
    fn an_undefined_key_ends_the_reading() {
        let buffer = packed_arguments();
        let mut size = 24usize;
        let extra = BeforeGuardPage::words(&[
            3 as *mut c_void,
            buffer.start as *mut c_void,
            POINTER,
            buffer.start as *mut c_void,
            SIZE,
            &mut size as *mut usize as *mut c_void,
            END,
        ]);
        assert!(from_extra(&extra).is_empty());
    }

    #[test]
    fn a_huge_size_reads_only_the_kernels_own_parameters() {
        let buffer = packed_arguments();
        for mut size in [usize::MAX, usize::MAX - 4, 1 << 40] {
            let extra = BeforeGuardPage::words(&[
                POINTER,
                buffer.start as *mut c_void,
                SIZE,
                &mut size as *mut usize as *mut c_void,
                END,
            ]);
            assert_eq!(
                from_extra(&extra),
                [PointerArg { address: A, writes: false }, PointerArg { address: B, writes: true }]
            );
        }
        // A size smaller than the layout: the parameters past it are not read.
        let mut size = 16usize;
        let extra = BeforeGuardPage::words(&[
            POINTER,
            buffer.start as *mut c_void,
            SIZE,
            &mut size as *mut usize as *mut c_void,
            END,
        ]);
        assert_eq!(from_extra(&extra), [PointerArg { address: A, writes: false }]);
    }

    #[test]
    fn a_layout_entry_whose_end_overflows_is_skipped() {
        let buffer = packed_arguments();
        let mut size = usize::MAX;
        let extra = BeforeGuardPage::words(&[
            POINTER,
            buffer.start as *mut c_void,
            SIZE,
            &mut size as *mut usize as *mut c_void,
            END,
        ]);
        let layout = [(usize::MAX - 3, 8usize, false), (0, 8, false)];
        let mut out = Vec::new();
        // Safety: the arrays end at guard pages.
        unsafe { launch_pointers(&layout, std::ptr::null_mut(), extra.start as *mut *mut c_void, &mut out) };
        assert_eq!(out, [PointerArg { address: A, writes: true }]);
    }
}
