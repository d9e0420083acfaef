//! The binary trace encoding (docs/trace-format.md, "The binary encoding"; the format crate's `binary`), read
//! on a background thread as the JSON reader reads text: frames are read one at a time, in place in the buffer
//! that large reads of the file or pipe fill, strings go to the table, and each record is taken by the JSON
//! reader's record reader (`json::parser`), through the same stages. The operation records a trace holds the
//! most of (`OpFields::KINDS`) are decoded straight into their fields (op_frames.rs); every other record, in
//! its layout or embedded as JSON, into the raw record the JSON reader decodes its text into (raw.rs). Either
//! way the same rules take it: the header's producer decides strict or tolerant reading, and what a tolerant
//! reading skips is counted under the same counters. Places are named by record (numbered as the lines of the
//! trace's JSON form) and byte.
//!
//! A file is read, not mapped: mapped (memmap2, MADV_SEQUENTIAL), the 2 M-record trace cost the reader the
//! same CPU within the noise, and its pages counted in the process's resident memory (peak 230 MB against 110).

mod op_frames;
mod raw;
mod strings;

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use streamtrace_format::binary::read::{line_frame, DecodeError, FrameInput, FrameOutcome, FrameReader};
use streamtrace_format::binary::{Tag, MAX_STRINGS, MAX_STRING_TABLE_BYTES};
use streamtrace_format::RecordKind;

use super::background::{BackgroundReader, Batch, BatchSender};
use super::json::op_fields::OpFields;
use super::json::parser::{JsonTraceParser, Places};
use super::json::problem::{Problem, ProblemKind};
use super::json::raw::RawRecord;
use super::record_source::{IngestError, BATCH};
use op_frames::decode_op;
use raw::{decode_record, SpareLists};
use strings::Strings;

/// Reads a binary trace on a background thread.
pub struct BinaryTraceReader;

/// The name reports give the input format.
pub const FORMAT_NAME: &str = "streamtrace binary";

impl BinaryTraceReader {
    /// Starts reading a binary trace from `input` (a pipe, a socket, a file), from its first byte; `name` is how
    /// errors name it.
    pub fn from_reader(name: PathBuf, input: impl Read + Send + 'static) -> Result<BackgroundReader, IngestError> {
        // It keeps ahead of the analysis: what the analysis only takes note of is taken on its thread.
        let reader = BackgroundReader::spawn("binary-ingest", FORMAT_NAME, move |tx| {
            let frames = FrameReader::new(input);
            read(Reading::new(name), frames, tx)
        })?;
        Ok(reader.observing_given_back())
    }
}

/// Reads every frame into batches sent through `tx`; the import counters at the end.
fn read<I: FrameInput>(
    mut reading: Reading,
    frames: Result<FrameReader<I>, String>,
    mut tx: BatchSender,
) -> crate::ingest::counters::ImportCounters {
    let mut batch = Vec::with_capacity(BATCH);
    match frames {
        Err(message) => batch.push(Err(IngestError::new(&reading.parser.path, None, message))),
        Ok(mut frames) => loop {
            match reading.frame(&mut frames, &mut batch) {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    batch.push(Err(error));
                    break;
                }
            }
            if batch.len() >= BATCH && !tx.send_keeping(&mut batch, &mut reading.parser.spare) {
                return reading.parser.counters;
            }
        },
    }
    tx.send_last(batch);
    reading.parser.counters
}

/// The reading's state: the record reader, the string table, the next record's number, and the lists a record
/// decodes into.
struct Reading {
    parser: JsonTraceParser,
    strings: Strings,
    string_bytes: usize,
    next_record: u64,
    /// The lists a record's decoding fills, kept for the next.
    lists: SpareLists,
}

impl Reading {
    fn new(path: PathBuf) -> Reading {
        Reading {
            parser: JsonTraceParser::new(path),
            strings: Vec::new(),
            string_bytes: 0,
            next_record: 1,
            lists: SpareLists::default(),
        }
    }

    /// Takes the next frame; false at the end of the trace.
    fn frame<I: FrameInput>(&mut self, frames: &mut FrameReader<I>, out: &mut Batch) -> Result<bool, IngestError> {
        let (at, head) = match frames.next_frame() {
            FrameOutcome::Frame { at, head } => (at, head),
            FrameOutcome::End => {
                self.parser.finish(out);
                return Ok(false);
            }
            FrameOutcome::Truncated { at, got } => {
                // A recording cut off when its process was killed: counted as the JSON reader counts a cut line.
                let record = self.place(at);
                let problem = Problem::malformed(format!("the trace ends inside this record ({got} bytes of it)"));
                self.parser.skip(record, problem)?;
                self.parser.finish(out);
                return Ok(false);
            }
            FrameOutcome::Error { at, message } => {
                return Err(IngestError::new(&self.parser.path, Some(format!("byte {at}")), message));
            }
        };
        let body = frames.body();
        match head.tag {
            Tag::String => self.declare(at, body)?,
            Tag::StringsReset => {
                self.strings.clear();
                self.string_bytes = 0;
            }
            Tag::Line => {
                self.next_record = line_frame(body)
                    .map_err(|message| IngestError::new(&self.parser.path, Some(format!("byte {at}")), message))?;
            }
            Tag::Json => {
                let record = self.place(at);
                let decoded = RawRecord::decode(body);
                self.parser.accept(record, body, decoded.as_ref(), out)?;
            }
            Tag::Record(kind) if OpFields::holds(kind) && self.parser.past_header() => {
                let record = self.place(at);
                let mut fields = OpFields::default();
                match decode_op(kind, body, &self.strings, &mut fields) {
                    Ok(()) => self.parser.accept_op(record, kind, &fields, out)?,
                    Err(e) => self.parser.skip(record, malformed(kind, at, e))?,
                }
            }
            Tag::Record(kind) => {
                let record = self.place(at);
                let mut raw = RawRecord::default();
                let decoded = decode_record(kind, body, &self.strings, &mut self.lists, &mut raw);
                let accepted = match decoded {
                    Ok(()) => self.parser.accept_raw(record, &raw, out),
                    Err(e) => self.parser.skip(record, malformed(kind, at, e)),
                };
                self.lists.recycle(&mut raw);
                accepted?;
            }
            Tag::Unknown(code) => {
                let record = self.place(at);
                let message = format!("unknown record tag {code} ({} bytes, skipped by its length)", head.len);
                self.parser.skip(record, Problem { kind: ProblemKind::UnknownKind, message })?;
            }
        }
        Ok(true)
    }

