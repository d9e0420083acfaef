//! The two encodings of a trace, and the field calls that write one record to either: the capture library and
//! the generators describe a record once, as calls of [`FieldSink`], and the JSON line ([`RecordLine`]) or the
//! binary frame ([`BinaryRecord`]) is what those calls make.

use crate::binary::write::{BinaryRecord, BinaryWriter};
use crate::line::{ByteRuns, RecordLine};
use crate::vocabulary::{AccessFlag, Field, Producer, RecordKind};
use crate::Recorded;

/// How a trace file is written.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum TraceEncoding {
    /// The binary encoding (`crate::binary`): what the capture library writes unless told otherwise.
    #[default]
    Binary,
    /// JSON lines, the documented interchange format.
    Json,
}

impl TraceEncoding {
    pub const ALL: [TraceEncoding; 2] = [TraceEncoding::Binary, TraceEncoding::Json];

    /// How `--trace-format` and `STREAMTRACE_TRACE_FORMAT` name it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TraceEncoding::Binary => "binary",
            TraceEncoding::Json => "json",
        }
    }

    pub fn parse(text: &str) -> Option<TraceEncoding> {
        TraceEncoding::ALL.into_iter().find(|e| e.as_str() == text)
    }

    /// The extension of a trace file in this encoding.
    pub const fn extension(self) -> &'static str {
        match self {
            TraceEncoding::Binary => "stbin",
            TraceEncoding::Json => "json",
        }
    }

    /// The encoding a file name's extension says (`.stbin`: binary, `.json` / `.jsonl`: JSON); None otherwise.
    pub fn of_path(path: &std::path::Path) -> Option<TraceEncoding> {
        match path.extension()?.to_str()? {
            "stbin" => Some(TraceEncoding::Binary),
            "json" | "jsonl" => Some(TraceEncoding::Json),
            _ => None,
        }
    }
}

/// An integer a record field holds.
pub trait FieldNumber: Copy {
    fn wide(self) -> i128;
}

macro_rules! field_numbers {
    ($($t:ty),*) => {$(
        impl FieldNumber for $t {
            #[inline]
            fn wide(self) -> i128 {
                self as i128
            }
        }
    )*};
}
field_numbers!(u8, u16, u32, u64, usize, i32, i64);

/// One record's fields, in any order, for either encoding.
pub trait FieldSink {
    /// Any integer: [`unsigned`](Self::unsigned) or [`signed`](Self::signed) by its sign.
    #[inline]
    fn number(&mut self, field: Field, value: impl FieldNumber) -> &mut Self {
        match u64::try_from(value.wide()) {
            Ok(v) => self.unsigned(field, v),
            Err(_) => self.signed(field, value.wide() as i64),
        }
    }
    fn unsigned(&mut self, field: Field, value: u64) -> &mut Self;
    fn signed(&mut self, field: Field, value: i64) -> &mut Self;
    fn boolean(&mut self, field: Field, value: bool) -> &mut Self;
    /// An address (JSON writes it in hex).
    fn address(&mut self, field: Field, value: u64) -> &mut Self;
    fn range(&mut self, field: Field, address: u64, size: u64) -> &mut Self;
    /// Any text.
    fn string(&mut self, field: Field, text: &str) -> &mut Self;
    /// Text that needs no JSON escaping: a vocabulary name, an API name.
    fn name(&mut self, field: Field, text: &str) -> &mut Self;
    /// Text given as it is and escaped for JSON once beforehand (a kernel name written for every launch).
    fn escaped(&mut self, field: Field, text: &str, escaped: &str) -> &mut Self;
    fn pointers(&mut self, field: Field, pointers: impl IntoIterator<Item = (u64, AccessFlag)>) -> &mut Self;
    fn numbers(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self;
    fn addresses(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self;
    fn runs(&mut self, field: Field, runs: impl IntoIterator<Item = ByteRuns>) -> &mut Self;
    fn ranges(&mut self, field: Field, ranges: impl IntoIterator<Item = (u64, u64)>) -> &mut Self;
}

impl FieldSink for RecordLine<'_> {
    fn number(&mut self, field: Field, value: impl FieldNumber) -> &mut Self {
        RecordLine::number(self, field, value.wide())
    }
    fn unsigned(&mut self, field: Field, value: u64) -> &mut Self {
        self.number(field, value)
    }
    fn signed(&mut self, field: Field, value: i64) -> &mut Self {
        self.number(field, value)
    }
    fn boolean(&mut self, field: Field, value: bool) -> &mut Self {
        RecordLine::boolean(self, field, value)
    }
    fn address(&mut self, field: Field, value: u64) -> &mut Self {
        RecordLine::address(self, field, value)
    }
    fn range(&mut self, field: Field, address: u64, size: u64) -> &mut Self {
        RecordLine::range(self, field, address, size)
    }
    fn string(&mut self, field: Field, text: &str) -> &mut Self {
        RecordLine::string(self, field, text)
    }
    fn name(&mut self, field: Field, text: &str) -> &mut Self {
        RecordLine::name(self, field, text)
    }
    fn escaped(&mut self, field: Field, _text: &str, escaped: &str) -> &mut Self {
        RecordLine::name(self, field, escaped)
    }
    fn pointers(&mut self, field: Field, pointers: impl IntoIterator<Item = (u64, AccessFlag)>) -> &mut Self {
        RecordLine::pointers(self, field, pointers)
    }
    fn numbers(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        RecordLine::numbers(self, field, values)
    }
    fn addresses(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        RecordLine::addresses(self, field, values)
    }
    fn runs(&mut self, field: Field, runs: impl IntoIterator<Item = ByteRuns>) -> &mut Self {
        RecordLine::runs(self, field, runs)
    }
    fn ranges(&mut self, field: Field, ranges: impl IntoIterator<Item = (u64, u64)>) -> &mut Self {
        RecordLine::ranges(self, field, ranges)
    }
}

impl FieldSink for BinaryRecord<'_> {
    fn unsigned(&mut self, field: Field, value: u64) -> &mut Self {
        BinaryRecord::unsigned(self, field, value)
    }
    fn signed(&mut self, field: Field, value: i64) -> &mut Self {
        BinaryRecord::signed(self, field, value)
    }
    fn boolean(&mut self, field: Field, value: bool) -> &mut Self {
        BinaryRecord::boolean(self, field, value)
    }
    fn address(&mut self, field: Field, value: u64) -> &mut Self {
        BinaryRecord::unsigned(self, field, value)
    }
    fn range(&mut self, field: Field, address: u64, size: u64) -> &mut Self {
        BinaryRecord::range(self, field, address, size)
    }
    fn string(&mut self, field: Field, text: &str) -> &mut Self {
        BinaryRecord::string(self, field, text)
    }
    fn name(&mut self, field: Field, text: &str) -> &mut Self {
        BinaryRecord::string(self, field, text)
    }
    fn escaped(&mut self, field: Field, text: &str, _escaped: &str) -> &mut Self {
        BinaryRecord::string(self, field, text)
    }
    fn pointers(&mut self, field: Field, pointers: impl IntoIterator<Item = (u64, AccessFlag)>) -> &mut Self {
        BinaryRecord::pointers(self, field, pointers)
    }
    fn numbers(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        BinaryRecord::numbers(self, field, values)
    }
    fn addresses(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        BinaryRecord::addresses(self, field, values)
    }
    fn runs(&mut self, field: Field, runs: impl IntoIterator<Item = ByteRuns>) -> &mut Self {
        BinaryRecord::runs(self, field, runs)
    }
    fn ranges(&mut self, field: Field, ranges: impl IntoIterator<Item = (u64, u64)>) -> &mut Self {
        BinaryRecord::ranges(self, field, ranges)
    }
}

