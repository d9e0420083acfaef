//! Nsight Systems SQLite exports (`nsys export --type sqlite`), schema 2.9 to 3.25+.
//!
//! Host issue order is rebuilt from correlation ids: every activity table is read sorted by (process,
//! correlation id) and merged (merge.rs). The API call (RUNTIME row) gives the host thread and time, the activity
//! rows the stream and what ran (mapping.rs), once each group is checked for what no intact export holds
//! (anomalies.rs). Which tables and columns are read, and how, is said once per table (tables.rs, columns.rs).
//! Reading runs on a background thread, each activity table read on a thread of its own (table_readers.rs).

mod anomalies;
mod calls;
mod columns;
mod mapping;
mod merge;
mod nvtx;
mod pages;
mod progress;
pub(super) mod rep;
mod schema;
mod table_readers;
mod tables;

use std::collections::HashSet;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::background::BackgroundReader;
use super::record_source::IngestError;
use mapping::Mapper;
use merge::Merge;
use nvtx::RegionCursor;
use progress::Progress;
use schema::Lookups;

/// How reports name the format ([`RecordSource::format`](super::RecordSource::format)). Its host and GPU times
/// share one clock, the session's.
pub const FORMAT: &str = "Nsight Systems SQLite export";

/// Reads an nsys SQLite export on a background thread.
pub struct NsysReader;

impl NsysReader {
    pub fn open(path: &Path) -> Result<BackgroundReader, IngestError> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(|e| IngestError::new(path, None, format!("cannot open as SQLite: {e}")))?;
        let tables = schema::table_names(&conn)
            .map_err(|e| IngestError::new(path, None, format!("not a readable SQLite database: {e}")))?;
        if !tables
            .iter()
            .any(|t| t.starts_with("CUPTI_ACTIVITY_KIND_") || t == "META_DATA_EXPORT" || t == "EXPORT_META_DATA")
        {
            return Err(IngestError::new(
                path,
                None,
                "SQLite, but not an Nsight Systems export: no CUPTI_ACTIVITY_KIND_* or META_DATA_EXPORT table",
            ));
        }
        let path = path.to_path_buf();
        BackgroundReader::spawn("nsys-ingest", FORMAT, move |tx| {
            let mut mapper = Mapper::new(path.clone(), tx);
            let error = read(&conn, &tables, &path, &mut mapper).err();
            mapper.finish(error)
        })
    }
}

/// Reads the whole export into `mapper`, which hands the records over as they come.
fn read(conn: &Connection, tables: &HashSet<String>, path: &Path, mapper: &mut Mapper) -> Result<(), IngestError> {
    mapper.has_event_table = schema::has_event_records(conn, tables, path)?;
    schema::check_version(conn, tables, &mut mapper.counters);
    mapper.lookups = Lookups::read(conn, tables, path, &mut mapper.counters)?;
    let plan = tables::plan(conn, tables, path, &mut mapper.counters)?;
    mapper.event_sync_ids = plan.event_sync_ids;
    std::thread::scope(|scope| {
        let mut readers = Vec::with_capacity(plan.queries.len());
        for query in &plan.queries {
            readers.push((query.table, table_readers::spawn(scope, path, query, plan.per_process)?));
        }
        // Dropped before the scope ends, so that readers still running see the hang-up and stop.
        let mut merge = Merge::start(readers, path, &mut mapper.counters)?;
        let mut region_stmt = nvtx::prepare(conn, tables, plan.per_process, &mut mapper.counters);
        let mut regions = region_stmt.as_mut().and_then(RegionCursor::start);
        let mut group = Vec::new();
        let mut progress = Progress::new();
        while merge.next_group(&mut group, path, &mut mapper.counters)? {
            progress.rows(group.len() as u64, path);
            anomalies::check_group(&mut group, &mapper.lookups, &mut mapper.api_calls, &mut mapper.counters);
            mapper.emit_group(&mut group, &mut regions);
        }
        progress.done();
        // The ranges themselves, for timelines, once every call has its label.
        drop(regions);
        if let Some(stmt) = region_stmt.as_mut() {
            nvtx::each_range(stmt, |pid, global_tid, start, end, text| {
                mapper.annotated_range(pid, global_tid, start, end, text)
            });
        }
        Ok(())
    })
}
