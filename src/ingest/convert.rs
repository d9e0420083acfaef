//! `streamtrace convert`: a trace from one encoding to the other, record by record, so that the converted trace
//! reads as the original did (the same records, the same analysis). Records are cut out of JSON text as the
//! JSON reader cuts them (`json::lines`, with its probing of records that do not close), and each is laid out
//! in binary when its kind's layout holds it exactly as the JSON reader takes it, else embedded as its JSON
//! text; a record that does not start one past the last one's line says its line (a line frame), so that
//! places in reports stay the same. Binary to JSON writes one record per line (padding with blank lines where
//! a line frame says so).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use streamtrace_format::binary::read::{line_frame, FrameOutcome, FrameReader};
use streamtrace_format::binary::transcode::{binary_to_json, json_to_binary};
use streamtrace_format::binary::write::BinaryWriter;
use streamtrace_format::binary::Tag;
use streamtrace_format::TraceEncoding;

use super::json::lines::LineRecords;
use super::json::raw::RawRecord;
use super::record_source::IngestError;

/// What a conversion wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Converted {
    pub records: u64,
    /// Records written as embedded JSON (binary output) because no layout holds them.
    pub embedded: u64,
}

/// Converts the trace `input` (named `name` in errors; its encoding is told by its first bytes) to `to`.
pub fn convert(
    name: &Path,
    input: impl Read,
    to: TraceEncoding,
    out: &mut dyn Write,
) -> Result<Converted, IngestError> {
    let mut input = BufReader::with_capacity(1 << 20, input);
    let head = input.fill_buf().map_err(|e| IngestError::new(name, None, format!("cannot read: {e}")))?;
    let binary = streamtrace_format::binary::read::is_binary(head);
    let write_error =
        |e: std::io::Error| IngestError::new(name, None, format!("cannot write the converted trace: {e}"));
    match (binary, to) {
        (false, TraceEncoding::Binary) => json_to_binary_trace(name, input, out, &write_error),
        (true, TraceEncoding::Json) => binary_to_json_trace(name, input, out, &write_error),
        _ => {
            // Already in the encoding asked for: copied as it is.
            std::io::copy(&mut input, out).map_err(write_error)?;
            Ok(Converted::default())
        }
    }
}

fn json_to_binary_trace(
    name: &Path,
    input: impl BufRead,
    out: &mut dyn Write,
    write_error: &dyn Fn(std::io::Error) -> IngestError,
) -> Result<Converted, IngestError> {
    let mut lines = LineRecords::new(input);
    let mut writer = BinaryWriter::new();
    let mut bytes = streamtrace_format::binary::preamble().to_vec();
    let mut converted = Converted::default();
    let mut expected_line = 1;
    let line_error = |(line, message): (u64, String)| IngestError::new(name, Some(line.to_string()), message);
    while let Some(line) = lines.next_record().map_err(line_error)? {
        // Where the record ends, as the JSON reader decides it (json/mod.rs).
        loop {
            if lines.probe_due() || lines.closed() {
                let failed = RawRecord::decode(lines.text()).err().map(|e| (e.is_eof(), e.line() as u64));
                let Some((cut_short, error_line)) = failed else { break };
                let closed = lines.closed();
                if !cut_short || closed {
                    if !closed {
                        lines.give_back_after(error_line);
                    }
                    break;
                }
            }
            if !lines.append_line().map_err(line_error)? {
                break;
            }
        }
        if line != expected_line {
            writer.line(&mut bytes, line);
        }
        expected_line = line + 1;
        let text = trim_line_end(lines.text());
        // Only what the JSON reader decodes as it is is laid out; the rest keeps its text.
        let decodes = RawRecord::decode(text).is_ok();
        // json_to_binary embeds what no layout holds.
        let laid_out = decodes && json_to_binary(&mut writer, &mut bytes, text);
        if !decodes {
            writer.json_record(&mut bytes, text);
        }
        converted.embedded += u64::from(!laid_out);
        converted.records += 1;
        if bytes.len() > 1 << 20 {
            out.write_all(&bytes).map_err(write_error)?;
            bytes.clear();
        }
    }
    out.write_all(&bytes).map_err(write_error)?;
    Ok(converted)
}

