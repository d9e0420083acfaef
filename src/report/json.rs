//! The JSON report. Its wire types live here alone; docs/json-report.md documents the schema.

use std::io;

use serde::Serialize;

use super::fix::fix_text;
use super::{describe_why, Report};
use crate::analysis::Analysis;
use crate::findings::{EdgeCount, RaceFinding, StreamPairCount, UnorderedPairGroup, UnrecordedWait};
use crate::hb::{EngineStats, HostOrder};
use crate::ingest::ImportCounters;
use crate::model::JobPlace;

/// The value of the report's `schema` field.
pub const SCHEMA: &str = "streamtrace.analysis";
/// Bumped on any incompatible change of the report's shape.
pub const SCHEMA_VERSION: u32 = 1;

pub struct JsonReport;

#[derive(Serialize)]
struct WireReport<'a> {
    schema: &'static str,
    version: u32,
    trace: &'a str,
    input_format: &'static str,
    /// The host order used: per-thread where the trace records its host synchronization (`host_sync_recorded`).
    host_order: HostOrder,
    host_sync_recorded: bool,
    /// The process's place in a distributed job (`rank`, `local_rank`, `world_size`), when its trace says.
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<JobPlace>,
    /// "clean", "timing_only" or "findings"; the exit status says the same.
    verdict: &'static str,
    summary: Summary,
    races: Vec<WireRace<'a>>,
    /// Races that only the per-thread host order finds: ordered only by timing, or by host synchronization the
    /// capture cannot see.
    timing_only_races: Vec<WireRace<'a>>,
    unrecorded_waits: &'a [UnrecordedWait],
    /// Info: waits on events no record ever named (a library's deliberate no-ops).
    waits_on_never_recorded_events: &'a [UnrecordedWait],
    waits_with_unknown_record: &'a [UnrecordedWait],
    unordered_pairs: &'a [UnorderedPairGroup],
    stream_pairs: &'a [StreamPairCount],
    edges: &'a [EdgeCount],
    stats: &'a EngineStats,
    import: &'a ImportCounters,
}

#[derive(Serialize)]
struct Summary {
    races: usize,
    race_occurrences: u64,
    timing_only_races: usize,
    timing_only_race_occurrences: u64,
    unrecorded_waits: usize,
    unordered_pairs: u64,
    has_addresses: bool,
    data_loss: bool,
}

#[derive(Serialize)]
struct WireRace<'a> {
    #[serde(flatten)]
    finding: &'a RaceFinding,
    why_text: String,
    fix_text: String,
}

fn wire_race(finding: &RaceFinding) -> WireRace<'_> {
    WireRace { finding, why_text: describe_why(finding), fix_text: fix_text(&finding.fix) }
}

impl Report for JsonReport {
    fn write(&self, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
        let findings = &analysis.findings;
        let wire = WireReport {
            schema: SCHEMA,
            version: SCHEMA_VERSION,
            trace: &analysis.trace,
            input_format: analysis.format,
            host_order: analysis.host_order,
            host_sync_recorded: analysis.host_sync_recorded,
            job: analysis.job,
            verdict: findings.verdict().as_str(),
            summary: Summary {
                races: findings.races.len(),
                race_occurrences: findings.races.iter().map(|r| r.count).sum(),
                timing_only_races: findings.timing_only_races.len(),
                timing_only_race_occurrences: findings.timing_only_races.iter().map(|r| r.count).sum(),
                unrecorded_waits: findings.unrecorded_waits.len(),
                unordered_pairs: findings.stream_pairs.iter().map(|p| p.pairs).sum(),
                has_addresses: analysis.stats.has_addresses,
                data_loss: analysis.import.data_loss().next().is_some(),
            },
            races: findings.races.iter().map(wire_race).collect(),
            timing_only_races: findings.timing_only_races.iter().map(wire_race).collect(),
            unrecorded_waits: &findings.unrecorded_waits,
            waits_on_never_recorded_events: &findings.waits_on_never_recorded_events,
            waits_with_unknown_record: &findings.waits_with_unknown_record,
            unordered_pairs: &findings.unordered_pairs,
            stream_pairs: &findings.stream_pairs,
            edges: &findings.edges,
            stats: &analysis.stats,
            import: &analysis.import,
        };
        serde_json::to_writer_pretty(&mut *out, &wire).map_err(io::Error::other)?;
        writeln!(out)
    }
}
