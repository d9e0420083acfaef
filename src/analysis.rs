//! One analysis of one trace: ingest, engine, findings, then the one pass that resolves what the findings' ids
//! stand for (crate::resolve), with the counters of every stage.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::findings::Findings;
use crate::hb::site_hints::SiteHinter;
use crate::hb::{Engine, EngineOptions, EngineStats, HostOrder};
use crate::ingest::{self, ImportCounters, IngestError, RecordObserver, RecordSource};
use crate::model::{JobPlace, TraceRecord};
use crate::names::Names;
use crate::resolve::{self, Lookup, Tables};
use crate::symbols::{BinarySearch, RecordedLines, Symbolizer};
use crate::timeline::Timeline;
use crate::timestamp_twin::TimestampTwin;

/// Everything a report needs.
#[derive(Debug)]
pub struct Analysis {
    pub trace: String,
    pub format: &'static str,
    /// The host order the analysis used (`Auto` decided: per-thread where the trace records its host
    /// synchronization, global where it does not).
    pub host_order: HostOrder,
    /// Whether the trace records the host synchronization between its threads (its header says so).
    pub host_sync_recorded: bool,
    /// The process's place in a distributed job, when its trace says (a `capture` of torchrun).
    pub job: Option<JobPlace>,
    pub findings: Findings,
    /// What the findings' ids stand for: names, source lines, symbolized call sites.
    pub tables: Tables,
    pub stats: EngineStats,
    pub import: ImportCounters,
    /// Bars and arrows for timeline reports, when asked for.
    pub timeline: Option<Timeline>,
    /// The capture range this analysis is the section of (see [`Analysis::range_sections`]).
    pub range: Option<CaptureRange>,
    /// A trace recorded in capture ranges: each range's findings, in order (`findings` holds them all, and
    /// `tables` stands for theirs too).
    pub ranges: Vec<RangeSection>,
}

/// A capture range of a trace (`streamtrace capture --capture-range`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureRange {
    /// Its number in the trace, from 1.
    pub index: u32,
    /// The NVTX range that was the capture range, when one was.
    pub name: Option<Arc<str>>,
}

impl CaptureRange {
    /// "capture range 2 (NVTX `train_step`)": how reports head its section.
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("capture range {} (NVTX `{name}`)", self.index),
            None => format!("capture range {}", self.index),
        }
    }
}

/// What one capture range found.
#[derive(Clone, Debug)]
pub struct RangeSection {
    pub range: CaptureRange,
    pub findings: Findings,
}

impl Analysis {
    /// One analysis per capture range, each with that range's findings, for a report with a section per range
    /// (`--capture-range-end=repeat`); empty for a trace not recorded in ranges.
    pub fn range_sections(&self) -> Vec<Analysis> {
        self.ranges
            .iter()
            .map(|section| Analysis {
                trace: self.trace.clone(),
                format: self.format,
                host_order: self.host_order,
                host_sync_recorded: self.host_sync_recorded,
                job: self.job,
                findings: section.findings.clone(),
                tables: self.tables.clone(),
                stats: self.stats.clone(),
                import: self.import.clone(),
                timeline: None,
                range: Some(section.range.clone()),
                ranges: Vec::new(),
            })
            .collect()
    }

    /// The findings with what their ids stand for, as reports read them.
    pub fn lookup(&self) -> Lookup<'_> {
        Lookup { findings: &self.findings, tables: &self.tables }
    }

    /// Whether the trace is a recording whose end was lost (no closing record): what it lacks may be what it
    /// would have said, so it is no trace of a known access tier.
    pub fn cut_short(&self) -> bool {
        self.import.get(ingest::Counter::JsonRecordingWithoutClosingRecord) > 0
    }
}

/// Why an analysis could not finish.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Input(#[from] IngestError),
    /// The engine's error is said once: it is this error's message, not a cause printed after it.
    #[error("{path}: {error}")]
    Engine { path: String, error: crate::hb::EngineError },
}

/// Analyzes the trace at `path`.
pub fn analyze_path(path: &Path, options: EngineOptions) -> Result<Analysis, AnalysisError> {
    let source = ingest::open(path)?;
    analyze_source(&path.display().to_string(), source, options)
}

