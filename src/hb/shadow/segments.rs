//! The shadow's segments by start address, sized to the cache: the address space is cut into granules of
//! [`GRANULE`] bytes, and the segments that start in one granule are one small sorted bucket, held inline (a
//! block-granular program has one to three segments a block). A radix table on the granule number finds the
//! bucket ([`super::radix`]), so the exact-start lookup of nearly every access is a load from a cached leaf and
//! one from the bucket, and a split or a merge moves a few entries inside it. The ordered set of granules that
//! hold a bucket ([`crate::hb::sorted_keys`]) answers what the buckets cannot alone: the last segment before an
//! address whose granule holds none, and the walk over a long range.

use smallvec::SmallVec;

use super::radix::{RadixTable, EMPTY};
use super::{prefetch_value, Segment};
use crate::hb::sorted_keys::SortedKeys;

const GRANULE_BITS: u32 = 16;
/// Bytes of address space a bucket covers.
pub(super) const GRANULE: u64 = 1 << GRANULE_BITS;
/// A range over at most this many granules is walked through the radix table, granule by granule; a longer one
/// through the ordered set, which skips the empty ones.
const DIRECT_WALK: u64 = 16;

fn granule(address: u64) -> u64 {
    address / GRANULE
}

/// The segments starting in one granule, by start.
type Bucket = SmallVec<[(u64, Segment); 2]>;

/// A bucket on cache lines of its own: at a 176-byte stride most buckets straddle four lines, and the access
/// check loads (and prefetches) each of them; aligned, three lines hold one (measured on 10 M operations: about
/// 3% off the wall time in five batches, for 16 bytes more a bucket).
#[repr(align(64))]
#[derive(Default)]
struct LineBucket(Bucket);

const _: () = assert!(size_of::<LineBucket>() == 3 * 64, "a bucket fills three cache lines");

impl std::ops::Deref for LineBucket {
    type Target = Bucket;
    fn deref(&self) -> &Bucket {
        &self.0
    }
}

impl std::ops::DerefMut for LineBucket {
    fn deref_mut(&mut self) -> &mut Bucket {
        &mut self.0
    }
}

#[derive(Default)]
pub(super) struct SegmentMap {
    /// Bucket index by granule.
    radix: RadixTable,
    /// Buckets, empty ones on `free_buckets`.
    buckets: Vec<LineBucket>,
    free_buckets: Vec<u32>,
    /// The granules that hold a bucket.
    granules: SortedKeys,
    len: usize,
}

impl SegmentMap {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn bucket(&self, granule: u64) -> Option<&Bucket> {
        match self.radix.get(granule) {
            EMPTY => None,
            index => Some(&*self.buckets[index as usize]),
        }
    }

    #[inline]
    pub(super) fn get(&self, start: u64) -> Option<&Segment> {
        let bucket = self.bucket(granule(start))?;
        bucket.iter().find(|(s, _)| *s == start).map(|(_, seg)| seg)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, start: u64) -> Option<&mut Segment> {
        let index = self.radix.get(granule(start));
        if index == EMPTY {
            return None;
        }
        self.buckets[index as usize].iter_mut().find(|(s, _)| *s == start).map(|(_, seg)| seg)
    }

    pub(super) fn contains(&self, start: u64) -> bool {
        self.get(start).is_some()
    }

    /// Files `segment` at `start`, replacing the segment there if any.
    pub(super) fn insert(&mut self, start: u64, segment: Segment) {
        let g = granule(start);
        let mut index = self.radix.get(g);
        if index == EMPTY {
            index = match self.free_buckets.pop() {
                Some(free) => free,
                None => {
                    self.buckets.push(LineBucket::default());
                    (self.buckets.len() - 1) as u32
                }
            };
            self.radix.set(g, index);
            self.granules.insert(g);
        }
        let bucket = &mut self.buckets[index as usize];
        let at = bucket.partition_point(|(s, _)| *s < start);
        match bucket.get_mut(at) {
            Some((s, existing)) if *s == start => *existing = segment,
            _ => {
                bucket.insert(at, (start, segment));
                self.len += 1;
            }
        }
    }

    pub(super) fn remove(&mut self, start: u64) -> Option<Segment> {
        let g = granule(start);
        let index = self.radix.get(g);
        if index == EMPTY {
            return None;
        }
        let bucket = &mut self.buckets[index as usize];
        let at = bucket.iter().position(|(s, _)| *s == start)?;
        let (_, segment) = bucket.remove(at);
        self.len -= 1;
        if bucket.spilled() && bucket.len() <= bucket.inline_size() {
            // A bucket once split finer goes back inline when it merges again: its heap storage would otherwise
            // stay for the rest of the trace.
            bucket.shrink_to_fit();
        }
        if bucket.is_empty() {
            self.radix.clear(g);
            self.granules.remove(g);
            self.free_buckets.push(index);
        }
        Some(segment)
    }

    /// Asks the processor to load the radix table's entry for the segment at `start` (a step before
    /// [`SegmentMap::prefetch`], which reads it).
    pub(super) fn prefetch_index(&self, start: u64) {
        self.radix.prefetch(granule(start));
    }

