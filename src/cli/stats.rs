//! `streamtrace stats`: computes the summary tables and writes them in the asked format: a terminal table as
//! `nsys stats` prints one (named columns with units, numbers right-aligned with thousands separators, the name
//! last), or CSV, JSON or Parquet, one file per table under `-o DIR`, or CSV and JSON on stdout without it.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;
use polars::prelude::*;

use super::args::{StatsArgs, StatsFormat};
use crate::output::{protect_input, write_atomically};
use crate::report::printable;
use crate::stats::{columns, compute, TraceStats};

/// Stream pairs the terminal table shows: pairs grow as the square of the streams (4,000 streams are 8 million
/// pairs), and the files of `--format csv|json|parquet` hold them all.
const OVERLAP_ROWS_SHOWN: usize = 100;

pub fn run(args: &StatsArgs) -> anyhow::Result<()> {
    protect_input(&args.trace);
    let mut stats = compute(&args.trace)?;
    if args.format != StatsFormat::Table || args.output.is_some() {
        // The warnings go with the tables on the terminal; with files, to standard error.
        let mut warnings = Vec::new();
        write_data_loss(&stats, &mut warnings).context("writing the warnings")?;
        eprint!("{}", String::from_utf8_lossy(&warnings));
    }
    if let Some(path) = &args.png {
        let (busy, kernels) = anyhow::Context::context(chart_rows(&stats.tables), "reading the tables for the charts")?;
        crate::report::png::write_stats(&busy, &kernels, path)?;
    }
    match (args.format, &args.output) {
        (StatsFormat::Table, None) => {
            let stdout = io::stdout();
            write_tables(&args.trace, &stats, &mut stdout.lock()).context("writing the tables")
        }
        (StatsFormat::Table, Some(path)) => write_atomically(path, |out| write_tables(&args.trace, &stats, out)),
        (format, output) => {
            let format = match format {
                StatsFormat::Csv => FileFormat::Csv,
                StatsFormat::Json => FileFormat::Json,
                _ => FileFormat::Parquet,
            };
            let Some(dir) = output.as_deref() else {
                let stdout = io::stdout();
                return write_to_stdout(&mut stats, format, &mut stdout.lock()).context("writing the tables");
            };
            crate::output::output_dir(dir)?;
            for (name, df) in stats.tables.iter_mut() {
                write_table_file(dir, name, df, format)?;
            }
            Ok(())
        }
    }
}

/// (label, value) bars of one chart.
type ChartRows = Vec<(String, f64)>;

