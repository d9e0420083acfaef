//! Writing frames of the binary encoding: [`BinaryWriter`] keeps the string table and appends frames to a byte
//! buffer the caller reuses (the capture library's writer thread formats every batch with it).
//!
//! A record's fields may be given in any order (as [`crate::RecordLine`] takes them); each is encoded at once
//! into the writer's scratch room and the record is laid out in its kind's order when it ends. A string is
//! declared into the output the first time a record names it, before that record.

use std::collections::HashMap;

use super::{slot, value_type, Tag, ValueType, FRAME_HEAD_BYTES, MAX_LAYOUT_FIELDS, MAX_STRINGS};
use crate::line::ByteRuns;
use crate::vocabulary::{AccessFlag, Field, RecordKind};

/// A record that its kind's layout cannot hold: a field outside it, or a value of another shape. The caller
/// writes the record as embedded JSON instead.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Unencodable(pub Field);

/// The string table a trace's writer has declared, and room for the record being built.
#[derive(Default)]
pub struct BinaryWriter {
    strings: HashMap<Box<str>, u32>,
    scratch: Vec<u8>,
    /// Where each field of the record being built lies in `scratch`, by its slot in the layout.
    slots: [(u32, u32); MAX_LAYOUT_FIELDS],
    mask: u32,
    refused: Option<Field>,
}

/// Appends a frame with `tag` and `body` to `out`.
pub fn frame(out: &mut Vec<u8>, tag: Tag, body: &[u8]) {
    frame_head(out, tag, body.len());
    out.extend_from_slice(body);
}

fn frame_head(out: &mut Vec<u8>, tag: Tag, len: usize) {
    out.extend_from_slice(&tag.code().to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    // Bodies are bounded by what one record holds (MAX_FRAME_BYTES); a longer one is the reader's to refuse.
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
}

impl BinaryWriter {
    pub fn new() -> BinaryWriter {
        BinaryWriter::default()
    }

    /// Starts a record of `kind`; its frame is appended to `out` by [`BinaryRecord::end`].
    pub fn begin<'a>(&'a mut self, out: &'a mut Vec<u8>, kind: RecordKind) -> BinaryRecord<'a> {
        self.scratch.clear();
        self.mask = 0;
        self.refused = None;
        BinaryRecord { writer: self, out, kind }
    }

    /// One record as a JSON object of the JSON format (`text`, one object), for what no layout holds.
    pub fn json_record(&mut self, out: &mut Vec<u8>, text: &[u8]) {
        frame(out, Tag::Json, text);
    }

    /// Says that the next record stands at `line` of the text it was converted from.
    pub fn line(&mut self, out: &mut Vec<u8>, line: u64) {
        frame(out, Tag::Line, &line.to_le_bytes());
    }

    /// The index of `text` in the string table, declaring it into `out` first when it is new.
    pub fn string_index(&mut self, out: &mut Vec<u8>, text: &str) -> u32 {
        if let Some(&index) = self.strings.get(text) {
            return index;
        }
        if self.strings.len() as u32 >= MAX_STRINGS {
            self.strings.clear();
            frame(out, Tag::StringsReset, &[]);
        }
        let index = self.strings.len() as u32;
        frame(out, Tag::String, text.as_bytes());
        self.strings.insert(text.into(), index);
        index
    }
}

/// One record being built: each field call encodes its value; [`end`](Self::end) appends the frame.
pub struct BinaryRecord<'a> {
    writer: &'a mut BinaryWriter,
    out: &'a mut Vec<u8>,
    kind: RecordKind,
}

