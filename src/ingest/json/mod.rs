//! The hand-written JSON trace format (docs/trace-format.md): a header object followed by one JSON object per
//! record, in host issue order. Records are usually one per line, but a record may span lines.
//!
//! Parsing and id mapping run on a background thread that hands batches of model records to the caller, so that
//! reading a large trace overlaps with analyzing it and memory stays bounded by the batch queue.
//!
//! The record kinds, fields and values are the format crate's (`streamtrace_format`). The tokenizer: reading
//! lines (this file, lines.rs) and decoding one record (scanner.rs; serde, raw.rs, for the records the scanner
//! declines). Then the reading's state and what to do with a record that cannot be taken (parser.rs,
//! problem.rs), and what each record means in the model (records.rs, accesses.rs, native.rs; op_fields.rs: the
//! typed fields of the commonest operation records, which the binary reader fills straight from its frames).
//! Its operations go through the stages every reader shares (`ingest::stages`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

pub(in crate::ingest) mod accesses;
pub(in crate::ingest) mod lines;
mod native;
pub(in crate::ingest) mod op_fields;
// The record level, which the binary reader shares: the reading's state, and the raw record it decodes into.
pub(in crate::ingest) mod parser;
pub(in crate::ingest) mod problem;
pub(in crate::ingest) mod raw;
mod records;
mod scanner;

use super::background::BackgroundReader;
use super::record_source::{IngestError, BATCH};
use lines::LineRecords;
use parser::JsonTraceParser;
use raw::RawRecord;
use scanner::Scanner;

/// Reads a JSON trace on a background thread.
pub struct JsonTraceReader;

impl JsonTraceReader {
    /// Opens `path` and starts parsing it. Fails at once when the file cannot be opened.
    pub fn open(path: &Path) -> Result<BackgroundReader, IngestError> {
        let file = File::open(path).map_err(|e| IngestError::new(path, None, format!("cannot open: {e}")))?;
        JsonTraceReader::from_reader(path.to_path_buf(), file)
    }

    /// Starts parsing a trace read from `input` (a pipe, standard input, a file already opened); `name` is how
    /// errors name it.
    pub fn from_reader(name: PathBuf, input: impl Read + Send + 'static) -> Result<BackgroundReader, IngestError> {
        JsonTraceReader::spawn(name, BufReader::with_capacity(1 << 20, input))
    }

    /// Parses JSON trace text held in memory (tests, generated scenarios).
    pub fn from_text(name: &str, text: String) -> BackgroundReader {
        JsonTraceReader::spawn(PathBuf::from(name), std::io::Cursor::new(text.into_bytes()))
            .expect("a thread for an in-memory trace")
    }

    fn spawn<R: BufRead + Send + 'static>(path: PathBuf, reader: R) -> Result<BackgroundReader, IngestError> {
        BackgroundReader::spawn("json-ingest", "streamtrace JSON", move |mut tx| {
            let mut parser = JsonTraceParser::new(path);
            let mut batch = Vec::with_capacity(BATCH);
            let mut lines = LineRecords::new(reader);
            let mut scanner = Scanner::default();
            loop {
                let outcome = match lines.next_record() {
                    Ok(Some(line)) => loop {
                        // A record may span lines: it is parsed once it is closed, or at the end of the input;
                        // one still open is probed now and then for an error, its first line at once (lines.rs).
                        if lines.probe_due() || lines.closed() {
                            // Nearly every record is one the scanner takes, whole on its first line.
                            let mut raw = RawRecord::default();
                            if scanner.scan(lines.text(), &mut raw) {
                                let accepted = parser.accept(line, lines.text(), Ok(&raw), &mut batch);
                                scanner.recycle(&mut raw);
                                break accepted;
                            }
                            let decoded = RawRecord::decode(lines.text());
                            let failed = decoded.as_ref().err().map(|e| (e.is_eof(), e.line() as u64));
                            let Some((cut_short, error_line)) = failed else {
                                break parser.accept(line, lines.text(), decoded.as_ref(), &mut batch);
                            };
                            let closed = lines.closed();
                            if !cut_short || closed {
                                if !closed {
                                    // The error is on the record's `error_line`th line: the lines after it may
                                    // begin the next records.
                                    lines.give_back_after(error_line);
                                }
                                // Decoded again for the error, which is rare: the first decoding borrowed the
                                // text that counting the record's brackets needed.
                                let decoded = RawRecord::decode(lines.text());
                                break parser.accept(line, lines.text(), decoded.as_ref(), &mut batch);
                            }
                        }
                        match lines.append_line() {
                            Ok(true) => continue,
                            Ok(false) => {
                                let decoded = RawRecord::decode(lines.text());
                                break parser.accept(line, lines.text(), decoded.as_ref(), &mut batch);
                            }
                            Err((at, message)) => break Err(parser.error(at, message)),
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
                if batch.len() >= BATCH && !tx.send_keeping(&mut batch, &mut parser.spare) {
                    return parser.counters;
                }
            }
            tx.send_last(batch);
            parser.counters
        })
    }
}

#[cfg(test)]
mod tests;
