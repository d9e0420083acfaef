//! The activity tables an export may hold and how each is read: its columns, declared once, and the activity a
//! row becomes. Every table is read sorted by (process, correlation id), the key the merge joins them on.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::Connection;

use super::columns::{read_ints, select_list, BadValue, Column, RecordRow, RowValues, Selected};
use super::schema::column_names;
use crate::ingest::counters::{Counter, ImportCounters};
use crate::ingest::record_source::IngestError;

/// CUPTI's "not applicable" for event ids.
pub(super) const NOT_APPLICABLE: i64 = 4_294_967_295;

/// One row of any table, keyed for the merge by (process id, correlation id).
#[derive(Debug)]
pub(super) struct Activity {
    pub(super) pid: i64,
    pub(super) correlation: i64,
    pub(super) row: ActivityRow,
}

/// What one row says. Names are StringIds ids (-1 when NULL); `event_sync` is [`NOT_APPLICABLE`] where the export
/// has no sync ids. Rows compare whole, to find a row an export holds twice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum ActivityRow {
    Api {
        start: i64,
        end: i64,
        global_tid: i64,
        name: i64,
    },
    Kernel {
        start: i64,
        end: i64,
        device: i64,
        context: i64,
        stream: i64,
        name: i64,
    },
    Memcpy {
        start: i64,
        end: i64,
        device: i64,
        context: i64,
        stream: i64,
        bytes: i64,
        copy_kind: i64,
        src_kind: i64,
        dst_kind: i64,
    },
    Memset {
        start: i64,
        end: i64,
        device: i64,
        context: i64,
        stream: i64,
        bytes: i64,
        mem_kind: i64,
    },
    Sync {
        context: i64,
        stream: i64,
        sync_type: i64,
        event: i64,
        event_sync: i64,
    },
    EventRecord {
        device: i64,
        context: i64,
        stream: i64,
        event: i64,
        event_sync: i64,
    },
    Memory {
        address: i64,
        bytes: i64,
        free: bool,
        name: Option<String>,
    },
}

/// How one table is read.
pub(super) struct ActivityTable<const N: usize> {
    name: &'static str,
    /// The column whose bits 24 to 47 are the process id: globalPid, or globalTid for API calls.
    process: &'static str,
    /// The columns after (process, correlation id), in the order `decode` takes their values.
    columns: [Column; N],
    /// A text column read after them (memory events name their allocation).
    label: Option<&'static str>,
    /// Which rows to read.
    filter: Option<&'static str>,
    /// What orders the rows of one (process, correlation id).
    ties: Option<&'static str>,
    decode: fn([i64; N], Option<String>) -> ActivityRow,
}

/// How a query of a table orders its rows. Every order is (process, correlation id, the table's ties), rows
/// equal in all of those by rowid where the table has one, so that every way of reading a table gives one order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum RowOrder {
    /// Sorted by SQLite, as the first readers did (a table without rowid).
    Sorted,
    /// Sorted by SQLite, rowid last.
    SortedWithRowid,
    /// The rows of a rowid range (`?1` to `?2`) in storage order, which the caller knows to be sorted; the
    /// order's tie value and the rowid follow the row's own columns.
    RowidRange,
}

/// A table's reading without its column count, so that the merge can hold every table in one list.
pub(super) trait ActivityQuery: Sync {
    fn table(&self) -> &'static str;
    /// The query for a table with the `present` columns; `per_process`: whether processes are told apart.
    fn sql(&self, present: &HashSet<String>, per_process: bool, order: RowOrder) -> Result<String, String>;
    /// What a [`RowOrder::RowidRange`] query selects, in its order.
    fn selection(&self, present: &HashSet<String>, per_process: bool) -> Result<Vec<Selected>, String>;
    /// Whether every row is read (no filter), so that the rows can be read from the export's pages.
    fn reads_every_row(&self) -> bool;
    /// The query of each row's rowid and sort key (process, correlation id, tie) in storage order.
    fn key_sql(&self, per_process: bool) -> String;
    /// How many columns [`ActivityQuery::read`] reads: a [`RowOrder::RowidRange`] query's tie and rowid follow.
    fn width(&self) -> usize;
    /// The activity of one row of that query; `None` when a NULL in a NOT NULL column skips it.
    fn read(&self, row: &rusqlite::Row) -> Result<Option<Activity>, BadValue>;
    /// The same from a record read from the export's pages.
    fn read_record(&self, row: &RecordRow) -> Result<Option<Activity>, BadValue>;
}

