//! Columns described once: a query lists the integer columns it reads, each with what to select when a reduced
//! export lacks it and what a NULL in it means. The SQL is built from that list and rows are read by position in
//! it, so a column is named in one place, an error names it, and reading a row looks nothing up.

use std::collections::HashSet;

use rusqlite::types::ValueRef;
use rusqlite::Row;

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
    pub(super) fn select(&self, present: &HashSet<String>) -> Result<&'static str, String> {
        if present.contains(self.name) {
            return Ok(self.name);
        }
        match self.if_absent {
            IfAbsent::Column(other) if present.contains(other) => Ok(other),
            IfAbsent::Column(other) => Err(format!("no column {} or {other}", self.name)),
            IfAbsent::Literal(sql) => Ok(sql),
            IfAbsent::Fail => Err(format!("no column {}", self.name)),
        }
    }
}

/// The SELECT list of `columns` for a table with `present` columns.
pub(super) fn select_list(columns: &[Column], present: &HashSet<String>) -> Result<String, String> {
    let selected = columns.iter().map(|c| c.select(present)).collect::<Result<Vec<_>, _>>()?;
    Ok(selected.join(", "))
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

/// Reads `columns` from `row`, the first of them at index `first`: `None` when a NULL skips the row.
#[inline]
pub(super) fn read_ints<const N: usize>(
    row: &Row,
    first: usize,
    columns: &[Column; N],
) -> Result<Option<[i64; N]>, BadValue> {
    let mut values = [0i64; N];
    for (i, (value, column)) in values.iter_mut().zip(columns).enumerate() {
        *value = match row.get_ref(first + i) {
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
