//! The shadow's ordered set of segment starts: what splitting a segment and walking a range need (the last start
//! before an address, the starts inside a range), beside the hash table that finds a segment by its exact start.
//!
//! A two-level sorted array rather than `BTreeSet`: the starts live in chunks of at most [`CHUNK_MAX`] sorted
//! addresses, and a flat array holds each chunk's first start. The flat array (a few kB for 100,000 segments)
//! stays in cache, so an operation costs one binary search there and one inside a chunk of a few cache lines,
//! where the standard B-tree (eleven keys a node) walks five levels, each a cache miss.

/// A chunk is split in two when it grows past this many starts.
const CHUNK_MAX: usize = 128;
/// A chunk this small is merged with its right neighbour when both fit in half a chunk.
const CHUNK_MERGE: usize = CHUNK_MAX / 4;

#[derive(Default, Debug)]
pub(super) struct SegmentStarts {
    /// Non-empty, sorted, each at most `CHUNK_MAX` long; every start of a chunk is below every start of the next.
    chunks: Vec<Vec<u64>>,
    /// `firsts[i] == chunks[i][0]`.
    firsts: Vec<u64>,
}

impl SegmentStarts {
    /// The chunk that holds `start` if any chunk does: the last one whose first start is at or below it (the
    /// first chunk for a start below all of them).
    fn chunk_for(&self, start: u64) -> usize {
        self.firsts.partition_point(|&first| first <= start).saturating_sub(1)
    }

    pub(super) fn insert(&mut self, start: u64) {
        if self.chunks.is_empty() {
            self.chunks.push(new_chunk(start));
            self.firsts.push(start);
            return;
        }
        let index = self.chunk_for(start);
        let chunk = &mut self.chunks[index];
        let at = chunk.partition_point(|&s| s < start);
        if chunk.get(at) == Some(&start) {
            return;
        }
        chunk.insert(at, start);
        if at == 0 {
            self.firsts[index] = start;
        }
        if chunk.len() > CHUNK_MAX {
            let mut right = Vec::with_capacity(CHUNK_MAX + 1);
            right.extend_from_slice(&chunk[CHUNK_MAX / 2..]);
            chunk.truncate(CHUNK_MAX / 2);
            self.firsts.insert(index + 1, right[0]);
            self.chunks.insert(index + 1, right);
        }
    }

    pub(super) fn remove(&mut self, start: u64) {
        if self.chunks.is_empty() {
            return;
        }
        let index = self.chunk_for(start);
        let chunk = &mut self.chunks[index];
        let Ok(at) = chunk.binary_search(&start) else { return };
        chunk.remove(at);
        match chunk.first() {
            None => {
                self.chunks.remove(index);
                self.firsts.remove(index);
                return;
            }
            Some(&first) => self.firsts[index] = first,
        }
        // Keep chunks from thinning out (the flat array would grow towards one entry a start).
        if chunk.len() < CHUNK_MERGE {
            if let Some(next) = self.chunks.get(index + 1) {
                if self.chunks[index].len() + next.len() <= CHUNK_MAX / 2 {
                    let next = self.chunks.remove(index + 1);
                    self.firsts.remove(index + 1);
                    self.chunks[index].extend_from_slice(&next);
                }
            }
        }
    }

    /// The greatest start below `at`.
    pub(super) fn last_before(&self, at: u64) -> Option<u64> {
        let index = self.firsts.partition_point(|&first| first < at).checked_sub(1)?;
        let chunk = &self.chunks[index];
        // chunk[0] < at, so at least one start of the chunk is below `at`.
        Some(chunk[chunk.partition_point(|&s| s < at) - 1])
    }

    /// Appends the starts inside `[start, end)` to `out`, in order.
    pub(super) fn extend_in(&self, start: u64, end: u64, out: &mut Vec<u64>) {
        if self.chunks.is_empty() || start >= end {
            return;
        }
        let first_chunk = self.chunk_for(start);
        for (i, chunk) in self.chunks[first_chunk..].iter().enumerate() {
            let from = if i == 0 { chunk.partition_point(|&s| s < start) } else { 0 };
            let rest = &chunk[from..];
            let upto = rest.partition_point(|&s| s < end);
            out.extend_from_slice(&rest[..upto]);
            if upto < rest.len() {
                return;
            }
        }
    }
}

impl SegmentStarts {
    /// The starts inside `[start, end)`, in order.
    pub(super) fn in_range(&self, start: u64, end: u64) -> impl Iterator<Item = u64> + '_ {
        let first_chunk = if start < end { self.chunk_for(start) } else { self.chunks.len() };
        let from = self.chunks.get(first_chunk).map_or(0, |chunk| chunk.partition_point(|&s| s < start));
        let rest = self.chunks.get(first_chunk).map_or(&[][..], |chunk| &chunk[from..]);
        let later = self.chunks.get(first_chunk + 1..).unwrap_or(&[]);
        rest.iter().chain(later.iter().flatten()).copied().take_while(move |&s| s < end)
    }
}

fn new_chunk(start: u64) -> Vec<u64> {
    let mut chunk = Vec::with_capacity(CHUNK_MAX + 1);
    chunk.push(start);
    chunk
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every operation checked against the standard library's ordered set, through splits and merges.
    #[test]
    fn agrees_with_an_ordered_set() {
        let mut starts = SegmentStarts::default();
        let mut model = BTreeSet::new();
        // A deterministic walk over a small address space: inserts outnumber removals first, then the reverse,
        // so chunks split and later thin out and merge.
        let mut x: u64 = 12345;
        for round in 0..40_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (x >> 33) % 5_000 * 16;
            let insert = if round < 20_000 { x % 4 != 0 } else { x % 4 == 0 };
            if insert {
                starts.insert(key);
                model.insert(key);
            } else {
                starts.remove(key);
                model.remove(&key);
            }
            if round % 97 == 0 {
                let probe = (x >> 17) % 81_000;
                assert_eq!(starts.last_before(probe), model.range(..probe).next_back().copied(), "before {probe}");
                let mut got = Vec::new();
                starts.extend_in(probe, probe + 3_000, &mut got);
                let want: Vec<u64> = model.range(probe..probe + 3_000).copied().collect();
                assert_eq!(got, want, "in [{probe}, +3000)");
                assert_eq!(starts.in_range(probe, probe + 3_000).collect::<Vec<_>>(), want);
            }
        }
        let mut all = Vec::new();
        starts.extend_in(0, u64::MAX, &mut all);
        assert_eq!(all, model.iter().copied().collect::<Vec<_>>());
        assert!(starts.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK_MAX));
        assert!(starts.chunks.iter().zip(&starts.firsts).all(|(c, f)| c[0] == *f));
        assert!(starts.chunks.len() > 1, "the walk made chunks split");
    }

    #[test]
    fn empty_and_edges() {
        let mut starts = SegmentStarts::default();
        assert_eq!(starts.last_before(10), None);
        starts.remove(3);
        starts.insert(8);
        starts.insert(8);
        assert_eq!(starts.last_before(8), None, "strictly below");
        assert_eq!(starts.last_before(9), Some(8));
        let mut got = Vec::new();
        starts.extend_in(8, 8, &mut got);
        assert!(got.is_empty(), "an empty range holds nothing");
        assert_eq!(starts.in_range(8, 8).count(), 0);
        assert_eq!(starts.in_range(0, 100).collect::<Vec<_>>(), vec![8]);
        starts.extend_in(0, 9, &mut got);
        assert_eq!(got, vec![8]);
        starts.remove(8);
        assert!(starts.chunks.is_empty() && starts.firsts.is_empty());
    }
}
