//! A table's rows read straight from the export's b-tree pages (SQLite's documented file format,
//! sqlite.org/fileformat2.html), without SQLite's virtual machine: decoding each row through it was most of an
//! nsys load (about 0.5 µs a row, and every table read twice: its keys, then its rows), where a row here is a few
//! varints. Only what the table readers need: the leaf cells of a rowid table in rowid order from a given rowid,
//! and the values of a record. Whatever else a file may hold is left to SQLite, decided before a row is read:
//! [`Pages::open`] declines a file in WAL mode, with a journal beside it, or not UTF-8, and
//! [`TableColumns::read`] a table that is not a plain rowid table (a virtual or generated column, a primary key,
//! a column with a default that short records would take).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::Connection;

/// Pages read at once for the leaves, which a table written in order stores one after the other.
const WINDOW_PAGES: usize = 32;
/// Deeper than any real b-tree (a 4 KiB-page tree of 2^40 rows is 6 deep): a deeper one loops.
const MAX_DEPTH: usize = 20;

/// The database file, checked to be one whose pages hold every row.
pub(super) struct Pages {
    file: File,
    page_size: usize,
    /// Bytes of each page the b-tree uses (the rest is reserved, e.g. for a checksum).
    usable: usize,
    pages: u64,
}

impl Pages {
    /// The file at `path`, or `None` when its pages may not hold every committed row (a WAL file or a hot
    /// journal beside it) or its text is not UTF-8: SQLite reads it then.
    pub(super) fn open(path: &Path) -> std::io::Result<Option<Pages>> {
        let file = File::open(path)?;
        let mut header = [0u8; 100];
        file.read_exact_at(&mut header, 0)?;
        if &header[..16] != b"SQLite format 3\0" {
            return Ok(None);
        }
        let page_size = match u16::from_be_bytes([header[16], header[17]]) {
            1 => 65536,
            n => n as usize,
        };
        // File format versions 1 and 1: rollback journal, not WAL.
        let legacy = header[18] == 1 && header[19] == 1;
        let utf8 = u32::from_be_bytes([header[56], header[57], header[58], header[59]]) == 1;
        let journal =
            path.with_file_name(format!("{}-journal", path.file_name().unwrap_or_default().to_string_lossy()));
        let hot_journal = std::fs::metadata(journal).is_ok_and(|m| m.len() > 0);
        if !legacy || !utf8 || hot_journal || !page_size.is_power_of_two() || page_size < 512 {
            return Ok(None);
        }
        let usable = page_size - header[20] as usize;
        if usable < 480 {
            return Ok(None);
        }
        let pages = file.metadata()?.len() / page_size as u64;
        Ok(Some(Pages { file, page_size, usable, pages }))
    }

    /// Page `number` (from 1) into `out`.
    fn read(&self, number: u32, out: &mut Vec<u8>) -> Result<(), String> {
        self.read_run(number, 1, out).map(|_| ())
    }

    /// Up to `count` pages from `first` into `out` (fewer at the end of the file); how many.
    fn read_run(&self, first: u32, count: usize, out: &mut Vec<u8>) -> Result<usize, String> {
        if first == 0 || u64::from(first) > self.pages {
            return Err(format!("a b-tree names page {first}, outside the file's {} pages", self.pages));
        }
        let count = count.min((self.pages - u64::from(first) + 1) as usize);
        out.resize(count * self.page_size, 0);
        self.file
            .read_exact_at(out, (u64::from(first) - 1) * self.page_size as u64)
            .map_err(|e| format!("cannot read page {first}: {e}"))?;
        Ok(count)
    }
}

/// Where the values a query selects lie in a table's records.
pub(super) struct TableColumns {
    /// The table b-tree's root page.
    root: u32,
    /// Each column's place in a record, by name.
    places: Vec<(String, usize)>,
}

