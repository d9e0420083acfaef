//! Each activity table read on a thread of its own, over its own read-only connection, and handed to the merge
//! in (process, correlation id, ties, rowid) order in chunks.
//!
//! SQLite's sort was most of an analysis (a 3.8 M-row RUNTIME table: 4.6 s sorted, 0.3 s in storage order), and
//! exports store their rows nearly sorted already: CUPTI hands correlation ids out in call order and nsys writes
//! rows about as they come. So a first pass reads only each row's key in storage (rowid) order and cuts the table
//! into its sorted runs; the rows are then read run by run in storage order and merged. A table of more runs than
//! [`MAX_RUNS`] (rows written far out of order), without rowids, or with a key that is not an integer is sorted
//! by SQLite as before. Both ways give the same order, rowid last.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row, Rows, Statement};

use super::columns::BadValue;
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
    // Without rowids the table is sorted by SQLite as before; an unreadable one fails in that query too.
    let runs = storage_runs(&conn, table, per_process).ok().flatten();
    let Some(runs) = runs else {
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
        return Ok(());
    };
    let range_sql = sql(RowOrder::RowidRange)?;
    let mut statements = Vec::with_capacity(runs.len());
    for _ in &runs {
        statements.push(conn.prepare(&range_sql).map_err(|e| error(format!("cannot query: {e}")))?);
    }
    let mut cursors = Vec::with_capacity(runs.len());
    for (stmt, run) in statements.iter_mut().zip(&runs) {
        let rows = stmt.query([run.0, run.1]).map_err(|e| error(format!("cannot query: {e}")))?;
        cursors.push(RunCursor { rows, width: table.width() });
    }
    // The next row of each run, smallest first.
    let mut heads = BinaryHeap::with_capacity(cursors.len());
    for (run, cursor) in cursors.iter_mut().enumerate() {
        if let Some((key, activity)) = cursor.next(table, sender).map_err(&error)? {
            heads.push(Reverse(Head { key, run, activity }));
        }
    }
    while sender.open {
        let Some(Reverse(Head { run, activity, .. })) = heads.pop() else { break };
        sender.row(activity);
        // Runs are long: their rows go straight out while they come before every other run's next row.
        while sender.open {
            let Some((key, activity)) = cursors[run].next(table, sender).map_err(&error)? else { break };
            if heads.peek().is_some_and(|Reverse(other)| other.key < key) {
                heads.push(Reverse(Head { key, run, activity }));
                break;
            }
            sender.row(activity);
        }
    }
    Ok(())
}

/// A row's place in the merge order: (process, correlation id, tie, rowid).
type Key = (i64, i64, i64, i64);

/// The next row of one run.
struct Head {
    key: Key,
    run: usize,
    activity: Activity,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

/// The rows of one run, in storage order.
struct RunCursor<'s> {
    rows: Rows<'s>,
    /// Where the tie value and the rowid follow the row's columns.
    width: usize,
}

impl RunCursor<'_> {
    /// The next row that is not skipped, with its key; skipped rows are counted into `sender`.
    fn next(&mut self, table: &dyn ActivityQuery, sender: &mut Sender) -> Result<Option<(Key, Activity)>, String> {
        loop {
            let Some(row) = self.rows.next().map_err(|e| format!("cannot read: {e}"))? else { return Ok(None) };
            let Some(activity) = table.read(row).map_err(|bad| bad.to_string())? else {
                sender.skipped += 1;
                continue;
            };
            let tie = integer(row, self.width, "tie").map_err(|bad| bad.to_string())?.unwrap_or(0);
            let rowid = integer(row, self.width + 1, "rowid").map_err(|bad| bad.to_string())?.unwrap_or(0);
            return Ok(Some(((activity.pid, activity.correlation, tie, rowid), activity)));
        }
    }
}

