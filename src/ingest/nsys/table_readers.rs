//! Each activity table read on a thread of its own, over its own read-only connection, and handed to the merge
//! in (process, correlation id, ties, rowid) order in chunks.
//!
//! SQLite's sort was most of an analysis (a 3.8 M-row RUNTIME table: 4.6 s sorted, 0.3 s in storage order), and
//! exports store their rows nearly sorted already: CUPTI hands correlation ids out in call order and nsys writes
//! rows about as they come. So a first pass reads only each row's key in storage (rowid) order and cuts the table
//! into its sorted runs; the rows are then read run by run in storage order and merged. A table of more runs than
//! [`MAX_RUNS`] (rows written far out of order), without rowids, or with a key that is not an integer is sorted
//! by SQLite as before. Both ways give the same order, rowid last.
//!
//! Both passes read the export's pages themselves (pages.rs), which costs a few varints a row where SQLite's
//! virtual machine cost about half a microsecond; a file or table that the page reader leaves to SQLite (a
//! filtered table, a WAL-mode file...) has its keys and runs read by SQLite, the same way.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Rows, Statement};

use super::columns::{sources, BadValue, RecordRow, RowValues, Source};
use super::pages::{Pages, RecordLayout, RowCursor, TableColumns};
use super::tables::{Activity, ActivityQuery, RowOrder, TableQuery};
use crate::ingest::record_source::IngestError;

/// Sorted runs a table may have and still be merged here rather than sorted by SQLite: each is a statement.
const MAX_RUNS: usize = 64;
/// Rows handed over at a time.
const CHUNK: usize = 2048;
/// Chunks a table's thread may read ahead of the merge.
const QUEUED_CHUNKS: usize = 4;

/// Rows of one table in merge order, and the rows before them that a NULL skipped.
pub(super) struct Chunk {
    pub(super) rows: Vec<Activity>,
    pub(super) skipped: u64,
    /// The table's last chunk: a channel that closes without one lost its reader.
    pub(super) last: bool,
}

pub(super) type ChunkResult = Result<Chunk, IngestError>;

/// Starts the thread that reads `query`'s table from the export at `path`; its chunks come on the receiver.
pub(super) fn spawn<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    path: &Path,
    query: &'scope TableQuery,
    per_process: bool,
) -> Result<Receiver<ChunkResult>, IngestError> {
    let (tx, rx) = sync_channel(QUEUED_CHUNKS);
    let table = query.table.table();
    let thread_path = path.to_path_buf();
    std::thread::Builder::new()
        .name(format!("nsys-{}", table.trim_start_matches("CUPTI_ACTIVITY_KIND_")))
        .spawn_scoped(scope, move || {
            let mut sender = Sender { tx, rows: Vec::with_capacity(CHUNK), skipped: 0, open: true };
            if let Err(error) = read_table(&thread_path, query, per_process, &mut sender) {
                sender.send_error(error);
            } else {
                sender.finish();
            }
        })
        .map_err(|e| IngestError::new(path, Some(table.to_string()), format!("cannot start a reader thread: {e}")))?;
    Ok(rx)
}

/// The rows read so far, not yet handed over; `open` until the merge hangs up.
struct Sender {
    tx: SyncSender<ChunkResult>,
    rows: Vec<Activity>,
    skipped: u64,
    open: bool,
}

impl Sender {
    fn row(&mut self, activity: Activity) {
        self.rows.push(activity);
        if self.rows.len() >= CHUNK {
            self.send(false);
        }
    }

    fn send(&mut self, last: bool) {
        let rows = std::mem::replace(&mut self.rows, Vec::with_capacity(if last { 0 } else { CHUNK }));
        let chunk = Chunk { rows, skipped: std::mem::take(&mut self.skipped), last };
        // The merge hangs up when the reading ended elsewhere (an error in another table): stop reading.
        self.open = self.tx.send(Ok(chunk)).is_ok();
    }

