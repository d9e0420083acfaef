//! One analysis of one trace: ingest, engine, findings, with the counters of every stage.

use std::path::Path;

use serde::Serialize;

use crate::findings::Findings;
use crate::hb::{Engine, EngineOptions, EngineStats, HostOrder};
use crate::ingest::{self, ImportCounters, IngestError, RecordSource};
use crate::model::{JobPlace, TraceRecord};
use crate::names::Names;
use crate::symbols::Symbolizer;
use crate::timeline::Timeline;

/// Everything a report needs.
#[derive(Debug, Serialize)]
pub struct Analysis {
    pub trace: String,
    pub format: &'static str,
    pub host_order: HostOrder,
    /// The process's place in a distributed job, when its trace says (a `capture` of torchrun).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobPlace>,
    pub findings: Findings,
    pub stats: EngineStats,
    pub import: ImportCounters,
    /// Bars and arrows for timeline reports, when asked for.
    #[serde(skip)]
    pub timeline: Option<Timeline>,
}

/// Why an analysis could not finish.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Input(#[from] IngestError),
    #[error("{path}: {source}")]
    Engine { path: String, source: crate::hb::EngineError },
}

/// Analyzes the trace at `path`.
pub fn analyze_path(path: &Path, options: EngineOptions) -> Result<Analysis, AnalysisError> {
    let source = ingest::open(path)?;
    analyze_source(&path.display().to_string(), source, options)
}

/// Analyzes the trace at `path` and keeps its timeline (every stream operation and happens-before edge) for the
/// HTML and Perfetto reports.
pub fn analyze_path_with_timeline(path: &Path, options: EngineOptions) -> Result<Analysis, AnalysisError> {
    let source = ingest::open(path)?;
    run(&path.display().to_string(), source, options, true)
}

/// Analyzes records from an open source; `name` is how reports refer to the trace.
pub fn analyze_source(
    name: &str,
    source: Box<dyn RecordSource>,
    options: EngineOptions,
) -> Result<Analysis, AnalysisError> {
    run(name, source, options, false)
}

fn run(
    name: &str,
    mut source: Box<dyn RecordSource>,
    options: EngineOptions,
    with_timeline: bool,
) -> Result<Analysis, AnalysisError> {
    let format = source.format();
    let mut engine = Engine::new(options);
    let mut timeline = with_timeline.then(Timeline::default);
    let mut names = Names::default();
    let mut job = None;
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
        for (i, record) in batch.iter().enumerate() {
            let Ok(record) = record else { continue };
            // The shadow lookups of the next operation start now, overlapping this one's (engine.rs).
            if let Some(Ok(next)) = batch.get(i + 1) {
                engine.prefetch(next);
            }
            if let Some(timeline) = timeline.as_mut() {
                timeline.observe(record);
            }
            names.observe(record);
            if let TraceRecord::Job(place) = record {
                job = Some(*place);
            }
            engine.apply(record).map_err(|source| AnalysisError::Engine { path: name.to_string(), source })?;
        }
    }
    let mut import = source.finish();
    let mut symbols = Symbolizer::new();
    names.finish(&mut symbols);
    if let Some(timeline) = timeline.as_mut() {
        timeline.finish(&engine.take_edges(), &names);
    }
    let (mut findings, stats) = engine.finish();
    // Only what the findings hold is symbolized (and the creation sites of the streams and events named).
    symbols.resolve(&mut findings, &mut import);
    names.name_findings(&mut findings);
    Ok(Analysis {
        trace: name.to_string(),
        format,
        host_order: options.host_order,
        job,
        findings,
        stats,
        import,
        timeline,
    })
}