impl<const N: usize> ActivityTable<N> {
    /// What stands for the process id: its column's bits, or 0 where processes are not told apart.
    fn process_selected(&self, per_process: bool) -> Selected {
        if per_process {
            Selected::ProcessOf(self.process)
        } else {
            Selected::Literal("0")
        }
    }

    fn process_sql(&self, per_process: bool) -> String {
        self.process_selected(per_process).sql()
    }

    fn filter_sql(&self) -> String {
        self.filter.map(|f| format!(" WHERE {f}")).unwrap_or_default()
    }
}

impl<const N: usize> ActivityQuery for ActivityTable<N> {
    fn table(&self) -> &'static str {
        self.name
    }

    fn sql(&self, present: &HashSet<String>, per_process: bool, order: RowOrder) -> Result<String, String> {
        let process = self.process_sql(per_process);
        let mut columns = select_list(&self.columns, present)?;
        if let Some(label) = self.label {
            if !present.contains(label) {
                return Err(format!("no column {label}"));
            }
            columns = format!("{columns}, {label}");
        }
        let name = self.name;
        let ties = self.ties.map(|t| format!(", {t}")).unwrap_or_default();
        Ok(match order {
            RowOrder::Sorted => format!(
                "SELECT {process}, correlationId, {columns} FROM {name}{} ORDER BY 1, 2{ties}",
                self.filter_sql()
            ),
            RowOrder::SortedWithRowid => format!(
                "SELECT {process}, correlationId, {columns} FROM {name}{} ORDER BY 1, 2{ties}, rowid",
                self.filter_sql()
            ),
            RowOrder::RowidRange => {
                let filter = self.filter.map(|f| format!("({f}) AND ")).unwrap_or_default();
                let selection = self.selection(present, per_process)?;
                let columns = selection.iter().map(Selected::sql).collect::<Vec<_>>().join(", ");
                format!("SELECT {columns} FROM {name} WHERE {filter}rowid BETWEEN ?1 AND ?2 ORDER BY rowid")
            }
        })
    }

    fn selection(&self, present: &HashSet<String>, per_process: bool) -> Result<Vec<Selected>, String> {
        let mut selection = Vec::with_capacity(self.width() + 2);
        selection.push(self.process_selected(per_process));
        selection.push(Selected::Column(CORRELATION.name));
        for column in &self.columns {
            selection.push(column.select(present)?);
        }
        if let Some(label) = self.label {
            if !present.contains(label) {
                return Err(format!("no column {label}"));
            }
            selection.push(Selected::Column(label));
        }
        selection.push(self.ties.map_or(Selected::Literal("0"), Selected::Column));
        selection.push(Selected::Rowid);
        Ok(selection)
    }

    fn reads_every_row(&self) -> bool {
        self.filter.is_none()
    }

    fn key_sql(&self, per_process: bool) -> String {
        let tie = self.ties.unwrap_or("0");
        format!(
            "SELECT rowid, {}, correlationId, {tie} FROM {}{} ORDER BY rowid",
            self.process_sql(per_process),
            self.name,
            self.filter_sql()
        )
    }

    fn width(&self) -> usize {
        2 + N + usize::from(self.label.is_some())
    }

    fn read(&self, row: &rusqlite::Row) -> Result<Option<Activity>, BadValue> {
        self.read_values(row)
    }

    fn read_record(&self, row: &RecordRow) -> Result<Option<Activity>, BadValue> {
        self.read_values(row)
    }
}

