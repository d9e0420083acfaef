//! Reading the binary encoding: a frame's head, and the field values of a record frame in its kind's layout.
//! Every length is checked against what is left before anything is read or allocated for it, so that a
//! hostile file is refused with the byte and the field where it went wrong, never a panic or a huge
//! allocation.

use std::fmt;
use std::io::Read;

use super::{layout, value_type, Tag, ValueType, FRAME_HEAD_BYTES, MAGIC, MAX_FRAME_BYTES, PREAMBLE_BYTES};
use crate::vocabulary::{access_range, AccessFlag, Field, RecordKind};

/// What is wrong with a frame: where (bytes from the start of its body), which field when one was being read,
/// and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub at: usize,
    pub field: Option<Field>,
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field {
            Some(field) => write!(f, "field `{field}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// What the preamble says: a binary trace of this build's version, or why not.
pub fn check_preamble(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < PREAMBLE_BYTES || bytes[..8] != MAGIC {
        return Err("not a binary streamtrace trace (no magic bytes)".to_string());
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != super::BINARY_VERSION {
        return Err(format!(
            "unsupported binary encoding version {version} (this build reads {})",
            super::BINARY_VERSION
        ));
    }
    Ok(())
}

/// Whether `head` (a file's first bytes) starts as a binary trace does.
pub fn is_binary(head: &[u8]) -> bool {
    head.starts_with(&MAGIC)
}

/// A frame's head: its tag and its body's length (at most [`MAX_FRAME_BYTES`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FrameHead {
    pub tag: Tag,
    pub len: u32,
}

/// Reads a frame's head; an error when its reserved bytes are not zero or its length is past the limit.
pub fn frame_head(bytes: &[u8; FRAME_HEAD_BYTES]) -> Result<FrameHead, DecodeError> {
    let tag = Tag::from_code(u16::from_le_bytes([bytes[0], bytes[1]]));
    let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if bytes[2] != 0 || bytes[3] != 0 {
        return Err(DecodeError { at: 2, field: None, message: "a frame head's reserved bytes are not zero".into() });
    }
    if len > MAX_FRAME_BYTES {
        return Err(DecodeError {
            at: 4,
            field: None,
            message: format!("a frame of {len} bytes, more than the {} MiB a record may hold", MAX_FRAME_BYTES >> 20),
        });
    }
    Ok(FrameHead { tag, len })
}

/// Frames up to this long are read into room made for them at once; longer ones as the input holds them.
const SMALL_FRAME_BYTES: usize = 64 << 10;

/// Reads the frames of a binary trace one at a time from `input`, into one buffer it reuses.
pub struct FrameReader<R> {
    input: R,
    body: Vec<u8>,
    /// Where the next frame starts, in bytes from the start of the file.
    offset: u64,
}

/// What the input held where a frame was read.
#[derive(Debug)]
pub enum FrameOutcome {
    /// A whole frame, `at` bytes from the start of the file; its body is [`FrameReader::body`].
    Frame { at: u64, head: FrameHead },
    /// The input ended where a frame starts: the end of the trace.
    End,
    /// The input ended inside the frame that starts at `at` (a process killed while writing): `got` of its
    /// bytes were there.
    Truncated { at: u64, got: u64 },
    /// The frame at `at` cannot be read: a head past the limits, or the input failed.
    Error { at: u64, message: String },
}

impl<R: Read> FrameReader<R> {
    /// Reads the preamble; an error when the input is not a binary trace of this build's version.
    pub fn new(mut input: R) -> Result<FrameReader<R>, String> {
        let mut preamble = [0u8; PREAMBLE_BYTES];
        read_full(&mut input, &mut preamble).map_err(|e| format!("cannot read: {e}"))?;
        check_preamble(&preamble)?;
        Ok(FrameReader { input, body: Vec::new(), offset: PREAMBLE_BYTES as u64 })
    }

    /// The next frame.
    pub fn next_frame(&mut self) -> FrameOutcome {
        let at = self.offset;
        let mut head = [0u8; FRAME_HEAD_BYTES];
        let got = match read_full(&mut self.input, &mut head) {
            Ok(got) => got,
            Err(e) => return FrameOutcome::Error { at, message: format!("cannot read: {e}") },
        };
        if got == 0 {
            return FrameOutcome::End;
        }
        if got < FRAME_HEAD_BYTES {
            return FrameOutcome::Truncated { at, got: got as u64 };
        }
        let head = match frame_head(&head) {
            Ok(head) => head,
            Err(e) => return FrameOutcome::Error { at: at + e.at as u64, message: e.message },
        };
        let len = head.len as usize;
        let got = if len <= SMALL_FRAME_BYTES {
            // Nearly every frame: read in one piece into room made for it.
            self.body.resize(len, 0);
            let got = read_full(&mut self.input, &mut self.body);
            if let Ok(got) = got {
                self.body.truncate(got);
            }
            got
        } else {
            // The room grows with what the input holds, not with what the head claims (bounded by frame_head).
            self.body.clear();
            (&mut self.input).take(u64::from(head.len)).read_to_end(&mut self.body)
        };
        match got {
            Ok(n) if n == len => {}
            Ok(n) => return FrameOutcome::Truncated { at, got: (FRAME_HEAD_BYTES + n) as u64 },
            Err(e) => return FrameOutcome::Error { at, message: format!("cannot read: {e}") },
        }
        self.offset = at + (FRAME_HEAD_BYTES as u64) + u64::from(head.len);
        FrameOutcome::Frame { at, head }
    }

    /// The body of the frame read last.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// Fills `buf` unless the input ends first; how many bytes it got.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// One item of a `reads` or `writes` list as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessValue {
    pub address: u64,
    pub len: u64,
    /// A strided view's element size and `[size, stride]` per dimension.
    pub view: Option<(u64, Vec<(u64, u64)>)>,
}

/// One field's value as read. Lists borrow the frame's bytes, checked whole when the field was read, and
/// decode item by item as they are iterated: reading a record allocates nothing but a view's dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Unsigned(u64),
    Signed(i64),
    Bool(bool),
    /// A string's index in the table.
    Text(u32),
    Range(u64, u64),
    Accesses(AccessList<'a>),
    Pointers(PointerList<'a>),
    Unsigneds(UnsignedList<'a>),
}

/// Little-endian integers from bytes already checked to hold them (a short read gives zero, never a panic).
fn le_u64(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()).map_or(0, u64::from_le_bytes)
}

/// A `reads` or `writes` list: its items' bytes (address, length, view dimensions, then the view).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AccessList<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> AccessList<'a> {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> AccessItems<'a> {
        AccessItems { bytes: self.bytes, at: 0, left: self.count }
    }
}

/// The items of an [`AccessList`].
#[derive(Clone, Debug)]
pub struct AccessItems<'a> {
    bytes: &'a [u8],
    at: usize,
    left: usize,
}