    fn finish(mut self) {
        self.send(true);
    }

    fn send_error(mut self, error: IngestError) {
        self.send(false);
        let _ = self.tx.send(Err(error));
    }
}

/// Reads the table of `query` in merge order into `sender`.
fn read_table(path: &Path, query: &TableQuery, per_process: bool, sender: &mut Sender) -> Result<(), IngestError> {
    let table = query.table;
    let error = |message: String| IngestError::new(path, Some(table.table().to_string()), message);
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| IngestError::new(path, None, format!("cannot open as SQLite: {e}")))?;
    let sql = |order| table.sql(&query.columns, per_process, order).map_err(|m| error(format!("cannot query: {m}")));
    match PagedTable::open(path, &conn, query, per_process).map_err(&error)? {
        Some(paged) => {
            if let Some(runs) = paged.runs().map_err(&error)? {
                let mut cursors = Vec::with_capacity(runs.len());
                for &(first, last) in &runs {
                    cursors.push(paged.run(first, last).map_err(&error)?);
                }
                return merge_runs(cursors, sender).map_err(&error);
            }
        }
        None => {
            if let Some(runs) = storage_runs(&conn, table, per_process).ok().flatten() {
                let range_sql = sql(RowOrder::RowidRange)?;
                let mut statements = Vec::with_capacity(runs.len());
                for _ in &runs {
                    statements.push(conn.prepare(&range_sql).map_err(|e| error(format!("cannot query: {e}")))?);
                }
                let mut cursors = Vec::with_capacity(runs.len());
                for (stmt, run) in statements.iter_mut().zip(&runs) {
                    let rows = stmt.query([run.0, run.1]).map_err(|e| error(format!("cannot query: {e}")))?;
                    cursors.push(SqliteRun { rows, table, next: None });
                }
                return merge_runs(cursors, sender).map_err(&error);
            }
        }
    }
    // Without rowids, or with too many runs, the table is sorted by SQLite as before; an unreadable one fails
    // in that query too.
    let order = if rowids(&conn, table) { RowOrder::SortedWithRowid } else { RowOrder::Sorted };
    let mut stmt = conn.prepare(&sql(order)?).map_err(|e| error(format!("cannot query: {e}")))?;
    let mut rows = stmt.query([]).map_err(|e| error(format!("cannot query: {e}")))?;
    while sender.open {
        match rows.next().map_err(|e| error(format!("cannot read: {e}")))? {
            Some(row) => match table.read(row).map_err(|bad| error(bad.to_string()))? {
                Some(activity) => sender.row(activity),
                None => sender.skipped += 1,
            },
            None => break,
        }
    }
    Ok(())
}

/// Merges the sorted runs of one table into `sender`.
fn merge_runs<R: Run>(mut runs: Vec<R>, sender: &mut Sender) -> Result<(), String> {
    // The key of each run's next row, smallest on top; the rows wait in their runs (a table's runs may take
    // turns row by row, and a row read from the pages is decoded only when it is handed over).
    let mut heads = BinaryHeap::with_capacity(runs.len());
    for (run, cursor) in runs.iter_mut().enumerate() {
        if let Some(key) = cursor.advance(sender)? {
            heads.push(Reverse((key, run)));
        }
    }
    while sender.open {
        let Some(mut top) = heads.peek_mut() else { break };
        let run = top.0 .1;
        runs[run].emit(sender)?;
        match runs[run].advance(sender)? {
            // Sifted down when `top` drops: it stays on top while its run comes before every other run.
            Some(key) => top.0 .0 = key,
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
    }
    Ok(())
}

/// A row's place in the merge order: (process, correlation id, tie, rowid).
type Key = (i64, i64, i64, i64);

/// The rows of one sorted run, in storage order.
trait Run {
    /// Moves to the next row that is not skipped and gives its key; `None` at the run's end. Skipped rows are
    /// counted into `sender`.
    fn advance(&mut self, sender: &mut Sender) -> Result<Option<Key>, String>;
    /// Hands the row `advance` moved to over to `sender` (or counts it, should a NULL skip it).
    fn emit(&mut self, sender: &mut Sender) -> Result<(), String>;
}

/// A run read by SQLite: a [`RowOrder::RowidRange`] query, each row read as it comes.
struct SqliteRun<'s> {
    rows: Rows<'s>,
    table: &'s dyn ActivityQuery,
    next: Option<Activity>,
}