impl TableColumns {
    /// The layout of `table`, or `None` when its records are not plain rows of its declared columns.
    pub(super) fn read(conn: &Connection, table: &str) -> rusqlite::Result<Option<TableColumns>> {
        let root: Option<i64> = conn
            .query_row("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| r.get(0))
            .ok();
        let Some(root) = root.and_then(|r| u32::try_from(r).ok()).filter(|&r| r > 0) else { return Ok(None) };
        let mut stmt = conn.prepare(&format!("PRAGMA table_xinfo(\"{table}\")"))?;
        let mut rows = stmt.query([])?;
        let mut places = Vec::new();
        while let Some(row) = rows.next()? {
            let name: String = row.get(1)?;
            let default: ValueRef = row.get_ref(4)?;
            let primary_key: i64 = row.get(5)?;
            let hidden: i64 = row.get(6)?;
            // A primary key may be the rowid's alias (stored as NULL) or make the table WITHOUT ROWID; a
            // default is what records written before an ALTER TABLE lack; a generated column is not stored.
            if primary_key != 0 || default != ValueRef::Null || hidden != 0 {
                return Ok(None);
            }
            places.push((name, places.len()));
        }
        Ok(Some(TableColumns { root, places }))
    }

    /// The place of column `name` in a record.
    pub(super) fn place(&self, name: &str) -> Option<usize> {
        self.places.iter().find(|(n, _)| n == name).map(|&(_, place)| place)
    }
}

/// One level of a cursor's path from the root: a copy of the page and the cell it is at.
struct Level {
    data: Vec<u8>,
    /// Where the b-tree header starts: 100 on page 1, after the file header.
    header: usize,
    leaf: bool,
    cells: usize,
    /// A leaf: the next cell to read; an interior page: the child being read (`cells`: the right-most one).
    cell: usize,
}

impl Level {
    fn cell_offset(&self, cell: usize) -> Result<usize, String> {
        let at = self.header + if self.leaf { 8 } else { 12 } + 2 * cell;
        let bytes = self.data.get(at..at + 2).ok_or("a cell pointer outside its page")?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]) as usize)
    }

    /// The child page an interior page's child `index` is (`cells`: the right-most).
    fn child(&self, index: usize) -> Result<u32, String> {
        let at = if index == self.cells { self.header + 8 } else { self.cell_offset(index)? };
        let bytes = self.data.get(at..at + 4).ok_or("a child pointer outside its page")?;
        Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// The largest rowid under interior cell `index`.
    fn interior_key(&self, index: usize) -> Result<i64, String> {
        let at = self.cell_offset(index)? + 4;
        Ok(varint(&self.data, at)?.0 as i64)
    }

    /// A leaf cell's rowid.
    fn leaf_rowid(&self, index: usize) -> Result<i64, String> {
        let (_, at) = varint(&self.data, self.cell_offset(index)?)?;
        Ok(varint(&self.data, at)?.0 as i64)
    }
}

/// A table's rows in rowid order.
pub(super) struct RowCursor<'p> {
    pages: &'p Pages,
    root: u32,
    path: Vec<Level>,
    /// The leaves read ahead, from page `window_first`.
    window: Vec<u8>,
    window_first: u32,
    window_pages: usize,
    /// Page buffers of levels left, for the next ones.
    spare: Vec<Vec<u8>>,
    /// The current row's payload, where it spills onto overflow pages.
    spilled: Vec<u8>,
    /// Where the payload of the row last read is: in the leaf at this range, or spilled (`None`).
    current: Option<std::ops::Range<usize>>,
    overflow: Vec<u8>,
}

