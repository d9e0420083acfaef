//! One analysis of one trace: ingest, engine, findings, with the counters of every stage.

use std::path::Path;

use serde::Serialize;

use crate::findings::Findings;
use crate::hb::{Engine, EngineOptions, EngineStats, HostOrder};
use crate::ingest::{self, ImportCounters, IngestError, RecordSource};

/// Everything a report needs.
#[derive(Debug, Serialize)]
pub struct Analysis {
    pub trace: String,
    pub format: &'static str,
    pub host_order: HostOrder,
    pub findings: Findings,
    pub stats: EngineStats,
    pub import: ImportCounters,
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

/// Analyzes records from an open source; `name` is how reports refer to the trace.
pub fn analyze_source(
    name: &str,
    mut source: Box<dyn RecordSource>,
    options: EngineOptions,
) -> Result<Analysis, AnalysisError> {
    let format = source.format();
    let mut engine = Engine::new(options);
    for record in source.by_ref() {
        engine
            .apply(record?)
            .map_err(|source| AnalysisError::Engine { path: name.to_string(), source })?;
    }
    let import = source.finish();
    let (findings, stats) = engine.finish();
    Ok(Analysis { trace: name.to_string(), format, host_order: options.host_order, findings, stats, import })
}
