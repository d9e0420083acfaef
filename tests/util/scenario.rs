//! Hand-written scenarios in the JSON trace format, analyzed in this process: the header, each file's prelude of
//! streams, events and allocations, then the body; and the records the rule tests write most.

use streamtrace::analysis::{analyze_source, Analysis, AnalysisError};
use streamtrace::findings::{OpOccurrence, RaceFinding, RaceKind, Site};
use streamtrace::hb::{CheckThread, EngineOptions, HostOrder};
use streamtrace::ingest::json::JsonTraceReader;
use streamtrace::report::fix::fix_text;
use streamtrace::report::json::JsonReport;
use streamtrace::report::Report;

/// The first line of every trace.
const HEADER: &str = "{\"type\":\"streamtrace\",\"version\":1}\n";

/// Analyzes the trace `prelude` then `body` (after the header), named `file` in messages.
pub fn try_analyze(file: &str, prelude: &str, body: &str, host_order: HostOrder) -> Result<Analysis, AnalysisError> {
    analyze_text(file, &format!("{HEADER}{prelude}{body}"), host_order)
}

/// Analyzes a whole trace's `text` with the shadow check on the engine's thread, and again on a thread of its own
/// (hb/checker.rs), which must find the same: every rule test holds for both.
pub fn analyze_text(file: &str, text: &str, host_order: HostOrder) -> Result<Analysis, AnalysisError> {
    let analyze = |check_thread| {
        let reader = JsonTraceReader::from_text(file, text.to_string());
        analyze_source(file, Box::new(reader), EngineOptions { host_order, check_thread })
    };
    let here = analyze(CheckThread::Off)?;
    let apart = analyze(CheckThread::On)?;
    assert_eq!(json_report(&apart), json_report(&here), "{file}: the checker's thread finds otherwise");
    Ok(here)
}

/// The JSON report of `analysis`: all it found and counted.
pub fn json_report(analysis: &Analysis) -> String {
    let mut out = Vec::new();
    JsonReport.write(analysis, &mut out).expect("a report in memory");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// [`try_analyze`] of a scenario that must analyze.
pub fn analyze(file: &str, prelude: &str, body: &str, host_order: HostOrder) -> Analysis {
    try_analyze(file, prelude, body, host_order).expect("scenario analyzes")
}

/// A kernel on `stream` reading and writing the ranges listed (JSON arrays, comma-separated).
pub fn kernel(stream: u32, name: &str, reads: &str, writes: &str) -> String {
    format!(
        "{{\"type\":\"kernel\",\"stream\":{stream},\"name\":\"{name}\",\"reads\":[{reads}],\"writes\":[{writes}]}}\n"
    )
}

pub fn rec(event: u32, stream: u32) -> String {
    format!("{{\"type\":\"record\",\"event\":{event},\"stream\":{stream}}}\n")
}

pub fn wait(stream: u32, event: u32) -> String {
    format!("{{\"type\":\"wait\",\"stream\":{stream},\"event\":{event}}}\n")
}

/// A scenario's races, with the analysis that looks up what their ids stand for.
#[derive(Debug)]
pub struct Found(pub Analysis);

impl std::ops::Deref for Found {
    type Target = [RaceFinding];
    fn deref(&self) -> &[RaceFinding] {
        &self.0.findings.races
    }
}

impl Found {
    /// The site an operation of a race was issued from.
    pub fn site(&self, op: &OpOccurrence) -> &Site {
        self.0.findings.site(op.site)
    }

    /// The fix of race `race`, as the reports say it.
    pub fn fix_text(&self, race: usize) -> String {
        fix_text(self.0.lookup(), &self.0.findings.races[race])
    }
}

/// The one race found is of `kind`, between the operations named `earlier` and `later`.
pub fn assert_one_race(found: &Found, kind: RaceKind, earlier: &str, later: &str) {
    assert_eq!(found.len(), 1, "expected one race, found {found:#?}");
    assert_eq!(found[0].kind, kind);
    assert_eq!((&*found.site(&found[0].earlier).name, &*found.site(&found[0].later).name), (earlier, later));
}
