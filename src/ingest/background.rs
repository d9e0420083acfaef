//! A reader that parses on a background thread and hands records over in batches, so that reading a large
//! trace overlaps with analyzing it while memory stays bounded by the queue. Every input format uses it.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use super::counters::ImportCounters;
use super::record_source::{IngestError, RecordSource};
use crate::model::TraceRecord;

/// Records as the worker hands them over; an error ends the stream.
pub type Batch = Vec<Result<TraceRecord, IngestError>>;

/// Batches a worker may queue ahead of the analysis.
const QUEUED_BATCHES: usize = 16;

pub struct BackgroundReader {
    format: &'static str,
    batches: Receiver<Batch>,
    current: std::vec::IntoIter<Result<TraceRecord, IngestError>>,
    worker: Option<JoinHandle<ImportCounters>>,
    failed: bool,
}

impl BackgroundReader {
    /// Runs `work` on a thread named `name`; it sends batches and returns its import counters.
    pub fn spawn(
        name: &str,
        format: &'static str,
        work: impl FnOnce(SyncSender<Batch>) -> ImportCounters + Send + 'static,
    ) -> Result<BackgroundReader, IngestError> {
        let (tx, rx) = sync_channel::<Batch>(QUEUED_BATCHES);
        let worker =
            std::thread::Builder::new().name(name.to_string()).spawn(move || work(tx)).map_err(|e| IngestError {
                path: name.to_string(),
                location: None,
                message: format!("cannot start the reader thread: {e}"),
            })?;
        Ok(BackgroundReader {
            format,
            batches: rx,
            current: Vec::new().into_iter(),
            worker: Some(worker),
            failed: false,
        })
    }
}

impl Iterator for BackgroundReader {
    type Item = Result<TraceRecord, IngestError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(item) = self.current.next() {
                self.failed = item.is_err();
                return Some(item);
            }
            self.current = self.batches.recv().ok()?.into_iter();
        }
    }
}

impl RecordSource for BackgroundReader {
    fn format(&self) -> &'static str {
        self.format
    }

    fn next_batch(&mut self) -> Option<Batch> {
        if self.failed {
            return None;
        }
        let rest: Batch = self.current.by_ref().collect();
        let batch = if rest.is_empty() { self.batches.recv().ok()? } else { rest };
        // An error ends the stream, as it does for the iterator.
        self.failed = batch.iter().any(Result::is_err);
        Some(batch)
    }

    fn finish(mut self: Box<Self>) -> ImportCounters {
        // Dropping the receiver first lets a worker blocked on a full queue see the hang-up and stop.
        let worker = self.worker.take();
        drop(self);
        worker.and_then(|w| w.join().ok()).unwrap_or_default()
    }
}
