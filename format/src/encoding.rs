//! The two encodings of a trace, and the field calls that write one record to either: the capture library and
//! the generators describe a record once, as calls of [`FieldSink`], and the JSON line ([`RecordLine`]) or the
//! binary frame ([`BinaryRecord`]) is what those calls make.

use crate::binary::write::BinaryRecord;
use crate::line::{ByteRuns, RecordLine};
use crate::vocabulary::{AccessFlag, Field};

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

/// One record's fields, in any order, for either encoding.
pub trait FieldSink {
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
