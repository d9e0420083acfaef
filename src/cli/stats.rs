//! `streamtrace stats`: computes the summary tables and writes them in the asked format.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use polars::prelude::*;

use super::args::{StatsArgs, StatsFormat};
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
        (StatsFormat::Table, Some(path)) => {
            let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = BufWriter::new(file);
            write_tables(&args.trace, &stats, &mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", path.display()))
        }
        (format, output) => {
            let format = match format {
                StatsFormat::Csv => FileFormat::Csv,
                StatsFormat::Json => FileFormat::Json,
                _ => FileFormat::Parquet,
            };
            let dir = output.as_deref().context("--format csv, json and parquet write one file per table: name a directory with -o")?;
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            for (name, df) in stats.tables.iter_mut() {
                write_table(dir, name, df, format)?;
            }
            Ok(())
        }
    }
}

/// (label, milliseconds) rows for the charts: busy time per stream, and the ten kernels taking the most time.
fn chart_rows(tables: &[(&'static str, DataFrame)]) -> PolarsResult<(Vec<(String, f64)>, Vec<(String, f64)>)> {
    let table = |name: &str| tables.iter().find(|(n, _)| *n == name).map(|(_, df)| df);
    let mut busy = Vec::new();
    if let Some(df) = table("streams") {
        let (process, stream, ns) = (df.column("process")?.u32()?, df.column("stream")?.u64()?, df.column("busy_ns")?.u64()?);
        for i in 0..df.height() {
            let label = format!("process {} stream {}", process.get(i).unwrap_or(0), crate::findings::stream_number(stream.get(i).unwrap_or(0)));
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
    writeln!(out, "streamtrace stats: {} ({} operations)", trace.display(), stats.operations)?;
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
            writeln!(out, "{df}")?;
        }
    }
    Ok(())
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
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let written = match format {
        FileFormat::Csv => CsvWriter::new(file).finish(df),
        FileFormat::Json => JsonWriter::new(file).with_json_format(JsonFormat::Json).finish(df),
        FileFormat::Parquet => ParquetWriter::new(file).finish(df).map(|_| ()),
    };
    anyhow::Context::with_context(written, || format!("writing {}", path.display()))
}
