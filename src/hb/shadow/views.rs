//! The shadow of strided accesses (tensor views, tier T2): each kept whole, as its pattern and its stamp, beside
//! the segments of plain ranges, so that a view of a 1 GiB tensor costs one entry and not one segment per
//! element.
//!
//! A view access is checked against the segments under its extent and against the views kept, exactly on the
//! bytes both cover ([`super::super::view_overlap`]); a plain access is checked against the views kept. The
//! clocks are compared first and the geometry only for accesses that are unordered, so an ordered program pays
//! for no overlap question. A view is dropped (FastTrack's "the last write replaces") when a write covers its
//! whole extent or a later access covers the same bytes and makes it redundant; the views of a released or
//! forgotten range go with it (a view lies inside one allocation).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{conflicts, Conflict, Segment, SegmentMap, ShadowMemory, Stamp};
use crate::hb::clock::VectorClock;
use crate::hb::view_overlap::{pattern_meets_range, patterns_meet, Budget, Placed, OVERLAP_STEP_CAP};
use crate::model::{AccessRange, StridedView};

/// One strided access the shadow remembers.
#[derive(Clone, Debug)]
struct ViewEntry {
    start: u64,
    end: u64,
    view: Arc<StridedView>,
    stamp: Stamp,
}

impl ViewEntry {
    fn placed(&self) -> Placed<'_> {
        Placed::view(self.start, &self.view)
    }
}

/// The strided accesses of one address space, by first byte (and arrival, to keep several at one address).
#[derive(Default)]
pub(super) struct ViewAccesses {
    entries: BTreeMap<(u64, u64), ViewEntry>,
    arrivals: u64,
    /// The longest extent ever kept: a range query starts this far before its range.
    longest: u64,
    /// Overlap questions answered "overlap" because they ran past their budget.
    pub(super) assumed_overlaps: u64,
    /// Scratch: keys to drop after a walk.
    doomed: Vec<(u64, u64)>,
}

impl ViewAccesses {
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every site a kept view's stamp names.
    pub(super) fn for_each_site(&self, mut each: impl FnMut(crate::hb::sites::SiteId)) {
        self.entries.values().for_each(|entry| each(entry.stamp.site));
    }

    /// The entries whose extent meets `[lo, hi)`, with their keys.
    fn keys_meeting(&self, lo: u64, hi: u64) -> impl Iterator<Item = (&(u64, u64), &ViewEntry)> {
        meeting(&self.entries, self.longest, lo, hi)
    }

    /// A plain access of `range`: checked against the views kept; a write drops the views it covers whole.
    pub(super) fn check_range(
        &mut self,
        range: AccessRange,
        current: &Stamp,
        clock: &VectorClock,
        out: &mut Vec<Conflict>,
    ) {
        let (lo, hi) = (range.start, range.end());
        let mut assumed = 0;
        let mut doomed = std::mem::take(&mut self.doomed);
        doomed.clear();
        for (key, entry) in meeting(&self.entries, self.longest, lo, hi) {
            if (current.is_write() || entry.stamp.is_write()) && conflicts(&entry.stamp, current, clock) {
                let mut budget = Budget::new(OVERLAP_STEP_CAP);
                if pattern_meets_range(entry.placed(), lo as i128, hi as i128, &mut budget) {
                    push_view_conflict(out, entry, lo, hi);
                }
                assumed += budget.exhausted as u64;
            }
            if current.is_write() && entry.start >= lo && entry.end <= hi {
                doomed.push(*key);
            }
        }
        self.assumed_overlaps += assumed;
        for key in doomed.drain(..) {
            self.entries.remove(&key);
        }
        self.doomed = doomed;
    }

    /// A strided access: checked against the views kept, then kept itself.
    fn check_and_keep(
        &mut self,
        start: u64,
        view: &Arc<StridedView>,
        current: Stamp,
        clock: &VectorClock,
        out: &mut Vec<Conflict>,
    ) {
        let end = start + view.extent;
        let mine = Placed::view(start, view);
        let mut assumed = 0;
        let mut doomed = std::mem::take(&mut self.doomed);
        doomed.clear();
        for (key, entry) in meeting(&self.entries, self.longest, start, end) {
            if (current.is_write() || entry.stamp.is_write()) && conflicts(&entry.stamp, &current, clock) {
                let mut budget = Budget::new(OVERLAP_STEP_CAP);
                if patterns_meet(entry.placed(), mine, &mut budget) {
                    push_view_conflict(out, entry, start, end);
                }
                assumed += budget.exhausted as u64;
            }
            // The same bytes again: a write replaces whatever was there; a read replaces the reads ordered
            // before it (FastTrack), since every later write that races with them races with it.
            let same_bytes = entry.start == start && entry.view.same_bytes(view);
            if same_bytes && (current.is_write() || (!entry.stamp.is_write() && entry.stamp.covered_by(clock))) {
                doomed.push(*key);
            }
        }
        self.assumed_overlaps += assumed;
        for key in doomed.drain(..) {
            self.entries.remove(&key);
        }
        self.doomed = doomed;
        self.arrivals += 1;
        self.longest = self.longest.max(view.extent);
        self.entries.insert((start, self.arrivals), ViewEntry { start, end, view: Arc::clone(view), stamp: current });
    }