    /// Asks the processor to load the bucket of the segment at `start` without waiting for it: every line of
    /// the bucket with its inline segments (a segment is wider than a line). Nothing of the bucket is read here,
    /// or the prefetch would wait for it.
    pub(super) fn prefetch(&self, start: u64) {
        let index = self.radix.get_for_prefetch(granule(start));
        if index == EMPTY {
            return;
        }
        prefetch_value(&self.buckets[index as usize] as *const LineBucket);
    }

    /// Appends the starts of the segments that begin inside `[start, end)` to `out`, in order.
    pub(super) fn starts_in(&self, start: u64, end: u64, out: &mut Vec<u64>) {
        if start >= end {
            return;
        }
        let (first, last) = (granule(start), granule(end - 1));
        let mut take = |bucket: &Bucket| {
            out.extend(bucket.iter().map(|(s, _)| *s).filter(|s| (start..end).contains(s)));
        };
        if last - first < DIRECT_WALK {
            (first..=last).filter_map(|g| self.bucket(g)).for_each(&mut take);
        } else {
            self.granules.in_range(first, last + 1).filter_map(|g| self.bucket(g)).for_each(take);
        }
    }

    /// The starts of the segments that begin inside `[start, end)`, in order.
    pub(super) fn starts_in_iter(&self, start: u64, end: u64) -> impl Iterator<Item = u64> + '_ {
        let (first, last) = if start < end { (granule(start), granule(end - 1) + 1) } else { (1, 0) };
        self.granules
            .in_range(first, last)
            .filter_map(|g| self.bucket(g))
            .flat_map(|bucket| bucket.iter().map(|(s, _)| *s))
            .filter(move |s| (start..end).contains(s))
    }

    /// The start of the segment that begins last before `at`.
    pub(super) fn last_start_before(&self, at: u64) -> Option<u64> {
        let g = granule(at);
        if let Some(bucket) = self.bucket(g) {
            let below = bucket.partition_point(|(s, _)| *s < at);
            if below > 0 {
                return Some(bucket[below - 1].0);
            }
        }
        let earlier = self.granules.last_before(g)?;
        self.bucket(earlier).and_then(|bucket| bucket.last()).map(|(s, _)| *s)
    }

    /// The segment that begins last before `at`.
    pub(super) fn last_before(&mut self, at: u64) -> Option<&mut Segment> {
        let start = self.last_start_before(at)?;
        self.get_mut(start)
    }

    /// Every segment with its start, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Segment)> {
        self.buckets.iter().flat_map(|bucket| bucket.iter()).map(|(s, seg)| (*s, seg))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::NO_READS;
    use super::*;

    fn seg(end: u64) -> Segment {
        Segment { end, write: None, reads: NO_READS }
    }

    /// Every operation checked against the standard library's ordered map, with starts that crowd some granules,
    /// leave long gaps between others and lie far apart in the address space.
    #[test]
    fn agrees_with_an_ordered_map() {
        let mut map = SegmentMap::default();
        let mut model: BTreeMap<u64, u64> = BTreeMap::new();
        let mut x: u64 = 7;
        for round in 0..60_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let start = match (x >> 61) % 4 {
                0 => (x >> 20) % 512,
                1 => 0x7f00_0000_0000 + (x >> 20) % (300 * GRANULE),
                2 => 0x7f00_0000_0000 + (x >> 20) % 8 * GRANULE * 1000,
                _ => u64::MAX - (x >> 20) % (4 * GRANULE),
            };
            let insert = if round < 30_000 { x % 3 != 0 } else { x % 3 == 0 };
            if insert {
                map.insert(start, seg(round));
                model.insert(start, round);
            } else {
                assert_eq!(map.remove(start).map(|s| s.end), model.remove(&start));
            }
            assert_eq!(map.len(), model.len());
            let probe = start.wrapping_add((x >> 30) % (3 * GRANULE)).wrapping_sub(GRANULE);
            assert_eq!(map.get(probe).map(|s| s.end), model.get(&probe).copied());
            assert_eq!(map.last_start_before(probe), model.range(..probe).next_back().map(|(s, _)| *s));
            if round % 8 != 0 {
                continue;
            }
            for span in [100, 5 * GRANULE, 40 * GRANULE, 9000 * GRANULE] {
                let end = probe.saturating_add(span);
                let want: Vec<u64> = model.range(probe..end).map(|(s, _)| *s).collect();
                let mut got = Vec::new();
                map.starts_in(probe, end, &mut got);
                assert_eq!(got, want, "in [{probe}, {end})");
                assert_eq!(map.starts_in_iter(probe, end).collect::<Vec<_>>(), want);
            }
        }
        let mut all: Vec<(u64, u64)> = map.iter().map(|(s, seg)| (s, seg.end)).collect();
        all.sort();
        assert_eq!(all, model.iter().map(|(s, e)| (*s, *e)).collect::<Vec<_>>());
        for start in model.keys() {
            map.remove(*start);
        }
        assert_eq!(map.len(), 0);
        assert_eq!(map.last_start_before(u64::MAX), None);
    }
}
