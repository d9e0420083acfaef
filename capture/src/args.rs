//! Kernel arguments: which 8-byte words of the parameter buffer may be device pointers.

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
    let mut i = first;
    while i + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        let value = u64::from_le_bytes(word);
        if (MIN_ADDRESS..MAX_ADDRESS).contains(&value) && !out.iter().any(|p| p.address == value) {
            out.push(PointerArg { address: value, writes: !read_only });
        }
        i += 8;
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
}
