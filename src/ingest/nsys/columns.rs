//! Columns described once: a query lists the integer columns it reads, each with what to select when a reduced
//! export lacks it and what a NULL in it means. The SQL is built from that list and rows are read by position in
//! it, so a column is named in one place, an error names it, and reading a row looks nothing up. A row is read
//! the same from SQLite or from the export's pages (pages.rs), through [`RowValues`].

use std::collections::HashSet;

use rusqlite::types::ValueRef;
use rusqlite::Row;

use super::pages::{Record, TableColumns};

/// One integer column a query reads.
#[derive(Copy, Clone, Debug)]
pub(super) struct Column {
    /// The column's name in the table.
    pub(super) name: &'static str,
    pub(super) if_absent: IfAbsent,
    pub(super) if_null: IfNull,
}

/// What to select when the table lacks the column (reduced exports drop some).
#[derive(Copy, Clone, Debug)]
pub(super) enum IfAbsent {
    /// Nothing: the table cannot be read without it.
    Fail,
    /// Another column of the same meaning.
    Column(&'static str),
    /// A literal SQL value.
    Literal(&'static str),
}

/// What a NULL in the column means.
#[derive(Copy, Clone, Debug)]
pub(super) enum IfNull {
    /// The schema says NOT NULL: a row of an export that broke that promise is skipped (and counted).
    SkipsRow,
    /// The value read instead.
    Reads(i64),
}

impl Column {
    /// A column every export has, NOT NULL in the schema.
    pub(super) const fn required(name: &'static str) -> Column {
        Column { name, if_absent: IfAbsent::Fail, if_null: IfNull::SkipsRow }
    }

    /// The same column, read as the literal `sql` where the table lacks it.
    pub(super) const fn or_literal(self, sql: &'static str) -> Column {
        Column { if_absent: IfAbsent::Literal(sql), ..self }
    }

    /// The same column, read from `other` where the table lacks it.
    pub(super) const fn or_column(self, other: &'static str) -> Column {
        Column { if_absent: IfAbsent::Column(other), ..self }
    }

    /// The same column, with NULL read as `value`.
    pub(super) const fn null_reads(self, value: i64) -> Column {
        Column { if_null: IfNull::Reads(value), ..self }
    }

    /// What to select for this column from a table with `present` columns; the error says what is missing.
    pub(super) fn select(&self, present: &HashSet<String>) -> Result<Selected, String> {
        if present.contains(self.name) {
            return Ok(Selected::Column(self.name));
        }
        match self.if_absent {
            IfAbsent::Column(other) if present.contains(other) => Ok(Selected::Column(other)),
            IfAbsent::Column(other) => Err(format!("no column {} or {other}", self.name)),
            IfAbsent::Literal(sql) => Ok(Selected::Literal(sql)),
            IfAbsent::Fail => Err(format!("no column {}", self.name)),
        }
    }
}

/// One value of a query's select list.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Selected {
    Column(&'static str),
    /// A literal SQL value: an integer or NULL.
    Literal(&'static str),
    /// The process id in bits 24 to 47 of this column.
    ProcessOf(&'static str),
    Rowid,
}

impl Selected {
    pub(super) fn sql(&self) -> String {
        match self {
            Selected::Column(name) | Selected::Literal(name) => name.to_string(),
            Selected::ProcessOf(column) => format!("(({column} >> 24) & 16777215)"),
            Selected::Rowid => "rowid".to_string(),
        }
    }
}

/// The process id a ProcessOf column's integer holds, as its SQL computes it.
fn process_of(value: i64) -> i64 {
    (value >> 24) & 16_777_215
}

/// Where one selected value comes from in a record read from the export's pages.
#[derive(Copy, Clone, Debug)]
pub(super) enum Source {
    Place(usize),
    ProcessAt(usize),
    Literal(Option<i64>),
    Rowid,
}

/// Where each of `selection` comes from in the records of a table laid out as `columns`; `None` when one is
/// not a plain column or integer literal (SQLite then reads the table).
pub(super) fn sources(selection: &[Selected], columns: &TableColumns) -> Option<Vec<Source>> {
    selection
        .iter()
        .map(|selected| match *selected {
            Selected::Column(name) => columns.place(name).map(Source::Place),
            Selected::ProcessOf(name) => columns.place(name).map(Source::ProcessAt),
            Selected::Literal("NULL") => Some(Source::Literal(None)),
            Selected::Literal(value) => value.parse().ok().map(|v| Source::Literal(Some(v))),
            Selected::Rowid => Some(Source::Rowid),
        })
        .collect()
}

/// The SELECT list of `columns` for a table with `present` columns.
pub(super) fn select_list(columns: &[Column], present: &HashSet<String>) -> Result<String, String> {
    let selected = columns.iter().map(|c| c.select(present).map(|s| s.sql())).collect::<Result<Vec<_>, _>>()?;
    Ok(selected.join(", "))
}

/// A row of a query, its values by their place in the select list: a SQLite row, or a record read from the
/// export's pages.
pub(super) trait RowValues {
    fn value(&self, index: usize) -> rusqlite::Result<ValueRef<'_>>;
    /// A text value that may be NULL.
    fn text(&self, index: usize, column: &'static str) -> Result<Option<String>, BadValue>;
}

impl RowValues for Row<'_> {
    #[inline]
    fn value(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(index)
    }

    fn text(&self, index: usize, column: &'static str) -> Result<Option<String>, BadValue> {
        read_text(self, index, column)
    }
}

/// A value a row could not be read from: which column, and what was wrong.
#[derive(Debug)]
pub(super) struct BadValue {
    pub(super) column: &'static str,
    pub(super) message: String,
}

impl std::fmt::Display for BadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

/// A record read from the export's pages, its values in the order of a query's select list.
pub(super) struct RecordRow<'r> {
    pub(super) record: Record<'r>,
    pub(super) rowid: i64,
    pub(super) selection: &'r [Source],
}

impl RowValues for RecordRow<'_> {
    #[inline]
    fn value(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        Ok(match self.selection.get(index) {
            Some(Source::Place(place)) => self.record.value(*place),
            Some(Source::ProcessAt(place)) => match self.record.value(*place) {
                ValueRef::Integer(v) => ValueRef::Integer(process_of(v)),
                // Only NULL: the key pass leaves a table with any other process value to SQLite.
                other => other,
            },
            Some(Source::Literal(Some(v))) => ValueRef::Integer(*v),
            Some(Source::Literal(None)) => ValueRef::Null,
            Some(Source::Rowid) => ValueRef::Integer(self.rowid),
            None => return Err(rusqlite::Error::InvalidColumnIndex(index)),
        })
    }

    fn text(&self, index: usize, column: &'static str) -> Result<Option<String>, BadValue> {
        match self.value(index) {
            Ok(ValueRef::Null) => Ok(None),
            Ok(ValueRef::Text(bytes)) => String::from_utf8(bytes.to_vec())
                .map(Some)
                .map_err(|e| BadValue { column, message: format!("unexpected value: {e}") }),
            Ok(other) => Err(BadValue { column, message: format!("unexpected value: {}", other.data_type()) }),
            Err(e) => Err(BadValue { column, message: format!("unexpected value: {e}") }),
        }
    }
}

/// Reads `columns` from `row`, the first of them at index `first`: `None` when a NULL skips the row.
#[inline]
pub(super) fn read_ints<const N: usize, R: RowValues + ?Sized>(
    row: &R,
    first: usize,
    columns: &[Column; N],
) -> Result<Option<[i64; N]>, BadValue> {
    let mut values = [0i64; N];
    for (i, (value, column)) in values.iter_mut().zip(columns).enumerate() {
        *value = match row.value(first + i) {
            Ok(ValueRef::Integer(v)) => v,
            Ok(ValueRef::Null) => match column.if_null {
                IfNull::SkipsRow => return Ok(None),
                IfNull::Reads(v) => v,
            },
            Ok(other) => {
                let message = format!("unexpected value: {} where an integer belongs", other.data_type());
                return Err(BadValue { column: column.name, message });
            }
            Err(e) => return Err(BadValue { column: column.name, message: format!("unexpected value: {e}") }),
        };
    }
    Ok(Some(values))
}

/// Reads a text column that may be NULL.
pub(super) fn read_text(row: &Row, index: usize, column: &'static str) -> Result<Option<String>, BadValue> {
    row.get::<_, Option<String>>(index).map_err(|e| BadValue { column, message: format!("unexpected value: {e}") })
}
