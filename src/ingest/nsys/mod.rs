//! Nsight Systems SQLite exports (`nsys export --type sqlite`), schema 2.9 to 3.25+.
//!
//! Host issue order is rebuilt from correlation ids: CUPTI hands them out in API-entry order within a process,
//! so every table is read sorted by (process, correlation id) and merged. The API call (RUNTIME row) gives the
//! host thread and time, the activity rows the stream and what ran. Synchronization rows are classified by the
//! API name of their call, since `syncType` disagrees with its own enum in many versions (MANIFEST.md).
//! Reading runs on a background thread; memory grows with streams and events, not with rows.

mod calls;
mod nvtx;
mod progress;
pub(super) mod rep;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags, Row};
use rustc_hash::FxHashMap;

use super::background::{Batch, BackgroundReader};
use calls::{base_name, blocks_device, classify_sync, SyncKind};
use nvtx::RegionCursor;
use progress::Progress;
use super::{ImportCounters, IngestError, Severity, BATCH};
use crate::model::{
    AccessRange, AllocId, AllocKind, ContextId, CopyKind, DeviceId, EventId, EventInfo, FreeKind, HostSync, OpKind,
    Operation, ProcessId, StreamId, StreamInfo, StreamKind, ThreadId, ThreadInfo, TraceRecord,
};

/// CUPTI's "not applicable" for event ids.
const NOT_APPLICABLE: i64 = 4_294_967_295;


/// Reads an nsys SQLite export on a background thread.
pub struct NsysReader;

impl NsysReader {
    pub fn open(path: &Path) -> Result<BackgroundReader, IngestError> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| IngestError::new(path, None, format!("cannot open as SQLite: {e}")))?;
        let tables = table_names(&conn).map_err(|e| IngestError::new(path, None, format!("not a readable SQLite database: {e}")))?;
        if !tables.iter().any(|t| t.starts_with("CUPTI_ACTIVITY_KIND_") || t == "META_DATA_EXPORT" || t == "EXPORT_META_DATA") {
            return Err(IngestError::new(
                path,
                None,
                "SQLite, but not an Nsight Systems export: no CUPTI_ACTIVITY_KIND_* or META_DATA_EXPORT table",
            ));
        }
        let path = path.to_path_buf();
        BackgroundReader::spawn("nsys-ingest", "Nsight Systems SQLite export", move |tx| {
            let mut reader = Export::new(tables, path, tx);
            if let Err(error) = reader.read(&conn) {
                reader.batch.push(Err(error));
            }
            reader.flush();
            reader.counters
        })
    }
}

fn table_names(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names = stmt.query_map([], |row| row.get::<_, String>(0))?.collect::<Result<_, _>>()?;
    Ok(names)
}

/// One row of any table, keyed for the merge by (process id, correlation id).
#[derive(Debug)]
struct Activity {
    pid: i64,
    correlation: i64,
    row: ActivityRow,
}

#[derive(Debug)]
enum ActivityRow {
    /// `name` is a StringIds id.
    Api { start: i64, end: i64, global_tid: i64, name: i64 },
    Kernel { start: i64, end: i64, device: i64, context: i64, stream: i64, name: i64 },
    Memcpy { start: i64, end: i64, device: i64, context: i64, stream: i64, bytes: i64, copy_kind: i64 },
    Memset { start: i64, end: i64, device: i64, context: i64, stream: i64, bytes: i64 },
    Sync { start: i64, end: i64, context: i64, stream: i64, sync_type: i64, event: i64, event_sync: Option<i64> },
    EventRecord { device: i64, context: i64, stream: i64, event: i64, event_sync: Option<i64> },
    Memory { start: i64, address: i64, bytes: i64, free: bool, name: Option<String> },
}

/// How to read one table: its query (columns in a fixed order) and how to turn a row into an activity.
struct TableQuery {
    table: &'static str,
    sql: String,
    decode: fn(&Row) -> rusqlite::Result<Option<ActivityRow>>,
}

/// Reads an integer column that the schema says is NOT NULL; `None` when an export broke that promise.
fn int(row: &Row, i: usize) -> rusqlite::Result<Option<i64>> {
    row.get::<_, Option<i64>>(i)
}