impl Run for SqliteRun<'_> {
    fn advance(&mut self, sender: &mut Sender) -> Result<Option<Key>, String> {
        let width = self.table.width();
        loop {
            let Some(row) = self.rows.next().map_err(|e| format!("cannot read: {e}"))? else { return Ok(None) };
            let Some(activity) = self.table.read(row).map_err(|bad| bad.to_string())? else {
                sender.skipped += 1;
                continue;
            };
            let tie = integer(row, width, "tie").map_err(|bad| bad.to_string())?.unwrap_or(0);
            let rowid = integer(row, width + 1, "rowid").map_err(|bad| bad.to_string())?.unwrap_or(0);
            let key = (activity.pid, activity.correlation, tie, rowid);
            self.next = Some(activity);
            return Ok(Some(key));
        }
    }

    fn emit(&mut self, sender: &mut Sender) -> Result<(), String> {
        if let Some(activity) = self.next.take() {
            sender.row(activity);
        }
        Ok(())
    }
}

/// A table read from the export's pages (pages.rs): the file, where each selected value lies in its records.
struct PagedTable<'q> {
    pages: Pages,
    columns: TableColumns,
    selection: Vec<Source>,
    /// Values of a record to find for its row, and for its key.
    places: usize,
    key_places: usize,
    table: &'q dyn ActivityQuery,
}

impl<'q> PagedTable<'q> {
    /// The table of `query` read from its pages, or `None` when SQLite must read it (pages.rs says when).
    fn open(
        path: &Path,
        conn: &Connection,
        query: &'q TableQuery,
        per_process: bool,
    ) -> Result<Option<PagedTable<'q>>, String> {
        let table = query.table;
        if !table.reads_every_row() {
            return Ok(None);
        }
        let Some(pages) = Pages::open(path).map_err(|e| format!("cannot read the file: {e}"))? else { return Ok(None) };
        let Some(columns) = TableColumns::read(conn, table.table()).map_err(|e| format!("cannot query: {e}"))? else {
            return Ok(None);
        };
        let selected = table.selection(&query.columns, per_process).map_err(|m| format!("cannot query: {m}"))?;
        // A column SQLite would find another way (in any case): its query says what it means.
        let Some(selection) = sources(&selected, &columns) else { return Ok(None) };
        // How many values of a record to find: up to the last place selected, or the last place of the key.
        let places = |selection: &mut dyn Iterator<Item = &Source>| {
            let place = |s: &Source| match s {
                Source::Place(p) | Source::ProcessAt(p) => Some(p + 1),
                _ => None,
            };
            selection.filter_map(place).max().unwrap_or(0)
        };
        let width = table.width();
        let key_places = places(&mut [0, 1, width].iter().filter_map(|&i| selection.get(i)));
        let places = places(&mut selection.iter());
        Ok(Some(PagedTable { pages, columns, selection, places, key_places, table }))
    }

    /// The table's sorted runs, as [`storage_runs`] finds them.
    fn runs(&self) -> Result<Option<Vec<(i64, i64)>>, String> {
        let mut cursor = RowCursor::new(&self.pages, &self.columns);
        cursor.seek(i64::MIN)?;
        let mut layout = RecordLayout::default();
        let width = self.table.width();
        let mut cuts = RunCuts::default();
        while let Some((rowid, bytes)) = cursor.next()? {
            let record = layout.parse(bytes, self.key_places)?;
            let row = RecordRow { record, rowid, selection: &self.selection };
            let key = [0, 1, width].map(|i| row.value(i).unwrap_or(ValueRef::Null));
            if !cuts.key(ValueRef::Integer(rowid), key) {
                return Ok(None);
            }
        }
        Ok(Some(cuts.runs()))
    }

    /// The rows of rowids `first` to `last`.
    fn run(&self, first: i64, last: i64) -> Result<PagedRun<'_>, String> {
        let mut cursor = RowCursor::new(&self.pages, &self.columns);
        cursor.seek(first)?;
        Ok(PagedRun { cursor, last, layout: RecordLayout::default(), paged: self, rowid: 0 })
    }
}