impl BinaryRecord<'_> {
    /// Starts `field`'s value, when the layout holds it with value type `expected`.
    fn open(&mut self, field: Field, expected: &[ValueType]) -> Option<usize> {
        let place = slot(self.kind, field).filter(|_| expected.contains(&value_type(field)));
        if place.is_none() {
            self.writer.refused.get_or_insert(field);
        }
        place
    }

    fn close(&mut self, place: usize, start: usize) {
        self.writer.slots[place] = (start as u32, self.writer.scratch.len() as u32);
        self.writer.mask |= 1 << place;
    }

    fn put(&mut self, field: Field, expected: &[ValueType], bytes: &[u8]) -> &mut Self {
        if let Some(place) = self.open(field, expected) {
            let start = self.writer.scratch.len();
            self.writer.scratch.extend_from_slice(bytes);
            self.close(place, start);
        }
        self
    }

    /// A u64 field (an address field takes one too, and a signed field one that fits it).
    #[inline]
    pub fn unsigned(&mut self, field: Field, value: u64) -> &mut Self {
        match i64::try_from(value) {
            Ok(signed) if value_type(field) == ValueType::Signed => self.signed(field, signed),
            _ => self.put(field, &[ValueType::Unsigned, ValueType::Address], &value.to_le_bytes()),
        }
    }

    /// An i64 field (an unsigned field takes a value that is not negative).
    #[inline]
    pub fn signed(&mut self, field: Field, value: i64) -> &mut Self {
        match u64::try_from(value) {
            Ok(unsigned) if value_type(field) != ValueType::Signed => self.unsigned(field, unsigned),
            _ => self.put(field, &[ValueType::Signed], &value.to_le_bytes()),
        }
    }

    #[inline]
    pub fn boolean(&mut self, field: Field, value: bool) -> &mut Self {
        self.put(field, &[ValueType::Bool], &[u8::from(value)])
    }

    #[inline]
    pub fn range(&mut self, field: Field, address: u64, size: u64) -> &mut Self {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&address.to_le_bytes());
        bytes[8..].copy_from_slice(&size.to_le_bytes());
        self.put(field, &[ValueType::Range], &bytes)
    }

    /// A string field: the text (not escaped), by its index in the string table.
    #[inline]
    pub fn string(&mut self, field: Field, text: &str) -> &mut Self {
        if slot(self.kind, field).is_some() && value_type(field) == ValueType::Text {
            let index = self.writer.string_index(self.out, text);
            return self.put(field, &[ValueType::Text], &index.to_le_bytes());
        }
        self.writer.refused.get_or_insert(field);
        self
    }

    /// A list field: `count` items, each appended by `item`.
    fn list<T>(
        &mut self,
        field: Field,
        expected: ValueType,
        items: impl IntoIterator<Item = T>,
        mut item: impl FnMut(&mut Vec<u8>, T),
    ) -> &mut Self {
        let Some(place) = self.open(field, &[expected]) else { return self };
        let start = self.writer.scratch.len();
        self.writer.scratch.extend_from_slice(&[0; 4]);
        let mut count = 0u32;
        for value in items {
            item(&mut self.writer.scratch, value);
            count = count.saturating_add(1);
        }
        self.writer.scratch[start..start + 4].copy_from_slice(&count.to_le_bytes());
        self.close(place, start);
        self
    }

    /// A kernel's pointer arguments.
    pub fn pointers(&mut self, field: Field, pointers: impl IntoIterator<Item = (u64, AccessFlag)>) -> &mut Self {
        self.list(field, ValueType::Pointers, pointers, |out, (address, flag)| {
            out.extend_from_slice(&address.to_le_bytes());
            out.push(u8::from(flag == AccessFlag::Write));
        })
    }

    /// Graph node handles.
    pub fn numbers(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        self.list(field, ValueType::Unsigneds, values, |out, value| out.extend_from_slice(&value.to_le_bytes()))
    }

    /// A call site's frames.
    pub fn addresses(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        self.list(field, ValueType::Addresses, values, |out, value| out.extend_from_slice(&value.to_le_bytes()))
    }

    /// Plain ranges `[address, size]` of a `reads` or `writes` list.
    pub fn ranges(&mut self, field: Field, ranges: impl IntoIterator<Item = (u64, u64)>) -> &mut Self {
        self.accesses(field, ranges.into_iter().map(|(address, len)| AccessItem { address, len, view: None }))
    }

    /// Byte runs, each a plain range or the strided view of exactly its bytes (as [`crate::RecordLine::runs`]).
    pub fn runs(&mut self, field: Field, runs: impl IntoIterator<Item = ByteRuns>) -> &mut Self {
        self.list(field, ValueType::Accesses, runs, |out, run| {
            if run.count <= 1 {
                push_access(out, run.first, run.len, None);
            } else {
                let (element, dims) = run.view();
                push_access(out, run.first, run.extent(), Some((element, &dims)));
            }
        })
    }

    /// A `reads` or `writes` list of plain ranges and strided views.
    pub fn accesses<'v>(&mut self, field: Field, items: impl IntoIterator<Item = AccessItem<'v>>) -> &mut Self {
        self.list(field, ValueType::Accesses, items, |out, item| push_access(out, item.address, item.len, item.view))
    }

    /// Appends the record's frame, its strings declared before it; the fields a layout cannot hold refuse it.
    pub fn end(self) -> Result<(), Unencodable> {
        let BinaryRecord { writer, out, kind } = self;
        if let Some(field) = writer.refused {
            return Err(Unencodable(field));
        }
        let mut len = 4;
        for place in 0..MAX_LAYOUT_FIELDS {
            if writer.mask & (1 << place) != 0 {
                let (start, end) = writer.slots[place];
                len += (end - start) as usize;
            }
        }
        out.reserve(FRAME_HEAD_BYTES + len);
        frame_head(out, Tag::Record(kind), len);
        out.extend_from_slice(&writer.mask.to_le_bytes());
        for place in 0..MAX_LAYOUT_FIELDS {
            if writer.mask & (1 << place) != 0 {
                let (start, end) = writer.slots[place];
                out.extend_from_slice(&writer.scratch[start as usize..end as usize]);
            }
        }
        Ok(())
    }
}

/// One item of a `reads` or `writes` list: a plain range, or a strided view (element size, `[size, stride]`
/// per dimension).
#[derive(Copy, Clone, Debug)]
pub struct AccessItem<'v> {
    pub address: u64,
    pub len: u64,
    pub view: Option<(u64, &'v [(u64, u64)])>,
}

fn push_access(out: &mut Vec<u8>, address: u64, len: u64, view: Option<(u64, &[(u64, u64)])>) {
    out.extend_from_slice(&address.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    match view {
        None => out.push(0),
        Some((element, dims)) => {
            // A view has at most MAX_VIEW_DIMS dimensions; more is the reader's to refuse.
            out.push(u8::try_from(dims.len()).unwrap_or(u8::MAX));
            out.extend_from_slice(&element.to_le_bytes());
            for (size, stride) in dims {
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&stride.to_le_bytes());
            }
        }
    }
}
