//! Shadow memory: for every byte range a trace touched, the last write and the reads since, each as a [`Stamp`].
//!
//! Ranges are kept as non-overlapping segments; an access splits the segments at its edges, so that overlapping
//! ranges of any shape compare byte-exactly. The segments are filed by start in small buckets per 64 KiB of
//! address space, found through a radix table on the address (`segments.rs`). The check itself is FastTrack's: the last write is
//! one epoch (O(1) to compare), and reads stay one epoch until two unordered reads coexist.

mod radix;
mod segments;
mod stamp;
mod views;

use std::sync::Arc;

use smallvec::{smallvec, SmallVec};

use super::clock::VectorClock;
use super::sites::SiteId;
use crate::model::{AccessRange, StridedView};
use segments::SegmentMap;
pub use stamp::Stamp;

/// What an access did besides reading or writing bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A plain access by a kernel, copy or memset.
    Access,
    /// A stream-ordered free: the block is gone from this point of the stream on.
    Free,
    /// A stream-ordered allocation: the block begins here. The allocator itself orders it after earlier frees.
    Alloc,
}

/// An earlier access that the current one is not ordered with, and the bytes they share (for a strided view:
/// the part of its extent where the shared bytes lie).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub earlier: Stamp,
    pub range: AccessRange,
    /// The earlier access's strided view, when it was one.
    pub earlier_view: Option<Arc<StridedView>>,
}

/// Reads not ordered with each other, on the heap: one pointer in the segment, so that [`Reads`] is no wider
/// than a stamp.
type SharedReads = Box<SmallVec<[Stamp; 3]>>;

/// The reads of a segment since its last write. Two variants, so that the stamp's never-0 word is tag enough.
#[derive(Clone, Debug, PartialEq)]
enum Reads {
    /// FastTrack's epoch mode: every read so far is ordered before this one.
    One(Stamp),
    /// Read-shared mode: reads that are not ordered with each other; none at all ([`NO_READS`]) before the
    /// first read.
    Many(Option<SharedReads>),
}

/// No read since the last write.
const NO_READS: Reads = Reads::Many(None);

impl Reads {
    fn stamps(&self) -> &[Stamp] {
        match self {
            Reads::One(read) => std::slice::from_ref(read),
            Reads::Many(None) => &[],
            Reads::Many(Some(reads)) => reads,
        }
    }
}

#[derive(Clone, Debug)]
struct Segment {
    end: u64,
    write: Option<Stamp>,
    reads: Reads,
}

/// A hint to load the cache line of `address`; a no-op where the target has no such instruction.
pub(super) fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // Safety: a prefetch is only a hint: it never faults (whatever the address) and does not change memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch(address as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// [`prefetch_address`] for every cache line that holds a byte of the `bytes` bytes at `head`. A plain loop over
/// the lines: the engine asks for a few lines on every record, and `step_by` ranges cost it more instructions
/// than the prefetches themselves.
pub(super) fn prefetch_bytes(head: *const u8, bytes: usize) {
    let Some((first, last)) = line_span(head as usize, bytes) else { return };
    let mut line = first;
    loop {
        prefetch_address(head.wrapping_add(line.wrapping_sub(head as usize)));
        if line >= last {
            break;
        }
        line += CACHE_LINE;
    }
}

/// [`prefetch_bytes`] of the whole of `*value`, whose size the compiler knows: the lines are asked for without a
/// loop (a step every `CACHE_LINE` bytes, and the last byte's line, which that misses where `value` does not
/// start a line). The engine loads a record and a shadow bucket this way several times an operation, and the
/// loop's compares were 2% of its thread's instructions (callgrind, 10 M synthetic operations).
#[inline(always)]
pub(super) fn prefetch_value<T>(value: *const T) {
    let (head, bytes) = (value as *const u8, size_of::<T>());
    let mut offset = 0;
    while offset < bytes {
        prefetch_address(head.wrapping_add(offset));
        offset += CACHE_LINE;
    }
    if bytes % CACHE_LINE != 0 {
        prefetch_address(head.wrapping_add(bytes - 1));
    }
}

/// The addresses of the first and the last cache line that hold a byte of `[address, address + bytes)`.
fn line_span(address: usize, bytes: usize) -> Option<(usize, usize)> {
    let end = address.checked_add(bytes.checked_sub(1)?)?;
    Some((address & !(CACHE_LINE - 1), end & !(CACHE_LINE - 1)))
}

/// The processor's cache line, in bytes.
const CACHE_LINE: usize = 64;