impl Iterator for AccessItems<'_> {
    type Item = AccessValue;

    fn next(&mut self) -> Option<AccessValue> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (address, len) = (le_u64(self.bytes, self.at), le_u64(self.bytes, self.at + 8));
        let dims = self.bytes.get(self.at + 16).copied().unwrap_or(0) as usize;
        self.at += 17;
        let view = (dims > 0).then(|| {
            let element = le_u64(self.bytes, self.at);
            let sizes = (0..dims)
                .map(|d| (le_u64(self.bytes, self.at + 8 + 16 * d), le_u64(self.bytes, self.at + 16 + 16 * d)));
            let sizes = sizes.collect();
            self.at += 8 + 16 * dims;
            (element, sizes)
        });
        Some(AccessValue { address, len, view })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for AccessItems<'_> {}

/// A `pointers` list: 9 bytes an item (the address, then 0 for a read, 1 for a write).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PointerList<'a> {
    bytes: &'a [u8],
}

impl<'a> PointerList<'a> {
    pub fn len(&self) -> usize {
        self.bytes.len() / 9
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u64, AccessFlag)> + 'a {
        self.bytes.chunks_exact(9).map(|item| {
            let flag = if item[8] == 0 { AccessFlag::Read } else { AccessFlag::Write };
            (le_u64(item, 0), flag)
        })
    }
}

