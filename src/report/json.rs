//! The JSON report: every finding as docs/json-report.md spells it, built from the findings and what their ids
//! stand for. Its wire types live in json/wire.rs alone.

mod wire;

use std::io;

use serde::Serialize;

use super::Report;
use crate::analysis::Analysis;
use crate::hb::{EngineStats, HostOrder};
use crate::model::JobPlace;
use wire::Naming;

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
    /// The capture range this report is the section of (`index` from 1, `name`: the NVTX range), when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_range: Option<WireRange<'a>>,
    /// "clean", "timing_only" or "findings"; the exit status says the same.
    verdict: &'static str,
    summary: Summary,
    races: Vec<wire::Race<'a>>,
    /// Races that only the per-thread host order finds: ordered only by timing, or by host synchronization the
    /// capture cannot see.
    timing_only_races: Vec<wire::Race<'a>>,
    unrecorded_waits: Vec<wire::Wait<'a>>,
    /// Info: waits on events no record ever named (a library's deliberate no-ops).
    waits_on_never_recorded_events: Vec<wire::Wait<'a>>,
    /// Info: waits before the first record of an event waited on again once recorded (a pipeline's first turn).
    waits_before_a_pipelines_first_record: Vec<wire::Wait<'a>>,
    waits_with_unknown_record: Vec<wire::Wait<'a>>,
    unordered_pairs: Vec<wire::PairGroup<'a>>,
    stream_pairs: Vec<wire::StreamPair<'a>>,
    /// Stream pairs with unordered operation pairs beyond those listed (the list keeps those with the most).
    #[serde(skip_serializing_if = "is_zero")]
    stream_pairs_omitted: u64,
    edges: Vec<wire::Edge<'a>>,
    stats: &'a EngineStats,
    /// The import's counters, then the symbolizer's.
    import: Vec<wire::WireCounter<'a>>,
}

#[derive(Serialize)]
struct WireRange<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
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

impl Report for JsonReport {
    fn write(&self, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
        let (findings, look) = (&analysis.findings, analysis.lookup());
        let wire = WireReport {
            schema: SCHEMA,
            version: SCHEMA_VERSION,
            trace: &analysis.trace,
            input_format: analysis.format,
            host_order: analysis.host_order,
            host_sync_recorded: analysis.host_sync_recorded,
            job: analysis.job,
            capture_range: analysis.range.as_ref().map(|r| WireRange { index: r.index, name: r.name.as_deref() }),
            verdict: findings.verdict().as_str(),
            summary: Summary {
                races: findings.races.len(),
                race_occurrences: findings.races.iter().map(|r| r.count).sum(),
                timing_only_races: findings.timing_only_races.len(),
                timing_only_race_occurrences: findings.timing_only_races.iter().map(|r| r.count).sum(),
                unrecorded_waits: findings.unrecorded_waits.len(),
                unordered_pairs: findings.stream_pair_totals.pairs,
                has_addresses: analysis.stats.has_addresses,
                data_loss: analysis.import.data_loss().next().is_some(),
            },
            races: findings.races.iter().map(|race| wire::Race::of(look, race)).collect(),
            timing_only_races: findings.timing_only_races.iter().map(|race| wire::Race::of(look, race)).collect(),
            unrecorded_waits: wire::waits(look, &findings.unrecorded_waits, Naming::Resolved),
            waits_on_never_recorded_events: wire::waits(
                look,
                &findings.waits_on_never_recorded_events,
                Naming::AsRecorded,
            ),
            waits_before_a_pipelines_first_record: wire::waits(
                look,
                &findings.waits_before_a_pipelines_first_record,
                Naming::AsRecorded,
            ),
            waits_with_unknown_record: wire::waits(look, &findings.waits_with_unknown_record, Naming::Resolved),
            unordered_pairs: findings.unordered_pairs.iter().map(|group| wire::PairGroup::of(look, group)).collect(),
            stream_pairs: findings.stream_pairs.iter().map(|pair| wire::StreamPair::of(look, pair)).collect(),
            stream_pairs_omitted: findings
                .stream_pair_totals
                .stream_pairs
                .saturating_sub(findings.stream_pairs.len() as u64),
            edges: findings.edges.iter().map(|edge| wire::Edge::of(look, edge)).collect(),
            stats: &analysis.stats,
            import: wire::counters(&analysis.import, &analysis.tables.symbols),
        };
        serde_json::to_writer_pretty(&mut *out, &wire).map_err(io::Error::other)?;
        writeln!(out)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