/// Analyzes the trace at `path` and keeps its timeline (every stream operation and happens-before edge) for the
/// HTML and Perfetto reports.
pub fn analyze_path_with_timeline(path: &Path, options: EngineOptions) -> Result<Analysis, AnalysisError> {
    analyze_path_with(path, options, &BinarySearch::default(), true)
}

/// Analyzes the trace at `path`, looking for binaries that moved in `binaries`' folders; with its timeline when
/// `with_timeline`.
pub fn analyze_path_with(
    path: &Path,
    options: EngineOptions,
    binaries: &BinarySearch,
    with_timeline: bool,
) -> Result<Analysis, AnalysisError> {
    let source = ingest::open(path)?;
    run(&path.display().to_string(), source, options, binaries, with_timeline)
}

/// Analyzes records from an open source; `name` is how reports refer to the trace.
pub fn analyze_source(
    name: &str,
    source: Box<dyn RecordSource>,
    options: EngineOptions,
) -> Result<Analysis, AnalysisError> {
    run(name, source, options, &BinarySearch::default(), false)
}

/// The names of streams and events, taken note of on the reader's thread.
struct NamesObserver(Arc<Mutex<Names>>);

impl RecordObserver for NamesObserver {
    fn observe(&mut self, batch: &[Result<TraceRecord, IngestError>]) {
        let mut names = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        batch.iter().flatten().for_each(|record| names.observe(record));
    }
}

