//! A record's byte ranges as the model's: a range, and the `reads` and `writes` lists of a kernel, a host
//! access, a graph node or a framework frame as accesses, strided views checked against their extents. The
//! lists come decoded from JSON, or still in a binary frame's bytes ([`AccessItems`]): each item is taken by
//! one rule ([`push_access`]) either way.

use std::sync::Arc;

use streamtrace_format::binary::read::AccessList;

use super::problem::Problem;
use super::raw::{Address, RawAccessRange, RawRange};
use crate::model::{Access, AccessMode, AccessRange, ElementDim, RangeError, StridedView, ViewBytes};

/// A record's `[address, length]` as a range: refused when it runs past the address space.
#[inline]
pub(super) fn range(raw: RawRange) -> Result<AccessRange, Problem> {
    AccessRange::new(raw.0 .0, raw.1 .0).map_err(range_problem)
}

// Cold: ranges that run past the address space are only in broken traces.
#[cold]
fn range_problem(e: RangeError) -> Problem {
    Problem::malformed(e.to_string())
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
// Always inlined: a kernel's lists are read for nearly every record (plain `inline` was not taken).
#[inline(always)]
pub(super) fn read_write_items(reads: AccessItems, writes: AccessItems, out: &mut Vec<Access>) -> Result<(), Problem> {
    push_items(reads, AccessMode::Read, out)?;
    push_items(writes, AccessMode::Write, out)
}

/// The items of one list, as accesses of `mode`.
// Inlined, once per list: a loop over an array of the two lists kept its state in memory.
#[inline(always)]
fn push_items(list: AccessItems, mode: AccessMode, out: &mut Vec<Access>) -> Result<(), Problem> {
    match list {
        AccessItems::Decoded(items) => {
            for item in items {
                let view = item.view.as_ref().map(|view| (view.element_size, view.dims.iter().copied()));
                push_access(item.range, view, mode, out)?;
            }
        }
        AccessItems::Frame(items) => {
            for item in items.refs() {
                push_access(RawRange(Address(item.address), Address(item.len)), item.view(), mode, out)?;
            }
        }
    }
    Ok(())
}

/// One item of a list: its range, and a strided view's element size and `[size, stride]` per dimension.
// Inlined into the lists' loops: a plain range, nearly every item, is a check and a push.
#[inline(always)]
fn push_access(
    extent: RawRange,
    view: Option<(u64, impl Iterator<Item = (u64, u64)>)>,
    mode: AccessMode,
    out: &mut Vec<Access>,
) -> Result<(), Problem> {
    let extent = range(extent)?;
    match view {
        None => {
            out.push(Access::plain(extent, mode));
            Ok(())
        }
        Some((element_size, dims)) => push_view(extent, element_size, dims, mode, out),
    }
}

/// [`push_access`] of an item with a strided view.
fn push_view(
    extent: AccessRange,
    element_size: u64,
    dims: impl Iterator<Item = (u64, u64)>,
    mode: AccessMode,
    out: &mut Vec<Access>,
) -> Result<(), Problem> {
    let shape: Vec<ElementDim> = dims.map(|(size, stride)| ElementDim { size, stride }).collect();
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

#[cfg(test)]
mod tests {
    use streamtrace_format::binary::read::{fields, Value};
    use streamtrace_format::binary::write::{AccessItem, BinaryWriter};
    use streamtrace_format::{Field, RecordKind};

    use super::super::raw::RawView;
    use super::*;

    /// The body of a kernel's record frame whose `reads` list holds `item`.
    fn frame_body(item: AccessItem) -> Vec<u8> {
        let (mut writer, mut out) = (BinaryWriter::new(), Vec::new());
        let mut record = writer.begin(&mut out, RecordKind::Kernel);
        record.accesses(Field::Reads, [item]);
        record.end().expect("encodable");
        // The record frame is the only one: its body is past its head.
        out.split_off(8)
    }

    /// The `reads` list of a kernel's record frame `body`.
    fn frame_list(body: &[u8]) -> AccessList<'_> {
        match fields(RecordKind::Kernel, body).expect("a record").next() {
            Some(Ok((Field::Reads, Value::Accesses(list)))) => list,
            other => panic!("{other:?}"),
        }
    }

    /// Each item taken alone both ways: a frame's item, read in place, gives the access (or the problem) the
    /// same item decoded from JSON gives.
    #[test]
    fn an_item_in_a_frame_gives_what_the_decoded_item_gives() {
        let items = [
            AccessItem { address: 0x1000, len: 64, view: None },
            AccessItem { address: 0x2000, len: 24, view: Some((4, &[(3, 2)])) },
            AccessItem { address: 0x3000, len: 16, view: Some((4, &[(2, 2), (2, 1)])) },
            AccessItem { address: 0x4000, len: 0, view: Some((4, &[(0, 1)])) },
            // Refused both ways: a view longer than its extent, a range past the address space, no element size.
            AccessItem { address: 0x5000, len: 8, view: Some((4, &[(3, 2)])) },
            AccessItem { address: u64::MAX - 4, len: 64, view: None },
            AccessItem { address: 0x6000, len: 8, view: Some((0, &[(3, 2)])) },
        ];
        for item in items {
            let AccessItem { address, len, view } = item;
            let body = frame_body(item);
            let frame = frame_list(&body);
            let decoded = [RawAccessRange {
                range: RawRange(Address(address), Address(len)),
                view: view.map(|(element_size, dims)| Box::new(RawView { element_size, dims: dims.to_vec() })),
            }];
            let (mut from_frame, mut from_json) = (Vec::new(), Vec::new());
            let read = read_write_items(AccessItems::Frame(frame), AccessItems::Decoded(&[]), &mut from_frame);
            let decoded = read_write_items(AccessItems::Decoded(&decoded), AccessItems::Decoded(&[]), &mut from_json);
            assert_eq!(read.map_err(|p| p.message), decoded.map_err(|p| p.message), "{item:?}");
            assert_eq!(from_frame, from_json, "{item:?}");
        }
    }
}
