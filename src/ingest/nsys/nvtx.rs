//! NVTX regions: the innermost push/pop or start/end range open on a host thread when it made an API call, used
//! as the region label of that call's operations; and every range with its whole text, for timelines
//! ([`each_range`]). A broken or unfamiliar NVTX table costs labels, not the analysis.

use std::collections::HashSet;
use std::sync::Arc;

use rusqlite::{Connection, Statement};
use rustc_hash::FxHashMap;

use crate::ingest::counters::{Counter, ImportCounters};
use crate::model::normalize_region;

/// The query of NVTX ranges in (process, start) order, or None when the export has none that can be read.
/// `per_process`: whether processes are told apart (the activity tables have globalPid).
pub(super) fn prepare<'c>(
    conn: &'c Connection,
    tables: &HashSet<String>,
    per_process: bool,
    counters: &mut ImportCounters,
) -> Option<Statement<'c>> {
    if !tables.contains("NVTX_EVENTS") {
        return None;
    }
    let pid = if per_process { "((globalTid >> 24) & 16777215)" } else { "0" };
    let text = if tables.contains("StringIds") {
        "COALESCE(text, (SELECT value FROM StringIds WHERE id = textId))"
    } else {
        "text"
    };
    // Event types 59 and 60: push/pop and start/end ranges.
    let sql = format!(
        "SELECT {pid}, start, end, globalTid, {text} FROM NVTX_EVENTS \
         WHERE eventType IN (59, 60) AND end IS NOT NULL ORDER BY 1, 2"
    );
    match conn.prepare(&sql) {
        Ok(stmt) => Some(stmt),
        Err(_) => {
            counters.bump(Counter::NsysNvtxUnreadable, 1);
            None
        }
    }
}

/// Every range the query of [`prepare`] gives, with its text as the program wrote it: (pid, globalTid, start,
/// end, text). Rows the table holds broken are left out, as region labels leave them out.
pub(super) fn each_range(stmt: &mut Statement<'_>, mut range: impl FnMut(i64, i64, i64, i64, String)) {
    let Ok(mut rows) = stmt.query([]) else { return };
    while let Ok(Some(row)) = rows.next() {
        if let Some((pid, start, end, global_tid, text)) = range_row(row) {
            range(pid, global_tid, start, end, text);
        }
    }
}

/// One row of the query of [`prepare`]: (pid, start, end, globalTid, text); None when the table holds it broken
/// (a NULL or a value of another type).
fn range_row(row: &rusqlite::Row<'_>) -> Option<(i64, i64, i64, i64, String)> {
    let fields = (|| -> rusqlite::Result<_> {
        Ok((
            row.get::<_, Option<i64>>(0)?,
            row.get::<_, Option<i64>>(1)?,
            row.get::<_, Option<i64>>(2)?,
            row.get::<_, Option<i64>>(3)?,
            row.get::<_, Option<String>>(4)?,
        ))
    })();
    match fields {
        Ok((Some(pid), Some(start), Some(end), Some(global_tid), Some(text))) => {
            Some((pid, start, end, global_tid, text))
        }
        _ => None,
    }
}

/// One NVTX range as the query gives it.
#[derive(Clone)]
struct Range {
    pid: i64,
    start: i64,
    end: i64,
    global_tid: i64,
    text: Arc<str>,
}

/// NVTX ranges in (process, start) order, one row ahead, with the ranges open on each thread.
pub(super) struct RegionCursor<'s> {
    rows: rusqlite::Rows<'s>,
    peeked: Option<Range>,
    process: Option<i64>,
    /// Open ranges by globalTid, innermost last: (end, text).
    open: FxHashMap<i64, Vec<(i64, Arc<str>)>>,
}

impl<'s> RegionCursor<'s> {
    /// Runs the query of [`prepare`]; None when it fails.
    pub(super) fn start(stmt: &'s mut Statement<'_>) -> Option<RegionCursor<'s>> {
        let rows = stmt.query([]).ok()?;
        let mut cursor = RegionCursor { rows, peeked: None, process: None, open: FxHashMap::default() };
        cursor.advance();
        Some(cursor)
    }

    fn advance(&mut self) {
        self.peeked = loop {
            match self.rows.next() {
                Ok(Some(row)) => {
                    if let Some((pid, start, end, global_tid, text)) = range_row(row) {
                        break Some(Range { pid, start, end, global_tid, text: Arc::from(normalize_region(&text)) });
                    }
                }
                // A broken NVTX table costs labels, not the analysis.
                _ => break None,
            }
        };
    }

    /// The innermost range open on `global_tid` of process `pid` at host time `time`. Calls come in time order
    /// within a process.
    pub(super) fn region_at(&mut self, pid: i64, global_tid: i64, time: i64) -> Option<Arc<str>> {
        if self.process != Some(pid) {
            self.open.clear();
            self.process = Some(pid);
            while self.peeked.as_ref().is_some_and(|p| p.pid < pid) {
                self.advance();
            }
        }
        while let Some(range) = self.peeked.clone() {
            if range.pid != pid || range.start > time {
                break;
            }
            self.open.entry(range.global_tid).or_default().push((range.end, range.text));
            self.advance();
        }
        let stack = self.open.get_mut(&global_tid)?;
        while stack.last().is_some_and(|(end, _)| *end < time) {
            stack.pop();
        }
        stack.last().map(|(_, text)| text.clone())
    }
}