/// One record being written in either encoding: what [`TraceWriter::record`] hands its caller.
pub enum AnyRecord<'a> {
    Json(RecordLine<'a>),
    Binary(BinaryRecord<'a>),
}

macro_rules! either {
    ($self:ident, $r:ident => $call:expr) => {{
        match $self {
            AnyRecord::Json($r) => {
                $call;
            }
            AnyRecord::Binary($r) => {
                $call;
            }
        }
        $self
    }};
}

impl FieldSink for AnyRecord<'_> {
    fn unsigned(&mut self, field: Field, value: u64) -> &mut Self {
        either!(self, r => r.unsigned(field, value))
    }
    fn signed(&mut self, field: Field, value: i64) -> &mut Self {
        either!(self, r => r.signed(field, value))
    }
    fn boolean(&mut self, field: Field, value: bool) -> &mut Self {
        either!(self, r => FieldSink::boolean(r, field, value))
    }
    fn address(&mut self, field: Field, value: u64) -> &mut Self {
        either!(self, r => FieldSink::address(r, field, value))
    }
    fn range(&mut self, field: Field, address: u64, size: u64) -> &mut Self {
        either!(self, r => FieldSink::range(r, field, address, size))
    }
    fn string(&mut self, field: Field, text: &str) -> &mut Self {
        either!(self, r => FieldSink::string(r, field, text))
    }
    fn name(&mut self, field: Field, text: &str) -> &mut Self {
        either!(self, r => FieldSink::name(r, field, text))
    }
    fn escaped(&mut self, field: Field, text: &str, escaped: &str) -> &mut Self {
        either!(self, r => r.escaped(field, text, escaped))
    }
    fn pointers(&mut self, field: Field, pointers: impl IntoIterator<Item = (u64, AccessFlag)>) -> &mut Self {
        either!(self, r => FieldSink::pointers(r, field, pointers))
    }
    fn numbers(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        either!(self, r => FieldSink::numbers(r, field, values))
    }
    fn addresses(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        either!(self, r => FieldSink::addresses(r, field, values))
    }
    fn runs(&mut self, field: Field, runs: impl IntoIterator<Item = ByteRuns>) -> &mut Self {
        either!(self, r => FieldSink::runs(r, field, runs))
    }
    fn ranges(&mut self, field: Field, ranges: impl IntoIterator<Item = (u64, u64)>) -> &mut Self {
        either!(self, r => FieldSink::ranges(r, field, ranges))
    }
}

