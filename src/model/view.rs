//! Strided views: the bytes a tensor view covers (DESIGN.md, access tier T2), kept as a pattern rather than a
//! list, so that a view of a 1 GiB tensor costs what its description costs.
//!
//! A view is its first byte (the access range's start), an element size, and per dimension a count and a stride.
//! It is kept twice: as written, for reports (`[512 x 256] strides (1024, 2) of 4-byte elements`), and
//! normalized to the bytes it covers: one contiguous run repeated along dimensions sorted by stride, with size-1
//! and stride-0 dimensions dropped and dimensions that continue each other merged. Two views that cover the same
//! bytes normalize alike, and a view that covers one contiguous range normalizes to no dimension at all.

use std::fmt;

use serde::Serialize;
use thiserror::Error;

/// One dimension of a normalized pattern: `count` copies of everything inside, `stride` bytes apart.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ByteDim {
    pub count: u64,
    pub stride: u64,
}

/// One dimension as the trace gave it: `size` elements, `stride` elements apart.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ElementDim {
    pub size: u64,
    pub stride: u64,
}

/// The bytes a strided view covers, relative to its first byte.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct StridedView {
    /// Bytes per element.
    pub element_size: u64,
    /// Sizes and strides (in elements) as written, outermost first: what reports show.
    pub shape: Box<[ElementDim]>,
    /// Length of the contiguous run every index of `dims` starts.
    pub run: u64,
    /// The normalized dimensions, innermost (smallest stride) first. Never empty: a view whose bytes are one
    /// contiguous range is no view (see [`StridedView::new`]).
    pub dims: Box<[ByteDim]>,
    /// One past the last byte covered, relative to the first.
    pub extent: u64,
}

/// Why a view could not be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ViewError {
    #[error("a view's element size must be at least 1 byte")]
    ZeroElementSize,
    #[error("a view spanning more than 2^64 bytes")]
    Overflow,
}

/// What a view description became.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewBytes {
    /// A dimension of size 0: no byte at all.
    Empty,
    /// One contiguous range of `len` bytes from the first: a plain access.
    Contiguous {
        len: u64,
    },
    Strided(StridedView),
}

impl StridedView {
    /// Normalizes the view of `element_size`-byte elements with `shape` (outermost first, strides in elements).
    #[allow(clippy::new_ret_no_self)] // a view normalizes to a ViewBytes: empty, contiguous or strided
    pub fn new(element_size: u64, shape: &[ElementDim]) -> Result<ViewBytes, ViewError> {
        if element_size == 0 {
            return Err(ViewError::ZeroElementSize);
        }
        if shape.iter().any(|d| d.size == 0) {
            return Ok(ViewBytes::Empty);
        }
        let mut dims = Vec::with_capacity(shape.len());
        for d in shape {
            // A size-1 dimension adds no byte; a stride-0 (expanded) one covers the same bytes again.
            if d.size > 1 && d.stride > 0 {
                let stride = d.stride.checked_mul(element_size).ok_or(ViewError::Overflow)?;
                dims.push(ByteDim { count: d.size, stride });
            }
        }
        dims.sort_by_key(|d| d.stride);
        let mut run = element_size;
        let mut merged: Vec<ByteDim> = Vec::with_capacity(dims.len());
        for d in dims {
            let span = |d: ByteDim| (d.count - 1).checked_mul(d.stride).ok_or(ViewError::Overflow);
            if merged.is_empty() && d.stride <= run {
                // Copies of the run that touch or overlap it: together one longer run.
                run = span(d)?.checked_add(run).ok_or(ViewError::Overflow)?;
                continue;
            }
            match merged.last_mut() {
                // This dimension steps over exactly what the one inside covers: one longer dimension.
                Some(inner) if inner.count.checked_mul(inner.stride) == Some(d.stride) => {
                    inner.count = inner.count.checked_mul(d.count).ok_or(ViewError::Overflow)?;
                }
                _ => merged.push(d),
            }
        }
        let mut extent = run;
        for d in &merged {
            extent =
                (d.count - 1).checked_mul(d.stride).and_then(|s| s.checked_add(extent)).ok_or(ViewError::Overflow)?;
        }
        if merged.is_empty() {
            return Ok(ViewBytes::Contiguous { len: run });
        }
        Ok(ViewBytes::Strided(StridedView {
            element_size,
            shape: shape.into(),
            run,
            dims: merged.into_boxed_slice(),
            extent,
        }))
    }