macro_rules! need {
    ($e:expr) => {
        match $e? {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}


/// Tables whose rows are keyed by globalPid and correlationId.
const ACTIVITY_TABLES: [&str; 6] = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
    "CUDA_GPU_MEMORY_USAGE_EVENTS",
];

/// The state of one export being read.
struct Export {
    tables: HashSet<String>,
    path: PathBuf,
    tx: SyncSender<Batch>,
    batch: Batch,
    counters: ImportCounters,
    seq: u64,
    processes: FxHashMap<i64, ProcessId>,
    threads: FxHashMap<i64, ThreadId>,
    unknown_threads: FxHashMap<ProcessId, ThreadId>,
    /// Stream flags and priorities from TARGET_INFO_CUDA_STREAM, by (pid, context, stream).
    stream_flags: FxHashMap<(i64, i64, i64), (i64, i64)>,
    /// Each context's legacy default stream and device, from TARGET_INFO_CUDA_CONTEXT_INFO.
    null_streams: FxHashMap<(i64, i64), (i64, i64)>,
    streams: FxHashMap<(i64, i64, i64), StreamId>,
    contexts: FxHashMap<(i64, i64), ContextId>,
    devices: FxHashMap<(i64, i64), DeviceId>,
    /// Events by (pid, eventSyncId) when the export has sync ids, else by (pid, eventId): the latest record.
    events: FxHashMap<(i64, i64), EventId>,
    next_event: u32,
    has_event_table: bool,
    live_allocations: FxHashMap<(i64, i64), (AllocId, u64)>,
    next_alloc: u32,
    api_names: FxHashMap<i64, Arc<str>>,
    /// StringIds, loaded once: names are joined in memory rather than by SQLite for every row.
    strings: FxHashMap<i64, Arc<str>>,
    every_table_has_pid: bool,
}

impl Export {
    fn new(tables: HashSet<String>, path: PathBuf, tx: SyncSender<Batch>) -> Export {
        let has_event_table = tables.contains("CUPTI_ACTIVITY_KIND_CUDA_EVENT");
        Export {
            tables,
            path,
            tx,
            batch: Vec::with_capacity(BATCH),
            counters: ImportCounters::default(),
            seq: 0,
            processes: FxHashMap::default(),
            threads: FxHashMap::default(),
            unknown_threads: FxHashMap::default(),
            stream_flags: FxHashMap::default(),
            null_streams: FxHashMap::default(),
            streams: FxHashMap::default(),
            contexts: FxHashMap::default(),
            devices: FxHashMap::default(),
            events: FxHashMap::default(),
            next_event: 0,
            has_event_table,
            live_allocations: FxHashMap::default(),
            next_alloc: 0,
            api_names: FxHashMap::default(),
            strings: FxHashMap::default(),
            every_table_has_pid: true,
        }
    }

    fn error(&self, table: &str, message: impl std::fmt::Display) -> IngestError {
        IngestError::new(&self.path, Some(table.to_string()), message.to_string())
    }

    fn push(&mut self, record: TraceRecord) {
        self.batch.push(Ok(record));
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        // A closed receiver means the consumer stopped early (an error downstream): nothing left to do.
        let _ = self.tx.send(batch);
    }

    fn columns(&self, conn: &Connection, table: &str) -> rusqlite::Result<HashSet<String>> {
        let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
        let names = stmt.query_map([], |row| row.get::<_, String>(1))?.collect::<Result<_, _>>()?;
        Ok(names)
    }

    fn schema_version(&mut self, conn: &Connection) -> Option<String> {
        let table = ["META_DATA_EXPORT", "EXPORT_META_DATA"].into_iter().find(|t| self.tables.contains(*t))?;
        conn
            .query_row(&format!("SELECT value FROM {table} WHERE name = 'EXPORT_SCHEMA_VERSION'"), [], |row| {
                row.get::<_, Option<String>>(0)
            })
            .ok()
            .flatten()
    }

    fn read(&mut self, conn: &Connection) -> Result<(), IngestError> {
        // An empty CUDA_EVENT table means event records were not captured (nsys without --cuda-event-trace).
        self.has_event_table = self.has_event_table
            && conn
                .query_row("SELECT EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT)", [], |row| row.get::<_, bool>(0))
                .map_err(|e| self.error("CUPTI_ACTIVITY_KIND_CUDA_EVENT", e))?;
        match self.schema_version(conn) {
            Some(version) => {
                let major = version.split('.').next().and_then(|m| m.parse::<u32>().ok());
                if !matches!(major, Some(2 | 3)) {
                    self.counters.bump(
                        "nsys.schema_unknown",
                        Severity::DataLoss,
                        "export schema version outside 2.x-3.x: read as 3.x, columns checked one by one",
                        1,
                    );
                }
            }
            None => self.counters.bump("nsys.schema_version_missing", Severity::Info, "export without a schema version", 1),
        }
        self.read_stream_info(conn)?;
        if self.tables.contains("StringIds") {
            let rows = query_all(conn, "SELECT id, value FROM StringIds", |row| Ok((int(row, 0)?, row.get::<_, Option<String>>(1)?)))
                .map_err(|e| self.error("StringIds", e))?;
            self.strings = rows.into_iter().filter_map(|(id, value)| Some((id?, Arc::from(value?.as_str())))).collect();
        }
        let queries = self.table_queries(conn)?;
        let mut statements = Vec::new();
        for query in &queries {
            let stmt = conn.prepare(&query.sql).map_err(|e| self.error(query.table, format!("cannot query: {e}")))?;
            statements.push((query, stmt));
        }
        let mut cursors = Vec::new();
        for (query, stmt) in statements.iter_mut() {
            let rows = stmt.query([]).map_err(|e| IngestError::new(&self.path, Some(query.table.to_string()), format!("cannot query: {e}")))?;
            cursors.push(Cursor { query, rows, peeked: None });
        }
        for cursor in cursors.iter_mut() {
            cursor.advance(&self.path, &mut self.counters)?;
        }
        let mut region_stmt = nvtx::prepare(conn, &self.tables, self.every_table_has_pid, &mut self.counters);
        let mut regions = region_stmt.as_mut().and_then(RegionCursor::start);
        let mut group: Vec<Activity> = Vec::new();
        let mut progress = Progress::new();
        loop {
            let Some(key) = cursors.iter().filter_map(|c| c.peeked.as_ref().map(|a| (a.pid, a.correlation))).min() else {
                break;
            };
            group.clear();
            for cursor in cursors.iter_mut() {
                while cursor.peeked.as_ref().is_some_and(|a| (a.pid, a.correlation) == key) {
                    if let Some(activity) = cursor.peeked.take() {
                        group.push(activity);
                    }
                    cursor.advance(&self.path, &mut self.counters)?;
                }
            }
            progress.rows(group.len() as u64, &self.path);
            self.emit_group(&mut group, &mut regions);
        }
        progress.done();
        Ok(())
    }

    fn read_stream_info(&mut self, conn: &Connection) -> Result<(), IngestError> {
        if self.tables.contains("TARGET_INFO_CUDA_STREAM") {
            let sql = "SELECT processId, contextId, streamId, priority, flag FROM TARGET_INFO_CUDA_STREAM";
            let rows = query_all(conn, sql, |row| {
                Ok((int(row, 0)?, int(row, 1)?, int(row, 2)?, int(row, 3)?.unwrap_or(0), int(row, 4)?))
            })
            .map_err(|e| self.error("TARGET_INFO_CUDA_STREAM", e))?;
            for (pid, ctx, stream, priority, flag) in rows {
                match (pid, ctx, stream, flag) {
                    (Some(pid), Some(ctx), Some(stream), Some(flag)) => {
                        self.stream_flags.insert((pid, ctx, stream), (flag, priority));
                    }
                    _ => self.counters.bump("nsys.null_in_not_null", Severity::DataLoss, "rows with NULL in a NOT NULL column, skipped", 1),
                }
            }
        }
        if self.tables.contains("TARGET_INFO_CUDA_CONTEXT_INFO") {
            let sql = "SELECT processId, contextId, nullStreamId, deviceId FROM TARGET_INFO_CUDA_CONTEXT_INFO";
            let rows = query_all(conn, sql, |row| Ok((int(row, 0)?, int(row, 1)?, int(row, 2)?, int(row, 3)?)))
                .map_err(|e| self.error("TARGET_INFO_CUDA_CONTEXT_INFO", e))?;
            for (pid, ctx, null_stream, device) in rows {
                match (pid, ctx, null_stream, device) {
                    (Some(pid), Some(ctx), Some(null_stream), Some(device)) => {
                        self.null_streams.insert((pid, ctx), (null_stream, device));
                    }
                    _ => self.counters.bump("nsys.null_in_not_null", Severity::DataLoss, "rows with NULL in a NOT NULL column, skipped", 1),
                }
            }
        }
        Ok(())
    }

    /// The queries for the tables this export has, each sorted by (process, correlation id).
    fn table_queries(&mut self, conn: &Connection) -> Result<Vec<TableQuery>, IngestError> {
        let mut queries = Vec::new();
        let has = |this: &Export, table: &str| this.tables.contains(table);
        let columns = |this: &Export, table: &'static str| this.columns(conn, table).map_err(|e| this.error(table, e));
        // Processes are told apart by globalPid; an export whose activity tables lack it is read as one process.
        let mut every_table_has_pid = true;
        for table in ACTIVITY_TABLES {
            if has(self, table) && !columns(self, table)?.contains("globalPid") {
                every_table_has_pid = false;
            }
        }
        self.every_table_has_pid = every_table_has_pid;
        self.every_table_has_pid = every_table_has_pid;
        if !every_table_has_pid {
            self.counters.bump("nsys.no_global_pid", Severity::Info, "activity tables without globalPid: read as one process", 1);
        }
        let (pid, runtime_pid) = if every_table_has_pid {
            ("((globalPid >> 24) & 16777215)", "((r.globalTid >> 24) & 16777215)")
        } else {
            ("0", "0")
        };
        if has(self, "CUPTI_ACTIVITY_KIND_RUNTIME") {
            queries.push(TableQuery {
                table: "CUPTI_ACTIVITY_KIND_RUNTIME",
                sql: format!(
                    "SELECT {runtime_pid}, r.correlationId, r.start, r.end, r.globalTid, r.nameId \
                     FROM CUPTI_ACTIVITY_KIND_RUNTIME r ORDER BY 1, 2, r.start"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::Api {
                        start: need!(int(row, 2)),
                        end: need!(int(row, 3)),
                        global_tid: need!(int(row, 4)),
                        name: int(row, 5)?.unwrap_or(-1),
                    }))
                },
            });
        } else {
            self.counters.bump("nsys.no_runtime_table", Severity::DataLoss, "export without CUDA API calls: host threads and host order unknown", 1);
        }
        if has(self, "CUPTI_ACTIVITY_KIND_KERNEL") {
            let cols = columns(self, "CUPTI_ACTIVITY_KIND_KERNEL")?;
            // The demangled name tells PyTorch's many `vectorized_elementwise_kernel`s apart (fill, mul, add, ...).
            let name_col = if cols.contains("demangledName") { "demangledName" } else { "shortName" };
            let name = format!("k.{name_col}");
            let [device, context, stream] = ["deviceId", "contextId", "streamId"].map(|c| column_or(&cols, c, "0"));
            queries.push(TableQuery {
                table: "CUPTI_ACTIVITY_KIND_KERNEL",
                sql: format!(
                    "SELECT {pid}, correlationId, start, end, {device}, {context}, {stream}, {name} \
                     FROM CUPTI_ACTIVITY_KIND_KERNEL k ORDER BY 1, 2, start"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::Kernel {
                        start: need!(int(row, 2)),
                        end: need!(int(row, 3)),
                        device: need!(int(row, 4)),
                        context: need!(int(row, 5)),
                        stream: need!(int(row, 6)),
                        name: int(row, 7)?.unwrap_or(-1),
                    }))
                },
            });
        }
        if has(self, "CUPTI_ACTIVITY_KIND_MEMCPY") {
            let cols = columns(self, "CUPTI_ACTIVITY_KIND_MEMCPY")?;
            let [device, context, stream] = ["deviceId", "contextId", "streamId"].map(|c| column_or(&cols, c, "0"));
            queries.push(TableQuery {
                table: "CUPTI_ACTIVITY_KIND_MEMCPY",
                sql: format!(
                    "SELECT {pid}, correlationId, start, end, {device}, {context}, {stream}, bytes, copyKind \
                     FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY 1, 2, start"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::Memcpy {
                        start: need!(int(row, 2)),
                        end: need!(int(row, 3)),
                        device: need!(int(row, 4)),
                        context: need!(int(row, 5)),
                        stream: need!(int(row, 6)),
                        bytes: need!(int(row, 7)),
                        copy_kind: need!(int(row, 8)),
                    }))
                },
            });
        }
        if has(self, "CUPTI_ACTIVITY_KIND_MEMSET") {
            let cols = columns(self, "CUPTI_ACTIVITY_KIND_MEMSET")?;
            let [device, context, stream] = ["deviceId", "contextId", "streamId"].map(|c| column_or(&cols, c, "0"));
            queries.push(TableQuery {
                table: "CUPTI_ACTIVITY_KIND_MEMSET",
                sql: format!(
                    "SELECT {pid}, correlationId, start, end, {device}, {context}, {stream}, bytes \
                     FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY 1, 2, start"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::Memset {
                        start: need!(int(row, 2)),
                        end: need!(int(row, 3)),
                        device: need!(int(row, 4)),
                        context: need!(int(row, 5)),
                        stream: need!(int(row, 6)),
                        bytes: need!(int(row, 7)),
                    }))
                },
            });
        }
        if has(self, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") {
            let cols = columns(self, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")?;
            let sync_id = column_or(&cols, "eventSyncId", "NULL");
            let [context, stream] = ["contextId", "streamId"].map(|c| column_or(&cols, c, "0"));
            queries.push(TableQuery {
                table: "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                sql: format!(
                    "SELECT {pid}, correlationId, start, end, {context}, {stream}, syncType, eventId, {sync_id} \
                     FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION ORDER BY 1, 2, start"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::Sync {
                        start: need!(int(row, 2)),
                        end: need!(int(row, 3)),
                        context: need!(int(row, 4)),
                        stream: need!(int(row, 5)),
                        sync_type: int(row, 6)?.unwrap_or(0),
                        event: int(row, 7)?.unwrap_or(NOT_APPLICABLE),
                        event_sync: int(row, 8)?,
                    }))
                },
            });
        }
        if self.tables.contains("CUPTI_ACTIVITY_KIND_CUDA_EVENT") {
            let cols = columns(self, "CUPTI_ACTIVITY_KIND_CUDA_EVENT")?;
            let sync_id = column_or(&cols, "eventSyncId", "NULL");
            let [device, context, stream] = ["deviceId", "contextId", "streamId"].map(|c| column_or(&cols, c, "0"));
            queries.push(TableQuery {
                table: "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
                sql: format!(
                    "SELECT {pid}, correlationId, {device}, {context}, {stream}, eventId, {sync_id} \
                     FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT ORDER BY 1, 2"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::EventRecord {
                        device: need!(int(row, 2)),
                        context: need!(int(row, 3)),
                        stream: need!(int(row, 4)),
                        event: need!(int(row, 5)),
                        event_sync: int(row, 6)?,
                    }))
                },
            });
        }
        if has(self, "CUDA_GPU_MEMORY_USAGE_EVENTS") {
            queries.push(TableQuery {
                table: "CUDA_GPU_MEMORY_USAGE_EVENTS",
                sql: format!(
                    "SELECT {pid}, correlationId, start, address, bytes, memoryOperationType, name \
                     FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 2 ORDER BY 1, 2, start"
                ),
                decode: |row| {
                    Ok(Some(ActivityRow::Memory {
                        start: need!(int(row, 2)),
                        address: need!(int(row, 3)),
                        bytes: need!(int(row, 4)),
                        free: need!(int(row, 5)) == 1,
                        name: row.get::<_, Option<String>>(6)?,
                    }))
                },
            });
        }
        Ok(queries)
    }

    fn process(&mut self, pid: i64) -> ProcessId {
        let next = ProcessId(self.processes.len() as u32);
        *self.processes.entry(pid).or_insert(next)
    }

    fn thread(&mut self, process: ProcessId, global_tid: Option<i64>) -> ThreadId {
        let next = ThreadId((self.threads.len() + self.unknown_threads.len()) as u32);
        let (id, fresh, tid) = match global_tid {
            Some(g) => {
                let id = *self.threads.entry(g).or_insert(next);
                (id, id == next, (g & 0xFF_FFFF) as u64)
            }
            None => {
                let id = *self.unknown_threads.entry(process).or_insert(next);
                (id, id == next, 0)
            }
        };
        if fresh {
            self.push(TraceRecord::Thread(ThreadInfo { id, process, tid, name: None }));
        }
        id
    }

    fn device(&mut self, pid: i64, device: i64) -> DeviceId {
        let next = DeviceId(self.devices.len() as u32);
        *self.devices.entry((pid, device)).or_insert(next)
    }

    /// The stream (pid, context, stream), declared on first use from TARGET_INFO's flags.
    fn stream(&mut self, pid: i64, context: i64, stream: i64, device: Option<i64>) -> StreamId {
        if let Some(&id) = self.streams.get(&(pid, context, stream)) {
            return id;
        }
        let process = self.process(pid);
        let id = StreamId(self.streams.len() as u32);
        self.streams.insert((pid, context, stream), id);
        let null = self.null_streams.get(&(pid, context)).copied();
        let kind = match (self.stream_flags.get(&(pid, context, stream)), null) {
            (_, Some((null_stream, _))) if null_stream == stream => StreamKind::LegacyDefault,
            (Some((3, _)), _) => StreamKind::LegacyDefault,
            (Some((1, _)), _) => StreamKind::Blocking,
            (Some((2, _)), _) => StreamKind::NonBlocking,
            _ => {
                self.counters.bump(
                    "nsys.stream_flags_unknown",
                    Severity::DataLoss,
                    "streams missing from TARGET_INFO_CUDA_STREAM, taken as non-blocking (legacy default stream ordering may be missed)",
                    1,
                );
                StreamKind::NonBlocking
            }
        };
        let priority = self.stream_flags.get(&(pid, context, stream)).map(|&(_, p)| p as i32);
        let device_number = null.map(|(_, d)| d).or(device).unwrap_or(0);
        let device = self.device(pid, device_number);
        let next_context = ContextId(self.contexts.len() as u32);
        let context_id = *self.contexts.entry((pid, context)).or_insert(next_context);
        self.push(TraceRecord::Stream(StreamInfo {
            id,
            handle: stream as u64,
            kind,
            priority,
            process,
            device,
            context: context_id,
            created_by: None,
        }));
        id
    }

    /// The API function's name without its version suffix, for a StringIds id.
    fn api_name(&mut self, id: i64) -> Arc<str> {
        if let Some(api) = self.api_names.get(&id) {
            return api.clone();
        }
        let full = self.strings.get(&id).cloned().unwrap_or_else(|| Arc::from("unknown API"));
        let api: Arc<str> = Arc::from(base_name(&full));
        self.api_names.insert(id, api.clone());
        api
    }

    fn new_event(&mut self, pid: i64, handle: i64) -> EventId {
        let process = self.process(pid);
        let id = EventId(self.next_event);
        self.next_event += 1;
        self.push(TraceRecord::Event(EventInfo { id, handle: handle as u64, process }));
        id
    }

    /// The key an event record and its waits share: the sync id where the export has one, else the event id.
    fn event_key(event: i64, event_sync: Option<i64>) -> Option<i64> {
        match event_sync {
            Some(sync) if sync != NOT_APPLICABLE => Some(sync),
            _ if event != NOT_APPLICABLE => Some(-1 - event), // a separate key space for plain event ids
            _ => None,
        }
    }

    fn emit_group(&mut self, group: &mut [Activity], regions: &mut Option<RegionCursor>) {
        let Some(first) = group.first() else { return };
        let (pid, correlation) = (first.pid, first.correlation);
        let process = self.process(pid);
        let api = group.iter().find_map(|a| match &a.row {
            ActivityRow::Api { start, end, global_tid, name } => Some((*start, *end, *global_tid, *name)),
            _ => None,
        });
        let thread = self.thread(process, api.as_ref().map(|a| a.2));
        let api_name = api.as_ref().map(|a| self.api_name(a.3));
        let region = match (regions.as_mut(), &api) {
            (Some(cursor), Some((start, _, global_tid, _))) => cursor.region_at(pid, *global_tid, *start),
            _ => None,
        };
        let call = CallContext {
            process,
            thread,
            correlation,
            host_start: api.as_ref().map(|a| a.0.max(0) as u64),
            host_end: api.as_ref().map(|a| a.1.max(0) as u64),
            api: api_name.clone(),
            region,
        };
        let gpu_rows = group.iter().filter(|a| !matches!(a.row, ActivityRow::Api { .. })).count();
        if api.is_none() {
            self.counters.bump(
                "nsys.activity_without_api_call",
                Severity::Info,
                "GPU activities whose API call is outside the capture window: host thread unknown",
                gpu_rows as u64,
            );
        }
        let name = api_name.as_deref().unwrap_or("");
        let mut emitted = false;
        for activity in group.iter_mut() {
            let row = std::mem::replace(&mut activity.row, ActivityRow::Api { start: 0, end: 0, global_tid: 0, name: -1 });
            let kind = match row {
                ActivityRow::Api { .. } => continue,
                ActivityRow::Kernel { start, end, device, context, stream, name: kernel } => {
                    self.counters.bump("nsys.kernels", Severity::Info, "kernel rows read", 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let name = self.strings.get(&kernel).cloned().unwrap_or_else(|| Arc::from("kernel"));
                    let op = OpKind::Kernel { stream, name, accesses: Vec::new(), pointers: Vec::new() };
                    self.push_op(&call, Some((start, end)), op);
                    emitted = true;
                    continue;
                }
                ActivityRow::Memcpy { start, end, device, context, stream, bytes, copy_kind } => {
                    self.counters.bump("nsys.memcpys", Severity::Info, "memcpy rows read", 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let copy = match copy_kind {
                        1 => CopyKind::HtoD,
                        2 => CopyKind::DtoH,
                        8 => CopyKind::DtoD,
                        9 => CopyKind::HtoH,
                        10 => CopyKind::PtoP,
                        _ => CopyKind::Default,
                    };
                    let synchronous = name.starts_with("cudaMemcpy") && !name.contains("Async")
                        || name.starts_with("cuMemcpy") && !name.contains("Async");
                    let op = OpKind::Memcpy { stream, copy, bytes: bytes.max(0) as u64, src: None, dst: None, synchronous };
                    self.push_op(&call, Some((start, end)), op);
                    emitted = true;
                    continue;
                }
                ActivityRow::Memset { start, end, device, context, stream, bytes } => {
                    self.counters.bump("nsys.memsets", Severity::Info, "memset rows read", 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let synchronous = name.starts_with("cudaMemset") && !name.contains("Async");
                    let op = OpKind::Memset { stream, bytes: bytes.max(0) as u64, dst: None, synchronous };
                    self.push_op(&call, Some((start, end)), op);
                    emitted = true;
                    continue;
                }
                ActivityRow::EventRecord { device, context, stream, event, event_sync } => {
                    self.counters.bump("nsys.event_records", Severity::Info, "event record rows read", 1);
                    let stream = self.stream(pid, context, stream, Some(device));
                    let Some(key) = Self::event_key(event, event_sync) else {
                        self.counters.bump("nsys.event_without_id", Severity::DataLoss, "event records without an event id, skipped", 1);
                        continue;
                    };
                    // With sync ids every record is its own event; without, a record replaces the last one.
                    let id = match (event_sync.is_some_and(|s| s != NOT_APPLICABLE), self.events.get(&(pid, key))) {
                        (false, Some(&id)) => id,
                        _ => {
                            let id = self.new_event(pid, event);
                            self.events.insert((pid, key), id);
                            id
                        }
                    };
                    OpKind::EventRecord { event: id, stream }
                }
                ActivityRow::Sync { start, end, context, stream, sync_type, event, event_sync } => {
                    self.counters.bump("nsys.syncs", Severity::Info, "synchronization rows read", 1);
                    let class = classify_sync(name, sync_type);
                    if api.is_none() || class.by_type {
                        self.counters.bump("nsys.sync_classified_by_type", Severity::Info, "synchronization rows classified by syncType (no API name)", 1);
                    }
                    let _ = (start, end);
                    match class.kind {
                        SyncKind::StreamWait => {
                            let waiting = self.stream(pid, context, stream, None);
                            let key = Self::event_key(event, event_sync);
                            match key.and_then(|k| self.events.get(&(pid, k)).copied()) {
                                Some(id) => OpKind::StreamWait { stream: waiting, event: id },
                                None if self.has_event_table => {
                                    // The export records event records, and none came before this wait.
                                    let id = self.new_event(pid, event);
                                    OpKind::StreamWait { stream: waiting, event: id }
                                }
                                None => {
                                    self.counters.bump(
                                        "nsys.wait_record_unknown",
                                        Severity::DataLoss,
                                        "stream waits whose recording stream is unknown (no CUPTI_ACTIVITY_KIND_CUDA_EVENT table): they order nothing here",
                                        1,
                                    );
                                    OpKind::StreamWaitUnknownRecord { stream: waiting, event: event.max(0) as u64 }
                                }
                            }
                        }
                        SyncKind::Stream => OpKind::HostSync(HostSync::Stream(self.stream(pid, context, stream, None))),
                        SyncKind::Event => {
                            let key = Self::event_key(event, event_sync);
                            match key.and_then(|k| self.events.get(&(pid, k)).copied()) {
                                Some(id) => OpKind::HostSync(HostSync::Event(id)),
                                None => {
                                    self.counters.bump(
                                        "nsys.event_sync_record_unknown",
                                        Severity::DataLoss,
                                        "event synchronizations whose record is not in the export: they order nothing here",
                                        1,
                                    );
                                    continue;
                                }
                            }
                        }
                        SyncKind::Context => {
                            let next = ContextId(self.contexts.len() as u32);
                            let ctx = *self.contexts.entry((pid, context)).or_insert(next);
                            OpKind::HostSync(HostSync::Context(ctx))
                        }
                    }
                }
                ActivityRow::Memory { start, address, bytes, free, name: label } => {
                    self.counters.bump("nsys.memory_events", Severity::Info, "device memory allocation and free rows read", 1);
                    let _ = start;
                    if free {
                        match self.live_allocations.remove(&(pid, address)) {
                            Some((alloc, _)) => OpKind::Free { alloc, free_kind: FreeKind::VirtualUnmap, stream: None },
                            None => continue, // allocated before the capture started
                        }
                    } else {
                        let Ok(range) = AccessRange::new(address as u64, bytes.max(0) as u64) else {
                            self.counters.bump("nsys.bad_memory_range", Severity::DataLoss, "allocations whose range overflows, skipped", 1);
                            continue;
                        };
                        let alloc = AllocId(self.next_alloc);
                        self.next_alloc += 1;
                        if let Some((old, _)) = self.live_allocations.insert((pid, address), (alloc, bytes as u64)) {
                            self.push_op(&call, None, OpKind::Free { alloc: old, free_kind: FreeKind::VirtualUnmap, stream: None });
                        }
                        OpKind::Alloc { alloc, handle: alloc.0 as u64, range, alloc_kind: AllocKind::Device, stream: None, label }
                    }
                }
            };
            self.push_op(&call, None, kind);
            emitted = true;
        }
        // API calls whose effect nsys records no activity for.
        if !emitted && api.is_some() && blocks_device(name) {
            // rule 6 (cudaFree, cudaFreeHost) and device synchronizations without a SYNCHRONIZATION row.
            let contexts: Vec<ContextId> = self
                .contexts
                .iter()
                .filter(|((p, _), _)| *p == pid)
                .map(|(_, &c)| c)
                .collect();
            for ctx in contexts {
                self.push_op(&call, None, OpKind::HostSync(HostSync::Context(ctx)));
            }
        }
    }

    fn push_op(&mut self, call: &CallContext, gpu: Option<(i64, i64)>, kind: OpKind) {
        let op = Operation {
            seq: self.seq,
            process: call.process,
            thread: call.thread,
            host_time_ns: call.host_start,
            gpu_start_ns: gpu.map(|g| g.0.max(0) as u64),
            gpu_end_ns: gpu.map(|g| g.1.max(0) as u64),
            correlation_id: Some(call.correlation as u64),
            host_end_ns: call.host_end,
            api: call.api.clone(),
            region: call.region.clone(),
            source: None,
            origin: call.correlation as u64,
            kind,
        };
        self.seq += 1;
        self.push(TraceRecord::Op(op));
    }
}

/// What the API call behind a group of activities tells about each of them.
struct CallContext {
    process: ProcessId,
    thread: ThreadId,
    correlation: i64,
    host_start: Option<u64>,
    host_end: Option<u64>,
    api: Option<Arc<str>>,
    region: Option<Arc<str>>,
}

/// `column` when the table has it, else a literal stand-in (reduced exports drop columns).
fn column_or<'a>(columns: &HashSet<String>, column: &'a str, default: &'a str) -> &'a str {
    if columns.contains(column) {
        column
    } else {
        default
    }
}

fn query_all<T>(conn: &Connection, sql: &str, f: impl FnMut(&Row) -> rusqlite::Result<T>) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], f)?.collect();
    rows
}