impl<const N: usize> ActivityTable<N> {
    #[inline]
    fn read_values<R: RowValues + ?Sized>(&self, row: &R) -> Result<Option<Activity>, BadValue> {
        let key = [Column::required(self.process), CORRELATION];
        let Some([pid, correlation]) = read_ints(row, 0, &key)? else { return Ok(None) };
        let Some(values) = read_ints(row, 2, &self.columns)? else { return Ok(None) };
        let label = match self.label {
            Some(column) => row.text(2 + N, column)?,
            None => None,
        };
        Ok(Some(Activity { pid, correlation, row: (self.decode)(values, label) }))
    }
}

const CORRELATION: Column = Column::required("correlationId");
const START: Column = Column::required("start");
const END: Column = Column::required("end");
const DEVICE: Column = Column::required("deviceId").or_literal("0");
const CONTEXT: Column = Column::required("contextId").or_literal("0");
const STREAM: Column = Column::required("streamId").or_literal("0");
const BYTES: Column = Column::required("bytes");
/// Absent from older exports: events are then joined on eventId.
const EVENT_SYNC_ID: Column = Column::required("eventSyncId").or_literal("NULL").null_reads(NOT_APPLICABLE);

static RUNTIME: ActivityTable<4> = ActivityTable {
    name: "CUPTI_ACTIVITY_KIND_RUNTIME",
    process: "globalTid",
    columns: [START, END, Column::required("globalTid"), Column::required("nameId").null_reads(-1)],
    label: None,
    filter: None,
    ties: Some("start"),
    decode: |[start, end, global_tid, name], _| ActivityRow::Api { start, end, global_tid, name },
};

static KERNEL: ActivityTable<6> = ActivityTable {
    name: "CUPTI_ACTIVITY_KIND_KERNEL",
    process: "globalPid",
    columns: [
        START,
        END,
        DEVICE,
        CONTEXT,
        STREAM,
        // The demangled name tells PyTorch's many `vectorized_elementwise_kernel`s apart (fill, mul, add, ...).
        Column::required("demangledName").or_column("shortName").null_reads(-1),
    ],
    label: None,
    filter: None,
    ties: Some("start"),
    decode: |[start, end, device, context, stream, name], _| ActivityRow::Kernel {
        start,
        end,
        device,
        context,
        stream,
        name,
    },
};

/// ENUM_CUDA_MEM_KIND's "unknown": what an export that did not record a memory kind reads as.
pub(super) const MEM_KIND_UNKNOWN: i64 = 7;

static MEMCPY: ActivityTable<9> = ActivityTable {
    name: "CUPTI_ACTIVITY_KIND_MEMCPY",
    process: "globalPid",
    columns: [
        START,
        END,
        DEVICE,
        CONTEXT,
        STREAM,
        BYTES,
        Column::required("copyKind"),
        Column::required("srcKind").or_literal("7").null_reads(MEM_KIND_UNKNOWN),
        Column::required("dstKind").or_literal("7").null_reads(MEM_KIND_UNKNOWN),
    ],
    label: None,
    filter: None,
    ties: Some("start"),
    decode: |[start, end, device, context, stream, bytes, copy_kind, src_kind, dst_kind], _| ActivityRow::Memcpy {
        start,
        end,
        device,
        context,
        stream,
        bytes,
        copy_kind,
        src_kind,
        dst_kind,
    },
};

static MEMSET: ActivityTable<7> = ActivityTable {
    name: "CUPTI_ACTIVITY_KIND_MEMSET",
    process: "globalPid",
    columns: [
        START,
        END,
        DEVICE,
        CONTEXT,
        STREAM,
        BYTES,
        Column::required("memKind").or_literal("7").null_reads(MEM_KIND_UNKNOWN),
    ],
    label: None,
    filter: None,
    ties: Some("start"),
    decode: |[start, end, device, context, stream, bytes, mem_kind], _| ActivityRow::Memset {
        start,
        end,
        device,
        context,
        stream,
        bytes,
        mem_kind,
    },
};