    /// Whether both cover the same bytes relative to their first (the same pattern, whatever was written).
    pub fn same_bytes(&self, other: &StridedView) -> bool {
        self.run == other.run && self.dims == other.dims
    }
}

/// `[512 x 256] strides (1024, 2) of 4-byte elements`: the view as written, sizes and strides in elements.
impl fmt::Display for StridedView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.shape.iter().enumerate() {
            write!(f, "{}{}", if i == 0 { "" } else { " x " }, d.size)?;
        }
        f.write_str("] strides (")?;
        for (i, d) in self.shape.iter().enumerate() {
            write!(f, "{}{}", if i == 0 { "" } else { ", " }, d.stride)?;
        }
        write!(f, ") of {}-byte elements", self.element_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(pairs: &[(u64, u64)]) -> Vec<ElementDim> {
        pairs.iter().map(|&(size, stride)| ElementDim { size, stride }).collect()
    }

    fn strided(element_size: u64, pairs: &[(u64, u64)]) -> StridedView {
        match StridedView::new(element_size, &dims(pairs)) {
            Ok(ViewBytes::Strided(view)) => view,
            other => panic!("not strided: {other:?}"),
        }
    }

    #[test]
    fn contiguous_shapes_are_plain_ranges() {
        assert_eq!(StridedView::new(4, &dims(&[(8, 16), (16, 1)])), Ok(ViewBytes::Contiguous { len: 512 }));
        // Size-1 dims and a transposed contiguous layout still cover one range.
        assert_eq!(StridedView::new(4, &dims(&[(1, 99), (16, 1), (8, 16)])), Ok(ViewBytes::Contiguous { len: 512 }));
        assert_eq!(StridedView::new(2, &dims(&[(0, 1)])), Ok(ViewBytes::Empty));
        assert_eq!(StridedView::new(0, &dims(&[(1, 1)])), Err(ViewError::ZeroElementSize));
    }

    #[test]
    fn expanded_dims_collapse() {
        // x.expand(64, 16) of a 16-element row: the row's bytes, once.
        assert_eq!(StridedView::new(4, &dims(&[(64, 0), (16, 1)])), Ok(ViewBytes::Contiguous { len: 64 }));
        let every_other = strided(4, &[(64, 0), (16, 2)]);
        assert_eq!((every_other.run, &*every_other.dims), (4, &[ByteDim { count: 16, stride: 8 }][..]));
    }

    #[test]
    fn columns_normalize_to_runs_along_rows() {
        // x[:, 0:2] of a 4 x 8 float matrix: 8-byte runs every 32 bytes.
        let view = strided(4, &[(4, 8), (2, 1)]);
        assert_eq!((view.run, &*view.dims, view.extent), (8, &[ByteDim { count: 4, stride: 32 }][..], 104));
        assert_eq!(view.to_string(), "[4 x 2] strides (8, 1) of 4-byte elements");
        // x[:, ::2] of a 4 x 8 matrix whose rows follow each other merges into one dimension.
        let view = strided(4, &[(4, 8), (4, 2)]);
        assert_eq!((view.run, &*view.dims), (4, &[ByteDim { count: 16, stride: 8 }][..]));
    }

    #[test]
    fn overflowing_views_are_refused() {
        assert_eq!(StridedView::new(8, &dims(&[(2, u64::MAX / 4)])), Err(ViewError::Overflow));
    }
}
