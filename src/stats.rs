//! `streamtrace stats`: the summaries people expect from `nsys stats`, for any trace streamtrace reads: kernels
//! (as `cuda_gpu_kern_sum`), per-stream busy time and the overlap of each pair of streams, synchronization calls
//! and the host time they blocked, and copies by kind. Tables are polars DataFrames so that they can be written as
//! a terminal table, CSV, JSON or Parquet alike.
//!
//! An nsys export of 2 million kernels is 2 million rows here: reading them does as little per row as it can
//! (a kernel's name is an index into the distinct names, a stream's work is found by its id), and polars groups
//! integers, not strings; names come back on the few grouped rows.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use polars::prelude::*;
use rustc_hash::FxHashMap;

use crate::ingest::{self, ImportCounters, IngestError};
use crate::model::{HostSync, OpKind, TraceRecord};

/// The tables' column names, as `nsys stats` spells them where it has the column.
pub mod columns {
    pub const TIME_PCT: &str = "Time (%)";
    pub const TOTAL_TIME: &str = "Total Time (ns)";
    pub const INSTANCES: &str = "Instances";
    pub const AVG: &str = "Avg (ns)";
    pub const MED: &str = "Med (ns)";
    pub const MIN: &str = "Min (ns)";
    pub const MAX: &str = "Max (ns)";
    pub const STDDEV: &str = "StdDev (ns)";
    pub const NAME: &str = "Name";
    pub const PROCESS: &str = "Process";
    pub const STREAM: &str = "Stream";
    pub const OPERATIONS: &str = "Operations";
    pub const BUSY_TIME: &str = "Busy Time (ns)";
    pub const BUSY_PCT: &str = "Busy (% of span)";
    pub const STREAM_A: &str = "Stream A";
    pub const STREAM_B: &str = "Stream B";
    pub const OVERLAP: &str = "Overlap (ns)";
    pub const API: &str = "API";
    pub const CALLS: &str = "Calls";
    pub const CALLS_TIMED: &str = "Calls Timed";
    pub const TOTAL_BLOCKED: &str = "Total Blocked (ns)";
    pub const AVG_BLOCKED: &str = "Avg Blocked (ns)";
    pub const MAX_BLOCKED: &str = "Max Blocked (ns)";
    pub const KIND: &str = "Kind";
    pub const COUNT: &str = "Count";
    pub const TOTAL_BYTES: &str = "Total (bytes)";
}

use columns::*;