impl<'p> RowCursor<'p> {
    pub(super) fn new(pages: &'p Pages, columns: &TableColumns) -> RowCursor<'p> {
        RowCursor {
            pages,
            root: columns.root,
            path: Vec::new(),
            window: Vec::new(),
            window_first: 0,
            window_pages: 0,
            spare: Vec::new(),
            spilled: Vec::new(),
            current: Some(0..0),
            overflow: Vec::new(),
        }
    }

    /// Places the cursor before the first row whose rowid is at least `rowid`.
    pub(super) fn seek(&mut self, rowid: i64) -> Result<(), String> {
        while !self.path.is_empty() {
            self.pop();
        }
        let mut page = self.root;
        loop {
            let mut level = self.level(page)?;
            let key = |index| if level.leaf { level.leaf_rowid(index) } else { level.interior_key(index) };
            // The first cell whose key is at least `rowid` (keys ascend within a page).
            let (mut lo, mut hi) = (0, level.cells);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if key(mid)? < rowid {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            level.cell = lo;
            let child = if level.leaf { None } else { Some(level.child(lo)?) };
            self.path.push(level);
            match child {
                Some(child) => page = child,
                None => return Ok(()),
            }
        }
    }

    /// The next row: its rowid and record.
    pub(super) fn next(&mut self) -> Result<Option<(i64, &[u8])>, String> {
        loop {
            let Some(top) = self.path.last_mut() else { return Ok(None) };
            if top.leaf {
                if top.cell < top.cells {
                    let cell = top.cell;
                    top.cell += 1;
                    return self.leaf_cell(cell).map(Some);
                }
            } else if top.cell < top.cells {
                top.cell += 1;
                let child = top.child(top.cell)?;
                self.descend_leftmost(child)?;
                continue;
            }
            self.pop();
        }
    }

    /// The payload of the row [`RowCursor::next`] last gave.
    pub(super) fn current(&self) -> &[u8] {
        match (&self.current, self.path.last()) {
            (Some(range), Some(leaf)) => &leaf.data[range.clone()],
            (Some(_), None) => &[],
            (None, _) => &self.spilled,
        }
    }

    fn descend_leftmost(&mut self, mut page: u32) -> Result<(), String> {
        loop {
            let level = self.level(page)?;
            let child = if level.leaf { None } else { Some(level.child(0)?) };
            self.path.push(level);
            match child {
                Some(child) => page = child,
                None => return Ok(()),
            }
        }
    }

    /// Page `number` as a level of the path, at its first cell.
    fn level(&mut self, number: u32) -> Result<Level, String> {
        if self.path.len() >= MAX_DEPTH {
            return Err(format!("a b-tree deeper than {MAX_DEPTH} pages at page {number}: it loops"));
        }
        let size = self.pages.page_size;
        let in_window = number >= self.window_first && ((number - self.window_first) as usize) < self.window_pages;
        if !in_window {
            // Leaves come one after the other in a table written in order: read on from this page.
            self.window_pages = self.pages.read_run(number, WINDOW_PAGES, &mut self.window)?;
            self.window_first = number;
        }
        let at = (number - self.window_first) as usize * size;
        let mut data = self.spare.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(&self.window[at..at + size]);
        let header = if number == 1 { 100 } else { 0 };
        let leaf = match data[header] {
            0x0D => true,
            0x05 => false,
            flag => return Err(format!("page {number} is not a table b-tree page (flag {flag:#x})")),
        };
        let cells = u16::from_be_bytes([data[header + 3], data[header + 4]]) as usize;
        Ok(Level { data, header, leaf, cells, cell: 0 })
    }

    fn pop(&mut self) {
        if let Some(level) = self.path.pop() {
            self.spare.push(level.data);
        }
    }

    /// Leaf cell `index` of the deepest level: its rowid and its whole payload.
    fn leaf_cell(&mut self, index: usize) -> Result<(i64, &[u8]), String> {
        let usable = self.pages.usable;
        let Some(leaf) = self.path.last() else { return Err("no leaf".to_string()) };
        let (size, at) = varint(&leaf.data, leaf.cell_offset(index)?)?;
        let (rowid, at) = varint(&leaf.data, at)?;
        let size = usize::try_from(size).map_err(|_| "a payload larger than memory")?;
        let local = local_payload(size, usable);
        let bytes = leaf.data.get(at..at + local).ok_or("a cell outside its page")?;
        if local == size {
            self.current = Some(at..at + local);
            return Ok((rowid as i64, bytes));
        }
        // The rest is on a chain of overflow pages, each a next-page number and then its part.
        let mut payload = Vec::with_capacity(size);
        payload.extend_from_slice(bytes);
        let next = leaf.data.get(at + local..at + local + 4).ok_or("an overflow pointer outside its page")?;
        let mut next = u32::from_be_bytes([next[0], next[1], next[2], next[3]]);
        while payload.len() < size {
            self.pages.read(next, &mut self.overflow)?;
            let part = (size - payload.len()).min(usable - 4);
            payload.extend_from_slice(&self.overflow[4..4 + part]);
            next = u32::from_be_bytes([self.overflow[0], self.overflow[1], self.overflow[2], self.overflow[3]]);
        }
        // Kept in a buffer the cursor owns, so that the record is borrowed like a local one.
        self.spilled = payload;
        self.current = None;
        Ok((rowid as i64, &self.spilled))
    }
}

/// How much of a table leaf cell's payload of `size` bytes is on its page (the file format's rule).
fn local_payload(size: usize, usable: usize) -> usize {
    let most = usable - 35;
    if size <= most {
        return size;
    }
    let least = (usable - 12) * 32 / 255 - 23;
    let local = least + (size - least) % (usable - 4);
    if local <= most {
        local
    } else {
        least
    }
}

/// A varint at `at`: its value and where the next byte is.
#[inline]
fn varint(bytes: &[u8], at: usize) -> Result<(u64, usize), String> {
    // Most are one byte: serial types of integers and short texts, header sizes, small payload sizes.
    match bytes.get(at) {
        Some(&byte) if byte < 0x80 => Ok((u64::from(byte), at + 1)),
        _ => long_varint(bytes, at),
    }
}

fn long_varint(bytes: &[u8], at: usize) -> Result<(u64, usize), String> {
    let mut value = 0u64;
    for i in 0..9 {
        let byte = *bytes.get(at + i).ok_or("a varint outside its page")?;
        if i == 8 {
            return Ok(((value << 8) | u64::from(byte), at + 9));
        }
        value = (value << 7) | u64::from(byte & 0x7F);
        if byte < 0x80 {
            return Ok((value, at + i + 1));
        }
    }
    unreachable!("a varint has at most 9 bytes")
}

/// The values of one record, found by their place.
pub(super) struct Record<'r> {
    bytes: &'r [u8],
    /// Each value's serial type and where it starts, for the values up to the last one asked for.
    values: &'r [(u64, usize)],
}

/// Where a record's values lie: reused from row to row.
#[derive(Default)]
pub(super) struct RecordLayout {
    values: Vec<(u64, usize)>,
}

impl RecordLayout {
    /// Parses the header of `bytes` far enough to find the first `count` values.
    #[inline]
    pub(super) fn parse<'r>(&'r mut self, bytes: &'r [u8], count: usize) -> Result<Record<'r>, String> {
        self.values.clear();
        let (header_size, mut at) = varint(bytes, 0)?;
        let header_end = usize::try_from(header_size).map_err(|_| "a record header larger than memory")?;
        let mut body = header_end;
        while at < header_end && self.values.len() < count {
            let (serial, next) = varint(bytes, at)?;
            self.values.push((serial, body));
            body += value_size(serial)?;
            at = next;
        }
        if body > bytes.len() {
            return Err("a record longer than its cell".to_string());
        }
        Ok(Record { bytes, values: &self.values })
    }

