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
        // The room grows with what the input holds, not with what the head claims (bounded by frame_head).
        self.body.clear();
        match (&mut self.input).take(u64::from(head.len)).read_to_end(&mut self.body) {
            Ok(n) if n == head.len as usize => {}
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

/// One field's value as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Unsigned(u64),
    Signed(i64),
    Bool(bool),
    /// A string's index in the table.
    Text(u32),
    Range(u64, u64),
    Accesses(Vec<AccessValue>),
    Pointers(Vec<(u64, AccessFlag)>),
    Unsigneds(Vec<u64>),
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

impl Fields<'_> {
    fn take(&mut self, field: Field, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.body.len());
        let Some(end) = end else {
            return Err(
                self.error(field, format!("needs {n} bytes, the record has {} left", self.body.len() - self.pos))
            );
        };
        let bytes = &self.body[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn error(&self, field: Field, message: String) -> DecodeError {
        DecodeError { at: self.pos, field: Some(field), message }
    }

    fn u64(&mut self, field: Field) -> Result<u64, DecodeError> {
        let b = self.take(field, 8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    fn u32(&mut self, field: Field) -> Result<u32, DecodeError> {
        let b = self.take(field, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

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

    fn value(&mut self, field: Field) -> Result<Value, DecodeError> {
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
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    let address = self.u64(field)?;
                    let flag = match self.u8(field)? {
                        0 => AccessFlag::Read,
                        1 => AccessFlag::Write,
                        other => return Err(self.error(field, format!("a pointer access of {other}"))),
                    };
                    items.push((address, flag));
                }
                Value::Pointers(items)
            }
            ValueType::Unsigneds | ValueType::Addresses => {
                let count = self.count(field, 8)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(self.u64(field)?);
                }
                Value::Unsigneds(items)
            }
            ValueType::Accesses => {
                let count = self.count(field, 17)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    let (address, len) = (self.u64(field)?, self.u64(field)?);
                    let dims = self.u8(field)? as usize;
                    let view = if dims == 0 {
                        None
                    } else {
                        if dims > access_range::MAX_VIEW_DIMS {
                            let most = access_range::MAX_VIEW_DIMS;
                            return Err(self.error(field, format!("a view of {dims} dimensions (at most {most})")));
                        }
                        let element = self.u64(field)?;
                        let mut sizes = Vec::with_capacity(dims);
                        for _ in 0..dims {
                            sizes.push((self.u64(field)?, self.u64(field)?));
                        }
                        Some((element, sizes))
                    };
                    items.push(AccessValue { address, len, view });
                }
                Value::Accesses(items)
            }
            ValueType::JsonOnly => return Err(self.error(field, "not in any layout".into())),
        })
    }

    /// The next present field and its value; None past the last. After the last, the body must be used up.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<(Field, Value), DecodeError>> {
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

    fn all_fields(kind: RecordKind, body: &[u8]) -> Vec<(Field, Value)> {
        let mut fields = fields(kind, body).unwrap();
        let mut out = Vec::new();
        while let Some(item) = fields.next() {
            out.push(item.unwrap());
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
                (Field::Thread, Value::Unsigned(3)),
                (Field::Api, Value::Text(1)),
                (Field::Stream, Value::Unsigned(7)),
                (Field::Name, Value::Text(0)),
                (Field::Pointers, Value::Pointers(vec![(0x10, AccessFlag::Read), (0x20, AccessFlag::Write)])),
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
        let read: Vec<Vec<(Field, Value)>> = frames
            .iter()
            .zip(kinds.iter().chain([&RecordKind::GraphDepAdd]))
            .map(|((_, b), k)| all_fields(*k, b))
            .collect();
        assert_eq!(
            read[0],
            vec![
                (Field::From, Value::Range(0x1000, 64)),
                (Field::Bytes, Value::Unsigned(64)),
                (Field::Sync, Value::Bool(true))
            ]
        );
        assert_eq!(read[1], vec![(Field::Id, Value::Unsigned(5)), (Field::Priority, Value::Signed(-2))]);
        let view = AccessValue { address: 8, len: 40, view: Some((4, dims.to_vec())) };
        let runs = AccessValue { address: 0x2000, len: 224, view: Some((32, vec![(4, 2), (1, 1)])) };
        assert_eq!(
            read[2],
            vec![
                (Field::Reads, Value::Accesses(vec![AccessValue { address: 1, len: 2, view: None }, view])),
                (Field::Writes, Value::Accesses(vec![runs])),
            ]
        );
        assert_eq!(
            read[3],
            vec![(Field::Id, Value::Unsigned(1)), (Field::Frames, Value::Unsigneds(vec![0x401000, 0x402000]))]
        );
        assert_eq!(read[4], vec![(Field::Deps, Value::Unsigneds(vec![1, 2, 3]))]);
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