/// The shadow state of one address space.
#[derive(Default)]
pub struct ShadowMemory {
    segments: SegmentMap,
    keys: Vec<u64>,
    gaps: Vec<(u64, u64)>,
    /// Strided accesses, kept whole beside the segments (`views.rs`).
    views: views::ViewAccesses,
}

/// Whether `earlier` and the access stamped `current` are unordered in a way that matters.
fn conflicts(earlier: &Stamp, current: &Stamp, clock: &VectorClock) -> bool {
    if earlier.covered_by(clock) {
        return false;
    }
    // The allocator orders a new block after the free of the old one, whatever the streams.
    !(current.effect() == Effect::Alloc && earlier.effect() == Effect::Free)
}

fn push_conflict(out: &mut Vec<Conflict>, earlier: Stamp, start: u64, end: u64) {
    if let Some(last) = out.last_mut() {
        if last.earlier == earlier && last.range.end() == start && last.earlier_view.is_none() {
            last.range.len += end - start;
            return;
        }
    }
    out.push(Conflict { earlier, range: AccessRange { start, len: end - start }, earlier_view: None });
}

impl ShadowMemory {
    /// Number of segments held: the live state this shadow costs.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Every site a stamp of this shadow names (a site collection's marking).
    pub fn for_each_site(&self, mut each: impl FnMut(SiteId)) {
        for (_, segment) in self.segments.iter() {
            if let Some(write) = &segment.write {
                each(write.site);
            }
            segment.reads.stamps().iter().for_each(|read| each(read.site));
        }
        self.views.for_each_site(each);
    }

    /// Loads the segment starting at `start`, if any, into the cache: an access there comes soon. Reads the
    /// radix table's entry for it, which [`ShadowMemory::prefetch_index`] loaded a step before.
    pub fn prefetch(&self, start: u64) {
        self.segments.prefetch(start);
    }

    /// Loads what finds the segment at `start` (its radix table entry) into the cache, reading nothing that may
    /// miss: the first step of a prefetch, an operation before [`ShadowMemory::prefetch`].
    pub fn prefetch_index(&self, start: u64) {
        self.segments.prefetch_index(start);
    }

    /// Checks an access by the operation stamped `current`, whose stream's clock is `clock`, against what the
    /// range saw before, appends the conflicts to `out`, and records the access.
    ///
    /// The common case, a range that is exactly one segment, is answered here, inline in the caller's loop; the
    /// call into the general case saved and restored registers for every access (2% of the engine thread's
    /// instructions, callgrind, 10 M synthetic operations).
    #[inline(always)]
    pub fn access(&mut self, range: AccessRange, current: Stamp, clock: &VectorClock, out: &mut Vec<Conflict>) {
        if range.is_empty() {
            return;
        }
        if !self.views.is_empty() {
            self.views.check_range(range, &current, clock, out);
        }
        let first_end = match self.segments.get_mut(range.start) {
            Some(seg) if seg.end == range.end() => {
                Self::check_and_record(seg, range.start, current, clock, out);
                return;
            }
            Some(seg) => Some(seg.end),
            None => None,
        };
        self.access_in_pieces(range, first_end, current, clock, out);
    }

    /// [`ShadowMemory::access`] of a range that is not exactly one segment. `first_end`: where the segment at the
    /// range's start ends, which the caller has looked up (`None`: none starts there).
    #[inline(never)]
    fn access_in_pieces(
        &mut self,
        range: AccessRange,
        first_end: Option<u64>,
        current: Stamp,
        clock: &VectorClock,
        out: &mut Vec<Conflict>,
    ) {
        let (start, end) = (range.start, range.end());
        if !self.walk_contiguous(start, first_end, end) {
            self.split_at(start);
            self.split_at(end);
            self.keys.clear();
            self.segments.starts_in(start, end, &mut self.keys);
        }
        if current.is_write() {
            // After a write every byte of the range has the same state: one segment replaces them all. The
            // segment at `start`, if any, stays in place; the others go.
            let mut kept_first = false;
            for i in 0..self.keys.len() {
                let key = self.keys[i];
                if key == start {
                    if let Some(seg) = self.segments.get_mut(key) {
                        Self::check_and_record(seg, key, current, clock, out);
                        seg.end = end;
                        kept_first = true;
                    }
                } else if let Some(mut seg) = self.segments.remove(key) {
                    Self::check_and_record(&mut seg, key, current, clock, out);
                }
            }
            if !kept_first {
                self.segments.insert(start, Segment { end, write: Some(current), reads: NO_READS });
            }
            return;
        }
        let mut cursor = start;
        self.gaps.clear();
        for &key in &self.keys {
            if key > cursor {
                self.gaps.push((cursor, key));
            }
            if let Some(seg) = self.segments.get_mut(key) {
                Self::check_and_record(seg, key, current, clock, out);
                cursor = seg.end;
            }
        }
        if cursor < end {
            self.gaps.push((cursor, end));
        }
        let had_gaps = !self.gaps.is_empty();
        for &(gap_start, gap_end) in &self.gaps {
            self.segments.insert(gap_start, Segment { end: gap_end, write: None, reads: Reads::One(current) });
        }
        if had_gaps {
            self.keys.clear();
            self.segments.starts_in(start, end, &mut self.keys);
        }
        self.merge_if_uniform(start, end);
    }

