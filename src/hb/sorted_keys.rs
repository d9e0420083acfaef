//! An ordered set of addresses or address granules, for what a hash map cannot say: the greatest key below a
//! point, the keys inside a range. The shadow keeps the granules that hold segments in one (what its radix
//! table cannot say alone: the last granule with a segment before an address, the granules inside a long
//! range); the allocation table the starts of its blocks (the block an address falls in).
//!
//! A two-level sorted array rather than `BTreeSet`: the keys live in chunks of at most [`CHUNK_MAX`] sorted
//! keys, and a flat array holds each chunk's first key. The flat array (a few kB for 100,000 keys) stays in
//! cache, so an operation costs one binary search there and one inside a chunk of a few cache lines, where the
//! standard B-tree (eleven keys a node) walks five levels, each a cache miss.

/// A chunk is split in two when it grows past this many keys.
const CHUNK_MAX: usize = 128;
/// A chunk this small is merged with its right neighbour when both fit in half a chunk.
const CHUNK_MERGE: usize = CHUNK_MAX / 4;

#[derive(Default, Debug)]
pub(super) struct SortedKeys {
    /// Non-empty, sorted, each at most `CHUNK_MAX` long; every key of a chunk is below every key of the next.
    chunks: Vec<Vec<u64>>,
    /// `firsts[i] == chunks[i][0]`.
    firsts: Vec<u64>,
}

impl SortedKeys {
    /// The chunk that holds `key` if any chunk does: the last one whose first key is at or below it (the
    /// first chunk for a key below all of them).
    fn chunk_for(&self, key: u64) -> usize {
        self.firsts.partition_point(|&first| first <= key).saturating_sub(1)
    }

    pub(super) fn insert(&mut self, key: u64) {
        if self.chunks.is_empty() {
            self.chunks.push(new_chunk(key));
            self.firsts.push(key);
            return;
        }
        let index = self.chunk_for(key);
        let chunk = &mut self.chunks[index];
        let at = chunk.partition_point(|&s| s < key);
        if chunk.get(at) == Some(&key) {
            return;
        }
        chunk.insert(at, key);
        if at == 0 {
            self.firsts[index] = key;
        }
        if chunk.len() > CHUNK_MAX {
            let mut right = Vec::with_capacity(CHUNK_MAX + 1);
            right.extend_from_slice(&chunk[CHUNK_MAX / 2..]);
            chunk.truncate(CHUNK_MAX / 2);
            self.firsts.insert(index + 1, right[0]);
            self.chunks.insert(index + 1, right);
        }
    }

    pub(super) fn remove(&mut self, key: u64) {
        if self.chunks.is_empty() {
            return;
        }
        let index = self.chunk_for(key);
        let chunk = &mut self.chunks[index];
        let Ok(at) = chunk.binary_search(&key) else { return };
        chunk.remove(at);
        match chunk.first() {
            None => {
                self.chunks.remove(index);
                self.firsts.remove(index);
                return;
            }
            Some(&first) => self.firsts[index] = first,
        }
        // Keep chunks from thinning out (the flat array would grow towards one entry a key).
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

    /// The greatest key below `at`.
    pub(super) fn last_before(&self, at: u64) -> Option<u64> {
        let index = self.firsts.partition_point(|&first| first < at).checked_sub(1)?;
        let chunk = &self.chunks[index];
        // chunk[0] < at, so at least one key of the chunk is below `at`.
        Some(chunk[chunk.partition_point(|&s| s < at) - 1])
    }

    /// The keys inside `[low, high)`, in order.
    pub(super) fn in_range(&self, low: u64, high: u64) -> impl Iterator<Item = u64> + '_ {
        let first_chunk = if low < high { self.chunk_for(low) } else { self.chunks.len() };
        let from = self.chunks.get(first_chunk).map_or(0, |chunk| chunk.partition_point(|&s| s < low));
        let rest = self.chunks.get(first_chunk).map_or(&[][..], |chunk| &chunk[from..]);
        let later = self.chunks.get(first_chunk + 1..).unwrap_or(&[]);
        rest.iter().chain(later.iter().flatten()).copied().take_while(move |&s| s < high)
    }
}

fn new_chunk(key: u64) -> Vec<u64> {
    let mut chunk = Vec::with_capacity(CHUNK_MAX + 1);
    chunk.push(key);
    chunk
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every operation checked against the standard library's ordered set, through splits and merges.
    #[test]
    fn agrees_with_an_ordered_set() {
        let mut keys = SortedKeys::default();
        let mut model = BTreeSet::new();
        // A deterministic walk over a small address space: inserts outnumber removals first, then the reverse,
        // so chunks split and later thin out and merge.
        let mut x: u64 = 12345;
        for round in 0..40_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (x >> 33) % 5_000 * 16;
            let insert = if round < 20_000 { x % 4 != 0 } else { x % 4 == 0 };
            if insert {
                keys.insert(key);
                model.insert(key);
            } else {
                keys.remove(key);
                model.remove(&key);
            }
            if round % 97 == 0 {
                let probe = (x >> 17) % 81_000;
                assert_eq!(keys.last_before(probe), model.range(..probe).next_back().copied(), "before {probe}");
                let want: Vec<u64> = model.range(probe..probe + 3_000).copied().collect();
                assert_eq!(keys.in_range(probe, probe + 3_000).collect::<Vec<_>>(), want, "in [{probe}, +3000)");
            }
        }
        let all: Vec<u64> = keys.in_range(0, u64::MAX).collect();
        assert_eq!(all, model.iter().copied().collect::<Vec<_>>());
        assert!(keys.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK_MAX));
        assert!(keys.chunks.iter().zip(&keys.firsts).all(|(c, f)| c[0] == *f));
        assert!(keys.chunks.len() > 1, "the walk made chunks split");
    }

    #[test]
    fn empty_and_edges() {
        let mut keys = SortedKeys::default();
        assert_eq!(keys.last_before(10), None);
        keys.remove(3);
        keys.insert(8);
        keys.insert(8);
        assert_eq!(keys.last_before(8), None, "strictly below");
        assert_eq!(keys.last_before(9), Some(8));
        assert_eq!(keys.in_range(8, 8).count(), 0, "an empty range holds nothing");
        assert_eq!(keys.in_range(0, 100).collect::<Vec<_>>(), vec![8]);
        assert_eq!(keys.in_range(0, 9).collect::<Vec<_>>(), vec![8]);
        keys.remove(8);
        assert!(keys.chunks.is_empty() && keys.firsts.is_empty());
    }
}
