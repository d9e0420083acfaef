//! One report for a distributed job: every process's trace in a directory (what `streamtrace capture` of a
//! launcher such as torchrun writes: one `trace.PID.json` per process) analyzed in parallel, one trace per core,
//! then put in rank order (the rank each trace's header gives, from torchrun's environment). Reports label each
//! trace's findings with its rank and the GPUs of the streams they name; the job's status is the worst of its
//! traces'.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Context;

use crate::analysis::{analyze_path_with, Analysis, AnalysisError};
use crate::findings::IdShift;
use crate::hb::EngineOptions;
use crate::symbols::BinarySearch;

/// One trace of the job and what its analysis gave.
pub struct JobTrace {
    pub path: PathBuf,
    pub outcome: Result<Analysis, AnalysisError>,
}

impl JobTrace {
    /// The rank its header gave, if any.
    pub fn rank(&self) -> Option<u32> {
        self.outcome.as_ref().ok().and_then(|a| a.job).and_then(|j| j.rank)
    }

    /// "rank 1 (local rank 1) of 2, GPU 1" or the file's name: how reports head this trace's part.
    pub fn label(&self) -> String {
        let Ok(analysis) = &self.outcome else { return self.path.display().to_string() };
        if let Some(range) = &analysis.range {
            return range.label();
        }
        let Some(job) = analysis.job.filter(|j| j.rank.is_some()) else { return analysis.trace.clone() };
        let mut label = format!("rank {}", job.rank.unwrap_or_default());
        if let Some(local) = job.local_rank {
            label.push_str(&format!(" (local rank {local})"));
        }
        if let Some(size) = job.world_size {
            label.push_str(&format!(" of {size}"));
        }
        let devices = finding_devices(analysis);
        if !devices.is_empty() {
            let list: Vec<String> = devices.iter().map(u32::to_string).collect();
            label.push_str(&format!(", GPU {}", list.join(" and GPU ")));
        }
        label
    }
}

/// The GPUs of the streams the analysis's findings name, in order.
pub fn finding_devices(analysis: &Analysis) -> Vec<u32> {
    let (findings, look) = (&analysis.findings, analysis.lookup());
    let ops = findings
        .all_races()
        .flat_map(|r| [&r.earlier, &r.later])
        .chain(findings.unrecorded_waits.iter().map(|w| &w.wait));
    let mut devices: Vec<u32> = ops.filter_map(|op| look.stream_of(op.site).map(|s| s.gpu)).collect();
    devices.sort_unstable();
    devices.dedup();
    devices
}

/// The traces of a job in `dir`: its regular files named `*.stbin` or `*.json` (capture writes
/// `trace.PID.stbin`), by name.
pub fn traces_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut traces = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let path = entry.path();
        if streamtrace_format::TraceEncoding::of_path(&path).is_some() && entry.file_type().is_ok_and(|t| t.is_file()) {
            traces.push(path);
        }
    }
    traces.sort();
    Ok(traces)
}

/// Analyzes every trace, as many at once as there are cores, and returns them in rank order (traces without a
/// rank after those with one, by path). `with_timeline` keeps each one's timeline for the HTML report.
pub fn analyze_job(
    traces: &[PathBuf],
    options: EngineOptions,
    binaries: &BinarySearch,
    with_timeline: bool,
) -> Vec<JobTrace> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(traces.len()).max(1);
    // Each analysis has its share of the cores: the shadow check's own thread only where that share is enough.
    let options = EngineOptions { check_thread: options.check_thread.decided_for_cores(cores / workers), ..options };
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(traces.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = traces.get(i) else { break };
                let outcome = analyze_path_with(path, options, binaries, with_timeline);
                done.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(JobTrace { path: path.clone(), outcome });
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    in_rank_order(&mut done);
    done
}

/// Puts a job's traces in rank order: traces without a rank after those with one, by path.
pub fn in_rank_order(traces: &mut [JobTrace]) {
    traces.sort_by(|a, b| (a.rank().is_none(), a.rank(), &a.path).cmp(&(b.rank().is_none(), b.rank(), &b.path)));
}

/// What the whole job found, for its summary line and its status.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JobSummary {
    pub traces: usize,
    pub failed: usize,
    pub with_findings: Vec<String>,
    pub races: usize,
    pub timing_only_races: usize,
    pub unrecorded_waits: usize,
}

