//! A kernel's accesses when both tier T2 and tier T3 speak of it (`capture --exact` of a PyTorch program): the
//! op's tensor views say, byte by byte, where its tensors lie (T2), and the exact-access capture says which
//! 32-byte granules the kernel read and wrote (T3). Neither alone is exact: a view is the whole tensor whatever
//! part the kernel touched, and granules merge neighbouring elements of interleaved views. Together they are.
//! Plain values, no I/O.

use super::access::Access;
use super::range::AccessRange;

/// The granule of the exact-access capture: its ranges are whole granules.
const GRANULE: u64 = 32;

/// The accesses of a kernel the capture saw (`seen`, tier T3) inside an op whose tensors are `extents` (tier
/// T2): each extent in each mode the kernel was seen to use within its span, and whatever the kernel touched
/// outside every extent (its own workspace, memory reached through a pointer it loaded) as seen. A seen range
/// only partly outside the extents is kept whole, so that nothing the kernel touched is ever left out.
pub fn refine_with_extents(extents: &[Access], seen: &[Access]) -> Vec<Access> {
    if extents.is_empty() {
        return seen.to_vec();
    }
    let spans: Vec<AccessRange> = extents.iter().map(|e| granules_of(e.range)).collect();
    let mut out = Vec::with_capacity(extents.len() + seen.len());
    for (extent, span) in extents.iter().zip(&spans) {
        let touched = seen.iter().any(|s| s.mode == extent.mode && s.range.intersection(*span).is_some());
        if touched && !out.contains(extent) {
            out.push(extent.clone());
        }
    }
    let covered = merged(spans);
    for access in seen {
        if !within(&covered, access.range) {
            out.push(access.clone());
        }
    }
    out
}

/// The whole granules `range` lies in.
fn granules_of(range: AccessRange) -> AccessRange {
    let start = range.start / GRANULE * GRANULE;
    let end = range.end().div_ceil(GRANULE).saturating_mul(GRANULE).max(range.end());
    AccessRange { start, len: end - start }
}

/// `ranges` sorted and merged where they touch.
fn merged(mut ranges: Vec<AccessRange>) -> Vec<AccessRange> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<AccessRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match out.last_mut() {
            Some(last) if range.start <= last.end() => {
                let end = last.end().max(range.end());
                last.len = end - last.start;
            }
            _ => out.push(range),
        }
    }
    out
}

/// Whether `range` lies inside one of the merged `covered` ranges.
fn within(covered: &[AccessRange], range: AccessRange) -> bool {
    covered.iter().any(|c| c.contains(range))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AccessMode::{Read, Write};
    use crate::model::{ElementDim, StridedView, ViewBytes};
    use std::sync::Arc;

    fn plain(start: u64, len: u64, mode: crate::model::AccessMode) -> Access {
        Access::plain(AccessRange { start, len }, mode)
    }

    /// Every other float of 1 MiB from `start`.
    fn every_other_float(start: u64) -> Access {
        let Ok(ViewBytes::Strided(view)) = StridedView::new(4, &[ElementDim { size: 1 << 18, stride: 2 }]) else {
            panic!("a strided view")
        };
        Access { range: AccessRange { start, len: (1 << 20) - 4 }, mode: Write, view: Some(Arc::new(view)) }
    }

    #[test]
    fn interleaved_views_stay_apart_where_granules_merge_them() {
        // buf[0::2] written by one op's kernel: the capture saw every granule of buf written.
        let even = every_other_float(0x1000_0000);
        let refined = refine_with_extents(std::slice::from_ref(&even), &[plain(0x1000_0000, 1 << 20, Write)]);
        assert_eq!(refined, vec![even], "the view, not the granules, says which bytes");
    }

    #[test]
    fn an_extent_the_kernel_never_touched_in_a_mode_is_dropped() {
        // An op reading a and writing b, whose kernel (one of several) only read a.
        let extents = [plain(0x2000, 4096, Read), plain(0x9000, 4096, Write)];
        let refined = refine_with_extents(&extents, &[plain(0x2000, 4096, Read)]);
        assert_eq!(refined, vec![plain(0x2000, 4096, Read)]);
    }

    #[test]
    fn what_the_kernel_touched_outside_the_ops_tensors_is_kept() {
        let extents = [plain(0x2000, 4096, Write)];
        let workspace = plain(0x8000_0000, 64, Write);
        let partly_outside = plain(0x2f00, 512, Write);
        let refined =
            refine_with_extents(&extents, &[plain(0x2000, 4096, Write), workspace.clone(), partly_outside.clone()]);
        assert_eq!(refined, vec![plain(0x2000, 4096, Write), workspace, partly_outside]);
    }

    #[test]
    fn a_seen_range_across_two_neighbouring_tensors_is_inside_them() {
        let extents = [plain(0x2000, 100, Read), plain(0x2064, 92, Read)];
        let refined = refine_with_extents(&extents, &[plain(0x2000, 192, Read)]);
        assert_eq!(refined, extents.to_vec());
    }

    #[test]
    fn without_extents_the_seen_bytes_are_the_accesses() {
        let seen = [plain(0x2000, 64, Read)];
        assert_eq!(refine_with_extents(&[], &seen), seen.to_vec());
    }
}