    /// When segments start at `start` and follow each other without a gap up to `end`, collects their starts
    /// into `keys` through the hash map alone (splitting the last one at `end` if it runs past), and returns
    /// true. The common case for blocks split by partial copies; the ordered set is needed only otherwise.
    /// `first_end`: where the segment at `start` ends, which the caller has looked up (`None`: none starts there).
    fn walk_contiguous(&mut self, start: u64, first_end: Option<u64>, end: u64) -> bool {
        self.keys.clear();
        let Some(first_end) = first_end else { return false };
        self.keys.push(start);
        let mut cursor = first_end;
        while cursor < end {
            match self.segments.get(cursor) {
                Some(seg) => {
                    self.keys.push(cursor);
                    cursor = seg.end;
                }
                None => return false,
            }
        }
        if cursor > end {
            let Some(&last) = self.keys.last() else { return false };
            if let Some(seg) = self.segments.get_mut(last) {
                let right = Segment { end: seg.end, write: seg.write, reads: seg.reads.clone() };
                seg.end = end;
                self.segments.insert(end, right);
            }
        }
        true
    }

    /// After a read, the pieces of the range often hold the same state again (the read replaced ordered reads
    /// everywhere): keep them as one segment, so that the next access of the whole range takes the fast path.
    /// `keys` holds the starts of the segments covering the range, in order.
    fn merge_if_uniform(&mut self, start: u64, end: u64) {
        if self.keys.len() < 2 || self.keys[0] != start {
            return;
        }
        let Some(first) = self.segments.get(start) else { return };
        let mut expected_start = first.end;
        for key in &self.keys[1..] {
            let Some(seg) = self.segments.get(*key) else { return };
            if *key != expected_start || seg.write != first.write || seg.reads != first.reads {
                return;
            }
            expected_start = seg.end;
        }
        if expected_start != end {
            return;
        }
        for key in &self.keys[1..] {
            self.segments.remove(*key);
        }
        if let Some(first) = self.segments.get_mut(start) {
            first.end = end;
        }
    }

    /// The memory of `range` is released by the host (a free or unmap) when the host thread's clock is `clock`:
    /// every access not ordered before that is a use after free. The range's history is then dropped.
    pub fn release(&mut self, range: AccessRange, clock: &VectorClock, out: &mut Vec<Conflict>) {
        if !self.views.is_empty() {
            self.views.release(range, clock, out);
        }
        self.split_at(range.start);
        self.split_at(range.end());
        self.keys.clear();
        self.segments.starts_in(range.start, range.end(), &mut self.keys);
        for &key in &self.keys {
            let Some(seg) = self.segments.remove(key) else { continue };
            for stamp in seg.write.iter().chain(seg.reads.stamps()) {
                if !stamp.covered_by(clock) {
                    push_conflict(out, *stamp, key, seg.end);
                }
            }
        }
    }

    /// Drops the history of `range` without checking it (a new allocation's lifetime begins).
    pub fn forget(&mut self, range: AccessRange) {
        if !self.views.is_empty() {
            self.views.forget(range);
        }
        self.split_at(range.start);
        self.split_at(range.end());
        self.keys.clear();
        self.segments.starts_in(range.start, range.end(), &mut self.keys);
        for key in &self.keys {
            self.segments.remove(*key);
        }
    }

    /// Splits the segment that straddles `at`, if any, so that a segment starts there.
    fn split_at(&mut self, at: u64) {
        // Segments never overlap: if one starts at `at`, none straddles it.
        if self.segments.contains(at) {
            return;
        }
        let Some(seg) = self.segments.last_before(at) else { return };
        if seg.end > at {
            let right = Segment { end: seg.end, write: seg.write, reads: seg.reads.clone() };
            seg.end = at;
            self.segments.insert(at, right);
        }
    }