/// The named tables of one trace, in display order.
pub struct TraceStats {
    pub tables: Vec<(&'static str, DataFrame)>,
    /// Operations read, for the header line.
    pub operations: u64,
    /// Kernels without GPU start and end times (a capture made without `--gpu-times`): counted, not timed.
    pub kernels_without_gpu_time: u64,
    /// What the reading counted, as `analyze` reports it: data lost means the tables may be incomplete.
    pub import: ImportCounters,
}

/// Why stats could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error(transparent)]
    Input(#[from] IngestError),
    #[error("building the `{table}` table: {source}")]
    Table { table: &'static str, source: PolarsError },
    #[error("{path}: the {column} add up to more than 2^64 ({total}): the trace's times or sizes cannot be real")]
    SumTooLarge { path: String, column: &'static str, total: u128 },
}

/// GPU work of one stream, for busy time and overlap.
#[derive(Default)]
struct StreamWork {
    intervals: Vec<(u64, u64)>,
    operations: u64,
}

/// Columns gathered while reading, one vector per column.
#[derive(Default)]
struct Columns {
    /// Each kernel's name, as an index into `names`.
    kernel_name: Vec<u32>,
    names: KernelNames,
    kernel_ns: Vec<Option<u64>>,
    copy_kind: Vec<&'static str>,
    copy_bytes: Vec<u64>,
    copy_ns: Vec<Option<u64>>,
    sync_api: Vec<String>,
    sync_blocked_ns: Vec<Option<u64>>,
    /// Work by stream id; streams that share a (process, handle) are summed when the tables are built.
    streams: Vec<StreamWork>,
}

/// The distinct kernel names, each given an index once. Readers hand every launch of a kernel the same shared
/// string, so the string's address finds its index without hashing 100-character C++ names; the map keeps a
/// reference to each string, so that an address cannot be reused by another name while it is a key.
#[derive(Default)]
struct KernelNames {
    by_address: FxHashMap<usize, (Arc<str>, u32)>,
    by_text: FxHashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

impl KernelNames {
    fn index(&mut self, name: &Arc<str>) -> u32 {
        let address = Arc::as_ptr(name) as *const u8 as usize;
        if let Some((_, index)) = self.by_address.get(&address) {
            return *index;
        }
        let next = self.names.len() as u32;
        let index = *self.by_text.entry(name.clone()).or_insert(next);
        if index == next {
            self.names.push(name.clone());
        }
        self.by_address.insert(address, (name.clone(), index));
        index
    }
}

fn sync_name(kind: &OpKind) -> Option<&'static str> {
    Some(match kind {
        OpKind::HostSync(HostSync::Stream(_)) => "cudaStreamSynchronize",
        OpKind::HostSync(HostSync::Event(_)) => "cudaEventSynchronize",
        OpKind::HostSync(HostSync::Device(_)) => "cudaDeviceSynchronize",
        OpKind::HostSync(HostSync::Context(_)) => "cuCtxSynchronize",
        OpKind::StreamWait { .. } | OpKind::StreamWaitUnknownRecord { .. } => "cudaStreamWaitEvent",
        OpKind::Query { .. } => "query",
        _ => return None,
    })
}

/// Reads the trace at `path` and computes every table.
pub fn compute(path: &Path) -> Result<TraceStats, StatsError> {
    let mut source = ingest::open(path)?;
    let mut columns = Columns::default();
    // (process, handle) of each stream, by id.
    let mut stream_handles: Vec<Option<(u32, u64)>> = Vec::new();
    let mut operations = 0;
    for record in source.by_ref() {
        let op = match record? {
            TraceRecord::Stream(info) => {
                set_grow(&mut stream_handles, info.id.index(), Some((info.process.0, info.handle)));
                continue;
            }
            TraceRecord::Op(op) => op,
            _ => continue,
        };
        operations += 1;
        let gpu = op.gpu_start_ns.zip(op.gpu_end_ns).filter(|(s, e)| e >= s);
        if let (Some(stream), Some((start, end))) = (op.kind.stream(), gpu) {
            if let Some(Some(_)) = stream_handles.get(stream.index()) {
                if stream.index() >= columns.streams.len() {
                    columns.streams.resize_with(stream.index() + 1, StreamWork::default);
                }
                let work = &mut columns.streams[stream.index()];
                work.intervals.push((start, end));
                work.operations += 1;
            }
        }
        let duration = gpu.map(|(s, e)| e - s);
        match &op.kind {
            OpKind::Kernel { name, .. } => {
                let index = columns.names.index(name);
                columns.kernel_name.push(index);
                columns.kernel_ns.push(duration);
            }
            OpKind::Memcpy { copy, bytes, .. } => {
                columns.copy_kind.push(copy.as_str());
                columns.copy_bytes.push(*bytes);
                columns.copy_ns.push(duration);
            }
            kind => {
                if let Some(default_name) = sync_name(kind) {
                    let api = op.api.as_deref().unwrap_or(default_name).to_string();
                    columns.sync_api.push(api);
                    columns.sync_blocked_ns.push(op.host_time_ns.zip(op.host_end_ns).map(|(s, e)| e.saturating_sub(s)));
                }
            }
        }
    }
    let import = source.finish();
    check_sums(path, &columns)?;
    // Each stream's busy intervals are sorted and merged once, for both stream tables.
    let unions = unions(std::mem::take(&mut columns.streams), &stream_handles);
    let tables = vec![
        ("kernels", kernel_summary(&columns).map_err(|source| StatsError::Table { table: "kernels", source })?),
        ("streams", stream_busy(&unions).map_err(|source| StatsError::Table { table: "streams", source })?),
        (
            "stream_overlap",
            stream_overlap(&unions).map_err(|source| StatsError::Table { table: "stream_overlap", source })?,
        ),
        ("syncs", sync_summary(&columns).map_err(|source| StatsError::Table { table: "syncs", source })?),
        ("memcpy", memcpy_summary(&columns).map_err(|source| StatsError::Table { table: "memcpy", source })?),
    ];
    let kernels_without_gpu_time = columns.kernel_ns.iter().filter(|ns| ns.is_none()).count() as u64;
    Ok(TraceStats { tables, operations, kernels_without_gpu_time, import })
}

/// The tables sum nanoseconds and bytes in 64 bits (polars' sums of u64 columns wrap): refuses columns whose
/// total does not fit, so that no table shows a wrapped total. No group's sum is larger than its column's.
fn check_sums(path: &Path, c: &Columns) -> Result<(), StatsError> {
    let optional = |values: &[Option<u64>]| values.iter().flatten().map(|&v| u128::from(v)).sum::<u128>();
    let columns = [
        ("kernel nanoseconds", optional(&c.kernel_ns)),
        ("copy nanoseconds", optional(&c.copy_ns)),
        ("copy bytes", c.copy_bytes.iter().map(|&v| u128::from(v)).sum()),
        ("synchronization nanoseconds", optional(&c.sync_blocked_ns)),
    ];
    match columns.into_iter().find(|(_, total)| *total > u128::from(u64::MAX)) {
        Some((column, total)) => Err(StatsError::SumTooLarge { path: path.display().to_string(), column, total }),
        None => Ok(()),
    }
}

/// As nsys's cuda_gpu_kern_sum: one row per kernel name, most total time first. Kernels are grouped by the
/// index of their name; the names join the grouped rows.
fn kernel_summary(c: &Columns) -> PolarsResult<DataFrame> {
    let df = df!("name" => &c.kernel_name, "ns" => &c.kernel_ns)?;
    // Fits: check_sums saw to it.
    let total: u64 = c.kernel_ns.iter().flatten().fold(0, |sum, &ns| sum.saturating_add(ns));
    let mut grouped = df
        .lazy()
        .group_by([col("name")])
        .agg([
            col("ns").sum().alias(TOTAL_TIME),
            col("name").count().alias(INSTANCES),
            col("ns").mean().alias(AVG),
            col("ns").median().alias(MED),
            col("ns").min().alias(MIN),
            col("ns").max().alias(MAX),
            // As nsys: the sample standard deviation (0 for one instance).
            col("ns").cast(DataType::Float64).std(1).fill_null(lit(0.0)).alias(STDDEV),
        ])
        .collect()?;
    let names: Vec<&str> =
        grouped.column("name")?.u32()?.into_no_null_iter().map(|i| &*c.names.names[i as usize]).collect();
    grouped.with_column(Column::new(NAME.into(), names))?;
    grouped
        .lazy()
        .with_column((col(TOTAL_TIME).cast(DataType::Float64) * lit(100.0) / lit(total.max(1) as f64)).alias(TIME_PCT))
        // A kernel without GPU times has no deviation either.
        .with_column(
            when(col(AVG).is_null()).then(lit(NULL).cast(DataType::Float64)).otherwise(col(STDDEV)).alias(STDDEV),
        )
        .select([
            col(TIME_PCT),
            col(TOTAL_TIME),
            col(INSTANCES),
            col(AVG),
            col(MED),
            col(MIN),
            col(MAX),
            col(STDDEV),
            col(NAME),
        ])
        .sort_by_exprs(
            [col(TOTAL_TIME), col(INSTANCES), col(NAME)],
            SortMultipleOptions::default().with_order_descending_multi([true, true, false]),
        )
        .collect()
}

/// Sorted, merged intervals: the union of a stream's GPU work.
fn union(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// Cannot wrap: the intervals of a union are disjoint and lie in 64-bit time.
fn length(intervals: &[(u64, u64)]) -> u64 {
    intervals.iter().map(|(s, e)| e - s).sum()
}

/// Total time covered by both unions.
fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let start = a[i].0.max(b[j].0);
        let end = a[i].1.min(b[j].1);
        if end > start {
            total += end - start;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// One stream's (process, handle), its operation count, and the union of its GPU work.
type StreamUnion = ((u32, u64), u64, Vec<(u64, u64)>);

/// The streams' work by (process, handle), in that order: streams sharing one (in different contexts) are one.
fn unions(streams: Vec<StreamWork>, handles: &[Option<(u32, u64)>]) -> Vec<StreamUnion> {
    let mut by_key: BTreeMap<(u32, u64), StreamWork> = BTreeMap::new();
    for (id, work) in streams.into_iter().enumerate() {
        let Some(Some(key)) = handles.get(id) else { continue };
        if work.operations == 0 {
            continue;
        }
        let merged = by_key.entry(*key).or_default();
        merged.operations += work.operations;
        merged.intervals.extend(work.intervals);
    }
    by_key.into_iter().map(|(key, work)| (key, work.operations, union(work.intervals))).collect()
}

fn set_grow<T: Clone + Default>(v: &mut Vec<T>, index: usize, value: T) {
    if index >= v.len() {
        v.resize(index + 1, T::default());
    }
    v[index] = value;
}

fn stream_busy(unions: &[StreamUnion]) -> PolarsResult<DataFrame> {
    let span_start = unions.iter().filter_map(|(_, _, u)| u.first().map(|i| i.0)).min().unwrap_or(0);
    let span_end = unions.iter().filter_map(|(_, _, u)| u.last().map(|i| i.1)).max().unwrap_or(0);
    let span = (span_end.saturating_sub(span_start)).max(1) as f64;
    let busy: Vec<u64> = unions.iter().map(|(_, _, u)| length(u)).collect();
    df!(
        PROCESS => unions.iter().map(|(k, _, _)| k.0).collect::<Vec<_>>(),
        STREAM => unions.iter().map(|(k, _, _)| k.1).collect::<Vec<_>>(),
        OPERATIONS => unions.iter().map(|(_, n, _)| *n).collect::<Vec<_>>(),
        BUSY_TIME => &busy,
        BUSY_PCT => busy.iter().map(|b| *b as f64 * 100.0 / span).collect::<Vec<_>>()
    )
}

fn stream_overlap(unions: &[StreamUnion]) -> PolarsResult<DataFrame> {
    let (mut process, mut a, mut b, mut both) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, (ka, _, ua)) in unions.iter().enumerate() {
        for (kb, _, ub) in &unions[i + 1..] {
            if ka.0 == kb.0 {
                process.push(ka.0);
                a.push(ka.1);
                b.push(kb.1);
                both.push(overlap(ua, ub));
            }
        }
    }
    df!(PROCESS => process, STREAM_A => a, STREAM_B => b, OVERLAP => both)?
        .sort([OVERLAP], SortMultipleOptions::default().with_order_descending(true))
}

fn sync_summary(c: &Columns) -> PolarsResult<DataFrame> {
    let df = df!("api" => &c.sync_api, "blocked_ns" => &c.sync_blocked_ns)?;
    df.lazy()
        .group_by([col("api")])
        .agg([
            col("blocked_ns").count().alias(CALLS_TIMED),
            len().alias(CALLS),
            col("blocked_ns").sum().alias(TOTAL_BLOCKED),
            col("blocked_ns").mean().alias(AVG_BLOCKED),
            col("blocked_ns").max().alias(MAX_BLOCKED),
        ])
        .select([
            col("api").alias(API),
            col(CALLS),
            col(CALLS_TIMED),
            col(TOTAL_BLOCKED),
            col(AVG_BLOCKED),
            col(MAX_BLOCKED),
        ])
        .sort_by_exprs(
            [col(TOTAL_BLOCKED), col(API)],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .collect()
}

fn memcpy_summary(c: &Columns) -> PolarsResult<DataFrame> {
    let df = df!("kind" => &c.copy_kind, "bytes" => &c.copy_bytes, "ns" => &c.copy_ns)?;
    df.lazy()
        .group_by([col("kind")])
        .agg([
            len().alias(COUNT),
            col("bytes").sum().alias(TOTAL_BYTES),
            col("ns").sum().alias(TOTAL_TIME),
            col("ns").mean().alias(AVG),
        ])
        .select([col("kind").alias(KIND), col(COUNT), col(TOTAL_BYTES), col(TOTAL_TIME), col(AVG)])
        .sort_by_exprs(
            [col(TOTAL_BYTES), col(KIND)],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_overlapping_and_touching_intervals() {
        assert_eq!(union(vec![(5, 9), (0, 3), (3, 4), (8, 12)]), vec![(0, 4), (5, 12)]);
    }

    #[test]
    fn sums_past_two_to_the_64_are_refused_not_wrapped() {
        let columns = Columns { kernel_ns: vec![Some(u64::MAX), Some(2)], ..Columns::default() };
        let error = check_sums(Path::new("t.json"), &columns).expect_err("too large").to_string();
        assert!(
            error.starts_with("t.json: the kernel nanoseconds add up to more than 2^64 (18446744073709551617)"),
            "{error}"
        );
        let columns = Columns { copy_bytes: vec![u64::MAX - 1, 1], ..Columns::default() };
        assert!(check_sums(Path::new("t.json"), &columns).is_ok());
    }

    #[test]
    fn overlap_counts_shared_time_once() {
        let a = union(vec![(0, 10), (20, 30)]);
        let b = union(vec![(5, 25)]);
        assert_eq!(overlap(&a, &b), 5 + 5);
        assert_eq!(overlap(&a, &[]), 0);
    }
}
