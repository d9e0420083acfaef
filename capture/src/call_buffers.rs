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

    /// Whether `address` lies within the span of one of the runs, read or written: a kernel's pointer word there
    /// points into a buffer the call names.
    pub fn spans(&self, address: u64) -> bool {
        self.reads.iter().chain(&self.writes).any(|run| address >= run.first && address - run.first < run.extent())
    }

    /// Drops the pointer words of one launch, `words[first..]`, that point into these ranges, keeping the others
    /// in order; returns how many the launch keeps.
    pub fn drop_words_within(&self, words: &mut Vec<PointerArg>, first: usize) -> u32 {
        let mut kept = first;
        for i in first..words.len() {
            let word = words[i];
            if !self.spans(word.address) {
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
    fn a_word_is_spanned_from_a_runs_first_byte_to_its_last() {
        let mut b = Buffers::default();
        b.read(0x1000, 0x100);
        b.writes.push(ByteRuns { first: 0x8000, len: 0x10, step: 0x100, count: 4 });
        assert!(b.spans(0x1000) && b.spans(0x10ff) && !b.spans(0x1100) && !b.spans(0xfff));
        // A strided run spans its gaps too: a kernel may be given a pointer to any column.
        assert!(b.spans(0x8000) && b.spans(0x8080) && b.spans(0x830f) && !b.spans(0x8310));
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
