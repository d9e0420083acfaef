//! The byte ranges one library call reads and writes by the library's own definition of it (an NCCL collective,
//! a cuBLAS routine), which the kernels that carry the call out take as their accesses (nccl.rs, cublas.rs).
//! Plain data: touches nothing.

use streamtrace_format::ByteRuns;

use crate::args::PointerArg;

/// What one call reads and writes, as byte runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    pub reads: Vec<ByteRuns>,
    pub writes: Vec<ByteRuns>,
}

impl Buffers {
    /// `bytes` read from `address`, unless empty or null (a rank that passes no buffer).
    pub fn read(&mut self, address: u64, bytes: u64) {
        push_range(&mut self.reads, address, bytes);
    }

    /// `bytes` written from `address`, unless empty or null.
    pub fn write(&mut self, address: u64, bytes: u64) {
        push_range(&mut self.writes, address, bytes);
    }

    pub fn extend(&mut self, other: &Buffers) {
        self.reads.extend_from_slice(&other.reads);
        self.writes.extend_from_slice(&other.writes);
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }

    /// Whether `address` is a byte of one of the runs, read or written: a kernel's pointer word there points into
    /// a buffer the call names (a column's start, a tile, a batch's base). The gaps between a strided run's runs
    /// are not the call's: a word there (a cuBLASLt epilogue's buffer inside a padded matrix) keeps counting.
    pub fn names(&self, address: u64) -> bool {
        self.reads.iter().chain(&self.writes).any(|run| {
            let Some(offset) = address.checked_sub(run.first) else { return false };
            if offset >= run.extent() {
                return false;
            }
            let within = if run.count <= 1 || run.step == 0 { offset } else { offset % run.step };
            within < run.len
        })
    }

    /// Drops the pointer words of one launch, `words[first..]`, that point into these ranges, keeping the others
    /// in order; returns how many the launch keeps.
    pub fn drop_words_within(&self, words: &mut Vec<PointerArg>, first: usize) -> u32 {
        let mut kept = first;
        for i in first..words.len() {
            let word = words[i];
            if !self.names(word.address) {
                words[kept] = word;
                kept += 1;
            }
        }
        words.truncate(kept);
        (kept - first) as u32
    }
}

fn push_range(runs: &mut Vec<ByteRuns>, address: u64, bytes: u64) {
    if address != 0 && bytes != 0 {
        runs.push(ByteRuns { first: address, len: bytes, step: 0, count: 1 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_null_ranges_are_left_out() {
        let mut b = Buffers::default();
        b.read(0, 64);
        b.write(0x1000, 0);
        assert!(b.is_empty());
        b.write(0x1000, 8);
        assert_eq!(b.writes, vec![ByteRuns { first: 0x1000, len: 8, step: 0, count: 1 }]);
    }

    #[test]
    fn a_word_is_named_on_a_runs_bytes_and_not_in_its_gaps() {
        let mut b = Buffers::default();
        b.read(0x1000, 0x100);
        b.writes.push(ByteRuns { first: 0x8000, len: 0x10, step: 0x100, count: 4 });
        assert!(b.names(0x1000) && b.names(0x10ff) && !b.names(0x1100) && !b.names(0xfff));
        // Each column of a strided run (a kernel may be given a pointer to any), not the gaps between them.
        assert!(b.names(0x8000) && b.names(0x800f) && b.names(0x8300) && b.names(0x830f));
        assert!(!b.names(0x8010) && !b.names(0x8080) && !b.names(0x8310));
    }

    #[test]
    fn a_launchs_words_into_the_ranges_are_dropped_and_the_others_kept_in_order() {
        let mut b = Buffers::default();
        b.read(0x1000, 0x100);
        b.write(0x3000, 0x100);
        let word = |address, writes| PointerArg { address, writes };
        // An earlier launch's word stays whatever it points to; this launch's workspace and struct pointer stay.
        let mut words =
            vec![word(0x1010, true), word(0x9000, true), word(0x1000, true), word(0x30f8, true), word(0x5000, false)];
        assert_eq!(b.drop_words_within(&mut words, 1), 2);
        assert_eq!(words, vec![word(0x1010, true), word(0x9000, true), word(0x5000, false)]);
    }
}
