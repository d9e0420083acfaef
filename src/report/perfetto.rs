//! Chrome Trace Event JSON, which ui.perfetto.dev and chrome://tracing load: one track per stream (grouped by
//! process), a flow arrow per happens-before edge, and an instant marker on the later operation of each race.

use std::io;

use serde::Serialize;
use serde_json::{json, Value};

use crate::timeline::Timeline;
use super::Report;
use crate::analysis::Analysis;
use crate::findings::EdgeKind;

pub struct PerfettoReport;

#[derive(Serialize)]
struct TraceFile {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Value>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
}

/// Trace Event timestamps are microseconds.
fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn events(analysis: &Analysis, timeline: &Timeline) -> Vec<Value> {
    let mut events = Vec::with_capacity(timeline.ops.len() * 2 + timeline.streams.len() + 8);
    let mut processes: Vec<u32> = timeline.streams.iter().map(|s| s.process).collect();
    processes.sort_unstable();
    processes.dedup();
    for process in processes {
        events.push(json!({"ph": "M", "name": "process_name", "pid": process, "args": {"name": format!("process {process}")}}));
    }
    for stream in &timeline.streams {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": stream.process, "tid": stream.id, "args": {"name": stream.label()}}));
    }
    let process_of = |stream: u32| timeline.streams.get(stream as usize).map_or(0, |s| s.process);
    for op in &timeline.ops {
        events.push(json!({
            "ph": "X", "cat": op.class, "name": &*op.name,
            "pid": process_of(op.stream), "tid": op.stream,
            "ts": micros(op.start_ns), "dur": micros(op.end_ns.saturating_sub(op.start_ns)),
            "args": {"seq": op.seq},
        }));
    }
    for (id, arrow) in timeline.arrows.iter().enumerate() {
        let Some(to) = arrow.to else { continue };
        let (from, to) = (&timeline.ops[arrow.from], &timeline.ops[to]);
        let name = match arrow.kind {
            EdgeKind::EventWait => "event record -> wait",
            EdgeKind::HostSync => "host synchronization",
            EdgeKind::LegacyDefault => "legacy default stream",
        };
        events.push(json!({"ph": "s", "cat": "happens-before", "name": name, "id": id, "pid": process_of(from.stream), "tid": from.stream, "ts": micros(from.end_ns)}));
        events.push(json!({"ph": "f", "bp": "e", "cat": "happens-before", "name": name, "id": id, "pid": process_of(to.stream), "tid": to.stream, "ts": micros(to.start_ns)}));
    }
    // One marker per finding, the most frequent first, at most MARKERS of them (the JSON report has them all).
    const MARKERS: usize = 10_000;
    for race in analysis.findings.races_by_count().into_iter().take(MARKERS) {
        let Some(later) = timeline.op_index(race.later.seq).map(|i| &timeline.ops[i]) else { continue };
        events.push(json!({
            "ph": "i", "s": "t", "cat": "race",
            "name": format!("{} race: {} / {}", race.kind.as_str(), race.earlier.site.name, race.later.site.name),
            "pid": process_of(later.stream), "tid": later.stream, "ts": micros(later.start_ns),
            "args": {"why": super::describe_why(race), "fix": race.fix.to_string(), "count": race.count,
                     "earlier_seq": race.earlier.seq, "later_seq": race.later.seq},
        }));
    }
    events
}

impl Report for PerfettoReport {
    fn write(&self, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
        let empty = Timeline::default();
        let timeline = analysis.timeline.as_ref().unwrap_or(&empty);
        let file = TraceFile { trace_events: events(analysis, timeline), display_time_unit: "ns" };
        serde_json::to_writer(&mut *out, &file).map_err(io::Error::other)?;
        writeln!(out)
    }
}
