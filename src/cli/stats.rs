//! `streamtrace stats`: computes the summary tables and writes them in the asked format.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;
use polars::prelude::*;

use super::args::{StatsArgs, StatsFormat};
use crate::output::write_atomically;
use crate::report::printable;
use crate::stats::{compute, TraceStats};

pub fn run(args: &StatsArgs) -> anyhow::Result<()> {
    let mut stats = compute(&args.trace)?;
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
            let dir = output
                .as_deref()
                .context("--format csv, json and parquet write one file per table: name a directory with -o")?;
            crate::output::output_dir(dir)?;
            for (name, df) in stats.tables.iter_mut() {
                write_table(dir, name, df, format)?;
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
        let (process, stream, ns) =
            (df.column("process")?.u32()?, df.column("stream")?.u64()?, df.column("busy_ns")?.u64()?);
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
        let (name, ns) = (df.column("name")?.str()?, df.column("total_ns")?.u64()?);
        for i in 0..df.height().min(10) {
            kernels.push((crate::report::shorten(name.get(i).unwrap_or("")), ns.get(i).unwrap_or(0) as f64 / 1e6));
        }
    }
    Ok((busy, kernels))
}

fn write_tables(trace: &Path, stats: &TraceStats, out: &mut dyn Write) -> io::Result<()> {
    // Show every row and column, however many: the terminal table is the report.
    std::env::set_var("POLARS_FMT_MAX_ROWS", "-1");
    std::env::set_var("POLARS_FMT_MAX_COLS", "-1");
    std::env::set_var("POLARS_FMT_STR_LEN", "160");
    std::env::set_var("POLARS_TABLE_WIDTH", "400");
    std::env::set_var("POLARS_FMT_TABLE_ROUNDED_CORNERS", "1");
    writeln!(out, "streamtrace stats: {} ({} operations)", printable(&trace.display().to_string()), stats.operations)?;
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
            writeln!(out, "{}", printable_table(df).map_err(io::Error::other)?)?;
        }
    }
    Ok(())
}

/// The table with its text (kernel and API names from the trace) made safe for a terminal by
/// [`printable`]; files of tables keep the names as they are (their formats quote them).
fn printable_table(df: &DataFrame) -> PolarsResult<DataFrame> {
    let mut shown = df.clone();
    for column in df.columns() {
        if column.dtype() == &DataType::String {
            let escaped = column.str()?.apply_into_string_amortized(|value, buf| buf.push_str(&printable(value)));
            shown.replace(column.name(), escaped.into_column())?;
        }
    }
    Ok(shown)
}

/// A file format for one table per file.
#[derive(Copy, Clone)]
enum FileFormat {
    Csv,
    Json,
    Parquet,
}

fn write_table(dir: &Path, name: &str, df: &mut DataFrame, format: FileFormat) -> anyhow::Result<()> {
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