/// (label, milliseconds) rows for the charts: busy time per stream, and the ten kernels taking the most time.
fn chart_rows(tables: &[(&'static str, DataFrame)]) -> PolarsResult<(ChartRows, ChartRows)> {
    let table = |name: &str| tables.iter().find(|(n, _)| *n == name).map(|(_, df)| df);
    let mut busy = Vec::new();
    if let Some(df) = table("streams") {
        let (process, stream, ns) = (
            df.column(columns::PROCESS)?.u32()?,
            df.column(columns::STREAM)?.u64()?,
            df.column(columns::BUSY_TIME)?.u64()?,
        );
        for i in 0..df.height() {
            let label = format!(
                "process {} stream {}",
                process.get(i).unwrap_or(0),
                crate::names::short::stream_number(stream.get(i).unwrap_or(0))
            );
            busy.push((label, ns.get(i).unwrap_or(0) as f64 / 1e6));
        }
    }
    let mut kernels = Vec::new();
    if let Some(df) = table("kernels") {
        let (name, ns) = (df.column(columns::NAME)?.str()?, df.column(columns::TOTAL_TIME)?.u64()?);
        let shown = df.height().min(10);
        // Three cuBLAS GEMMs are all `Kernel2` by their short names: labels that tell them apart.
        let names: Vec<&str> = (0..shown).map(|i| name.get(i).unwrap_or("")).collect();
        let labels = crate::names::short::distinct_short_names(&names, 40);
        for (i, label) in labels.into_iter().enumerate() {
            kernels.push((label, ns.get(i).unwrap_or(0) as f64 / 1e6));
        }
    }
    Ok((busy, kernels))
}

fn write_tables(trace: &Path, stats: &TraceStats, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "streamtrace stats: {} ({} operations)", printable(&trace.display().to_string()), stats.operations)?;
    write_data_loss(stats, out)?;
    if stats.kernels_without_gpu_time > 0 {
        writeln!(
            out,
            "{} kernels have no GPU times: they are counted, but kernel and stream times stay empty (record them with `streamtrace capture --gpu-times`)",
            stats.kernels_without_gpu_time
        )?;
    }
    for (name, df) in &stats.tables {
        writeln!(out, "\n{name}:")?;
        if df.height() == 0 {
            writeln!(out, "  (none)")?;
        } else {
            let shown = if *name == "stream_overlap" { OVERLAP_ROWS_SHOWN } else { df.height() };
            write_table(&df.head(Some(shown)), out)?;
            if df.height() > shown {
                writeln!(
                    out,
                    "  ... {} more stream pairs, with less overlap (`--format csv -o DIR` writes every pair)",
                    df.height() - shown
                )?;
            }
        }
    }
    Ok(())
}

/// What the reading lost, as `analyze` says it: one warning per data-loss counter.
fn write_data_loss(stats: &TraceStats, out: &mut dyn Write) -> io::Result<()> {
    for lost in stats.import.data_loss() {
        let first = lost.first.as_deref().map(|at| format!("; first at {}", printable(at))).unwrap_or_default();
        writeln!(
            out,
            "warning: {} {} ({}{first}): the tables may be incomplete",
            lost.count,
            lost.counter.description(),
            lost.counter.name()
        )?;
    }
    Ok(())
}

/// Longest text a terminal table shows of a name (kernel names run to 700 characters; CSV, JSON and Parquet keep
/// them whole).
const NAME_SHOWN: usize = 100;

/// One table as `nsys stats` prints one: a header of the column names, a rule, then the rows; numbers
/// right-aligned under their column, with thousands separators (integers whole, averages and shares to one
/// decimal); text columns left-aligned, the last one unpadded; an empty cell for a value the trace lacks.
fn write_table(df: &DataFrame, out: &mut dyn Write) -> io::Result<()> {
    let columns = df.columns();
    let cells: Vec<Vec<String>> = columns.iter().map(|c| (0..df.height()).map(|row| cell(c, row)).collect()).collect();
    let numeric: Vec<bool> = columns.iter().map(|c| c.dtype().is_primitive_numeric()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .zip(&cells)
        .map(|(c, values)| values.iter().map(|v| v.chars().count()).max().unwrap_or(0).max(c.name().chars().count()))
        .collect();
    let line = |texts: &mut dyn Iterator<Item = (usize, &str)>| {
        let mut text = String::new();
        for (i, value) in texts {
            if i > 0 {
                text.push_str("  ");
            }
            let pad = widths[i].saturating_sub(value.chars().count());
            let last = i + 1 == columns.len();
            if numeric[i] {
                text.push_str(&" ".repeat(pad));
                text.push_str(value);
            } else {
                text.push_str(value);
                if !last {
                    text.push_str(&" ".repeat(pad));
                }
            }
        }
        text.trim_end().to_string()
    };
    writeln!(out, "{}", line(&mut columns.iter().enumerate().map(|(i, c)| (i, c.name().as_str()))))?;
    let rules: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "{}", line(&mut rules.iter().enumerate().map(|(i, rule)| (i, rule.as_str()))))?;
    for row in 0..df.height() {
        writeln!(out, "{}", line(&mut cells.iter().enumerate().map(|(i, values)| (i, values[row].as_str()))))?;
    }
    Ok(())
}

/// One cell as the terminal table shows it.
fn cell(column: &Column, row: usize) -> String {
    let Ok(value) = column.get(row) else { return String::new() };
    match value {
        AnyValue::Null => String::new(),
        AnyValue::Float64(v) => grouped_decimal(v),
        AnyValue::Float32(v) => grouped_decimal(f64::from(v)),
        AnyValue::String(text) => shown_name(text),
        AnyValue::StringOwned(text) => shown_name(&text),
        other => match other.extract::<u64>() {
            Some(v) => grouped(v),
            None => printable(&other.to_string()).into_owned(),
        },
    }
}

/// A name from the trace, safe for a terminal ([`printable`]) and cut to [`NAME_SHOWN`] characters.
fn shown_name(text: &str) -> String {
    let text = printable(text);
    match text.char_indices().nth(NAME_SHOWN) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.into_owned(),
    }
}

