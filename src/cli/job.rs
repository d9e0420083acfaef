//! The reports of a job (`streamtrace analyze DIR`, and `capture` of a program that started several
//! processes): each trace's report under a heading with its rank, then one summary line; JSON as one object
//! holding every trace's report; the HTML timeline with a lane group per rank (src/job.rs).

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use super::{exit_status, EXIT_ERROR};
use crate::findings::Verdict;
use crate::job::{JobSummary, JobTrace};
use crate::report::text::{wrap, TextReport, WIDTH};
use crate::report::{json::JsonReport, printable, Report};

/// The job's verdict: the worst of its traces' (None: a trace could not be analyzed, worst of all).
fn verdict(traces: &[JobTrace]) -> Option<Verdict> {
    traces.iter().try_fold(Verdict::Clean, |worst, t| t.outcome.as_ref().ok().map(|a| worst.max(a.findings.verdict())))
}

/// The job's status: an analysis that failed is worst, then findings, then races ordered only by timing.
pub fn status(traces: &[JobTrace]) -> u8 {
    verdict(traces).map_or(EXIT_ERROR, exit_status)
}

/// Every trace's text report under a heading naming its rank, then the job's summary line.
pub fn write_text(traces: &[JobTrace], out: &mut dyn Write) -> io::Result<()> {
    let wrapped = |line: String| wrap(&line, WIDTH);
    for trace in traces {
        let heading = format!("== {}: {}", printable(&trace.label()), printable(&trace.path.display().to_string()));
        out.write_all(wrapped(heading).as_bytes())?;
        match &trace.outcome {
            Ok(analysis) => TextReport::PLAIN.write(analysis, out)?,
            Err(error) => writeln!(
                out,
                "streamtrace: cannot analyze {}: {}",
                printable(&trace.path.display().to_string()),
                printable(&error.to_string())
            )?,
        }
    }
    out.write_all(wrapped(JobSummary::of(traces).line()).as_bytes())
}

#[derive(Serialize)]
struct WireJob {
    schema: &'static str,
    version: u32,
    directory: String,
    /// "clean", "timing_only", "findings" or "error": the exit status says the same.
    verdict: &'static str,
    summary: WireSummary,
    /// Traces that could not be analyzed, with why.
    errors: Vec<WireError>,
}

#[derive(Serialize)]
struct WireSummary {
    traces: usize,
    races: usize,
    timing_only_races: usize,
    unrecorded_waits: usize,
}

#[derive(Serialize)]
struct WireError {
    trace: String,
    error: String,
}

/// The value of a job report's `schema` field.
pub const JOB_SCHEMA: &str = "streamtrace.job";

/// The job as one JSON object: its verdict and summary, then `traces`, each trace's JSON report (with its
/// `job` place) in rank order.
pub fn write_json(dir: &Path, traces: &[JobTrace], out: &mut dyn Write) -> io::Result<()> {
    let summary = JobSummary::of(traces);
    let verdict = verdict(traces).map_or("error", Verdict::as_str);
    let errors = traces
        .iter()
        .filter_map(|t| {
            t.outcome.as_ref().err().map(|e| WireError { trace: t.path.display().to_string(), error: e.to_string() })
        })
        .collect();
    let head = WireJob {
        schema: JOB_SCHEMA,
        version: 1,
        directory: dir.display().to_string(),
        verdict,
        summary: WireSummary {
            traces: summary.traces,
            races: summary.races,
            timing_only_races: summary.timing_only_races,
            unrecorded_waits: summary.unrecorded_waits,
        },
        errors,
    };
    // The head's fields, then the traces' reports as written by the JSON report (one object each).
    let head = serde_json::to_string_pretty(&head).map_err(io::Error::other)?;
    let head = head.trim_end().strip_suffix('}').unwrap_or(&head).trim_end();
    write!(out, "{head},\n  \"traces\": [")?;
    let mut first = true;
    for analysis in traces.iter().filter_map(|t| t.outcome.as_ref().ok()) {
        writeln!(out, "{}", if first { "" } else { "," })?;
        first = false;
        JsonReport.write(analysis, out)?;
    }
    writeln!(out, "]\n}}")
}
