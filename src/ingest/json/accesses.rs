//! A record's byte ranges as the model's: a range, and the `reads` and `writes` lists of a kernel, a host
//! access, a graph node or a framework frame as accesses, strided views checked against their extents. The
//! lists come decoded from JSON, or still in a binary frame's bytes ([`AccessItems`]): each item is taken by
//! one rule ([`push_access`]) either way.

use std::sync::Arc;

use streamtrace_format::binary::read::AccessList;

use super::problem::Problem;
use super::raw::{Address, RawAccessRange, RawRange};
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
    read_write_items(AccessItems::Decoded(reads), AccessItems::Decoded(writes), out)
}

/// A `reads` or `writes` list as the record carried it: decoded from JSON, or a binary frame's bytes.
#[derive(Copy, Clone, Debug)]
pub(in crate::ingest) enum AccessItems<'a> {
    Decoded(&'a [RawAccessRange]),
    Frame(AccessList<'a>),
}

impl Default for AccessItems<'_> {
    fn default() -> Self {
        AccessItems::Decoded(&[])
    }
}

impl AccessItems<'_> {
    pub fn len(&self) -> usize {
        match self {
            AccessItems::Decoded(items) => items.len(),
            AccessItems::Frame(items) => items.len(),
        }
    }
}

/// [`read_write_accesses`] for lists in either form.
pub(super) fn read_write_items(reads: AccessItems, writes: AccessItems, out: &mut Vec<Access>) -> Result<(), Problem> {
    for (list, mode) in [(reads, AccessMode::Read), (writes, AccessMode::Write)] {
        match list {
            AccessItems::Decoded(items) => {
                for item in items {
                    let view = item.view.as_ref().map(|view| (view.element_size, &view.dims[..]));
                    push_access(item.range, view, mode, out)?;
                }
            }
            AccessItems::Frame(items) => {
                for item in items.iter() {
                    let view = item.view.as_ref().map(|(element_size, dims)| (*element_size, &dims[..]));
                    push_access(RawRange(Address(item.address), Address(item.len)), view, mode, out)?;
                }
            }
        }
    }
    Ok(())
}

/// One item of a list: its range, and a strided view's element size and `[size, stride]` per dimension.
fn push_access(
    extent: RawRange,
    view: Option<(u64, &[(u64, u64)])>,
    mode: AccessMode,
    out: &mut Vec<Access>,
) -> Result<(), Problem> {
    let extent = range(extent)?;
    let Some((element_size, dims)) = view else {
        out.push(Access::plain(extent, mode));
        return Ok(());
    };
    let shape: Vec<ElementDim> = dims.iter().map(|&(size, stride)| ElementDim { size, stride }).collect();
    let view = StridedView::new(element_size, &shape).map_err(|e| Problem::malformed(e.to_string()))?;
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
    Ok(())
}