    /// The number of the record whose frame starts at byte `at`, which names it in messages from now on.
    fn place(&mut self, at: u64) -> u64 {
        let record = self.next_record;
        self.next_record += 1;
        self.parser.places = Places::Records { current: record, byte: at };
        record
    }

    /// A string frame: the table's next string, bounded in count and bytes.
    fn declare(&mut self, at: u64, body: &[u8]) -> Result<(), IngestError> {
        self.string_bytes += body.len();
        if self.strings.len() >= MAX_STRINGS as usize || self.string_bytes > MAX_STRING_TABLE_BYTES {
            let message = format!(
                "more than {MAX_STRINGS} strings or {} MiB of them without a reset (is this a trace?)",
                MAX_STRING_TABLE_BYTES >> 20
            );
            return Err(IngestError::new(&self.parser.path, Some(format!("byte {at}")), message));
        }
        // Not UTF-8: the records that name it are malformed (a tolerant reading skips only those).
        self.strings.push(std::str::from_utf8(body).ok().map(Arc::from));
        Ok(())
    }
}

/// A record frame of `kind` at byte `at` whose body could not be decoded.
fn malformed(kind: RecordKind, at: u64, e: DecodeError) -> Problem {
    let field = e.field.map(|f| format!("field `{f}`: ")).unwrap_or_default();
    // The byte within the file: past the frame's head.
    let byte = at + 8 + e.at as u64;
    Problem::malformed(format!("a {kind} record: {field}{} (byte {byte})", e.message))
}

#[cfg(test)]
mod tests {
    use streamtrace_format::binary::transcode::json_to_binary;
    use streamtrace_format::binary::write::BinaryWriter;

    use super::*;
    use crate::model::{OpKind, TraceRecord};

    /// The records of the binary form of the JSON lines `lines`.
    fn read_binary(lines: &[&str]) -> Vec<TraceRecord> {
        let (mut writer, mut bytes) = (BinaryWriter::new(), streamtrace_format::binary::preamble().to_vec());
        for line in lines {
            json_to_binary(&mut writer, &mut bytes, line.as_bytes());
        }
        let reader = BinaryTraceReader::from_reader("t.stbin".into(), std::io::Cursor::new(bytes)).expect("started");
        reader.collect::<Result<_, _>>().expect("a trace")
    }

    #[test]
    fn a_name_declared_once_is_one_shared_copy_and_a_region_loses_its_counters() {
        let records = read_binary(&[
            r#"{"type":"streamtrace","version":1}"#,
            r#"{"type":"stream","id":1}"#,
            r#"{"type":"kernel","stream":1,"name":"gemm","api":"cuLaunchKernel","region":"fwd"}"#,
            r#"{"type":"kernel","stream":1,"name":"gemm","api":"cuLaunchKernel","region":"aten::mm, seq = 3"}"#,
            r#"{"type":"kernel","stream":1,"name":"gemm","api":"cuLaunchKernel","region":"aten::mm, seq = 4"}"#,
        ]);
        let ops: Vec<_> =
            records.iter().filter_map(|r| if let TraceRecord::Op(op) = r { Some(op) } else { None }).collect();
        let names: Vec<_> = ops
            .iter()
            .map(|op| match &op.kind {
                OpKind::Kernel { name, .. } => name.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(&*names[0], "gemm");
        assert!(names.iter().all(|name| Arc::ptr_eq(name, &names[0])), "one copy of the name");
        let apis: Vec<_> = ops.iter().map(|op| op.api.clone().expect("an api")).collect();
        assert!(Arc::ptr_eq(&apis[0], &apis[2]) && &*apis[0] == "cuLaunchKernel");
        let regions: Vec<_> = ops.iter().map(|op| op.region.clone().expect("a region")).collect();
        assert_eq!(regions.iter().map(|r| &**r).collect::<Vec<_>>(), ["fwd", "aten::mm", "aten::mm"]);
        assert!(Arc::ptr_eq(&regions[1], &regions[2]), "the regions without their counters, one copy");
    }
}