/// A trace being written in one encoding into a buffer the caller drains ([`bytes`](Self::bytes), then
/// [`clear`](Self::clear)); the binary string table lives as long as the writer.
pub struct TraceWriter {
    encoding: TraceEncoding,
    text: String,
    bytes: Vec<u8>,
    binary: BinaryWriter,
}

impl TraceWriter {
    pub fn new(encoding: TraceEncoding) -> TraceWriter {
        TraceWriter { encoding, text: String::new(), bytes: Vec::new(), binary: BinaryWriter::new() }
    }

    pub fn encoding(&self) -> TraceEncoding {
        self.encoding
    }

    /// The file's start: the binary preamble, and the header record.
    pub fn header(&mut self, producer: Option<Producer>, recorded: Recorded, comment: Option<&str>) {
        match self.encoding {
            TraceEncoding::Json => self.text.push_str(&crate::job_header_line(producer, recorded, comment)),
            TraceEncoding::Binary => {
                let header = crate::binary_header(&mut self.binary, producer, recorded, comment);
                self.bytes.extend_from_slice(&header);
            }
        }
    }

    /// Appends one record of `kind` whose fields `fields` gives. False when the binary layout cannot hold a
    /// field given (a writer's mistake: the record is left out).
    pub fn record(&mut self, kind: RecordKind, fields: impl FnOnce(&mut AnyRecord)) -> bool {
        match self.encoding {
            TraceEncoding::Json => {
                let mut record = AnyRecord::Json(RecordLine::begin(&mut self.text, kind));
                fields(&mut record);
                if let AnyRecord::Json(line) = record {
                    line.end();
                }
                true
            }
            TraceEncoding::Binary => {
                let mut record = AnyRecord::Binary(self.binary.begin(&mut self.bytes, kind));
                fields(&mut record);
                match record {
                    AnyRecord::Binary(record) => record.end().is_ok(),
                    AnyRecord::Json(_) => false,
                }
            }
        }
    }

    /// Appends one record given as the text of a JSON object (a framework hook's): a line of its own in JSON,
    /// laid out (or embedded) in binary.
    #[cfg(feature = "json")]
    pub fn json_record(&mut self, text: &str) {
        match self.encoding {
            TraceEncoding::Json => {
                if text.contains(['\n', '\r']) {
                    self.text.extend(text.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
                } else {
                    self.text.push_str(text);
                }
                self.text.push('\n');
            }
            TraceEncoding::Binary => {
                crate::binary::transcode::json_to_binary(&mut self.binary, &mut self.bytes, text.as_bytes());
            }
        }
    }

    /// What was written since the last [`clear`](Self::clear).
    pub fn bytes(&self) -> &[u8] {
        match self.encoding {
            TraceEncoding::Json => self.text.as_bytes(),
            TraceEncoding::Binary => &self.bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the buffer (the string table stays: later records refer to it). Room past `keep` bytes is given
    /// back when the last batch used less than a quarter of it (a burst must not keep its buffer).
    pub fn clear(&mut self, keep: usize) {
        if self.text.capacity() > keep && self.text.len() < self.text.capacity() / 4 {
            self.text.shrink_to(keep);
        }
        if self.bytes.capacity() > keep && self.bytes.len() < self.bytes.capacity() / 4 {
            self.bytes.shrink_to(keep);
        }
        self.text.clear();
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::read::{fields, frame_head, Value};
    use crate::binary::Tag;

    #[test]
    fn one_description_of_a_record_writes_either_encoding() {
        let write = |encoding| {
            let mut writer = TraceWriter::new(encoding);
            writer.header(None, Recorded::default(), None);
            writer.record(RecordKind::Wait, |r| {
                r.unsigned(Field::Stream, 7).unsigned(Field::Event, 3);
            });
            writer.bytes().to_vec()
        };
        let json = String::from_utf8(write(TraceEncoding::Json)).unwrap();
        assert_eq!(json, "{\"type\":\"streamtrace\",\"version\":1}\n{\"type\":\"wait\",\"stream\":7,\"event\":3}\n");
        let binary = write(TraceEncoding::Binary);
        assert_eq!(binary[..16], crate::binary::preamble());
        let header = frame_head(binary[16..24].try_into().unwrap()).unwrap();
        assert_eq!(header.tag, Tag::Record(RecordKind::Header));
        let at = 24 + header.len as usize;
        let wait = frame_head(binary[at..at + 8].try_into().unwrap()).unwrap();
        assert_eq!(wait.tag, Tag::Record(RecordKind::Wait));
        let mut values = fields(RecordKind::Wait, &binary[at + 8..]).unwrap();
        assert_eq!(values.next(), Some(Ok((Field::Stream, Value::Unsigned(7)))));
        assert_eq!(values.next(), Some(Ok((Field::Event, Value::Unsigned(3)))));
        assert_eq!(values.next(), None);
        assert_eq!(TraceEncoding::of_path(std::path::Path::new("t.stbin")), Some(TraceEncoding::Binary));
        assert_eq!(TraceEncoding::parse("json"), Some(TraceEncoding::Json));
    }
}
