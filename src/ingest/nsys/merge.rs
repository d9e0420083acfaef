//! The k-way merge of the activity tables. Each table comes sorted by (process, correlation id) from its reader
//! thread (table_readers.rs); CUPTI hands correlation ids out in API-entry order within a process, so taking the
//! smallest key across tables yields host issue order, one group per API call: its RUNTIME row and the GPU
//! activities it caused.

use std::path::Path;
use std::sync::mpsc::Receiver;

use super::table_readers::ChunkResult;
use super::tables::{Activity, ActivityQuery};
use crate::ingest::counters::{Counter, ImportCounters};
use crate::ingest::record_source::IngestError;

/// One table's rows in (process, correlation id) order, one row ahead.
struct TableCursor {
    table: &'static dyn ActivityQuery,
    chunks: Receiver<ChunkResult>,
    rows: std::vec::IntoIter<Activity>,
    /// Whether the table's last chunk came.
    ended: bool,
    peeked: Option<Activity>,
}

impl TableCursor {
    fn advance(&mut self, path: &Path, counters: &mut ImportCounters) -> Result<(), IngestError> {
        loop {
            if let Some(activity) = self.rows.next() {
                self.peeked = Some(activity);
                return Ok(());
            }
            if self.ended {
                self.peeked = None;
                return Ok(());
            }
            let chunk = self.chunks.recv().map_err(|_| {
                IngestError::new(path, Some(self.table.table().to_string()), "its reader thread stopped early")
            })??;
            if chunk.skipped > 0 {
                counters.bump(Counter::NsysNullInNotNull, chunk.skipped);
            }
            self.ended = chunk.last;
            self.rows = chunk.rows.into_iter();
        }
    }

    fn key(&self) -> Option<(i64, i64)> {
        self.peeked.as_ref().map(|a| (a.pid, a.correlation))
    }
}

/// The merge over every table's rows.
pub(super) struct Merge {
    cursors: Vec<TableCursor>,
}

impl Merge {
    /// Takes the first row of each table, in the order the tables are mapped within a group.
    pub(super) fn start(
        tables: Vec<(&'static dyn ActivityQuery, Receiver<ChunkResult>)>,
        path: &Path,
        counters: &mut ImportCounters,
    ) -> Result<Merge, IngestError> {
        let mut cursors = Vec::with_capacity(tables.len());
        for (table, chunks) in tables {
            cursors.push(TableCursor { table, chunks, rows: Vec::new().into_iter(), ended: false, peeked: None });
        }
        for cursor in cursors.iter_mut() {
            cursor.advance(path, counters)?;
        }
        Ok(Merge { cursors })
    }

    /// Fills `group` with the rows of the next (process, correlation id), in table order; false at the end.
    pub(super) fn next_group(
        &mut self,
        group: &mut Vec<Activity>,
        path: &Path,
        counters: &mut ImportCounters,
    ) -> Result<bool, IngestError> {
        group.clear();
        let Some(key) = self.cursors.iter().filter_map(TableCursor::key).min() else {
            return Ok(false);
        };
        for cursor in self.cursors.iter_mut() {
            while cursor.key() == Some(key) {
                if let Some(activity) = cursor.peeked.take() {
                    group.push(activity);
                }
                cursor.advance(path, counters)?;
            }
        }
        Ok(true)
    }
}