fn run(
    name: &str,
    mut source: Box<dyn RecordSource>,
    options: EngineOptions,
    binaries: &BinarySearch,
    with_timeline: bool,
) -> Result<Analysis, AnalysisError> {
    let format = source.format();
    let engine_error = |error| AnalysisError::Engine { path: name.to_string(), error };
    let mut engine = Engine::new(options);
    // A trace that records its host synchronization, analyzed in the per-thread order, also goes through the
    // timestamp order: a race that one finds and not the other is ordered only by timing, or by host
    // synchronization the capture cannot see. (Without recorded host synchronization the per-thread order is
    // the strict one, and its races stay races.) Made at the first record past the header, which says.
    let mut by_timestamps: Option<TimestampTwin> = None;
    let mut order_decided = false;
    let mut timeline = with_timeline.then(Timeline::default);
    // Names are taken note of on the reader's thread as batches come back where the reader keeps ahead of this
    // thread (a binary trace: 4% of a 10 M-operation run, reading names the reader's core wrote); here otherwise.
    let names = Arc::new(Mutex::new(Names::default()));
    let mut names_here = match source.observe_given_back(Box::new(NamesObserver(Arc::clone(&names)))) {
        Ok(()) => None,
        Err(_) => Some(Names::default()),
    };
    // The sites of kernels, copies and sets are numbered there too, where the reader keeps ahead (the engine then
    // finds each by its number: hb/site_hints.rs); a source that cannot leaves them to the engine.
    let _ = source.prepare_before_hand_over(Box::new(SiteHinter::default()));
    let mut recorded_lines = RecordedLines::default();
    let mut job = None;
    // The capture range open now, and the findings of those that ended.
    let mut open_range: Option<CaptureRange> = None;
    let mut ranges: Vec<RangeSection> = Vec::new();
    if with_timeline {
        engine.log_edges();
    }
    while let Some(mut batch) = source.next_batch() {
        // Bad input ends the analysis: report it before analyzing the batch.
        if let Some(bad) = batch.iter().position(Result::is_err) {
            if let Err(error) = batch.swap_remove(bad) {
                return Err(error.into());
            }
        }
        // Where in this batch the timestamp order's engine starts (it starts with the first record past the header).
        let mut twin_from = 0;
        for (i, record) in batch.iter().enumerate() {
            let Ok(record) = record else { continue };
            // The memory the next operations touch starts loading now, overlapping this one's misses (engine.rs).
            engine.prefetch(|k| batch.get(i + k).and_then(|r| r.as_ref().ok()));
            if !order_decided && !matches!(record, TraceRecord::Job(_) | TraceRecord::HostSyncRecorded) {
                order_decided = true;
                if engine.host_order() == HostOrder::PerThread && engine.host_sync_recorded() {
                    by_timestamps = Some(TimestampTwin::start());
                    twin_from = i;
                }
            }
            if let Some(timeline) = timeline.as_mut() {
                timeline.observe(record);
            }
            if let Some(names) = names_here.as_mut() {
                names.observe(record);
            }
            match record {
                TraceRecord::Job(place) => job = Some(*place),
                TraceRecord::FrameLine(line) => recorded_lines.add(line),
                _ => {}
            }
            engine.apply(record).map_err(engine_error)?;
            match record {
                TraceRecord::RangeBegin { index, name, .. } => {
                    open_range = Some(CaptureRange { index: *index, name: name.clone() });
                }
                TraceRecord::RangeEnd { .. } => {
                    // The timestamp order's findings of this range are set apart once its engine is done.
                    let findings = engine.finish_range();
                    let range =
                        open_range.take().unwrap_or(CaptureRange { index: ranges.len() as u32 + 1, name: None });
                    ranges.push(RangeSection { range, findings });
                }
                _ => {}
            }
        }
        // Its records are dropped, and its memory filled again, on the reader's thread (after the timestamp
        // order's engine has applied them too).
        match by_timestamps.as_mut() {
            Some(twin) => twin.hand_over(batch, twin_from, &mut |done| source.recycle(done)).map_err(engine_error)?,
            None => source.recycle(batch),
        }
    }
    // The timestamp order's engine finishes first, so that every batch is given back before the reader ends.
    let by_timestamps = match by_timestamps {
        Some(twin) => Some(twin.finish(&mut |done| source.recycle(done)).map_err(engine_error)?),
        None => None,
    };
    let import = source.finish();
    let names = match names_here {
        Some(names) => names,
        None => std::mem::take(&mut *names.lock().unwrap_or_else(|poisoned| poisoned.into_inner())),
    };
    let edges = engine.take_edges();
    let (host_order, host_sync_recorded) = (engine.host_order(), engine.host_sync_recorded());
    let (mut findings, stats) = engine.finish();
    if let Some(found) = by_timestamps {
        // Each range ended in both engines, in the same order.
        for (section, by_timestamps) in ranges.iter_mut().zip(&found.ranges) {
            section.findings.set_apart_timing_only(by_timestamps);
        }
        findings.set_apart_timing_only(&found.rest);
    }
    // A range the program did not end (it exited inside it) ends with the trace.
    if let Some(range) = open_range.take() {
        ranges.push(RangeSection { range, findings: std::mem::take(&mut findings) });
    }
    // The whole trace's findings hold every range's (each later range's site tables extend the earlier ones').
    if !ranges.is_empty() {
        let rest = std::mem::take(&mut findings);
        for section in &ranges {
            findings.extend_with_later(section.findings.clone());
        }
        findings.extend_with_later(rest);
        // Each section's sites by the whole trace's table, which the tables resolved.
        for section in &mut ranges {
            section.findings.sites.clone_from(&findings.sites);
            section.findings.natives.clone_from(&findings.natives);
        }
    }
    // Only what the findings show is symbolized (and the creation sites of the streams and events named).
    // The timeline's bars are placed by a symbolizer of their own, with the same lines and folders.
    let timeline_symbols = timeline.is_some().then(|| Symbolizer::new(binaries.clone(), recorded_lines.clone()));
    let tables = resolve::resolve(&findings, names, Symbolizer::new(binaries.clone(), recorded_lines));
    if let Some(timeline) = timeline.as_mut() {
        // An nsys export's host times are on its GPU times' clock: its API calls and NVTX ranges can be drawn.
        timeline.finish(&edges, &tables.names, format == ingest::nsys::FORMAT, timeline_symbols.unwrap_or_default());
    }
    Ok(Analysis {
        trace: name.to_string(),
        format,
        host_order,
        host_sync_recorded,
        job,
        findings,
        tables,
        stats,
        import,
        timeline,
        range: None,
        ranges,
    })
}
