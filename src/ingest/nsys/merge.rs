//! The k-way merge of the activity tables. Each table is read sorted by (process, correlation id); CUPTI hands
//! correlation ids out in API-entry order within a process, so taking the smallest key across tables yields
//! host issue order, one group per API call: its RUNTIME row and the GPU activities it caused.

use std::path::Path;

use rusqlite::{Rows, Statement};

use super::tables::{Activity, ActivityQuery};
use crate::ingest::counters::{Counter, ImportCounters};
use crate::ingest::record_source::IngestError;

/// One table's rows in (process, correlation id) order, one row ahead.
struct TableCursor<'s> {
    table: &'static dyn ActivityQuery,
    rows: Rows<'s>,
    peeked: Option<Activity>,
}

impl TableCursor<'_> {
    fn advance(&mut self, path: &Path, counters: &mut ImportCounters) -> Result<(), IngestError> {
        let error = |message: String| IngestError::new(path, Some(self.table.table().to_string()), message);
        loop {
            let row = match self.rows.next() {
                Ok(Some(row)) => row,
                Ok(None) => {
                    self.peeked = None;
                    return Ok(());
                }
                Err(e) => return Err(error(format!("cannot read: {e}"))),
            };
            match self.table.read(row) {
                Ok(Some(activity)) => {
                    self.peeked = Some(activity);
                    return Ok(());
                }
                Ok(None) => counters.bump(Counter::NsysNullInNotNull, 1),
                Err(bad) => return Err(error(bad.to_string())),
            }
        }
    }

    fn key(&self) -> Option<(i64, i64)> {
        self.peeked.as_ref().map(|a| (a.pid, a.correlation))
    }
}

/// The merge over every table's query.
pub(super) struct Merge<'s> {
    cursors: Vec<TableCursor<'s>>,
}

impl<'s> Merge<'s> {
    /// Runs the prepared query of each table and reads its first row.
    pub(super) fn start(
        statements: &'s mut [(&'static dyn ActivityQuery, Statement<'_>)],
        path: &Path,
        counters: &mut ImportCounters,
    ) -> Result<Merge<'s>, IngestError> {
        let mut cursors = Vec::with_capacity(statements.len());
        for (table, stmt) in statements.iter_mut() {
            let rows = stmt
                .query([])
                .map_err(|e| IngestError::new(path, Some(table.table().to_string()), format!("cannot query: {e}")))?;
            cursors.push(TableCursor { table: *table, rows, peeked: None });
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