/// An integer column that may be NULL.
fn integer(row: &Row, index: usize, column: &'static str) -> Result<Option<i64>, BadValue> {
    match row.get_ref(index) {
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

/// The table's sorted runs in storage order, as inclusive rowid ranges covering every row; `None` when SQLite
/// must sort it: more than [`MAX_RUNS`] runs, or a key that is not an integer (whose place SQLite decides).
/// Rows with a NULL in the key are skipped by every reading, so they cut no run.
fn storage_runs(
    conn: &Connection,
    table: &dyn ActivityQuery,
    per_process: bool,
) -> rusqlite::Result<Option<Vec<(i64, i64)>>> {
    let mut stmt: Statement = conn.prepare(&table.key_sql(per_process))?;
    let mut rows = stmt.query([])?;
    let mut starts = vec![i64::MIN];
    let mut last: Option<(i64, i64, i64)> = None;
    while let Some(row) = rows.next()? {
        let mut key = [0i64; 4];
        let mut null = false;
        for (i, value) in key.iter_mut().enumerate() {
            match row.get_ref(i)? {
                ValueRef::Integer(v) => *value = v,
                ValueRef::Null => null = true,
                _ => return Ok(None),
            }
        }
        if null {
            continue;
        }
        let [rowid, pid, correlation, tie] = key;
        let key = (pid, correlation, tie);
        if last.is_some_and(|last| key < last) {
            if starts.len() == MAX_RUNS {
                return Ok(None);
            }
            starts.push(rowid);
        }
        last = Some(key);
    }
    let ends = starts.iter().skip(1).map(|start| start - 1).chain([i64::MAX]);
    Ok(Some(starts.iter().copied().zip(ends).collect()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::ingest::counters::ImportCounters;
    use crate::ingest::nsys::tables::{plan, ActivityRow};

    /// A kernel table whose rows are stored in `order` (correlation ids; start = 10 x id, ties by rowid).
    fn export(name: &str, order: &[i64]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("{name}.{}.table_readers.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let conn = Connection::open(&path).expect("creates");
        conn.execute_batch(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, \
             contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER)",
        )
        .expect("table");
        conn.execute_batch("BEGIN").expect("begins");
        for (i, corr) in order.iter().enumerate() {
            // Rows of one correlation id share their start: the rowid decides.
            let start = corr * 10;
            conn.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?1 + 5, 0, 1, 7, ?2, ?3, ?4)",
                [start, *corr, 1 << 24, i as i64],
            )
            .expect("row");
        }
        conn.execute_batch("COMMIT").expect("commits");
        path
    }

    /// The rows as the merge gets them: (pid, correlation id, name), the name being the row's insertion index.
    fn read_all(path: &Path) -> Vec<(i64, i64, i64)> {
        let conn = Connection::open(path).expect("opens");
        let tables: HashSet<String> = ["CUPTI_ACTIVITY_KIND_KERNEL".to_string()].into();
        let plan = plan(&conn, &tables, path, &mut ImportCounters::default()).expect("plan");
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
                 ORDER BY 1, 2, start, rowid",
            )
            .expect("query");
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).expect("rows");
        rows.collect::<Result<_, _>>().expect("read")
    }

    fn runs(path: &Path) -> Option<usize> {
        let conn = Connection::open(path).expect("opens");
        let tables: HashSet<String> = ["CUPTI_ACTIVITY_KIND_KERNEL".to_string()].into();
        let plan = plan(&conn, &tables, path, &mut ImportCounters::default()).expect("plan");
        storage_runs(&conn, plan.queries[0].table, true).expect("keys").map(|runs| runs.len())
    }

    #[test]
    fn a_table_stored_in_a_few_sorted_runs_is_merged_into_the_order_sqlite_sorts_it_in() {
        // Three runs, one a block of late rows, and repeated ids in each.
        let mut order: Vec<i64> = (0..3000).collect();
        order.extend([5, 7, 7, 2999, 3001]);
        order.extend((2990..4000).chain([1, 1, 3]));
        let path = export("few_runs", &order);
        assert_eq!(runs(&path), Some(4));
        let read = read_all(&path);
        assert_eq!(read.len(), order.len());
        assert_eq!(read, sorted_by_sqlite(&path));
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn a_table_far_out_of_order_is_sorted_by_sqlite() {
        let order: Vec<i64> = (0..5000).map(|i| (i * 7919) % 5003).collect();
        let path = export("many_runs", &order);
        assert_eq!(runs(&path), None, "more runs than MAX_RUNS");
        assert_eq!(read_all(&path), sorted_by_sqlite(&path));
        std::fs::remove_file(&path).ok();
    }
}