/// A run read from the pages: a row's key is read first, the rest when the row is handed over.
struct PagedRun<'p> {
    cursor: RowCursor<'p>,
    last: i64,
    layout: RecordLayout,
    paged: &'p PagedTable<'p>,
    /// The row `advance` moved to.
    rowid: i64,
}

impl Run for PagedRun<'_> {
    fn advance(&mut self, sender: &mut Sender) -> Result<Option<Key>, String> {
        let width = self.paged.table.width();
        loop {
            let Some((rowid, bytes)) = self.cursor.next()? else { return Ok(None) };
            if rowid > self.last {
                return Ok(None);
            }
            let record = self.layout.parse(bytes, self.paged.places)?;
            let row = RecordRow { record, rowid, selection: &self.paged.selection };
            // A NULL process or correlation id skips the row, as reading it would; a NULL tie orders as 0.
            let key = |index, column| integer(&row, index, column).map_err(|bad| bad.to_string());
            let (Some(pid), Some(correlation)) = (key(0, "process")?, key(1, "correlationId")?) else {
                sender.skipped += 1;
                continue;
            };
            self.rowid = rowid;
            return Ok(Some((pid, correlation, key(width, "tie")?.unwrap_or(0), rowid)));
        }
    }

    fn emit(&mut self, sender: &mut Sender) -> Result<(), String> {
        let record = self.layout.record(self.cursor.current());
        let row = RecordRow { record, rowid: self.rowid, selection: &self.paged.selection };
        match self.paged.table.read_record(&row).map_err(|bad| bad.to_string())? {
            Some(activity) => sender.row(activity),
            None => sender.skipped += 1,
        }
        Ok(())
    }
}

/// An integer column that may be NULL.
fn integer<R: RowValues + ?Sized>(row: &R, index: usize, column: &'static str) -> Result<Option<i64>, BadValue> {
    match row.value(index) {
        Ok(ValueRef::Integer(v)) => Ok(Some(v)),
        Ok(ValueRef::Null) => Ok(None),
        Ok(other) => Err(BadValue { column, message: format!("unexpected value: {}", other.data_type()) }),
        Err(e) => Err(BadValue { column, message: format!("unexpected value: {e}") }),
    }
}

/// Whether the table has rowids (every table nsys writes does).
fn rowids(conn: &Connection, table: &dyn ActivityQuery) -> bool {
    conn.prepare(&format!("SELECT rowid FROM {} LIMIT 0", table.table())).is_ok()
}

/// A table cut into its sorted runs from its keys in storage order.
#[derive(Default)]
struct RunCuts {
    /// The first rowid of each run after the first.
    starts: Vec<i64>,
    last: Option<(i64, i64, i64)>,
}

impl RunCuts {
    /// The next row's rowid and key (process, correlation id, tie); false when SQLite must sort the table: more
    /// than [`MAX_RUNS`] runs, or a key that is not an integer (whose place SQLite decides). Rows with a NULL in
    /// the key are skipped by every reading, so they cut no run.
    fn key(&mut self, rowid: ValueRef, key: [ValueRef; 3]) -> bool {
        let mut values = [0i64; 4];
        let mut null = false;
        for (value, read) in values.iter_mut().zip([rowid, key[0], key[1], key[2]]) {
            match read {
                ValueRef::Integer(v) => *value = v,
                ValueRef::Null => null = true,
                _ => return false,
            }
        }
        if null {
            return true;
        }
        let [rowid, pid, correlation, tie] = values;
        let key = (pid, correlation, tie);
        if self.last.is_some_and(|last| key < last) {
            if self.starts.len() + 1 == MAX_RUNS {
                return false;
            }
            self.starts.push(rowid);
        }
        self.last = Some(key);
        true
    }