/// One table's rows in (process, correlation id) order, one row ahead.
struct Cursor<'q, 's> {
    query: &'q TableQuery,
    rows: rusqlite::Rows<'s>,
    peeked: Option<Activity>,
}

impl Cursor<'_, '_> {
    fn advance(&mut self, path: &Path, counters: &mut ImportCounters) -> Result<(), IngestError> {
        loop {
            let row = match self.rows.next() {
                Ok(Some(row)) => row,
                Ok(None) => {
                    self.peeked = None;
                    return Ok(());
                }
                Err(e) => return Err(IngestError::new(path, Some(self.query.table.to_string()), format!("cannot read: {e}"))),
            };
            let decoded = (|| -> rusqlite::Result<Option<Activity>> {
                let (Some(pid), Some(correlation)) = (int(row, 0)?, int(row, 1)?) else { return Ok(None) };
                Ok((self.query.decode)(row)?.map(|row| Activity { pid, correlation, row }))
            })();
            match decoded {
                Ok(Some(activity)) => {
                    self.peeked = Some(activity);
                    return Ok(());
                }
                Ok(None) => counters.bump(
                    "nsys.null_in_not_null",
                    Severity::DataLoss,
                    "rows with NULL in a NOT NULL column (or no correlation id), skipped",
                    1,
                ),
                Err(e) => {
                    return Err(IngestError::new(path, Some(self.query.table.to_string()), format!("unexpected value: {e}")))
                }
            }
        }
    }
}