    /// The record [`RecordLayout::parse`] last parsed, `bytes` being the same record again.
    pub(super) fn record<'r>(&'r self, bytes: &'r [u8]) -> Record<'r> {
        Record { bytes, values: &self.values }
    }
}

/// The size of a value of serial type `serial`.
#[inline]
fn value_size(serial: u64) -> Result<usize, String> {
    Ok(match serial {
        0 | 8 | 9 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 | 7 => 8,
        10 | 11 => return Err(format!("a reserved serial type {serial}")),
        n => ((n - 12) / 2) as usize,
    })
}

impl<'r> Record<'r> {
    /// The value at `place`; NULL past the record's end, as SQLite reads a column a record predates.
    #[inline]
    pub(super) fn value(&self, place: usize) -> ValueRef<'r> {
        let Some(&(serial, at)) = self.values.get(place) else { return ValueRef::Null };
        let bytes = self.bytes;
        // Big-endian two's complement of 1, 2, 3, 4, 6 or 8 bytes: parse checked that they are in the record.
        let int = |n: usize| {
            let mut wide = [0u8; 8];
            wide[8 - n..].copy_from_slice(&bytes[at..at + n]);
            let shift = 64 - 8 * n as u32;
            ValueRef::Integer(i64::from_be_bytes(wide) << shift >> shift)
        };
        match serial {
            0 => ValueRef::Null,
            1 => int(1),
            2 => int(2),
            3 => int(3),
            4 => int(4),
            5 => int(6),
            6 => int(8),
            7 => {
                let mut wide = [0u8; 8];
                wide.copy_from_slice(&bytes[at..at + 8]);
                ValueRef::Real(f64::from_be_bytes(wide))
            }
            8 => ValueRef::Integer(0),
            9 => ValueRef::Integer(1),
            n => {
                let len = ((n - 12) / 2) as usize;
                let value = &bytes[at..at + len];
                if n % 2 == 0 {
                    ValueRef::Blob(value)
                } else {
                    ValueRef::Text(value)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(name: &str, setup: &str) -> (std::path::PathBuf, Connection) {
        let path = std::env::temp_dir().join(format!("{name}.{}.pages.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let conn = Connection::open(&path).expect("creates");
        conn.execute_batch(setup).expect("setup");
        (path, conn)
    }

    /// Every row of `table` as SQLite reads it: rowid and each column's value.
    fn by_sqlite(conn: &Connection, table: &str, from: i64) -> Vec<(i64, Vec<String>)> {
        let mut stmt = conn.prepare(&format!("SELECT rowid, * FROM {table} WHERE rowid >= ?1 ORDER BY rowid")).unwrap();
        let columns = stmt.column_count();
        let mut rows = stmt.query([from]).unwrap();
        let mut read = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            let values = (1..columns).map(|i| format!("{:?}", row.get_ref(i).unwrap())).collect();
            read.push((row.get(0).unwrap(), values));
        }
        read
    }

    fn by_pages(path: &Path, conn: &Connection, table: &str, from: i64) -> Vec<(i64, Vec<String>)> {
        let pages = Pages::open(path).unwrap().expect("a plain file");
        let columns = TableColumns::read(conn, table).unwrap().expect("a plain table");
        let mut cursor = RowCursor::new(&pages, &columns);
        cursor.seek(from).unwrap();
        let mut layout = RecordLayout::default();
        let mut read = Vec::new();
        while let Some((rowid, bytes)) = cursor.next().unwrap() {
            let record = layout.parse(bytes, columns.places.len()).unwrap();
            let values = (0..columns.places.len()).map(|i| format!("{:?}", record.value(i))).collect();
            read.push((rowid, values));
        }
        read
    }

    #[test]
    fn rows_read_from_the_pages_are_the_rows_sqlite_reads_from_any_rowid() {
        let (path, conn) = database("many_rows", "CREATE TABLE t (a INTEGER, b, c TEXT, d INTEGER)");
        let edges = [0, 1, -1, 127, 128, -128, -129, 32767, 32768, 1 << 23, -(1 << 23) - 1, 1 << 31, 1 << 40, 1 << 47];
        let edges: Vec<i64> = edges.into_iter().chain([i64::MIN, i64::MAX, (1 << 47) + 5, -(1 << 47)]).collect();
        conn.execute_batch("BEGIN").unwrap();
        for i in 0..30_000i64 {
            let a = edges[i as usize % edges.len()].wrapping_add(i / edges.len() as i64);
            // Every 997th row spills onto overflow pages; some values are NULL, real, blob or a short record.
            let c = if i % 997 == 0 { "x".repeat(10_000 + i as usize) } else { format!("row {i}") };
            match i % 5 {
                0 => conn.execute("INSERT INTO t VALUES (?1, NULL, ?2, 1)", rusqlite::params![a, c]),
                1 => conn.execute("INSERT INTO t VALUES (?1, 2.5, ?2, 0)", rusqlite::params![a, c]),
                2 => conn.execute("INSERT INTO t VALUES (?1, x'00ff', ?2, ?3)", rusqlite::params![a, c, i * 3]),
                3 => conn.execute(
                    "INSERT INTO t (rowid, a, c) VALUES (?1, ?2, ?3)",
                    rusqlite::params![i * 7 + 100_000, a, c],
                ),
                _ => conn.execute("INSERT INTO t (a, b, c, d) VALUES (?1, ?1, ?2, NULL)", rusqlite::params![a, c]),
            }
            .unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
        for from in [i64::MIN, 0, 1, 2, 5_000, 29_999, 100_000, 100_001, 150_003, 1 << 40] {
            assert_eq!(by_pages(&path, &conn, "t", from), by_sqlite(&conn, "t", from), "from rowid {from}");
        }
        assert_eq!(by_pages(&path, &conn, "t", i64::MIN).len(), 30_000);
        // A record written before a column was added reads NULL there, as SQLite reads it.
        conn.execute_batch("ALTER TABLE t ADD COLUMN e INTEGER").unwrap();
        assert_eq!(by_pages(&path, &conn, "t", 29_000), by_sqlite(&conn, "t", 29_000));
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn what_the_pages_may_not_hold_whole_is_left_to_sqlite() {
        let (path, conn) = database(
            "declined",
            "CREATE TABLE plain (a INTEGER); CREATE TABLE keyed (id INTEGER PRIMARY KEY, a); \
             CREATE TABLE defaulted (a INTEGER, b INTEGER DEFAULT 3); \
             CREATE TABLE generated (a INTEGER, b INTEGER AS (a + 1))",
        );
        assert!(Pages::open(&path).unwrap().is_some());
        assert!(TableColumns::read(&conn, "plain").unwrap().is_some());
        for table in ["keyed", "defaulted", "generated", "missing"] {
            assert!(TableColumns::read(&conn, table).unwrap().is_none(), "{table}");
        }
        conn.execute_batch("PRAGMA journal_mode = WAL; INSERT INTO plain VALUES (1)").unwrap();
        assert!(Pages::open(&path).unwrap().is_none(), "rows may be in the WAL file");
        drop(conn);
        std::fs::remove_file(&path).ok();
        std::fs::remove_file(path.with_extension("sqlite-wal")).ok();
        std::fs::remove_file(path.with_extension("sqlite-shm")).ok();
    }
}