static SYNCHRONIZATION: ActivityTable<7> = ActivityTable {
    name: "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    process: "globalPid",
    // deviceId is not read: it can be wrong in these rows (MANIFEST.md). start and end are read for their
    // NOT NULL promise only.
    columns: [
        START,
        END,
        CONTEXT,
        STREAM,
        Column::required("syncType").null_reads(0),
        Column::required("eventId").null_reads(NOT_APPLICABLE),
        EVENT_SYNC_ID,
    ],
    label: None,
    filter: None,
    ties: Some("start"),
    decode: |[_start, _end, context, stream, sync_type, event, event_sync], _| ActivityRow::Sync {
        context,
        stream,
        sync_type,
        event,
        event_sync,
    },
};

static CUDA_EVENT: ActivityTable<5> = ActivityTable {
    name: "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
    process: "globalPid",
    columns: [DEVICE, CONTEXT, STREAM, Column::required("eventId"), EVENT_SYNC_ID],
    label: None,
    filter: None,
    ties: None,
    decode: |[device, context, stream, event, event_sync], _| ActivityRow::EventRecord {
        device,
        context,
        stream,
        event,
        event_sync,
    },
};

static MEMORY_USAGE: ActivityTable<4> = ActivityTable {
    name: "CUDA_GPU_MEMORY_USAGE_EVENTS",
    process: "globalPid",
    columns: [START, Column::required("address"), BYTES, Column::required("memoryOperationType")],
    label: Some("name"),
    // Device memory only.
    filter: Some("memKind = 2"),
    ties: Some("start"),
    // Operation type 1 is a free.
    decode: |[_start, address, bytes, operation], name| ActivityRow::Memory {
        address,
        bytes,
        free: operation == 1,
        name,
    },
};

/// Every table the merge reads, in the order a group's rows are mapped (the API call first).
static ACTIVITY_TABLES: [&dyn ActivityQuery; 7] =
    [&RUNTIME, &KERNEL, &MEMCPY, &MEMSET, &SYNCHRONIZATION, &CUDA_EVENT, &MEMORY_USAGE];

/// One table to read, with the columns it has.
pub(super) struct TableQuery {
    pub(super) table: &'static dyn ActivityQuery,
    pub(super) columns: HashSet<String>,
}

/// What to read from one export: each table it has.
pub(super) struct Plan {
    pub(super) queries: Vec<TableQuery>,
    /// Whether processes are told apart (every activity table has globalPid).
    pub(super) per_process: bool,
    /// Whether the event tables carry eventSyncId (schema 3.x): then a record or wait without one lost it.
    pub(super) event_sync_ids: bool,
}

/// The tables this export has, each checked to be readable (its query can be built).
pub(super) fn plan(
    conn: &Connection,
    tables: &HashSet<String>,
    path: &Path,
    counters: &mut ImportCounters,
) -> Result<Plan, IngestError> {
    let error = |table: &str, message: String| IngestError::new(path, Some(table.to_string()), message);
    let mut present = Vec::new();
    for table in ACTIVITY_TABLES.iter().copied().filter(|t| tables.contains(t.table())) {
        let columns = column_names(conn, table.table()).map_err(|e| error(table.table(), e.to_string()))?;
        present.push((table, columns));
    }
    // Processes are told apart by globalPid; an export whose activity tables lack it is read as one process.
    let per_process =
        present.iter().filter(|(t, _)| t.table() != RUNTIME.name).all(|(_, columns)| columns.contains("globalPid"));
    if !per_process {
        counters.bump(Counter::NsysNoGlobalPid, 1);
    }
    if !tables.contains(RUNTIME.name) {
        counters.bump(Counter::NsysNoRuntimeTable, 1);
    }
    let event_sync_ids = present.iter().any(|(t, columns)| {
        [SYNCHRONIZATION.name, CUDA_EVENT.name].contains(&t.table()) && columns.contains(EVENT_SYNC_ID.name)
    });
    let mut queries = Vec::new();
    for (table, columns) in present {
        table
            .sql(&columns, per_process, RowOrder::Sorted)
            .map_err(|m| error(table.table(), format!("cannot query: {m}")))?;
        queries.push(TableQuery { table, columns });
    }
    Ok(Plan { queries, per_process, event_sync_ids })
}
