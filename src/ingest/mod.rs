//! Ingest: turning trace files into the model's record stream.
//!
//! Each reader only parses and maps ids; it decides nothing about ordering. Readers return records in host issue
//! order together with [`ImportCounters`] that say what was read and what was lost.

mod background;
mod counters;
pub mod json;
pub mod nsys;
use nsys::rep as nsys_rep;

use std::path::Path;

pub use background::BackgroundReader;
pub use counters::{ImportCounter, ImportCounters, Severity};

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

/// Opens a trace file, choosing the reader from its first bytes: SQLite (an nsys export), an nsys report
/// (converted with `nsys export`), or JSON.
pub fn open(path: &Path) -> Result<Box<dyn RecordSource>, IngestError> {
    let mut head = [0u8; 32];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .map_err(|e| IngestError::new(path, None, format!("cannot open: {e}")))?;
    let head = &head[..read];
    if head.starts_with(SQLITE_MAGIC) {
        return nsys::NsysReader::open(path).map(|r| Box::new(r) as Box<dyn RecordSource>);
    }
    if head.starts_with(nsys_rep::MAGIC) {
        let sqlite = nsys_rep::to_sqlite(path)?;
        return nsys::NsysReader::open(&sqlite).map(|r| Box::new(r) as Box<dyn RecordSource>);
    }
    json::JsonTraceReader::open(path).map(|r| Box::new(r) as Box<dyn RecordSource>)
}
