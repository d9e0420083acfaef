//! A record's byte ranges as the model's: a range, and the `reads` and `writes` lists of a kernel, a host
//! access, a graph node or a framework frame as accesses, strided views checked against their extents.

use std::sync::Arc;

use super::problem::Problem;
use super::raw::{RawAccessRange, RawRange};
use crate::model::{Access, AccessMode, AccessRange, ElementDim, StridedView, ViewBytes};

pub(super) fn range(raw: RawRange) -> Result<AccessRange, Problem> {
    AccessRange::new(raw.0 .0, raw.1 .0).map_err(|e| Problem::malformed(e.to_string()))
}

/// A record's `reads` and `writes` lists as accesses. A view of no byte is no access; a view whose bytes are
/// one contiguous range is a plain access of that range.
pub(super) fn read_write_accesses(
    reads: &[RawAccessRange],
    writes: &[RawAccessRange],
    out: &mut Vec<Access>,
) -> Result<(), Problem> {
    for (list, mode) in [(reads, AccessMode::Read), (writes, AccessMode::Write)] {
        for item in list {
            let extent = range(item.range)?;
            let Some(raw_view) = &item.view else {
                out.push(Access::plain(extent, mode));
                continue;
            };
            let shape: Vec<ElementDim> =
                raw_view.dims.iter().map(|&(size, stride)| ElementDim { size, stride }).collect();
            let view =
                StridedView::new(raw_view.element_size, &shape).map_err(|e| Problem::malformed(e.to_string()))?;
            let covered = match &view {
                ViewBytes::Empty => 0,
                ViewBytes::Contiguous { len } => *len,
                ViewBytes::Strided(strided) => strided.extent,
            };
            if covered != extent.len {
                return Err(Problem::malformed(format!(
                    "a view at {:#x} gives a length of {} bytes, but its sizes and strides span {covered}",
                    extent.start, extent.len
                )));
            }
            match view {
                ViewBytes::Empty => {}
                ViewBytes::Contiguous { .. } => out.push(Access::plain(extent, mode)),
                ViewBytes::Strided(strided) => out.push(Access { range: extent, mode, view: Some(Arc::new(strided)) }),
            }
        }
    }
    Ok(())
}