    /// The host releases `range`: every view there not ordered before `clock` is a use after free; then the
    /// views that meet the range are dropped.
    pub(super) fn release(&mut self, range: AccessRange, clock: &VectorClock, out: &mut Vec<Conflict>) {
        let (lo, hi) = (range.start, range.end());
        let mut doomed = std::mem::take(&mut self.doomed);
        doomed.clear();
        let mut assumed = 0;
        for (key, entry) in meeting(&self.entries, self.longest, lo, hi) {
            let mut budget = Budget::new(OVERLAP_STEP_CAP);
            if !entry.stamp.covered_by(clock)
                && pattern_meets_range(entry.placed(), lo as i128, hi as i128, &mut budget)
            {
                push_view_conflict(out, entry, lo, hi);
            }
            assumed += budget.exhausted as u64;
            doomed.push(*key);
        }
        self.assumed_overlaps += assumed;
        for key in doomed.drain(..) {
            self.entries.remove(&key);
        }
        self.doomed = doomed;
    }
}

impl ViewAccesses {
    /// Drops the views that meet `range` without checking them (a new allocation's lifetime begins).
    pub(super) fn forget(&mut self, range: AccessRange) {
        let doomed: Vec<(u64, u64)> = self.keys_meeting(range.start, range.end()).map(|(key, _)| *key).collect();
        for key in doomed {
            self.entries.remove(&key);
        }
    }
}

/// The entries of `entries` whose extent meets `[lo, hi)`, none longer than `longest`.
fn meeting(
    entries: &BTreeMap<(u64, u64), ViewEntry>,
    longest: u64,
    lo: u64,
    hi: u64,
) -> impl Iterator<Item = (&(u64, u64), &ViewEntry)> {
    entries.range((lo.saturating_sub(longest), 0)..(hi, 0)).filter(move |(_, e)| e.end > lo)
}

/// A conflict with a kept view, over the bytes where the view's extent and `[lo, hi)` meet.
fn push_view_conflict(out: &mut Vec<Conflict>, entry: &ViewEntry, lo: u64, hi: u64) {
    let start = entry.start.max(lo);
    let range = AccessRange { start, len: entry.end.min(hi) - start };
    out.push(Conflict { earlier: entry.stamp, range, earlier_view: Some(Arc::clone(&entry.view)) });
}

impl SegmentMap {
    /// The segments that hold a byte of `[lo, hi)`, by start, in address order.
    fn meeting(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, &Segment)> {
        let straddling = self.last_start_before(lo);
        straddling.into_iter().chain(self.starts_in_iter(lo, hi)).filter_map(move |start| {
            let seg = self.get(start)?;
            (seg.end > lo).then_some((start, seg))
        })
    }
}

impl ShadowMemory {
    /// Checks a strided access (the bytes of `view` from `start`) by the operation stamped `current` against
    /// what those bytes saw before, appends the conflicts to `out`, and records the access. The segments under
    /// it are left as they are: they still hold the bytes between the view's elements.
    pub fn access_view(
        &mut self,
        start: u64,
        view: &Arc<StridedView>,
        current: Stamp,
        clock: &VectorClock,
        out: &mut Vec<Conflict>,
    ) {
        let end = start + view.extent;
        let mine = Placed::view(start, view);
        let mut assumed = 0;
        for (seg_start, seg) in self.segments.meeting(start, end) {
            let reads: &[Stamp] = if current.is_write() { seg.reads.stamps() } else { &[] };
            for earlier in seg.write.iter().chain(reads) {
                if !conflicts(earlier, &current, clock) {
                    continue;
                }
                let (lo, hi) = (seg_start.max(start), seg.end.min(end));
                let mut budget = Budget::new(OVERLAP_STEP_CAP);
                if pattern_meets_range(mine, lo as i128, hi as i128, &mut budget) {
                    out.push(Conflict {
                        earlier: *earlier,
                        range: AccessRange { start: lo, len: hi - lo },
                        earlier_view: None,
                    });
                }
                assumed += budget.exhausted as u64;
            }
        }
        self.views.assumed_overlaps += assumed;
        self.views.check_and_keep(start, view, current, clock, out);
    }

    /// Overlap questions answered "overlap" because they ran past their step budget: each may be a race
    /// reported that is not one.
    pub fn assumed_view_overlaps(&self) -> u64 {
        self.views.assumed_overlaps
    }

