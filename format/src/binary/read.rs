//! Reading the binary encoding: a frame's head, and the field values of a record frame in its kind's layout.
//! Every length is checked against what is left before anything is read or allocated for it, so that a
//! hostile file is refused with the byte and the field where it went wrong, never a panic or a huge
//! allocation.

use std::fmt;
use std::io::Read;

use super::{layout, value_type, Tag, ValueType, FRAME_HEAD_BYTES, MAGIC, MAX_FRAME_BYTES, MAX_LINE, PREAMBLE_BYTES};
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

/// The line a line frame's body names, or why it names none: 8 bytes, a line in 1..=[`MAX_LINE`].
pub fn line_frame(body: &[u8]) -> Result<u64, String> {
    match <[u8; 8]>::try_from(body).map(u64::from_le_bytes) {
        Ok(line @ 1..=MAX_LINE) => Ok(line),
        Ok(line) => Err(format!("a line frame naming line {line}, outside 1..={MAX_LINE}")),
        Err(_) => Err(format!("a line frame of {} bytes (8 expected)", body.len())),
    }
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
// Always inlined: it is called once per frame from a reader's large loop, whose inlining budget it missed.
#[inline(always)]
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

/// Where frames are read from: bytes that are already in memory (a mapped file, a buffer), or an input read
/// in large pieces into a buffer that frames are then taken from in place ([`Buffered`]). Either way a frame's
/// body is a slice of what the input holds: no copy per frame.
pub trait FrameInput {
    /// Makes at least `n` bytes from the current position available in [`FrameInput::window`], or all that is
    /// left when the input ends first; how many are available.
    fn fill(&mut self, n: usize) -> std::io::Result<usize>;
    /// The bytes available from the current position.
    fn window(&self) -> &[u8];
    /// Moves the current position `n` bytes on (at most the window's length).
    fn consume(&mut self, n: usize);
}

/// Bytes already in memory: the whole input.
impl FrameInput for &[u8] {
    fn fill(&mut self, _n: usize) -> std::io::Result<usize> {
        Ok(self.len())
    }

    fn window(&self) -> &[u8] {
        self
    }

    fn consume(&mut self, n: usize) {
        *self = &self[n.min(self.len())..];
    }
}

/// What [`Buffered`] reads at a time.
const READ_BYTES: usize = 1 << 20;

/// An input read [`READ_BYTES`] at a time into one buffer. The buffer grows for a frame longer than it only as
/// the input delivers that frame's bytes, never at once to what a frame head claims.
pub struct Buffered<R> {
    input: R,
    buf: Vec<u8>,
    /// The current position, and the end of what was read, in `buf`.
    pos: usize,
    end: usize,
}

impl<R: Read> Buffered<R> {
    pub fn new(input: R) -> Buffered<R> {
        Buffered { input, buf: Vec::new(), pos: 0, end: 0 }
    }
}

impl<R: Read> Buffered<R> {
    /// [`FrameInput::fill`] when the window holds fewer than `n` bytes: reads more.
    #[inline(never)]
    fn read_more(&mut self, n: usize) -> std::io::Result<usize> {
        while self.end - self.pos < n {
            if self.pos > 0 {
                // What is left of the last piece goes to the front, so the buffer stays one piece long.
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.pos = 0;
            }
            if self.end == self.buf.len() {
                // Zeroed by the allocator, not by a loop of stores (`resize`, a loop in unoptimized builds: 5 ms a
                // trace in the debug test run); what was read so far copied over.
                let mut grown = vec![0; (self.buf.len() * 2).max(READ_BYTES)];
                grown[..self.end].copy_from_slice(&self.buf[..self.end]);
                self.buf = grown;
            }
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => break,
                Ok(got) => self.end += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.pos)
    }
}

impl<R: Read> FrameInput for Buffered<R> {
    // Inlined: nearly every frame is in the window already (a read brings a megabyte of them).
    #[inline]
    fn fill(&mut self, n: usize) -> std::io::Result<usize> {
        let held = self.end - self.pos;
        if held >= n {
            return Ok(held);
        }
        self.read_more(n)
    }

    #[inline]
    fn window(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        self.pos += n.min(self.end - self.pos);
    }
}

/// Reads the frames of a binary trace one at a time from its input.
pub struct FrameReader<I> {
    input: I,
    /// The length of the frame read last (head and body), still in the input's window: its body is read in
    /// place until the next frame is asked for.
    last: usize,
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

impl<R: Read> FrameReader<Buffered<R>> {
    /// Reads the preamble from `input` (a file, a pipe, a socket); an error when it is not a binary trace of
    /// this build's version.
    pub fn new(input: R) -> Result<FrameReader<Buffered<R>>, String> {
        FrameReader::from_input(Buffered::new(input))
    }
}

impl<I: FrameInput> FrameReader<I> {
    /// [`FrameReader::new`] for any [`FrameInput`] (a slice: a trace already in memory, a mapped file).
    pub fn from_input(mut input: I) -> Result<FrameReader<I>, String> {
        let got = input.fill(PREAMBLE_BYTES).map_err(|e| format!("cannot read: {e}"))?;
        check_preamble(&input.window()[..got.min(PREAMBLE_BYTES)])?;
        input.consume(PREAMBLE_BYTES);
        Ok(FrameReader { input, last: 0, offset: PREAMBLE_BYTES as u64 })
    }

    /// The next frame.
    #[inline]
    pub fn next_frame(&mut self) -> FrameOutcome {
        self.input.consume(std::mem::take(&mut self.last));
        let at = self.offset;
        // Nearly every frame is whole in the window already: its head read once, no filling asked for.
        let window = self.input.window();
        if let Some(Ok(head)) = window.first_chunk::<FRAME_HEAD_BYTES>().map(frame_head) {
            let len = FRAME_HEAD_BYTES + head.len as usize;
            if window.len() >= len {
                self.last = len;
                self.offset = at + len as u64;
                return FrameOutcome::Frame { at, head };
            }
        }
        self.fill_frame(at)
    }

    /// [`FrameReader::next_frame`] of a frame at byte `at` that is not whole in the window (or not a frame).
    #[inline(never)]
    fn fill_frame(&mut self, at: u64) -> FrameOutcome {
        let got = match self.input.fill(FRAME_HEAD_BYTES) {
            Ok(got) => got,
            Err(e) => return FrameOutcome::Error { at, message: format!("cannot read: {e}") },
        };
        if got == 0 {
            return FrameOutcome::End;
        }
        if got < FRAME_HEAD_BYTES {
            return FrameOutcome::Truncated { at, got: got as u64 };
        }
        let head = self.input.window()[..FRAME_HEAD_BYTES].try_into().map(frame_head);
        let head = match head {
            Ok(Ok(head)) => head,
            Ok(Err(e)) => return FrameOutcome::Error { at: at + e.at as u64, message: e.message },
            Err(_) => return FrameOutcome::Truncated { at, got: got as u64 },
        };
        let len = FRAME_HEAD_BYTES + head.len as usize;
        match self.input.fill(len) {
            Ok(got) if got >= len => {}
            Ok(got) => return FrameOutcome::Truncated { at, got: got as u64 },
            Err(e) => return FrameOutcome::Error { at, message: format!("cannot read: {e}") },
        }
        self.last = len;
        self.offset = at + len as u64;
        FrameOutcome::Frame { at, head }
    }

    /// The body of the frame read last.
    pub fn body(&self) -> &[u8] {
        self.input.window().get(FRAME_HEAD_BYTES..self.last).unwrap_or_default()
    }
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
#[inline]
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
        AccessItems { refs: self.refs(), left: self.count }
    }

    /// The items as they lie in the frame, a view's dimensions unread: what [`AccessList::iter`] gives, without
    /// allocating for a view.
    pub fn refs(&self) -> AccessRefs<'a> {
        AccessRefs { bytes: self.bytes }
    }
}