/// The most blank lines a line frame makes a conversion to JSON write: a record's text is at most 64 MiB, so
/// one record spreads over at most this many lines, and a frame that asks for more (16 bytes asking for
/// terabytes of output) is refused. Blank lines between records beyond that are not kept through a round trip.
const MAX_LINE_GAP: u64 = 64 << 20;

/// Writes `text` out and empties it once it holds more than a megabyte: a conversion holds no more than that.
fn write_when_full(text: &mut String, out: &mut dyn Write) -> std::io::Result<()> {
    if text.len() > 1 << 20 {
        out.write_all(text.as_bytes())?;
        text.clear();
    }
    Ok(())
}

/// A record's text without the line end after it (a JSON frame holds the object alone).
fn trim_line_end(text: &[u8]) -> &[u8] {
    let end = text.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |at| at + 1);
    &text[..end]
}

fn binary_to_json_trace(
    name: &Path,
    input: impl Read,
    out: &mut dyn Write,
    write_error: &dyn Fn(std::io::Error) -> IngestError,
) -> Result<Converted, IngestError> {
    let mut frames = FrameReader::new(input).map_err(|message| IngestError::new(name, None, message))?;
    let mut strings: Vec<Option<String>> = Vec::new();
    let mut text = String::new();
    let mut converted = Converted::default();
    let mut line = 1u64;
    let error = |at: u64, message: String| IngestError::new(name, Some(format!("byte {at}")), message);
    loop {
        let (at, head) = match frames.next_frame() {
            FrameOutcome::Frame { at, head } => (at, head),
            FrameOutcome::End => break,
            FrameOutcome::Truncated { .. } => {
                // A record cut off (a killed process): a cut line, which the JSON reader counts as such.
                text.push_str("{\n");
                break;
            }
            FrameOutcome::Error { at, message } => return Err(error(at, message)),
        };
        let body = frames.body();
        match head.tag {
            Tag::String => strings.push(std::str::from_utf8(body).ok().map(str::to_string)),
            Tag::StringsReset => strings.clear(),
            Tag::Line => {
                let next = line_frame(body).map_err(|message| error(at, message))?;
                let gap = next.saturating_sub(line);
                if gap > MAX_LINE_GAP {
                    let message = format!(
                        "a line frame naming line {next}, {gap} lines past the last record: more than the \
                         {MAX_LINE_GAP} blank lines a conversion writes"
                    );
                    return Err(error(at, message));
                }
                // Blank lines keep the records' places; written as they come, not held.
                for _ in 0..gap {
                    text.push('\n');
                    write_when_full(&mut text, out).map_err(write_error)?;
                }
                line += gap;
            }
            Tag::Json => {
                let object = String::from_utf8_lossy(body);
                text.extend(object.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
                text.push('\n');
                line += 1;
                converted.records += 1;
            }
            Tag::Record(kind) => {
                let lookup = |index: u32| strings.get(index as usize).and_then(Option::as_deref);
                binary_to_json(kind, body, lookup, &mut text)
                    .map_err(|e| error(at + 8 + e.at as u64, e.to_string()))?;
                line += 1;
                converted.records += 1;
            }
            Tag::Unknown(code) => {
                // A kind this build does not know: as a JSON record of an unknown type, which a reading counts.
                text.push_str(&format!("{{\"type\":\"binary record tag {code}\"}}\n"));
                line += 1;
                converted.records += 1;
            }
        }
        write_when_full(&mut text, out).map_err(write_error)?;
    }
    out.write_all(text.as_bytes()).map_err(write_error)?;
    Ok(converted)
}