    // Inline at its four calls: made once per segment an access covers, its call cost 1.3% of the engine thread's
    // instructions.
    #[inline(always)]
    fn check_and_record(seg: &mut Segment, start: u64, current: Stamp, clock: &VectorClock, out: &mut Vec<Conflict>) {
        let end = seg.end;
        if let Some(write) = &seg.write {
            if conflicts(write, &current, clock) {
                push_conflict(out, *write, start, end);
            }
        }
        if current.is_write() {
            for read in seg.reads.stamps() {
                if conflicts(read, &current, clock) {
                    push_conflict(out, *read, start, end);
                }
            }
            seg.write = Some(current);
            seg.reads = NO_READS;
            return;
        }
        // The common read, ordered after the segment's one read, replaces it in place.
        if let Reads::One(read) = &mut seg.reads {
            if read.covered_by(clock) {
                *read = current;
                return;
            }
        }
        seg.reads = match std::mem::replace(&mut seg.reads, NO_READS) {
            Reads::Many(None) => Reads::One(current),
            Reads::One(read) => Reads::Many(Some(Box::new(smallvec![read, current]))),
            Reads::Many(Some(mut reads)) => {
                // Reads ordered before this one are subsumed by it for every later write check.
                reads.retain(|r| !r.covered_by(clock));
                if reads.is_empty() {
                    Reads::One(current)
                } else {
                    reads.push(current);
                    Reads::Many(Some(reads))
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hb::clock::{Epoch, Slot};
    use crate::model::{AccessMode, StreamId};

    fn stamp(stream: u32, tick: u64, mode: AccessMode) -> Stamp {
        stamp_with(stream, tick, mode, Effect::Access)
    }

    fn stamp_with(stream: u32, tick: u64, mode: AccessMode, effect: Effect) -> Stamp {
        let epoch = Epoch { stream: StreamId(stream), slot: Slot(stream), tick };
        Stamp::new(epoch, tick, tick, SiteId(stream), mode, effect)
    }

    fn clock_of(stream: u32, tick: u64) -> VectorClock {
        let mut c = VectorClock::new();
        c.set(Slot(stream), tick);
        c
    }

    fn r(start: u64, len: u64) -> AccessRange {
        AccessRange::new(start, len).unwrap()
    }

    #[test]
    fn a_prefetch_covers_every_line_its_bytes_touch() {
        assert_eq!(line_span(128, 64), Some((128, 128)), "one aligned line");
        assert_eq!(line_span(160, 64), Some((128, 192)), "a line's worth across two lines");
        assert_eq!(line_span(130, 184), Some((128, 256)), "184 bytes from an unaligned address: three lines");
        assert_eq!(line_span(191, 1), Some((128, 128)));
        assert_eq!(line_span(64, 0), None, "nothing to load");
        assert_eq!(line_span(usize::MAX, 2), None, "past the address space: no line");
    }

    #[test]
    fn partial_overlap_reports_only_shared_bytes() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access(r(0, 100), stamp(0, 1, AccessMode::Write), &clock_of(0, 1), &mut out);
        shadow.access(r(50, 100), stamp(1, 1, AccessMode::Write), &clock_of(1, 1), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].range, r(50, 50));
        assert_eq!(out[0].earlier.slot, Slot(0));
    }

    #[test]
    fn read_in_the_middle_splits_and_keeps_edges() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access(r(0, 100), stamp(0, 1, AccessMode::Write), &clock_of(0, 1), &mut out);
        let mut ordered = clock_of(1, 1);
        ordered.set(Slot(0), 1);
        shadow.access(r(40, 20), stamp(1, 1, AccessMode::Read), &ordered, &mut out);
        assert!(out.is_empty());
        // A write on stream 2, unordered with both, conflicts with the write everywhere and the read in the middle.
        shadow.access(r(0, 100), stamp(2, 1, AccessMode::Write), &clock_of(2, 1), &mut out);
        let write_bytes: u64 = out.iter().filter(|c| c.earlier.mode() == AccessMode::Write).map(|c| c.range.len).sum();
        let read: Vec<_> = out.iter().filter(|c| c.earlier.mode() == AccessMode::Read).collect();
        assert_eq!(write_bytes, 100);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].range, r(40, 20));
        assert_eq!(shadow.segments(), 1, "a write leaves one segment");
    }

    #[test]
    fn write_checks_every_unordered_read() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access(r(0, 8), stamp(0, 1, AccessMode::Read), &clock_of(0, 1), &mut out);
        shadow.access(r(0, 8), stamp(1, 1, AccessMode::Read), &clock_of(1, 1), &mut out);
        assert!(out.is_empty(), "read/read is never a race");
        let mut knows_first_read_only = clock_of(2, 1);
        knows_first_read_only.set(Slot(0), 1);
        shadow.access(r(0, 8), stamp(2, 1, AccessMode::Write), &knows_first_read_only, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].earlier.slot, Slot(1));
    }

    #[test]
    fn release_reports_unordered_accesses_then_forgets() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access(r(0, 8), stamp(0, 1, AccessMode::Read), &clock_of(0, 1), &mut out);
        shadow.release(r(0, 8), &VectorClock::new(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(shadow.segments(), 0);
    }

    /// Every access, release and forget of a random run checked against FastTrack applied literally to each cell
    /// of memory (a cell of 1 KiB here: every range's edges fall on cells): the conflicts, as (cell, earlier
    /// access) pairs, must be the same. The ranges cross bucket edges, meet existing segments at their middles,
    /// leave gaps, and cover runs of split pieces, so that every path of the segment walk is taken.
    #[test]
    fn agrees_with_fasttrack_applied_to_every_cell() {
        const CELL: u64 = 1024;
        const CELLS: usize = 3 * (segments::GRANULE / CELL) as usize;
        #[derive(Clone, Default)]
        struct Cell {
            write: Option<Stamp>,
            reads: Vec<Stamp>,
        }
        let mut cells = vec![Cell::default(); CELLS];
        let mut shadow = ShadowMemory::default();
        let mut seed = 11u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        // What each of three streams has done, and what each knows of the others.
        let mut ticks = [0u64; 3];
        for round in 0..20_000u64 {
            let first = next(CELLS as u64 - 1) as usize;
            // Mostly a block's worth (a few cells), sometimes far across bucket edges.
            let len = if next(8) == 0 { 1 + next(90) } else { 1 + next(12) } as usize;
            let cells_of = first..(first + len).min(CELLS);
            let range = r(cells_of.start as u64 * CELL, cells_of.len() as u64 * CELL);
            let stream = next(3) as u32;
            ticks[stream as usize] += 1;
            let mut clock = VectorClock::new();
            for (other, &tick) in ticks.iter().enumerate() {
                let known = if other == stream as usize { tick } else { next(tick + 1) };
                clock.set(Slot(other as u32), known);
            }
            let unordered = |s: &&Stamp| !s.covered_by(&clock);
            let mut expected = Vec::new();
            let mut out = Vec::new();
            match next(20) {
                0 => {
                    shadow.release(range, &clock, &mut out);
                    for (i, cell) in cells[cells_of.clone()].iter_mut().enumerate() {
                        let stamps = cell.write.iter().chain(&cell.reads);
                        expected.extend(stamps.filter(unordered).map(|s| (cells_of.start + i, *s)));
                        *cell = Cell::default();
                    }
                }
                1 => {
                    shadow.forget(range);
                    cells[cells_of.clone()].fill(Cell::default());
                }
                _ => {
                    let mode = if next(3) == 0 { AccessMode::Write } else { AccessMode::Read };
                    let current = Stamp::new(
                        Epoch { stream: StreamId(stream), slot: Slot(stream), tick: ticks[stream as usize] },
                        round,
                        round,
                        SiteId(stream),
                        mode,
                        Effect::Access,
                    );
                    shadow.access(range, current, &clock, &mut out);
                    for (i, cell) in cells[cells_of.clone()].iter_mut().enumerate() {
                        let at = cells_of.start + i;
                        expected.extend(cell.write.iter().filter(unordered).map(|s| (at, *s)));
                        if mode == AccessMode::Write {
                            expected.extend(cell.reads.iter().filter(unordered).map(|s| (at, *s)));
                            *cell = Cell { write: Some(current), reads: Vec::new() };
                        } else {
                            cell.reads.retain(|s| !s.covered_by(&clock));
                            cell.reads.push(current);
                        }
                    }
                }
            }
            let mut got: Vec<(usize, Stamp)> = out
                .iter()
                .flat_map(|c| (c.range.start / CELL..c.range.end() / CELL).map(move |cell| (cell as usize, c.earlier)))
                .collect();
            let key = |(cell, s): &(usize, Stamp)| (*cell, s.seq, s.slot.0, s.is_write());
            got.sort_by_key(key);
            expected.sort_by_key(key);
            assert_eq!(got, expected, "round {round}: {range:?}");
        }
    }

    #[test]
    fn alloc_is_ordered_after_free_by_the_allocator() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        let free = stamp_with(0, 1, AccessMode::Write, Effect::Free);
        shadow.access(r(0, 8), free, &clock_of(0, 1), &mut out);
        let alloc = stamp_with(1, 1, AccessMode::Write, Effect::Alloc);
        shadow.access(r(0, 8), alloc, &clock_of(1, 1), &mut out);
        assert!(out.is_empty());
    }
}
