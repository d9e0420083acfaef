//! The hand-written JSON trace format (docs/trace-format.md): a header object followed by one JSON object per
//! record, in host issue order. Records are usually one per line, but a record may span lines.
//!
//! Parsing and id mapping run on a background thread that hands batches of model records to the caller, so that
//! reading a large trace overlaps with analyzing it and memory stays bounded by the batch queue.
//!
//! The record kinds, fields and values are the format crate's (`streamtrace_format`); here: reading lines
//! (this file), decoding one record (raw.rs), the reading's state and what to do with a record that cannot be
//! taken (parser.rs), what each record means in the model (records.rs), and framework frames (frames.rs).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

mod frames;
mod parser;
mod raw;
mod records;

use super::background::{BackgroundReader, Batch};
use super::{IngestError, BATCH};
use parser::JsonTraceParser;
use raw::RawRecord;

/// Reads a JSON trace on a background thread.
pub struct JsonTraceReader;

impl JsonTraceReader {
    /// Opens `path` and starts parsing it. Fails at once when the file cannot be opened.
    pub fn open(path: &Path) -> Result<BackgroundReader, IngestError> {
        let file = File::open(path).map_err(|e| IngestError::new(path, None, format!("cannot open: {e}")))?;
        let reader = BufReader::with_capacity(1 << 20, file);
        JsonTraceReader::spawn(path.to_path_buf(), reader)
    }

    /// Parses JSON trace text held in memory (tests, generated scenarios).
    pub fn from_text(name: &str, text: String) -> BackgroundReader {
        JsonTraceReader::spawn(PathBuf::from(name), std::io::Cursor::new(text.into_bytes()))
            .expect("a thread for an in-memory trace")
    }

    fn spawn<R: BufRead + Send + 'static>(path: PathBuf, reader: R) -> Result<BackgroundReader, IngestError> {
        BackgroundReader::spawn("json-ingest", "streamtrace JSON", move |tx| {
            let mut parser = JsonTraceParser::new(path);
            let mut batch = Vec::with_capacity(BATCH);
            let mut lines = LineRecords::new(reader);
            loop {
                let outcome = match lines.next_record() {
                    Ok(Some(line)) => loop {
                        // A record may span lines: on running out of text, join the next line and retry.
                        match serde_json::from_slice::<RawRecord>(lines.text()) {
                            Err(e) if e.is_eof() => match lines.append_line() {
                                Ok(true) => continue,
                                Ok(false) => break parser.accept(line, lines.text(), Err(e), &mut batch),
                                Err((at, message)) => break Err(parser.error(at, message)),
                            },
                            decoded => break parser.accept(line, lines.text(), decoded, &mut batch),
                        }
                    },
                    Ok(None) => {
                        parser.finish(&mut batch);
                        break;
                    }
                    Err((line, message)) => Err(parser.error(line, message)),
                };
                if let Err(error) = outcome {
                    batch.push(Err(error));
                    break;
                }
                if batch.len() >= BATCH && tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).is_err() {
                    return parser.counters;
                }
            }
            let _ = tx.send(batch);
            parser.counters
        })
    }
}

/// Reads the input line by line, skipping blank lines; a record that spans lines is joined on request.
struct LineRecords<R> {
    reader: R,
    buf: Vec<u8>,
    line: u64,
}

impl<R: BufRead> LineRecords<R> {
    fn new(reader: R) -> Self {
        LineRecords { reader, buf: Vec::with_capacity(4096), line: 0 }
    }

    /// Appends the next line to the current text; false at the end of the input.
    fn append_line(&mut self) -> Result<bool, (u64, String)> {
        match self.reader.read_until(b'\n', &mut self.buf) {
            Ok(0) => Ok(false),
            Ok(_) => {
                self.line += 1;
                Ok(true)
            }
            Err(e) => Err((self.line + 1, format!("cannot read: {e}"))),
        }
    }

    /// Starts the next record at the next non-blank line and returns that line's number, or `None` at the end.
    fn next_record(&mut self) -> Result<Option<u64>, (u64, String)> {
        loop {
            self.buf.clear();
            if !self.append_line()? {
                return Ok(None);
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(self.line));
            }
        }
    }

    fn text(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests;