/// A list of numbers or addresses: 8 bytes each.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct UnsignedList<'a> {
    bytes: &'a [u8],
}

impl<'a> UnsignedList<'a> {
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        self.bytes.chunks_exact(8).map(|item| le_u64(item, 0))
    }
}

/// The fields of one record frame's body, in layout order.
#[derive(Debug)]
pub struct Fields<'a> {
    layout: &'static [Field],
    mask: u32,
    next: usize,
    body: &'a [u8],
    pos: usize,
}

/// Starts reading the body of a record frame of `kind`: its presence mask first.
pub fn fields(kind: RecordKind, body: &[u8]) -> Result<Fields<'_>, DecodeError> {
    let layout = layout(kind);
    let Some(mask) = body.get(..4) else {
        return Err(DecodeError { at: 0, field: None, message: "a record without its presence mask".into() });
    };
    let mask = u32::from_le_bytes([mask[0], mask[1], mask[2], mask[3]]);
    if layout.len() < 32 && mask >> layout.len() != 0 {
        return Err(DecodeError {
            at: 0,
            field: None,
            message: format!("presence mask {mask:#x} names fields past the {} of a {kind} record", layout.len()),
        });
    }
    Ok(Fields { layout, mask, next: 0, body, pos: 4 })
}

impl<'a> Fields<'a> {
    fn take(&mut self, field: Field, n: usize) -> Result<&'a [u8], DecodeError> {
        let body: &'a [u8] = self.body;
        let end = self.pos.checked_add(n).filter(|&end| end <= body.len());
        let Some(end) = end else {
            return Err(self.error(field, format!("needs {n} bytes, the record has {} left", body.len() - self.pos)));
        };
        let bytes = &body[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn error(&self, field: Field, message: String) -> DecodeError {
        DecodeError { at: self.pos, field: Some(field), message }
    }

    #[inline]
    fn u64(&mut self, field: Field) -> Result<u64, DecodeError> {
        let b = self.take(field, 8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    #[inline]
    fn u32(&mut self, field: Field) -> Result<u32, DecodeError> {
        let b = self.take(field, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    fn u8(&mut self, field: Field) -> Result<u8, DecodeError> {
        Ok(self.take(field, 1)?[0])
    }

    /// A list's count, checked against the bytes left at `item_bytes` (its smallest item) each.
    fn count(&mut self, field: Field, item_bytes: usize) -> Result<usize, DecodeError> {
        let count = self.u32(field)? as usize;
        let left = self.body.len() - self.pos;
        if count.saturating_mul(item_bytes) > left {
            return Err(self.error(field, format!("a list of {count} items in the {left} bytes left")));
        }
        Ok(count)
    }

    #[inline]
    fn value(&mut self, field: Field) -> Result<Value<'a>, DecodeError> {
        Ok(match value_type(field) {
            ValueType::Unsigned | ValueType::Address => Value::Unsigned(self.u64(field)?),
            ValueType::Signed => Value::Signed(self.u64(field)? as i64),
            ValueType::Bool => match self.u8(field)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => return Err(self.error(field, format!("a boolean of {other}"))),
            },
            ValueType::Text => Value::Text(self.u32(field)?),
            ValueType::Range => Value::Range(self.u64(field)?, self.u64(field)?),
            ValueType::Pointers => {
                let count = self.count(field, 9)?;
                let start = self.pos;
                for _ in 0..count {
                    self.u64(field)?;
                    match self.u8(field)? {
                        0 | 1 => {}
                        other => return Err(self.error(field, format!("a pointer access of {other}"))),
                    }
                }
                Value::Pointers(PointerList { bytes: &self.body[start..self.pos] })
            }
            ValueType::Unsigneds | ValueType::Addresses => {
                let count = self.count(field, 8)?;
                Value::Unsigneds(UnsignedList { bytes: self.take(field, 8 * count)? })
            }
            ValueType::Accesses => {
                let count = self.count(field, 17)?;
                let start = self.pos;
                // Checked value by value, as the items will be read: an error names the byte where it went wrong.
                for _ in 0..count {
                    let (_address, _len) = (self.u64(field)?, self.u64(field)?);
                    let dims = self.u8(field)? as usize;
                    if dims > access_range::MAX_VIEW_DIMS {
                        let most = access_range::MAX_VIEW_DIMS;
                        return Err(self.error(field, format!("a view of {dims} dimensions (at most {most})")));
                    }
                    if dims > 0 {
                        let _element = self.u64(field)?;
                        for _ in 0..dims {
                            let (_size, _stride) = (self.u64(field)?, self.u64(field)?);
                        }
                    }
                }
                Value::Accesses(AccessList { bytes: &self.body[start..self.pos], count })
            }
            ValueType::JsonOnly => return Err(self.error(field, "not in any layout".into())),
        })
    }

    /// The next present field and its value; None past the last. After the last, the body must be used up.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<(Field, Value<'a>), DecodeError>> {
        while self.next < self.layout.len() {
            let place = self.next;
            self.next += 1;
            if self.mask & (1 << place) != 0 {
                let field = self.layout[place];
                return Some(self.value(field).map(|value| (field, value)));
            }
        }
        if self.pos != self.body.len() {
            let extra = self.body.len() - self.pos;
            self.pos = self.body.len();
            return Some(Err(DecodeError {
                at: self.body.len() - extra,
                field: None,
                message: format!("{extra} bytes after the record's last field"),
            }));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::write::{AccessItem, BinaryWriter};
    use super::super::{preamble, slot};
    use super::*;
    use crate::ByteRuns;

    /// The frames of `out` after the preamble: (tag, body).
    fn frames(out: &[u8]) -> Vec<(Tag, Vec<u8>)> {
        let mut frames = Vec::new();
        let mut at = 0;
        while at < out.len() {
            let head = frame_head(out[at..at + 8].try_into().unwrap()).unwrap();
            frames.push((head.tag, out[at + 8..at + 8 + head.len as usize].to_vec()));
            at += 8 + head.len as usize;
        }
        frames
    }

    /// A value as read, its list decoded.
    #[derive(Debug, PartialEq, Eq)]
    enum Owned {
        Unsigned(u64),
        Signed(i64),
        Bool(bool),
        Text(u32),
        Range(u64, u64),
        Accesses(Vec<AccessValue>),
        Pointers(Vec<(u64, AccessFlag)>),
        Unsigneds(Vec<u64>),
    }

    fn owned(value: Value) -> Owned {
        match value {
            Value::Unsigned(v) => Owned::Unsigned(v),
            Value::Signed(v) => Owned::Signed(v),
            Value::Bool(v) => Owned::Bool(v),
            Value::Text(v) => Owned::Text(v),
            Value::Range(a, s) => Owned::Range(a, s),
            Value::Accesses(items) => {
                assert_eq!(items.iter().len(), items.len());
                Owned::Accesses(items.iter().collect())
            }
            Value::Pointers(items) => Owned::Pointers(items.iter().collect()),
            Value::Unsigneds(items) => Owned::Unsigneds(items.iter().collect()),
        }
    }

    fn all_fields(kind: RecordKind, body: &[u8]) -> Vec<(Field, Owned)> {
        let mut fields = fields(kind, body).unwrap();
        let mut out = Vec::new();
        while let Some(item) = fields.next() {
            let (field, value) = item.unwrap();
            out.push((field, owned(value)));
        }
        out
    }

    #[test]
    fn a_kernel_launch_reads_back_field_by_field_in_layout_order() {
        let mut writer = BinaryWriter::new();
        let mut out = Vec::new();
        let mut record = writer.begin(&mut out, RecordKind::Kernel);
        record
            .string(Field::Name, "k<\"x\">")
            .unsigned(Field::Stream, 7)
            .pointers(Field::Pointers, [(0x10, AccessFlag::Read), (0x20, AccessFlag::Write)])
            .unsigned(Field::Thread, 3)
            .string(Field::Api, "cuLaunchKernel");
        record.end().unwrap();
        let written = frames(&out);
        assert_eq!(written[0], (Tag::String, b"k<\"x\">".to_vec()), "strings are declared before the record");
        assert_eq!(written[1], (Tag::String, b"cuLaunchKernel".to_vec()));
        assert_eq!(written[2].0, Tag::Record(RecordKind::Kernel));
        let body = &written[2].1;
        // mask, thread, api, stream, name, 2 pointers
        assert_eq!(body.len(), 4 + 8 + 4 + 8 + 4 + 4 + 2 * 9);
        assert_eq!(
            all_fields(RecordKind::Kernel, body),
            vec![
                (Field::Thread, Owned::Unsigned(3)),
                (Field::Api, Owned::Text(1)),
                (Field::Stream, Owned::Unsigned(7)),
                (Field::Name, Owned::Text(0)),
                (Field::Pointers, Owned::Pointers(vec![(0x10, AccessFlag::Read), (0x20, AccessFlag::Write)])),
            ]
        );
        // A second launch of the same kernel declares nothing.
        let before = out.len();
        let mut record = writer.begin(&mut out, RecordKind::Kernel);
        record.string(Field::Name, "k<\"x\">").unsigned(Field::Stream, 7);
        record.end().unwrap();
        assert_eq!(frames(&out[before..]).len(), 1);
    }

    #[test]
    fn every_value_type_reads_back() {
        let mut writer = BinaryWriter::new();
        let mut out = Vec::new();
        let dims = [(4u64, 2u64), (3, 1)];
        let mut record = writer.begin(&mut out, RecordKind::Memcpy);
        record.range(Field::From, 0x1000, 64).boolean(Field::Sync, true).unsigned(Field::Bytes, 64);
        record.end().unwrap();
        let mut record = writer.begin(&mut out, RecordKind::Stream);
        record.signed(Field::Priority, -2).unsigned(Field::Id, 5);
        record.end().unwrap();
        let mut record = writer.begin(&mut out, RecordKind::OpEnd);
        record.accesses(
            Field::Reads,
            [AccessItem { address: 1, len: 2, view: None }, AccessItem { address: 8, len: 40, view: Some((4, &dims)) }],
        );
        record.runs(Field::Writes, [ByteRuns { first: 0x2000, len: 32, step: 64, count: 4 }]);
        record.end().unwrap();
        let mut record = writer.begin(&mut out, RecordKind::Callsite);
        record.addresses(Field::Frames, [0x401000, 0x402000]).unsigned(Field::Id, 1);
        record.end().unwrap();
        let mut record = writer.begin(&mut out, RecordKind::GraphDepAdd);
        record.numbers(Field::Deps, [1, 2, 3]);
        record.end().unwrap();
        let frames = frames(&out);
        let kinds = [RecordKind::Memcpy, RecordKind::Stream, RecordKind::OpEnd, RecordKind::Callsite];
        let read: Vec<Vec<(Field, Owned)>> = frames
            .iter()
            .zip(kinds.iter().chain([&RecordKind::GraphDepAdd]))
            .map(|((_, b), k)| all_fields(*k, b))
            .collect();
        assert_eq!(
            read[0],
            vec![
                (Field::From, Owned::Range(0x1000, 64)),
                (Field::Bytes, Owned::Unsigned(64)),
                (Field::Sync, Owned::Bool(true))
            ]
        );
        assert_eq!(read[1], vec![(Field::Id, Owned::Unsigned(5)), (Field::Priority, Owned::Signed(-2))]);
        let view = AccessValue { address: 8, len: 40, view: Some((4, dims.to_vec())) };
        let runs = AccessValue { address: 0x2000, len: 224, view: Some((32, vec![(4, 2), (1, 1)])) };
        assert_eq!(
            read[2],
            vec![
                (Field::Reads, Owned::Accesses(vec![AccessValue { address: 1, len: 2, view: None }, view])),
                (Field::Writes, Owned::Accesses(vec![runs])),
            ]
        );
        assert_eq!(
            read[3],
            vec![(Field::Id, Owned::Unsigned(1)), (Field::Frames, Owned::Unsigneds(vec![0x401000, 0x402000]))]
        );
        assert_eq!(read[4], vec![(Field::Deps, Owned::Unsigneds(vec![1, 2, 3]))]);
    }

    #[test]
    fn a_field_the_layout_does_not_hold_refuses_the_record() {
        let mut writer = BinaryWriter::new();
        let mut out = Vec::new();
        let mut record = writer.begin(&mut out, RecordKind::Memcpy);
        record.unsigned(Field::Stream, 1).accesses(Field::Reads, []);
        assert_eq!(record.end(), Err(super::super::write::Unencodable(Field::Reads)));
        assert!(out.is_empty());
        let mut record = writer.begin(&mut out, RecordKind::Kernel);
        record.boolean(Field::Stream, true);
        assert!(record.end().is_err(), "a value of another shape");
    }

    #[test]
    fn hostile_bodies_are_refused_with_their_byte_and_field() {
        assert!(frame_head(&[21, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).unwrap_err().message.contains("MiB"));
        assert!(frame_head(&[21, 0, 1, 0, 0, 0, 0, 0]).is_err());
        assert!(fields(RecordKind::Kernel, &[1, 0]).is_err(), "no mask");
        assert!(fields(RecordKind::Event, &[0xff, 0xff, 0xff, 0xff]).unwrap_err().message.contains("past"));
        // A pointer list that claims four billion items in a few bytes.
        let pointers = slot(RecordKind::Kernel, Field::Pointers).unwrap();
        let mut body = (1u32 << pointers).to_le_bytes().to_vec();
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        body.extend_from_slice(&[0; 9]);
        let error = fields(RecordKind::Kernel, &body).unwrap().next().unwrap().unwrap_err();
        assert_eq!(error.field, Some(Field::Pointers));
        assert!(error.message.contains("4294967295 items"), "{error}");
        // A value cut short, and bytes after the last field.
        let stream = slot(RecordKind::Kernel, Field::Stream).unwrap();
        let mut body = (1u32 << stream).to_le_bytes().to_vec();
        body.extend_from_slice(&[1, 2, 3]);
        let error = fields(RecordKind::Kernel, &body).unwrap().next().unwrap().unwrap_err();
        assert_eq!((error.field, error.at), (Some(Field::Stream), 4));
        let mut body = 0u32.to_le_bytes().to_vec();
        body.push(0);
        assert!(fields(RecordKind::Kernel, &body).unwrap().next().unwrap().is_err());
        // A view of too many dimensions.
        let reads = slot(RecordKind::OpEnd, Field::Reads).unwrap();
        let mut body = (1u32 << reads).to_le_bytes().to_vec();
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&[0; 16]);
        body.push(200);
        body.extend_from_slice(&[0; 64]);
        assert!(fields(RecordKind::OpEnd, &body).unwrap().next().unwrap().unwrap_err().message.contains("200"));
    }

    #[test]
    fn the_preamble_names_the_encoding_and_its_version() {
        let bytes = preamble();
        assert!(is_binary(&bytes));
        assert_eq!(check_preamble(&bytes), Ok(()));
        let mut newer = bytes;
        newer[8] = 9;
        assert!(check_preamble(&newer).unwrap_err().contains("version 9"));
        assert!(check_preamble(b"{\"type\":\"streamtrace\"}").is_err());
    }
}
