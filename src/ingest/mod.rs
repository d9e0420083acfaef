//! Ingest: turning trace files into the model's record stream.
//!
//! Each reader only parses and maps ids; it decides nothing about ordering. Readers return records in host issue
//! order together with [`ImportCounters`] that say what was read and what was lost.

mod background;
mod counters;
pub mod json;
pub mod nsys;
use nsys::rep as nsys_rep;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use background::BackgroundReader;
pub use counters::{Counter, ImportCounter, ImportCounters, Severity};

use crate::model::TraceRecord;

/// An error in the input, with enough context to find it: the file, and the line or row when known.
#[derive(Debug, thiserror::Error)]
#[error("{path}{}: {message}", location.as_deref().map(|l| format!(":{l}")).unwrap_or_default())]
pub struct IngestError {
    pub path: String,
    /// Line (for text formats) or record (for tables).
    pub location: Option<String>,
    pub message: String,
}

impl IngestError {
    pub fn new(path: &Path, location: Option<String>, message: impl Into<String>) -> IngestError {
        IngestError { path: path.display().to_string(), location, message: message.into() }
    }
}

/// How much a trace knows about the memory each operation touches (DESIGN.md "Access tiers").
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum AccessTier {
    /// No addresses at all: only operation-level findings are possible.
    T0,
    /// Allocation blocks reached through pointer arguments.
    T1,
    /// Exact byte extents and read/write sets.
    T2,
}

/// A source of trace records in host issue order, with the counters of what the import saw.
pub trait RecordSource: Iterator<Item = Result<TraceRecord, IngestError>> {
    /// The name of the input format, for reports.
    fn format(&self) -> &'static str;
    /// Counters for the records read so far (all of them, once the iterator is exhausted).
    fn finish(self: Box<Self>) -> ImportCounters;
    /// The next records as one batch (None at the end), for a caller that reads them in place rather than
    /// moving each one out: a record is a few hundred bytes.
    fn next_batch(&mut self) -> Option<Vec<Result<TraceRecord, IngestError>>> {
        let mut batch = Vec::new();
        while batch.len() < BATCH {
            match self.next() {
                Some(record) => batch.push(record),
                None => break,
            }
        }
        (!batch.is_empty()).then_some(batch)
    }
}

/// Records a reader hands over at a time.
const BATCH: usize = 4096;

/// The first bytes of an SQLite database.
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// The path that names standard input.
pub const STDIN: &str = "-";

/// Opens a trace, choosing the reader from its first bytes: SQLite (an nsys export), an nsys report (converted
/// with `nsys export`), or JSON. The input is opened once and its first bytes are read from the same reader that
/// then reads the rest, so a pipe, a FIFO, `/dev/stdin` and `-` (standard input) work for JSON traces. SQLite
/// reads its file by path and seeks in it, so an export or report that comes through a pipe is refused with a
/// message saying so, rather than spooled to a temporary copy of unknown size.
pub fn open(path: &Path) -> Result<Box<dyn RecordSource>, IngestError> {
    let (name, mut input, regular): (PathBuf, Box<dyn Read + Send>, bool) = if path == Path::new(STDIN) {
        let regular = std::fs::metadata("/dev/stdin").is_ok_and(|m| m.is_file());
        (PathBuf::from("<stdin>"), Box::new(std::io::stdin()), regular)
    } else {
        let file = std::fs::File::open(path).map_err(|e| IngestError::new(path, None, format!("cannot open: {e}")))?;
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        (path.to_path_buf(), Box::new(file), regular)
    };
    let mut head = Vec::with_capacity(32);
    (&mut input)
        .take(32)
        .read_to_end(&mut head)
        .map_err(|e| IngestError::new(&name, None, format!("cannot read: {e}")))?;
    let sqlite = head.starts_with(SQLITE_MAGIC);
    if sqlite || head.starts_with(nsys_rep::MAGIC) {
        let what = if sqlite { "an nsys SQLite export" } else { "an Nsight Systems report" };
        if !regular {
            return Err(IngestError::new(
                &name,
                None,
                format!(
                    "{what} that is not a regular file (a pipe?): SQLite reads a file by path; name the file itself"
                ),
            ));
        }
        // A regular file given as standard input (`< report.sqlite`) is read through its /dev/stdin link.
        let file = if path == Path::new(STDIN) { Path::new("/dev/stdin") } else { path };
        let export = if sqlite { file.to_path_buf() } else { nsys_rep::to_sqlite(file)? };
        return nsys::NsysReader::open(&export).map(|r| Box::new(r) as Box<dyn RecordSource>);
    }
    let rest = std::io::Cursor::new(head).chain(input);
    json::JsonTraceReader::from_reader(name, rest).map(|r| Box::new(r) as Box<dyn RecordSource>)
}
