//! What an export holds besides its activity rows: its tables and their columns, its schema version, whether it
//! recorded events, and the small tables read whole before the merge (stream flags, each context's legacy default
//! stream, StringIds).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;
use rustc_hash::FxHashMap;

use super::columns::{read_ints, read_text, select_list, Column};
use crate::ingest::counters::{Counter, ImportCounters};
use crate::ingest::record_source::IngestError;

pub(super) fn table_names(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names = stmt.query_map([], |row| row.get::<_, String>(0))?.collect::<Result<_, _>>()?;
    Ok(names)
}

pub(super) fn column_names(conn: &Connection, table: &str) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let names = stmt.query_map([], |row| row.get::<_, String>(1))?.collect::<Result<_, _>>()?;
    Ok(names)
}

/// Whether the export recorded event records: an empty CUDA_EVENT table means it did not (nsys without
/// --cuda-event-trace).
pub(super) fn has_event_records(conn: &Connection, tables: &HashSet<String>, path: &Path) -> Result<bool, IngestError> {
    const TABLE: &str = "CUPTI_ACTIVITY_KIND_CUDA_EVENT";
    if !tables.contains(TABLE) {
        return Ok(false);
    }
    conn.query_row(&format!("SELECT EXISTS (SELECT 1 FROM {TABLE})"), [], |row| row.get::<_, bool>(0))
        .map_err(|e| IngestError::new(path, Some(TABLE.to_string()), e.to_string()))
}

/// Counts an export without a schema version, or with one this reader does not know (it is then read as 3.x).
pub(super) fn check_version(conn: &Connection, tables: &HashSet<String>, counters: &mut ImportCounters) {
    match schema_version(conn, tables) {
        Some(version) => {
            let major = version.split('.').next().and_then(|m| m.parse::<u32>().ok());
            if !matches!(major, Some(2 | 3)) {
                counters.bump(Counter::NsysSchemaUnknown, 1);
            }
        }
        None => counters.bump(Counter::NsysSchemaVersionMissing, 1),
    }
}

fn schema_version(conn: &Connection, tables: &HashSet<String>) -> Option<String> {
    // The table was renamed in schema 3.4.0.
    let table = ["META_DATA_EXPORT", "EXPORT_META_DATA"].into_iter().find(|t| tables.contains(*t))?;
    conn.query_row(&format!("SELECT value FROM {table} WHERE name = 'EXPORT_SCHEMA_VERSION'"), [], |row| {
        row.get::<_, Option<String>>(0)
    })
    .ok()
    .flatten()
}

/// The small tables, read whole before the merge.
#[derive(Default)]
pub(super) struct Lookups {
    /// Stream flags and priorities from TARGET_INFO_CUDA_STREAM, by (pid, context, stream).
    pub(super) stream_flags: FxHashMap<(i64, i64, i64), (i64, i64)>,
    /// Each context's legacy default stream and device, from TARGET_INFO_CUDA_CONTEXT_INFO, by (pid, context).
    pub(super) null_streams: FxHashMap<(i64, i64), (i64, i64)>,
    /// StringIds, loaded once: names are joined in memory rather than by SQLite for every row.
    pub(super) strings: FxHashMap<i64, Arc<str>>,
    /// Whether the export has a StringIds table (without one, every name is unknown, counted once).
    pub(super) has_strings: bool,
}

const STREAM_COLUMNS: [Column; 5] = [
    Column::required("processId"),
    Column::required("contextId"),
    Column::required("streamId"),
    Column::required("priority").null_reads(0),
    Column::required("flag"),
];

const CONTEXT_COLUMNS: [Column; 4] = [
    Column::required("processId"),
    Column::required("contextId"),
    Column::required("nullStreamId"),
    Column::required("deviceId"),
];

impl Lookups {
    pub(super) fn read(
        conn: &Connection,
        tables: &HashSet<String>,
        path: &Path,
        counters: &mut ImportCounters,
    ) -> Result<Lookups, IngestError> {
        let mut lookups = Lookups::default();
        let mut skipped = 0;
        if tables.contains("TARGET_INFO_CUDA_STREAM") {
            for_each_row(conn, path, "TARGET_INFO_CUDA_STREAM", &STREAM_COLUMNS, |values| match values {
                Some([pid, context, stream, priority, flag]) => {
                    lookups.stream_flags.insert((pid, context, stream), (flag, priority));
                }
                None => skipped += 1,
            })?;
        }
        if tables.contains("TARGET_INFO_CUDA_CONTEXT_INFO") {
            for_each_row(conn, path, "TARGET_INFO_CUDA_CONTEXT_INFO", &CONTEXT_COLUMNS, |values| match values {
                Some([pid, context, null_stream, device]) => {
                    lookups.null_streams.insert((pid, context), (null_stream, device));
                }
                None => skipped += 1,
            })?;
        }
        if skipped > 0 {
            counters.bump(Counter::NsysNullInNotNull, skipped);
        }
        if tables.contains("StringIds") {
            lookups.strings = read_strings(conn, path)?;
            lookups.has_strings = true;
        } else {
            // Names are how API calls are told apart: without them, calls that synchronize without an activity
            // row (cudaFree, cudaDeviceSynchronize) and synchronous copies cannot be recognized.
            counters.bump(Counter::NsysNoStringIds, 1);
        }
        Ok(lookups)
    }
}

/// Reads `columns` of every row of `table`; `each` gets `None` for a row that a NULL skips.
fn for_each_row<const N: usize>(
    conn: &Connection,
    path: &Path,
    table: &str,
    columns: &[Column; N],
    mut each: impl FnMut(Option<[i64; N]>),
) -> Result<(), IngestError> {
    let error = |message: String| IngestError::new(path, Some(table.to_string()), message);
    let present = column_names(conn, table).map_err(|e| error(e.to_string()))?;
    let select = select_list(columns, &present).map_err(|m| error(format!("cannot query: {m}")))?;
    let mut stmt =
        conn.prepare(&format!("SELECT {select} FROM {table}")).map_err(|e| error(format!("cannot query: {e}")))?;
    let mut rows = stmt.query([]).map_err(|e| error(format!("cannot query: {e}")))?;
    while let Some(row) = rows.next().map_err(|e| error(format!("cannot read: {e}")))? {
        each(read_ints(row, 0, columns).map_err(|e| error(e.to_string()))?);
    }
    Ok(())
}

fn read_strings(conn: &Connection, path: &Path) -> Result<FxHashMap<i64, Arc<str>>, IngestError> {
    const ID: [Column; 1] = [Column::required("id")];
    let error = |message: String| IngestError::new(path, Some("StringIds".to_string()), message);
    let mut stmt = conn.prepare("SELECT id, value FROM StringIds").map_err(|e| error(format!("cannot query: {e}")))?;
    let mut rows = stmt.query([]).map_err(|e| error(format!("cannot query: {e}")))?;
    let mut strings = FxHashMap::default();
    while let Some(row) = rows.next().map_err(|e| error(format!("cannot read: {e}")))? {
        let id = read_ints(row, 0, &ID).map_err(|e| error(e.to_string()))?;
        let value = read_text(row, 1, "value").map_err(|e| error(e.to_string()))?;
        // A NULL id or value names nothing.
        if let (Some([id]), Some(value)) = (id, value) {
            strings.insert(id, Arc::from(value.as_str()));
        }
    }
    Ok(strings)
}