/// 4092512 -> "4,092,512".
fn grouped(value: u64) -> String {
    let digits = value.to_string();
    let mut text = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            text.push(',');
        }
        text.push(c);
    }
    text
}

/// 125490.572581 -> "125,490.6", with one decimal, as nsys prints averages.
fn grouped_decimal(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let tenths = (value.abs() * 10.0).round() as u64;
    let sign = if value < 0.0 && tenths > 0 { "-" } else { "" };
    format!("{sign}{}.{}", grouped(tenths / 10), tenths % 10)
}

/// CSV or JSON on stdout, every table: CSV as one block per table under a `# name` line, blank lines between;
/// JSON as one object whose keys are the tables' names and whose values are their rows. Parquet is binary: it
/// needs a directory.
fn write_to_stdout(stats: &mut TraceStats, format: FileFormat, out: &mut dyn Write) -> anyhow::Result<()> {
    match format {
        FileFormat::Parquet => anyhow::bail!("--format parquet writes one file per table: name a directory with -o"),
        FileFormat::Csv => {
            for (i, (name, df)) in stats.tables.iter_mut().enumerate() {
                writeln!(out, "{}# {name}", if i > 0 { "\n" } else { "" })?;
                let written = CsvWriter::new(&mut *out).finish(df);
                anyhow::Context::with_context(written, || format!("writing the {name} table"))?;
            }
        }
        FileFormat::Json => {
            write!(out, "{{")?;
            for (i, (name, df)) in stats.tables.iter_mut().enumerate() {
                write!(out, "{}{}:", if i > 0 { "," } else { "" }, serde_json::to_string(name)?)?;
                let mut rows = Vec::new();
                let written = JsonWriter::new(&mut rows).with_json_format(JsonFormat::Json).finish(df);
                anyhow::Context::with_context(written, || format!("writing the {name} table"))?;
                out.write_all(&rows)?;
            }
            writeln!(out, "}}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// A file format for one table per file.
#[derive(Copy, Clone)]
enum FileFormat {
    Csv,
    Json,
    Parquet,
}

fn write_table_file(dir: &Path, name: &str, df: &mut DataFrame, format: FileFormat) -> anyhow::Result<()> {
    let extension = match format {
        FileFormat::Csv => "csv",
        FileFormat::Json => "json",
        FileFormat::Parquet => "parquet",
    };
    let path = dir.join(format!("{name}.{extension}"));
    write_atomically(&path, |file| {
        let written = match format {
            FileFormat::Csv => CsvWriter::new(file).finish(df),
            FileFormat::Json => JsonWriter::new(file).with_json_format(JsonFormat::Json).finish(df),
            FileFormat::Parquet => ParquetWriter::new(file).finish(df).map(|_| ()),
        };
        written.map_err(io::Error::other)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_labels_tell_kernels_apart() {
        // Three PyTorch kernels, all `vectorized_elementwise_kernel` by their short names.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/nsys/torch_loop_race.sqlite");
        let stats = compute(&path).expect("stats");
        let (_, kernels) = chart_rows(&stats.tables).expect("rows");
        let labels: std::collections::HashSet<&str> = kernels.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!((kernels.len(), labels.len()), (3, 3), "{kernels:?}");
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(4_092_512), "4,092,512");
        assert_eq!(grouped_decimal(125_490.572_581), "125,490.6");
        assert_eq!(grouped_decimal(4.0925e6), "4,092,500.0");
        assert_eq!(grouped_decimal(0.04), "0.0");
        assert_eq!(grouped_decimal(-1234.56), "-1,234.6");
    }

    #[test]
    fn tables_align_numbers_right_and_names_last() {
        let df =
            df!("Instances" => [3u64, 1200], "Avg (ns)" => [Some(1.5f64), None], "Name" => ["a", "bb"]).expect("frame");
        let mut out = Vec::new();
        write_table(&df, &mut out).expect("written");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "Instances  Avg (ns)  Name\n---------  --------  ----\n        3       1.5  a\n    1,200            bb\n"
        );
    }
}