    /// Strided accesses held.
    pub fn views_held(&self) -> usize {
        self.views.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Effect;
    use super::*;
    use crate::hb::clock::{Epoch, Slot};
    use crate::hb::sites::SiteId;
    use crate::model::{AccessMode, ElementDim, StreamId, ViewBytes};

    fn stamp(stream: u32, tick: u64, mode: AccessMode) -> Stamp {
        let epoch = Epoch { stream: StreamId(stream), slot: Slot(stream), tick };
        Stamp::new(epoch, tick, tick, SiteId(stream), mode, Effect::Access)
    }

    fn clock_of(stream: u32, tick: u64) -> VectorClock {
        let mut c = VectorClock::new();
        c.set(Slot(stream), tick);
        c
    }

    /// Every `step`-th of `count` floats.
    fn floats(count: u64, step: u64) -> Arc<StridedView> {
        match StridedView::new(4, &[ElementDim { size: count, stride: step }]) {
            Ok(ViewBytes::Strided(view)) => Arc::new(view),
            other => panic!("not strided: {other:?}"),
        }
    }

    #[test]
    fn interleaved_writes_do_not_conflict_and_a_whole_read_meets_both() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access(
            AccessRange::new(0x1000, 4096).unwrap(),
            stamp(9, 1, AccessMode::Write),
            &clock_of(9, 1),
            &mut out,
        );
        let after_init = |stream| {
            let mut c = clock_of(stream, 1);
            c.set(Slot(9), 1);
            c
        };
        shadow.access_view(0x1000, &floats(512, 2), stamp(0, 1, AccessMode::Write), &after_init(0), &mut out);
        shadow.access_view(0x1004, &floats(512, 2), stamp(1, 1, AccessMode::Write), &after_init(1), &mut out);
        assert!(out.is_empty(), "{out:?}");
        shadow.access(AccessRange::new(0x1000, 4096).unwrap(), stamp(2, 1, AccessMode::Read), &after_init(2), &mut out);
        let mut streams: Vec<_> = out.iter().map(|c| c.earlier.slot.0).collect();
        streams.sort();
        assert_eq!(streams, vec![0, 1]);
        assert!(out.iter().all(|c| c.earlier_view.is_some()));
    }

    #[test]
    fn shifted_views_conflict_with_each_other_and_with_plain_writes() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access_view(0x1000, &floats(512, 2), stamp(0, 1, AccessMode::Write), &clock_of(0, 1), &mut out);
        shadow.access_view(0x1008, &floats(511, 2), stamp(1, 1, AccessMode::Write), &clock_of(1, 1), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].earlier.slot, Slot(0));
        out.clear();
        // A plain write between two odd elements meets no even one; one that covers an even element does.
        shadow.access(AccessRange::new(0x1004, 4).unwrap(), stamp(2, 1, AccessMode::Write), &clock_of(2, 1), &mut out);
        assert!(out.is_empty(), "{out:?}");
        shadow.access(AccessRange::new(0x1010, 4).unwrap(), stamp(2, 2, AccessMode::Write), &clock_of(2, 2), &mut out);
        assert_eq!(out.len(), 2, "both views hold 0x1010: {out:?}");
    }

    #[test]
    fn a_view_meets_the_plain_segments_under_it_exactly() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        // Stream 0 writes the odd element at 0x1004; an even view on stream 1 misses it, an odd one does not.
        shadow.access(AccessRange::new(0x1004, 4).unwrap(), stamp(0, 1, AccessMode::Write), &clock_of(0, 1), &mut out);
        shadow.access_view(0x1000, &floats(512, 2), stamp(1, 1, AccessMode::Write), &clock_of(1, 1), &mut out);
        assert!(out.is_empty(), "{out:?}");
        shadow.access_view(0x1004, &floats(512, 2), stamp(1, 2, AccessMode::Read), &clock_of(1, 2), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].range, AccessRange::new(0x1004, 4).unwrap());
    }

    #[test]
    fn repeated_views_and_covering_writes_keep_the_shadow_small() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        for tick in 1..100 {
            shadow.access_view(
                0x1000,
                &floats(512, 2),
                stamp(0, tick, AccessMode::Write),
                &clock_of(0, tick),
                &mut out,
            );
            shadow.access_view(0x1000, &floats(512, 2), stamp(0, tick, AccessMode::Read), &clock_of(0, tick), &mut out);
        }
        assert!(out.is_empty());
        assert_eq!(shadow.views_held(), 2, "the last write and the read after it");
        shadow.access(
            AccessRange::new(0x1000, 4096).unwrap(),
            stamp(0, 100, AccessMode::Write),
            &clock_of(0, 100),
            &mut out,
        );
        assert_eq!(shadow.views_held(), 0);
    }

    #[test]
    fn release_reports_unordered_views_then_drops_them() {
        let mut shadow = ShadowMemory::default();
        let mut out = Vec::new();
        shadow.access_view(0x1000, &floats(512, 2), stamp(0, 1, AccessMode::Read), &clock_of(0, 1), &mut out);
        shadow.release(AccessRange::new(0x1000, 4096).unwrap(), &VectorClock::new(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(shadow.views_held(), 0);
        shadow.access_view(0x1000, &floats(512, 2), stamp(0, 2, AccessMode::Read), &clock_of(0, 2), &mut out);
        shadow.forget(AccessRange::new(0x1000, 4096).unwrap());
        assert_eq!(shadow.views_held(), 0);
    }
}
