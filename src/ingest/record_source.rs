//! What every reader is to the rest of the program: a [`RecordSource`] of model records in host issue order,
//! with its import counters, and the [`IngestError`] that ends one.

use std::path::Path;

use super::counters::ImportCounters;
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
    /// Gives a batch from [`RecordSource::next_batch`] back once read, so that its records are dropped and its
    /// memory reused where they were made (the reader's thread) rather than on the caller's.
    fn recycle(&mut self, batch: Vec<Result<TraceRecord, IngestError>>) {
        drop(batch);
    }
    /// Has `observer` take note of every batch given back from now on ([`RecordSource::recycle`]), in order, on
    /// the reader's thread, before its records are dropped; by [`RecordSource::finish`] it has seen them all.
    /// A source that cannot gives the observer back: the caller then observes the records itself.
    fn observe_given_back(&mut self, observer: Box<dyn RecordObserver>) -> Result<(), Box<dyn RecordObserver>> {
        Err(observer)
    }
    /// Has `preparer` go over every batch before it is handed over, from some batch on (those already read
    /// are handed over as they are), on the reader's thread: for work the analysis would otherwise do, where
    /// the reader keeps ahead of it. A source that cannot gives the preparer back.
    fn prepare_before_hand_over(&mut self, preparer: Box<dyn RecordPreparer>) -> Result<(), Box<dyn RecordPreparer>> {
        Err(preparer)
    }
}

/// What a caller learns from records that does not decide the analysis (the names of streams and events): taken
/// note of where the records are dropped ([`RecordSource::observe_given_back`]), so that the thread that analyzes
/// them reads each record once.
pub trait RecordObserver: Send {
    /// Takes note of a batch of records, the batches in the order they were read.
    fn observe(&mut self, batch: &[Result<TraceRecord, IngestError>]);
}

/// Work on the records that the analysis hands to the reader's thread ([`RecordSource::prepare_before_hand_over`]):
/// it may fill in what the records leave for the analysis to work out, never change what they say.
pub trait RecordPreparer: Send {
    /// Goes over a batch of records, the batches in the order they were read.
    fn prepare(&mut self, batch: &mut [Result<TraceRecord, IngestError>]);
}

/// Records a reader hands over at a time (see `background::QUEUED_BATCHES` for why this few).
pub(super) const BATCH: usize = 1024;
