//! Chrome Trace Event JSON, which ui.perfetto.dev and chrome://tracing load: one track per stream that ran
//! something, named as people know it and grouped by process and device, bars named by their short op or
//! kernel names (the whole name in their arguments), a graph launch's nodes nested in its slice, a flow arrow
//! per happens-before edge, and an instant marker on the later operation of each race (on the later node, for
//! a race between two nodes of one launch, whose arguments name both).

use std::io;

use serde::Serialize;
use serde_json::{json, Value};

use super::Report;
use crate::analysis::Analysis;
use crate::findings::EdgeKind;
use crate::timeline::Timeline;

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

/// Start and duration of node `k` of a graph launch's `n`, nested in the launch's slice in node order (one
/// launch's nodes are not timed apart).
fn node_slice(op: &crate::timeline::TimelineOp, k: usize, n: usize) -> (f64, f64) {
    let each = micros(op.end_ns.saturating_sub(op.start_ns)) / n.max(1) as f64;
    (micros(op.start_ns) + each * k as f64, each)
}

fn events(analysis: &Analysis, timeline: &Timeline) -> Vec<Value> {
    let look = analysis.lookup();
    let mut events = Vec::with_capacity(timeline.ops.len() * 2 + timeline.streams.len() + 8);
    // One Perfetto process per lane group (a device of a process, or its host threads), named after it.
    let groups = timeline.groups();
    for (pid, (group, _, _)) in groups.iter().enumerate() {
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": group.label()}}));
        events.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}));
    }
    let group_of_lane: Vec<usize> =
        groups.iter().enumerate().flat_map(|(pid, (_, _, count))| std::iter::repeat(pid).take(*count)).collect();
    for (lane, stream) in timeline.streams.iter().enumerate() {
        let pid = group_of_lane[lane];
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": stream.id, "args": {"name": stream.label()}}),
        );
        events.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": stream.id, "args": {"sort_index": lane}}),
        );
    }
    let process_of = |op: &crate::timeline::TimelineOp| group_of_lane.get(op.lane as usize).copied().unwrap_or(0);
    // A graph launch is its stream's block with its nodes nested inside, up to a bound, so that a graph replayed
    // thousands of times keeps the file loadable.
    const NODE_SLICES: usize = 100_000;
    let mut node_slices = 0;
    for op in &timeline.ops {
        // The bar shows the short name; its arguments keep the whole one.
        let mut args = json!({"seq": op.seq, "name": &*op.name});
        if let Some(nodes) = &op.nodes {
            args["graph_nodes"] = json!(nodes.iter().map(|n| &**n).collect::<Vec<_>>());
        }
        let (ts, dur) = (micros(op.start_ns), micros(op.end_ns.saturating_sub(op.start_ns)));
        events.push(json!({
            "ph": "X", "cat": op.class, "name": &*op.label,
            "pid": process_of(op), "tid": op.stream, "ts": ts, "dur": dur,
            "args": args,
        }));
        let Some(nodes) = op.nodes.as_ref().filter(|n| !n.is_empty() && node_slices + n.len() <= NODE_SLICES) else {
            continue;
        };
        node_slices += nodes.len();
        for (i, node) in nodes.iter().enumerate() {
            let (ts, dur) = node_slice(op, i, nodes.len());
            events.push(json!({
                "ph": "X", "cat": "graph node", "name": &**node,
                "pid": process_of(op), "tid": op.stream, "ts": ts, "dur": dur,
                "args": {"launch_seq": op.seq, "node": i},
            }));
        }
    }
    for (id, arrow) in timeline.arrows.iter().enumerate() {
        let Some(to) = arrow.to else { continue };
        let (from, to) = (&timeline.ops[arrow.from], &timeline.ops[to]);
        let name = match arrow.kind {
            EdgeKind::EventWait => "event record -> wait",
            EdgeKind::HostSync => "host synchronization",
            EdgeKind::LegacyDefault => "legacy default stream",
        };
        events.push(json!({"ph": "s", "cat": "happens-before", "name": name, "id": id, "pid": process_of(from), "tid": from.stream, "ts": micros(from.end_ns)}));
        events.push(json!({"ph": "f", "bp": "e", "cat": "happens-before", "name": name, "id": id, "pid": process_of(to), "tid": to.stream, "ts": micros(to.start_ns)}));
    }
    // One marker per finding, the most frequent first, at most MARKERS of them (the JSON report has them all).
    const MARKERS: usize = 10_000;
    for race in analysis.findings.all_races_by_count().into_iter().take(MARKERS) {
        let Some(mark) = timeline.mark(&race.later) else { continue };
        let later = &timeline.ops[mark.bar];
        // On the later node's slice when the race is between two nodes of one launch.
        let ts = match (mark.node, &later.nodes) {
            (Some(k), Some(nodes)) => node_slice(later, k, nodes.len()).0,
            _ => micros(later.start_ns),
        };
        let mut args = json!({"why": super::describe_why(look, race), "fix": super::fix::fix_text(look, race), "count": race.count,
                              "earlier": super::describe_op(look, &race.earlier), "later": super::describe_op(look, &race.later),
                              "earlier_seq": race.earlier.seq, "later_seq": race.later.seq});
        if let Some(nodes) = timeline.outlined_nodes(race) {
            // The node slices' own `node` arguments, so that the pair can be found among the launch's slices.
            args["outlined"] = json!(nodes);
            args["earlier_node"] = json!(timeline.mark(&race.earlier).and_then(|m| m.node));
            args["later_node"] = json!(mark.node);
        }
        events.push(json!({
            "ph": "i", "s": "t", "cat": "race",
            "name": super::race_title(look, race),
            "pid": process_of(later), "tid": later.stream, "ts": ts,
            "args": args,
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