/// One item of an [`AccessList`] in the frame's bytes: its range, and its strided view still in those bytes.
#[derive(Copy, Clone, Debug)]
pub struct AccessRef<'a> {
    pub address: u64,
    pub len: u64,
    /// The view's element size and `[size, stride]` pairs; empty for a plain range.
    view: &'a [u8],
}

impl<'a> AccessRef<'a> {
    /// A strided view's element size and `[size, stride]` per dimension; None for a plain range.
    #[inline]
    pub fn view(&self) -> Option<(u64, impl ExactSizeIterator<Item = (u64, u64)> + 'a)> {
        let (element, dims) = self.view.split_first_chunk::<8>()?;
        let dims = dims.chunks_exact(16).map(|dim| (le_u64(dim, 0), le_u64(dim, 8)));
        Some((u64::from_le_bytes(*element), dims))
    }
}

/// The items of an [`AccessList`] as [`AccessRef`]s.
#[derive(Clone, Debug)]
pub struct AccessRefs<'a> {
    /// The items not read yet (checked whole by [`Fields::accesses`]: they end at the end of these bytes).
    bytes: &'a [u8],
}

impl<'a> Iterator for AccessRefs<'a> {
    type Item = AccessRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<AccessRef<'a>> {
        let (head, rest) = self.bytes.split_first_chunk::<17>()?;
        let address = u64::from_le_bytes([head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7]]);
        let len = u64::from_le_bytes([head[8], head[9], head[10], head[11], head[12], head[13], head[14], head[15]]);
        let view_bytes = match head[16] {
            0 => 0,
            dims => 8 + 16 * dims as usize,
        };
        // The list was checked to hold each item whole; a short one (never) ends it.
        let Some((view, rest)) = rest.split_at_checked(view_bytes) else {
            self.bytes = &[];
            return None;
        };
        self.bytes = rest;
        Some(AccessRef { address, len, view })
    }
}