    /// The runs as inclusive rowid ranges covering every row.
    fn runs(self) -> Vec<(i64, i64)> {
        let starts: Vec<i64> = [i64::MIN].into_iter().chain(self.starts).collect();
        let ends = starts.iter().skip(1).map(|start| start - 1).chain([i64::MAX]);
        starts.iter().copied().zip(ends).collect()
    }
}

/// The table's sorted runs in storage order, as SQLite reads its keys; `None` when SQLite must sort it
/// ([`RunCuts::key`]).
fn storage_runs(
    conn: &Connection,
    table: &dyn ActivityQuery,
    per_process: bool,
) -> rusqlite::Result<Option<Vec<(i64, i64)>>> {
    let mut stmt: Statement = conn.prepare(&table.key_sql(per_process))?;
    let mut rows = stmt.query([])?;
    let mut cuts = RunCuts::default();
    while let Some(row) = rows.next()? {
        if !cuts.key(row.get_ref(0)?, [row.get_ref(1)?, row.get_ref(2)?, row.get_ref(3)?]) {
            return Ok(None);
        }
    }
    Ok(Some(cuts.runs()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::ingest::counters::ImportCounters;
    use crate::ingest::nsys::tables::{plan, ActivityRow};

    /// How the test export is stored: its rows are then read from its pages, or by SQLite.
    #[derive(Copy, Clone, Debug)]
    enum Storage {
        Plain,
        Wal,
    }

    /// A kernel table whose rows are stored in the order of `rows` (correlation id, start; NULL where negative),
    /// each named by its insertion index.
    fn export(name: &str, rows: &[(i64, i64)], storage: Storage) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("{name}.{storage:?}.{}.table_readers.sqlite", std::process::id()));
        for file in [path.clone(), path.with_extension("sqlite-wal"), path.with_extension("sqlite-shm")] {
            let _ = std::fs::remove_file(file);
        }
        let conn = Connection::open(&path).expect("creates");
        if let Storage::Wal = storage {
            conn.execute_batch("PRAGMA journal_mode = WAL").expect("wal");
        }
        conn.execute_batch(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, \
             contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER)",
        )
        .expect("table");
        conn.execute_batch("BEGIN").expect("begins");
        for (i, &(corr, start)) in rows.iter().enumerate() {
            let null = |v: i64| (v >= 0).then_some(v);
            conn.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?1 + 5, 0, 1, 7, ?2, ?3, ?4)",
                rusqlite::params![null(start), null(corr), 1i64 << 24, i as i64],
            )
            .expect("row");
        }
        conn.execute_batch("COMMIT").expect("commits");
        path
    }

    /// Rows of correlation ids stored in `order`, rows of one id sharing their start: the rowid decides.
    fn by_correlation(order: &[i64]) -> Vec<(i64, i64)> {
        order.iter().map(|&corr| (corr, corr * 10)).collect()
    }

    fn kernel_plan(path: &Path) -> crate::ingest::nsys::tables::Plan {
        let conn = Connection::open(path).expect("opens");
        let tables: HashSet<String> = ["CUPTI_ACTIVITY_KIND_KERNEL".to_string()].into();
        plan(&conn, &tables, path, &mut ImportCounters::default()).expect("plan")
    }

    /// The rows as the merge gets them: (pid, correlation id, name), the name being the row's insertion index.
    fn read_all(path: &Path) -> Vec<(i64, i64, i64)> {
        let plan = kernel_plan(path);
        let mut rows = Vec::new();
        std::thread::scope(|scope| {
            let chunks = spawn(scope, path, &plan.queries[0], plan.per_process).expect("spawns");
            loop {
                let chunk = chunks.recv().expect("a last chunk").expect("reads");
                for activity in chunk.rows {
                    let ActivityRow::Kernel { name, .. } = activity.row else { panic!("a kernel") };
                    rows.push((activity.pid, activity.correlation, name));
                }
                if chunk.last {
                    break;
                }
            }
        });
        rows
    }

    /// What SQLite's sort gives.
    fn sorted_by_sqlite(path: &Path) -> Vec<(i64, i64, i64)> {
        let conn = Connection::open(path).expect("opens");
        let mut stmt = conn
            .prepare(
                "SELECT (globalPid >> 24) & 16777215, correlationId, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL \
                 WHERE correlationId NOT NULL AND start NOT NULL ORDER BY 1, 2, start, rowid",
            )
            .expect("query");
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).expect("rows");
        rows.collect::<Result<_, _>>().expect("read")
    }

    /// The sorted runs as the page reader and as SQLite find them; the page reader's `None` when it leaves the
    /// file to SQLite.
    fn runs(path: &Path) -> (Option<Option<usize>>, Option<usize>) {
        let conn = Connection::open(path).expect("opens");
        let plan = kernel_plan(path);
        let query = &plan.queries[0];
        let paged = PagedTable::open(path, &conn, query, plan.per_process).expect("opens");
        let paged = paged.map(|paged| paged.runs().expect("keys").map(|runs| runs.len()));
        let by_sqlite = storage_runs(&conn, query.table, plan.per_process).expect("keys").map(|runs| runs.len());
        (paged, by_sqlite)
    }

    fn check(name: &str, rows: &[(i64, i64)], expected_runs: Option<usize>) {
        for storage in [Storage::Plain, Storage::Wal] {
            let path = export(name, rows, storage);
            let (paged, by_sqlite) = runs(&path);
            assert_eq!(by_sqlite, expected_runs, "{storage:?}: runs found by SQLite");
            match storage {
                Storage::Plain => assert_eq!(paged, Some(expected_runs), "runs found in the pages"),
                Storage::Wal => assert_eq!(paged, None, "a WAL file is read by SQLite"),
            }
            let read = read_all(&path);
            assert_eq!(read, sorted_by_sqlite(&path), "{storage:?}");
            assert!(read.len() > rows.len() / 2, "{storage:?}: most rows read");
            std::fs::remove_file(&path).ok();
        }
    }

    #[test]
    fn a_table_stored_in_a_few_sorted_runs_is_merged_into_the_order_sqlite_sorts_it_in() {
        // Three breaks, one a block of late rows, and repeated ids in each.
        let mut order: Vec<i64> = (0..3000).collect();
        order.extend([5, 7, 7, 2999, 3001]);
        order.extend((2990..4000).chain([1, 1, 3]));
        check("few_runs", &by_correlation(&order), Some(4));
    }

    #[test]
    fn a_break_in_the_ties_or_around_rows_a_null_skips_cuts_a_run_too() {
        // Correlation id 50 twice, the second starting earlier: a run breaks on the tie alone. Rows whose key
        // is NULL are skipped and break nothing: the run after 60 carries on past them.
        let mut rows: Vec<(i64, i64)> = (0..100).map(|c| (c, c * 10)).collect();
        rows.insert(51, (50, 499));
        rows.insert(70, (-1, 5));
        rows.insert(71, (3, -1));
        rows.extend((100..200).map(|c| (c, c * 10)));
        check("tie_break", &rows, Some(2));
    }

    #[test]
    fn a_table_far_out_of_order_is_sorted_by_sqlite() {
        let order: Vec<i64> = (0..5000).map(|i| (i * 7919) % 5003).collect();
        check("many_runs", &by_correlation(&order), None);
    }
}