impl JobSummary {
    pub fn of(traces: &[JobTrace]) -> JobSummary {
        let mut summary = JobSummary { traces: traces.len(), ..JobSummary::default() };
        for trace in traces {
            match &trace.outcome {
                Ok(analysis) => {
                    summary.races += analysis.findings.races.len();
                    summary.timing_only_races += analysis.findings.timing_only_races.len();
                    summary.unrecorded_waits += analysis.findings.unrecorded_waits.len();
                    if analysis.findings.verdict() != crate::findings::Verdict::Clean {
                        summary.with_findings.push(trace.label());
                    }
                }
                Err(_) => summary.failed += 1,
            }
        }
        summary
    }

    /// The job's summary line.
    pub fn line(&self) -> String {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        let mut text = format!(
            "JOB SUMMARY: streamtrace: {} trace{}: {} race{} and {} wait{} before the event's record",
            self.traces,
            s(self.traces),
            self.races,
            s(self.races),
            self.unrecorded_waits,
            s(self.unrecorded_waits)
        );
        if self.timing_only_races > 0 {
            text.push_str(&format!(
                ", and {} race{} ordered only by timing, or by host synchronization the capture cannot see",
                self.timing_only_races,
                s(self.timing_only_races)
            ));
        }
        if !self.with_findings.is_empty() {
            text.push_str(&format!(" in {}", self.with_findings.join("; ")));
        }
        if self.failed > 0 {
            text.push_str(&format!("; {} trace{} could not be analyzed", self.failed, s(self.failed)));
        }
        text
    }
}

/// The job's traces as one analysis for the HTML timeline: each trace's lanes form the group of its rank (its
/// position in rank order), its operations and findings follow the previous trace's. Traces that could not be
/// analyzed are left out. None when no trace kept a timeline.
pub fn merged_for_timeline(dir: &Path, traces: &[JobTrace]) -> Option<Analysis> {
    let analyses: Vec<&Analysis> =
        traces.iter().filter_map(|t| t.outcome.as_ref().ok()).filter(|a| a.timeline.is_some()).collect();
    let first = analyses.first()?;
    let mut merged = Analysis {
        trace: format!("{} ({} traces)", dir.display(), analyses.len()),
        format: first.format,
        host_order: first.host_order,
        host_sync_recorded: first.host_sync_recorded,
        job: None,
        findings: Default::default(),
        tables: Default::default(),
        stats: Default::default(),
        import: Default::default(),
        timeline: Some(Default::default()),
        range: None,
        ranges: Vec::new(),
    };
    let mut seq_base = 0;
    for (group, analysis) in analyses.iter().enumerate() {
        let timeline = analysis.timeline.as_ref()?;
        let into = merged.timeline.as_mut()?;
        // Stream ids are dense ids of the trace's declared streams (lanes keep only those that ran something).
        let stream_base = into.streams.iter().map(|s| s.id + 1).max().unwrap_or(0);
        let (lane_base, op_base) = (into.streams.len() as u32, into.ops.len());
        let rank = analysis.job.and_then(|j| j.rank).unwrap_or(group as u32);
        into.streams.extend(timeline.streams.iter().cloned().map(|mut s| {
            s.id += stream_base;
            s.process = group as u32;
            s.rank = Some(rank);
            s
        }));
        into.ops.extend(timeline.ops.iter().cloned().map(|mut op| {
            op.seq += seq_base;
            op.stream += stream_base;
            op.lane += lane_base;
            op
        }));
        into.arrows.extend(timeline.arrows.iter().cloned().map(|mut a| {
            a.from += op_base;
            a.to = a.to.map(|t| t + op_base);
            a
        }));
        let row_base = into.host_rows.len() as u32;
        into.host_rows.extend(timeline.host_rows.iter().cloned().map(|mut row| {
            row.process = group as u32;
            row.rank = Some(rank);
            row
        }));
        into.host_spans.extend(timeline.host_spans.iter().cloned().map(|mut span| {
            span.row += row_base;
            span
        }));
        into.gpu_time = if group == 0 { timeline.gpu_time } else { into.gpu_time && timeline.gpu_time };
        let names = &merged.tables.names;
        let shift = IdShift {
            streams: names.streams.len() as u32,
            events: names.events.len() as u32,
            threads: names.threads.len() as u32,
            seq: seq_base,
        };
        merged.findings.append(&analysis.findings, shift);
        merged.tables.append(&analysis.tables);
        merged.stats.operations += analysis.stats.operations;
        merged.stats.streams += analysis.stats.streams;
        merged.stats.accesses += analysis.stats.accesses;
        merged.stats.has_addresses |= analysis.stats.has_addresses;
        let last_op = timeline.ops.iter().map(|o| o.seq).max().unwrap_or(0);
        let last_race = analysis.findings.all_races().map(|r| r.later.seq.max(r.earlier.seq)).max().unwrap_or(0);
        seq_base += last_op.max(last_race).max(analysis.stats.operations) + 1;
    }
    Some(merged)
}