/// The items of an [`AccessList`].
#[derive(Clone, Debug)]
pub struct AccessItems<'a> {
    refs: AccessRefs<'a>,
    left: usize,
}

impl Iterator for AccessItems<'_> {
    type Item = AccessValue;

    fn next(&mut self) -> Option<AccessValue> {
        let item = self.refs.next()?;
        self.left = self.left.saturating_sub(1);
        let view = item.view().map(|(element, dims)| (element, dims.collect()));
        Some(AccessValue { address: item.address, len: item.len, view })
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

/// The fields of one record frame's body, in layout order. (Its errors are made from copies of its state, not
/// through a reference to it, so that the error paths of a reader's loop over the fields take none: 0.6% fewer
/// instructions on the analyzer's binary reader.)
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    layout: &'static [Field],
    /// The presence mask's bits of the fields not read yet.
    left: u32,
    body: &'a [u8],
    pos: usize,
}

/// Starts reading the body of a record frame of `kind`: its presence mask first.
// Always inlined, as `frame_head`.
#[inline(always)]
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
    Ok(Fields { layout, left: mask, body, pos: 4 })
}

impl<'a> Fields<'a> {
    #[inline]
    fn take(&mut self, field: Field, n: usize) -> Result<&'a [u8], DecodeError> {
        let body: &'a [u8] = self.body;
        match body.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(short(self.pos, self.body.len() - self.pos, field, n)),
        }
    }

    #[inline]
    fn u64(&mut self, field: Field) -> Result<u64, DecodeError> {
        let b = self.take(field, 8)?;
        Ok(<[u8; 8]>::try_from(b).map_or(0, u64::from_le_bytes))
    }

    #[inline]
    fn u32(&mut self, field: Field) -> Result<u32, DecodeError> {
        let b = self.take(field, 4)?;
        Ok(<[u8; 4]>::try_from(b).map_or(0, u32::from_le_bytes))
    }

    #[inline]
    fn u8(&mut self, field: Field) -> Result<u8, DecodeError> {
        Ok(self.take(field, 1)?.first().copied().unwrap_or(0))
    }

    /// A list's count, checked against the bytes left at `item_bytes` (its smallest item) each.
    #[inline]
    fn count(&mut self, field: Field, item_bytes: usize) -> Result<usize, DecodeError> {
        let count = self.u32(field)? as usize;
        let left = self.body.len() - self.pos;
        if count.saturating_mul(item_bytes) > left {
            return Err(error_at(self.pos, field, format!("a list of {count} items in the {left} bytes left")));
        }
        Ok(count)
    }

    /// The value of `field` (the field [`Fields::next_field`] gave), of its type. A record reader that knows the
    /// field's type may read it with that type's reader ([`Fields::unsigned`] and the others) instead: the same
    /// reading.
    #[inline]
    pub fn value(&mut self, field: Field) -> Result<Value<'a>, DecodeError> {
        Ok(match value_type(field) {
            ValueType::Unsigned | ValueType::Address => Value::Unsigned(self.unsigned(field)?),
            ValueType::Signed => Value::Signed(self.u64(field)? as i64),
            ValueType::Bool => Value::Bool(self.boolean(field)?),
            ValueType::Text => Value::Text(self.text(field)?),
            ValueType::Range => {
                let (address, size) = self.range(field)?;
                Value::Range(address, size)
            }
            ValueType::Pointers => Value::Pointers(self.pointers(field)?),
            ValueType::Unsigneds | ValueType::Addresses => {
                let count = self.count(field, 8)?;
                Value::Unsigneds(UnsignedList { bytes: self.take(field, 8 * count)? })
            }
            ValueType::Accesses => Value::Accesses(self.accesses(field)?),
            ValueType::JsonOnly => return Err(error_at(self.pos, field, "not in any layout".into())),
        })
    }

    /// The value of an unsigned or address field.
    #[inline]
    pub fn unsigned(&mut self, field: Field) -> Result<u64, DecodeError> {
        self.u64(field)
    }

    /// The value of a boolean field: a byte, 0 or 1.
    #[inline]
    pub fn boolean(&mut self, field: Field) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(error_at(self.pos, field, format!("a boolean of {other}"))),
        }
    }

    /// The value of a text field: the index of a declared string.
    #[inline]
    pub fn text(&mut self, field: Field) -> Result<u32, DecodeError> {
        self.u32(field)
    }

    /// The value of a range field: address and size.
    #[inline]
    pub fn range(&mut self, field: Field) -> Result<(u64, u64), DecodeError> {
        Ok((self.u64(field)?, self.u64(field)?))
    }

    /// The value of a `pointers` field.
    #[inline]
    pub fn pointers(&mut self, field: Field) -> Result<PointerList<'a>, DecodeError> {
        let count = self.count(field, 9)?;
        // `count` checked that the items are there.
        let bytes = self.take(field, 9 * count)?;
        if let Some(bad) = bytes.chunks_exact(9).position(|item| item[8] > 1) {
            // Named after the access byte, as a reading item by item would stop.
            self.pos -= bytes.len() - 9 * (bad + 1);
            return Err(error_at(self.pos, field, format!("a pointer access of {}", bytes[9 * bad + 8])));
        }
        Ok(PointerList { bytes })
    }

    /// The value of a `reads` or `writes` field.
    // Always inlined into a record reader's loop over the fields (plain `inline` was not taken): with `layout`
    // inlined too, 5% fewer instructions on the analyzer's binary reader.
    #[inline(always)]
    pub fn accesses(&mut self, field: Field) -> Result<AccessList<'a>, DecodeError> {
        let count = self.count(field, 17)?;
        let (body, start) = (self.body, self.pos);
        // Each item's length from its dimensions: plain ranges are nearly all.
        let mut at = start;
        for _ in 0..count {
            match body.get(at + 16).map(|&dims| dims as usize) {
                Some(0) => at += 17,
                Some(dims) if dims <= access_range::MAX_VIEW_DIMS => at += 17 + 8 + 16 * dims,
                _ => return Err(self.clone().access_error(field, count)),
            }
        }
        if at > body.len() {
            return Err(self.clone().access_error(field, count));
        }
        self.pos = at;
        Ok(AccessList { bytes: &body[start..at], count })
    }

    /// What is wrong with the items of an access list that starts here: read value by value, as the items would
    /// be, so that the error names the byte where it went wrong.
    #[cold]
    #[inline(never)]
    fn access_error(mut self, field: Field, count: usize) -> DecodeError {
        let mut walk = || -> Result<(), DecodeError> {
            for _ in 0..count {
                let (_address, _len) = (self.u64(field)?, self.u64(field)?);
                let dims = self.u8(field)? as usize;
                if dims > access_range::MAX_VIEW_DIMS {
                    let most = access_range::MAX_VIEW_DIMS;
                    return Err(error_at(self.pos, field, format!("a view of {dims} dimensions (at most {most})")));
                }
                if dims > 0 {
                    let _element = self.u64(field)?;
                    for _ in 0..dims {
                        let (_size, _stride) = (self.u64(field)?, self.u64(field)?);
                    }
                }
            }
            Ok(())
        };
        walk().err().unwrap_or_else(|| error_at(self.pos, field, "an access list past the record's end".into()))
    }

    /// The next present field, whose value is to be read next; None past the last. After the last, the body
    /// must be used up.
    #[inline]
    pub fn next_field(&mut self) -> Result<Option<Field>, DecodeError> {
        // The present fields left, lowest place first (`fields` checked that each has a place in the layout).
        if let Some(&field) = self.layout.get(self.left.trailing_zeros() as usize) {
            self.left &= self.left - 1;
            return Ok(Some(field));
        }
        if self.pos != self.body.len() {
            let error = trailing(self.pos, self.body.len());
            self.pos = self.body.len();
            return Err(error);
        }
        Ok(None)
    }

    /// The next present field and its value; None past the last. After the last, the body must be used up.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Option<Result<(Field, Value<'a>), DecodeError>> {
        match self.next_field() {
            Ok(Some(field)) => Some(self.value(field).map(|value| (field, value))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// A value of `field` at byte `at` that needs `n` bytes where `left` are.
#[cold]
#[inline(never)]
fn short(at: usize, left: usize, field: Field, n: usize) -> DecodeError {
    error_at(at, field, format!("needs {n} bytes, the record has {left} left"))
}

/// What is wrong with the value of `field` at byte `at`.
#[cold]
#[inline(never)]
fn error_at(at: usize, field: Field, message: String) -> DecodeError {
    DecodeError { at, field: Some(field), message }
}

/// The bytes after a record's last field, `at` of its `len`.
#[cold]
#[inline(never)]
fn trailing(at: usize, len: usize) -> DecodeError {
    DecodeError { at, field: None, message: format!("{} bytes after the record's last field", len - at) }
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

    /// An input that gives at most `step` bytes a read, as a pipe may.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// (at, tag, body) of every frame, and how the frames ended.
    fn read_all<I: FrameInput>(mut frames: FrameReader<I>) -> (Vec<(u64, Tag, Vec<u8>)>, String) {
        let mut read = Vec::new();
        loop {
            match frames.next_frame() {
                FrameOutcome::Frame { at, head } => read.push((at, head.tag, frames.body().to_vec())),
                other => return (read, format!("{other:?}")),
            }
        }
    }

    #[test]
    fn frames_read_alike_from_memory_from_a_trickle_and_across_the_buffer_cut_short_anywhere() {
        let mut writer = BinaryWriter::new();
        let mut out = preamble().to_vec();
        for i in 0..2000u64 {
            let mut record = writer.begin(&mut out, RecordKind::Kernel);
            record.unsigned(Field::Stream, i).string(Field::Name, &format!("k{}", i % 7));
            record.end().unwrap();
        }
        // A frame longer than the buffer's first piece, which the buffer grows for.
        let long = "x".repeat(READ_BYTES + 5);
        writer.string_index(&mut out, &long);
        let whole = read_all(FrameReader::from_input(&out[..]).unwrap());
        assert_eq!(whole.1, "End");
        assert_eq!(whole.0.len(), 2000 + 7 + 1);
        assert_eq!(whole.0.last().unwrap().2.len(), long.len());
        for step in [1, 7, 4096, 1 << 22] {
            let trickle = read_all(FrameReader::new(Trickle { bytes: &out, step }).unwrap());
            assert_eq!(trickle, whole, "{step} bytes a read");
        }
        // Cut anywhere: the frames before the cut, then the frame it cuts, with the bytes of it there were.
        for cut in [PREAMBLE_BYTES, PREAMBLE_BYTES + 3, PREAMBLE_BYTES + 8, 5000, out.len() - 1] {
            let from_memory = read_all(FrameReader::from_input(&out[..cut]).unwrap());
            let from_trickle = read_all(FrameReader::new(Trickle { bytes: &out[..cut], step: 3 }).unwrap());
            assert_eq!(from_memory, from_trickle, "cut at {cut}");
            let last_end =
                from_memory.0.last().map_or(PREAMBLE_BYTES as u64, |(at, _, body)| at + 8 + body.len() as u64);
            let expected = if last_end == cut as u64 {
                "End".to_string()
            } else {
                format!("Truncated {{ at: {last_end}, got: {} }}", cut as u64 - last_end)
            };
            assert_eq!(from_memory.1, expected, "cut at {cut}");
        }
        assert!(FrameReader::from_input(&out[..PREAMBLE_BYTES - 1]).is_err(), "a preamble cut short");
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
