//! Hand-written scenarios in the JSON trace format, analyzed in this process: the header, each file's prelude of
//! streams, events and allocations, then the body; and the records the rule tests write most.

use streamtrace::analysis::{analyze_source, Analysis, AnalysisError};
use streamtrace::findings::{RaceFinding, RaceKind};
use streamtrace::hb::{EngineOptions, HostOrder};
use streamtrace::ingest::json::JsonTraceReader;

/// The first line of every trace.
const HEADER: &str = "{\"type\":\"streamtrace\",\"version\":1}\n";

/// Analyzes the trace `prelude` then `body` (after the header), named `file` in messages.
pub fn try_analyze(file: &str, prelude: &str, body: &str, host_order: HostOrder) -> Result<Analysis, AnalysisError> {
    let reader = JsonTraceReader::from_text(file, format!("{HEADER}{prelude}{body}"));
    analyze_source(file, Box::new(reader), EngineOptions { host_order })
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

/// The one race found is of `kind`, between the operations named `earlier` and `later`.
pub fn assert_one_race(found: &[RaceFinding], kind: RaceKind, earlier: &str, later: &str) {
    assert_eq!(found.len(), 1, "expected one race, found {found:#?}");
    assert_eq!(found[0].kind, kind);
    assert_eq!((found[0].earlier.site.name.as_str(), found[0].later.site.name.as_str()), (earlier, later));
}
