//! The table a launch's patches fill (capture/patches/exact_access.cu, whose `LaunchTable` and `ChunkEntry`
//! these mirror), and turning what a launch left in it into byte runs: for each 4 KiB chunk the launch touched,
//! which of its 32-byte granules it read and which it wrote. Pure data; the device memory behind a table is
//! sanitizer/tables.rs's.

use streamtrace_format::ByteRuns;

/// Address bits of a chunk and of a granule (exact_access.cu's CHUNK_SHIFT and GRANULE_SHIFT).
pub const CHUNK_SHIFT: u32 = 12;
pub const GRANULE_SHIFT: u32 = 5;
const GRANULES_PER_CHUNK: u32 = 1 << (CHUNK_SHIFT - GRANULE_SHIFT);
pub const GRANULE_BYTES: u64 = 1 << GRANULE_SHIFT;

/// The patches' flags (exact_access.cu's SAW_*).
pub const SAW_OVERFLOW: u32 = 0x1;
pub const SAW_ASYNC_BARRIER: u32 = 0x2;
pub const SAW_BLOCK: u32 = 0x4;

/// One chunk a launch touched.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkEntry {
    pub chunk: u64,
    pub read: [u32; 4],
    pub write: [u32; 4],
}

/// The table's header, as the device reads and writes it.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct LaunchTable {
    pub generation: u32,
    pub count: u32,
    pub capacity: u32,
    pub flags: u32,
    pub slot_mask: u32,
    pub pad: u32,
    pub slot_keys: u64,
    pub slot_entry: u64,
    pub entries: u64,
}

/// A launch's reads and writes as runs of bytes, periodic runs folded into one item each.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LaunchAccesses {
    pub reads: Vec<ByteRuns>,
    pub writes: Vec<ByteRuns>,
}

/// The accesses the entries of one launch describe. Sorts `entries` by chunk.
pub fn accesses_of(entries: &mut [ChunkEntry]) -> LaunchAccesses {
    entries.sort_unstable_by_key(|e| e.chunk);
    LaunchAccesses {
        reads: fold_periodic(&runs(entries, |e| &e.read)),
        writes: fold_periodic(&runs(entries, |e| &e.write)),
    }
}

/// The maximal runs of marked granules, in address order, as `(first byte, length)`.
fn runs(entries: &[ChunkEntry], bits: impl Fn(&ChunkEntry) -> &[u32; 4]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for entry in entries {
        let base = entry.chunk << CHUNK_SHIFT;
        let words = bits(entry);
        let mut granule = 0u32;
        while granule < GRANULES_PER_CHUNK {
            let word = words[(granule / 32) as usize] >> (granule % 32);
            if word == 0 {
                granule = (granule / 32 + 1) * 32;
                continue;
            }
            let skip = word.trailing_zeros();
            granule += skip;
            let length = (words[(granule / 32) as usize] >> (granule % 32)).trailing_ones().min(32 - granule % 32);
            let start = base + u64::from(granule) * GRANULE_BYTES;
            let bytes = u64::from(length) * GRANULE_BYTES;
            match runs.last_mut() {
                Some((first, len)) if *first + *len == start => *len += bytes,
                _ => runs.push((start, bytes)),
            }
            granule += length;
        }
    }
    runs
}

/// Folds each longest sequence of three or more runs of one length, one step apart, into one periodic item
/// (a strided access pattern: every other granule, a column of a row-major matrix).
fn fold_periodic(runs: &[(u64, u64)]) -> Vec<ByteRuns> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < runs.len() {
        let (first, len) = runs[i];
        let mut count = 1;
        let mut step = 0;
        if i + 2 < runs.len() && runs[i + 1].1 == len {
            step = runs[i + 1].0 - first;
            count = 2;
            while i + count < runs.len()
                && runs[i + count].1 == len
                && runs[i + count].0 - runs[i + count - 1].0 == step
            {
                count += 1;
            }
        }
        if count < 3 {
            out.push(ByteRuns { first, len, step: 0, count: 1 });
            i += 1;
        } else {
            out.push(ByteRuns { first, len, step, count: count as u64 });
            i += count;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(chunk: u64, read: [u32; 4], write: [u32; 4]) -> ChunkEntry {
        ChunkEntry { chunk, read, write }
    }

    #[test]
    fn the_layout_is_the_patches() {
        // exact_access.cu: ChunkEntry is a u64 and two arrays of four u32; LaunchTable six u32 and three pointers.
        assert_eq!(std::mem::size_of::<ChunkEntry>(), 40);
        assert_eq!(std::mem::size_of::<LaunchTable>(), 48);
        assert_eq!(std::mem::offset_of!(LaunchTable, slot_keys), 24);
    }

    #[test]
    fn whole_chunks_touched_in_a_row_are_one_run() {
        let full = [u32::MAX; 4];
        let mut entries = vec![entry(0x7f01, [0; 4], full), entry(0x7f00, [0; 4], full), entry(0x7f02, full, [0; 4])];
        let accesses = accesses_of(&mut entries);
        assert_eq!(accesses.writes, vec![ByteRuns { first: 0x7f00 << 12, len: 8192, step: 0, count: 1 }]);
        assert_eq!(accesses.reads, vec![ByteRuns { first: 0x7f02 << 12, len: 4096, step: 0, count: 1 }]);
    }

    #[test]
    fn a_run_ends_where_a_granule_is_unmarked() {
        // Granules 0-2 and 5 of the first word.
        let mut entries = vec![entry(1, [0b10_0111, 0, 0, 0], [0; 4])];
        let accesses = accesses_of(&mut entries);
        assert_eq!(
            accesses.reads,
            vec![
                ByteRuns { first: 4096, len: 96, step: 0, count: 1 },
                ByteRuns { first: 4096 + 5 * 32, len: 32, step: 0, count: 1 },
            ]
        );
        assert!(accesses.writes.is_empty());
    }

    #[test]
    fn every_other_granule_is_one_periodic_item_that_leaves_the_others_out() {
        let alternate = [0x5555_5555; 4];
        let mut entries = vec![entry(2, [0; 4], alternate), entry(3, [0; 4], alternate)];
        let accesses = accesses_of(&mut entries);
        assert_eq!(accesses.writes, vec![ByteRuns { first: 2 << 12, len: 32, step: 64, count: 128 }]);
        let interleaved = accesses.writes[0];
        assert_eq!(interleaved.extent(), 2 * 4096 - 32, "ends at the last written granule");
    }

    #[test]
    fn runs_spanning_a_word_boundary_are_whole() {
        // Granules 30..34: the top two of word 0 and the bottom two of word 1.
        let mut entries = vec![entry(5, [0xC000_0000, 0x3, 0, 0], [0; 4])];
        let accesses = accesses_of(&mut entries);
        assert_eq!(accesses.reads, vec![ByteRuns { first: (5 << 12) + 30 * 32, len: 128, step: 0, count: 1 }]);
    }
}
