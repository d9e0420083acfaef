//! A self-contained HTML report: a canvas timeline with a time axis, one lane per stream that ran something
//! (named as people know it, grouped by process or rank and GPU), bars labelled with short op or kernel names
//! cut to fit (a graph launch's nodes inside its bar), a tooltip on every bar (its op, stream, times and line),
//! happens-before arrows, for nsys exports each host thread's CUDA API calls and NVTX ranges as rows of their own,
//! a legend, and the findings beside it. The first finding is picked when the page opens (`#finding=N` in the
//! address picks another, and picking one puts it there); picking one zooms to its two operations, outlined
//! (two nodes of one graph launch inside its block), with the hand-over that came too early, and shows it in
//! sections. A trace without addresses (an nsys export) lists its unordered cross-stream operation pairs as
//! candidates instead. Everything is inline; nothing is fetched. Every string from the trace reaches the page as
//! JSON data and is shown through `textContent`, never parsed as HTML.

use std::io;

use serde::Serialize;

use super::fix::fix_text;
use super::{
    action_word, describe_location, describe_op, describe_site, describe_why, event_phrase, race_title, Report,
};
use crate::analysis::Analysis;
use crate::findings::{EdgeKind, RaceFinding, UnorderedPairGroup};
use crate::names::short::distinct_short_names;
use crate::resolve::Lookup;
use crate::timeline::{HostRowKind, Timeline};

pub struct HtmlReport;

/// Findings listed in the page, most frequent first; the JSON report has them all. A synthetic trace that
/// races everywhere would otherwise put tens of megabytes of sentences into the page.
const FINDINGS_SHOWN: usize = 1000;

/// What a picked finding's outlines hold, unless they are two nodes inside one graph launch.
const TWO_OPERATIONS: &str = "its two operations";

/// What a lane holds, which decides its height and colours.
#[derive(Serialize, Copy, Clone)]
#[serde(rename_all = "snake_case")]
enum LaneKind {
    Stream,
    Api,
    Nvtx,
}

#[derive(Serialize)]
struct Lane {
    title: String,
    detail: String,
    /// Index into `groups`.
    group: usize,
    kind: LaneKind,
}

/// What a listed finding is, for its badge.
#[derive(Serialize, Copy, Clone)]
#[serde(rename_all = "snake_case")]
enum FindingKind {
    Race,
    /// A race ordered only by timing, or by host synchronization the capture cannot see.
    TimingOnly,
    /// A wait on an event that was never recorded.
    Wait,
    /// An unordered cross-stream operation pair of a trace without addresses: a race cannot be decided.
    Candidate,
}

/// One part of a finding's panel: a heading and its paragraphs.
#[derive(Serialize)]
struct Section {
    heading: &'static str,
    lines: Vec<String>,
}

#[derive(Serialize)]
struct FindingView {
    kind: FindingKind,
    title: String,
    count: u64,
    /// Indexes of the two bars in `ops`, when both ran on streams.
    earlier: Option<usize>,
    later: Option<usize>,
    /// For nodes of a graph launch: their indexes among the nodes drawn inside the bar, outlined there.
    earlier_node: Option<usize>,
    later_node: Option<usize>,
    /// What the two outlines hold, for the legend: "its two operations", or the two nodes of one launch.
    outlined: String,
    /// The happens-before arrows that matter for it (indexes into `arrows`).
    arrows: Vec<usize>,
    sections: Vec<Section>,
}

/// A bar as the page holds it: [lane, start_ns, end_ns, name index, seq, label index, line index or null].
type PageBar = (u32, u64, u64, u32, u64, u32, Option<u32>);

#[derive(Serialize)]
struct PageData<'a> {
    trace: &'a str,
    summary: String,
    /// Said above the findings: what the list holds when races cannot be decided.
    notice: Option<&'static str>,
    gpu_time: bool,
    /// Lane groups' titles ("process 0, GPU 0", "rank 1, GPU 1"), in order.
    groups: Vec<String>,
    lanes: Vec<Lane>,
    /// Interned operation names, bar labels and lines, referenced by index from `ops`, `graphs` and `spans`.
    names: Vec<&'a str>,
    ops: Vec<PageBar>,
    /// [bar, [node label indexes]] for each graph launch: its nodes are drawn inside its bar.
    graphs: Vec<(usize, Vec<u32>)>,
    /// [from bar, to bar, kind: 0 event wait, 1 host sync, 2 legacy]
    arrows: Vec<(usize, usize, u8)>,
    /// [lane, start_ns, end_ns, name index] per API call and NVTX range, sorted by start within each lane.
    spans: Vec<(u32, u64, u64, u32)>,
    findings: Vec<FindingView>,
}

/// Interns strings into the page's `names` table.
struct Interner<'a> {
    names: Vec<&'a str>,
    index: std::collections::HashMap<&'a str, u32>,
}

impl<'a> Interner<'a> {
    fn index(&mut self, name: &'a str) -> u32 {
        let next = self.names.len() as u32;
        *self.index.entry(name).or_insert_with(|| {
            self.names.push(name);
            next
        })
    }
}

/// "1 race", "2 races".
fn counted(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The lanes in drawing order: each group's streams, then the host rows of its process, and which lane each
/// stream and host row became.
fn lanes(timeline: &Timeline) -> (Vec<String>, Vec<Lane>, Vec<u32>, Vec<u32>) {
    // (group, place within the group, lane): streams keep their order, host rows follow a process's host lanes.
    let mut entries: Vec<(crate::timeline::LaneGroup, usize, Lane, bool, usize)> = Vec::new();
    for (i, s) in timeline.streams.iter().enumerate() {
        let lane = Lane { title: s.title(), detail: s.detail(), group: 0, kind: LaneKind::Stream };
        entries.push((s.group(), i, lane, true, i));
    }
    for (i, row) in timeline.host_rows.iter().enumerate() {
        let (kind, detail) = match row.kind {
            HostRowKind::Api => (LaneKind::Api, "CUDA API calls, from call to return".to_string()),
            HostRowKind::Nvtx { .. } => (LaneKind::Nvtx, "NVTX ranges".to_string()),
        };
        let lane = Lane { title: row.title(), detail, group: 0, kind };
        entries.push((row.group(), timeline.streams.len() + i, lane, false, i));
    }
    entries.sort_by_key(|(group, place, ..)| (group.order(), group.rank, *place));
    let (mut groups, mut lanes) = (Vec::new(), Vec::new());
    let mut last = None;
    let (mut stream_lane, mut row_lane) = (vec![0; timeline.streams.len()], vec![0; timeline.host_rows.len()]);
    for (group, _, mut lane, is_stream, index) in entries {
        if last != Some(group) {
            last = Some(group);
            groups.push(group.label());
        }
        lane.group = groups.len() - 1;
        if is_stream {
            stream_lane[index] = lanes.len() as u32;
        } else {
            row_lane[index] = lanes.len() as u32;
        }
        lanes.push(lane);
    }
    (groups, lanes, stream_lane, row_lane)
}

/// A race's panel: the two accesses, the memory, why nothing orders them, the fix.
fn race_sections(look: Lookup, race: &RaceFinding) -> Vec<Section> {
    let access = |lead: String, op: &crate::findings::OpOccurrence| {
        let mut lines = vec![lead];
        // As the text report lists them: where it was issued, then the program's frames that called that (a
        // Python line under an extension's native frame).
        let frames = look.frames(op.site);
        let mut frames = frames.iter();
        if let Some(source) = frames.next() {
            lines.push(format!("issued at {source}"));
        }
        lines.extend(frames.map(|frame| format!("called from {frame}")));
        lines
    };
    let mut sections = vec![
        Section {
            heading: "Access",
            lines: access(
                format!(
                    "{} of {} bytes by {}",
                    action_word(race.later.action),
                    race.range.len,
                    describe_op(look, &race.later)
                ),
                &race.later,
            ),
        },
        Section {
            heading: "Previous access",
            lines: access(
                format!("{} by {}", action_word(race.earlier.action), describe_op(look, &race.earlier)),
                &race.earlier,
            ),
        },
        Section { heading: "Memory", lines: describe_location(look, race) },
        Section { heading: "Why nothing orders them", lines: vec![describe_why(look, race)] },
        Section { heading: "Fix", lines: vec![fix_text(look, race)] },
    ];
    if race.count > 1 {
        sections.push(Section { heading: "Seen", lines: vec![format!("{} times", race.count)] });
    }
    sections
}

/// An unordered pair of a trace without addresses: the two operations and why it is listed.
fn candidate_sections(look: Lookup, group: &UnorderedPairGroup) -> Vec<Section> {
    vec![
        Section { heading: "Earlier operation", lines: vec![describe_site(look, group.earlier)] },
        Section { heading: "Later operation", lines: vec![describe_site(look, group.later)] },
        Section {
            heading: "Why it is listed",
            lines: vec![
                "Nothing orders the two operations, and they ran on different streams. The trace has no addresses \
                 (an Nsight Systems export records none), so whether they touch the same memory cannot be decided: \
                 a capture with `streamtrace capture` can."
                    .to_string(),
                format!("{} such pairs of these two sites", group.pairs),
            ],
        },
    ]
}

fn page_data<'a>(analysis: &'a Analysis, timeline: &'a Timeline) -> PageData<'a> {
    let (groups, lanes, stream_lane, row_lane) = lanes(timeline);
    let mut names = Interner { names: Vec::new(), index: std::collections::HashMap::new() };
    let ops = timeline
        .ops
        .iter()
        .map(|op| {
            (
                stream_lane.get(op.lane as usize).copied().unwrap_or(0),
                op.start_ns,
                op.end_ns,
                names.index(&op.name),
                op.seq,
                names.index(&op.label),
                op.place.as_deref().map(|p| names.index(p)),
            )
        })
        .collect();
    let graphs = timeline
        .ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| Some((i, op.nodes.as_ref()?)))
        .map(|(i, nodes)| (i, nodes.iter().map(|n| names.index(n)).collect()))
        .collect();
    let spans = timeline
        .host_spans
        .iter()
        .map(|s| (row_lane.get(s.row as usize).copied().unwrap_or(0), s.start_ns, s.end_ns, names.index(&s.name)))
        .collect();
    // Arrows to nothing are not drawn: the page's arrow indexes count only the others.
    let mut page_arrow = vec![None; timeline.arrows.len()];
    let mut arrows = Vec::new();
    for (i, a) in timeline.arrows.iter().enumerate() {
        let kind = match a.kind {
            EdgeKind::EventWait => 0,
            EdgeKind::HostSync => 1,
            EdgeKind::LegacyDefault => 2,
        };
        if let Some(to) = a.to {
            page_arrow[i] = Some(arrows.len());
            arrows.push((a.from, to, kind));
        }
    }
    let (findings, look) = (&analysis.findings, analysis.lookup());
    let race_view = |race: &RaceFinding, kind: FindingKind| {
        let (earlier, later) = (timeline.mark(&race.earlier), timeline.mark(&race.later));
        // In a job's page, which rank's race it is.
        let rank = later.or(earlier).and_then(|m| timeline.streams.get(timeline.ops[m.bar].lane as usize)?.rank);
        let title = race_title(look, race);
        FindingView {
            kind,
            title: rank.map_or(title.clone(), |r| format!("rank {r}: {title}")),
            count: race.count,
            earlier: earlier.map(|m| m.bar),
            later: later.map(|m| m.bar),
            earlier_node: earlier.and_then(|m| m.node),
            later_node: later.and_then(|m| m.node),
            outlined: timeline.outlined_nodes(race).unwrap_or_else(|| TWO_OPERATIONS.to_string()),
            arrows: timeline.arrows_for(race).into_iter().filter_map(|i| page_arrow[i]).collect(),
            sections: race_sections(look, race),
        }
    };
    let mut views: Vec<FindingView> = findings
        .races_by_count()
        .into_iter()
        .take(FINDINGS_SHOWN)
        .map(|race| race_view(race, FindingKind::Race))
        .collect();
    views.extend(findings.timing_only_races.iter().take(FINDINGS_SHOWN).map(|race| {
        let mut view = race_view(race, FindingKind::TimingOnly);
        view.sections.insert(
            0,
            Section {
                heading: "Ordered only by timing",
                lines: vec![
                    "In the order the threads' calls happened to run this race does not occur, but nothing the \
                     capture saw orders it: only timing, or host synchronization the capture cannot see (a \
                     `std::atomic` flag), does."
                        .to_string(),
                ],
            },
        );
        view
    }));
    views.extend(findings.unrecorded_waits.iter().take(FINDINGS_SHOWN).map(|w| FindingView {
        kind: FindingKind::Wait,
        title: format!("wait on a never-recorded event: {}", event_phrase(look, w)),
        count: w.count,
        earlier: None,
        later: timeline.op_index(w.wait.seq),
        earlier_node: None,
        later_node: None,
        outlined: "the wait".to_string(),
        arrows: Vec::new(),
        sections: vec![
            Section { heading: "Wait", lines: vec![describe_op(look, &w.wait)] },
            Section {
                heading: "Why it matters",
                lines: vec!["The wait orders nothing: record the event before waiting on it.".to_string()],
            },
        ],
    }));
    let no_addresses = !analysis.stats.has_addresses;
    if no_addresses && views.iter().all(|v| matches!(v.kind, FindingKind::Wait)) {
        let mut candidates: Vec<&UnorderedPairGroup> = findings.unordered_pairs.iter().collect();
        candidates.sort_by_key(|g| std::cmp::Reverse(g.pairs));
        views.extend(candidates.into_iter().take(FINDINGS_SHOWN).map(|group| {
            let (earlier, later) = (look.site(group.earlier), look.site(group.later));
            FindingView {
                kind: FindingKind::Candidate,
                title: {
                    let [a, b] = short_op_labels([earlier, later]);
                    format!("unordered: {a} / {b}")
                },
                count: group.pairs,
                earlier: timeline.op_index(group.first.0),
                later: timeline.op_index(group.first.1),
                earlier_node: None,
                later_node: None,
                outlined: "the first such pair".to_string(),
                arrows: Vec::new(),
                sections: candidate_sections(look, group),
            }
        }));
    }
    let races = findings.races.len();
    let pairs = findings.stream_pair_totals.pairs;
    let omitted = findings.races.len().saturating_sub(FINDINGS_SHOWN);
    let mut summary = if no_addresses {
        // A recording cut short may have lost the addresses it would have given: it is no trace without them.
        let what = if analysis.cut_short() { "no addresses read (a recording cut short)" } else { "no addresses" };
        format!("{what}: races cannot be decided; {pairs} unordered cross-stream operation pairs")
    } else {
        counted(races, "race")
    };
    if !findings.unrecorded_waits.is_empty() {
        summary.push_str(&format!(", {} on never-recorded events", counted(findings.unrecorded_waits.len(), "wait")));
    }
    if !findings.timing_only_races.is_empty() {
        summary.push_str(&format!(", {} ordered only by timing", counted(findings.timing_only_races.len(), "race")));
    }
    summary.push_str(&format!(
        "; {} on {}",
        counted(analysis.stats.operations as usize, "operation"),
        counted(timeline.streams.len(), "stream")
    ));
    if omitted > 0 {
        summary.push_str(&format!(
            "; the {FINDINGS_SHOWN} most frequent races are listed, {omitted} more in the JSON report"
        ));
    }
    PageData {
        trace: &analysis.trace,
        summary,
        notice: no_addresses.then_some(if analysis.cut_short() {
            "This recording lost its end (it has no closing record) before any address was read: races cannot be \
             decided. Listed instead: pairs of operations on different streams that nothing orders, by site, most \
             pairs first."
        } else {
            "This trace has no addresses (an Nsight Systems export records none): races cannot be decided. Listed \
             instead: pairs of operations on different streams that nothing orders, by site, most pairs first."
        }),
        gpu_time: timeline.gpu_time,
        groups,
        lanes,
        names: names.names,
        ops,
        graphs,
        arrows,
        spans,
        findings: views,
    }
}

/// Two sites' names for a title: each one's framework op's short name, else its kernel's, told apart when two
/// different kernels share a short name.
fn short_op_labels(sites: [&crate::findings::Site; 2]) -> [String; 2] {
    let kernels = distinct_short_names(&[&*sites[0].name, &*sites[1].name], 60);
    let label = |k: usize| match &sites[k].region {
        Some(region) => crate::names::short::short_op_name(region).to_string(),
        None => kernels[k].clone(),
    };
    [label(0), label(1)]
}

/// JSON that can sit inside a `<script>` element: no `<`, `>` or `&` can end it or start a tag.
fn script_safe_json<T: Serialize>(value: &T) -> io::Result<String> {
    let json = serde_json::to_string(value).map_err(io::Error::other)?;
    Ok(json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026"))
}

const STYLE: &str = r##"
body { margin: 0; font: 13px system-ui, sans-serif; color: #1d2330; display: grid; grid-template-columns: 1fr 420px; grid-template-rows: auto 1fr; height: 100vh; }
header { grid-column: 1 / 3; padding: 8px 12px; border-bottom: 1px solid #d8dce5; }
header h1 { font-size: 15px; margin: 0 0 2px 0; overflow-wrap: anywhere; }
#timeline { position: relative; overflow: hidden; border-right: 1px solid #d8dce5; }
canvas { display: block; width: 100%; height: 100%; cursor: grab; }
#tip { position: absolute; display: none; pointer-events: none; background: #1d2330; color: #fff; font: 12px system-ui, sans-serif; padding: 6px 8px; border-radius: 4px; white-space: pre; max-width: 560px; overflow: hidden; text-overflow: ellipsis; z-index: 2; box-shadow: 0 2px 6px rgba(0,0,0,.25); }
aside { overflow: auto; padding: 8px 12px; }
aside h2 { font-size: 14px; margin: 6px 0; }
#notice { background: #fff6dd; border: 1px solid #eed9a0; border-radius: 4px; padding: 6px 8px; margin-bottom: 8px; }
#findings { padding: 0; margin: 0; max-height: 34vh; overflow: auto; }
#findings li { cursor: pointer; padding: 4px 6px; border-radius: 4px; margin-bottom: 2px; list-style: none; overflow-wrap: anywhere; }
#findings li:hover { background: #eef1f7; }
#findings li.selected { background: #fde8e8; }
.badge { display: inline-block; font-size: 10px; font-weight: 600; text-transform: uppercase; letter-spacing: .03em; border-radius: 3px; padding: 0 4px; margin-right: 5px; color: #fff; background: #c2475c; }
.badge.timing_only { background: #c9822b; } .badge.wait { background: #8a5cc2; } .badge.candidate { background: #687085; }
.times { color: #687085; margin-left: 4px; }
#details { margin-top: 10px; border-top: 1px solid #d8dce5; padding-top: 8px; overflow-wrap: anywhere; }
#details h3 { font-size: 13px; margin: 0 0 6px 0; }
#details dl { margin: 0; }
#details dt { font-weight: 600; color: #3b4356; margin-top: 8px; font-size: 12px; }
#details dd { margin: 2px 0 0 0; line-height: 1.4; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f0f2f7; border-radius: 3px; padding: 0 2px; }
#lanes { padding-left: 18px; }
.hint { color: #687085; }
"##;

const SCRIPT: &str = r##"
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const canvas = document.getElementById("canvas");
const tip = document.getElementById("tip");
const ctx = canvas.getContext("2d");
const GROUP_H = 18, AXIS_H = 30, LEGEND_H = 34;
const HEIGHT = { stream: 30, api: 18, nvtx: 16 };
const FONT = "system-ui, sans-serif";
let t0 = Infinity, t1 = -Infinity;
for (const op of data.ops) { if (op[1] < t0) t0 = op[1]; if (op[2] > t1) t1 = op[2]; }
for (const s of data.spans) { if (s[1] < t0) t0 = s[1]; if (s[2] > t1) t1 = s[2]; }
if (!isFinite(t0)) { t0 = 0; t1 = 1; }
if (t1 <= t0) t1 = t0 + 1;
let view = { start: t0, end: t1 + (t1 - t0) * 0.02 };
let selected = null;
// The label column is as wide as the longest lane title needs, within bounds; longer titles are cut.
ctx.font = "12px " + FONT;
const LABEL_W = Math.round(Math.min(340, Math.max(170, 16 + Math.max(0, ...data.lanes.map(l => ctx.measureText(l.title).width)))));
// Text cut to `w` pixels with an ellipsis (in the current font), keeping its end when `keepEnd` (a lane's "#2").
function fit(text, w, keepEnd) {
  if (ctx.measureText(text).width <= w) return text;
  let lo = 0, hi = text.length;
  const cut = n => keepEnd ? text.slice(0, Math.ceil(n / 2)) + "…" + text.slice(text.length - Math.floor(n / 2)) : text.slice(0, n) + "…";
  while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (ctx.measureText(cut(mid)).width <= w) lo = mid; else hi = mid - 1; }
  return lo > 0 ? cut(lo) : "";
}
// Each lane's top and height: group headers sit above their first lane.
const laneY = [], laneH = [];
let plotBottom = AXIS_H;
{
  let y = AXIS_H, group = -1;
  data.lanes.forEach((lane, li) => {
    if (lane.group !== group) { group = lane.group; y += GROUP_H; }
    laneY[li] = y; laneH[li] = HEIGHT[lane.kind]; y += laneH[li];
  });
  plotBottom = y;
}
// Bars per lane, sorted by start, for level-of-detail drawing and hit tests: stream operations ("o") and host
// rows' API calls and NVTX ranges ("s"). Bars of one lane do not overlap, so their ends are sorted too.
const lanes = data.lanes.map(() => []);
data.ops.forEach((op, i) => { if (lanes[op[0]]) lanes[op[0]].push(i); });
for (const l of lanes) l.sort((a, b) => data.ops[a][1] - data.ops[b][1]);
const rows = data.lanes.map(() => []);
data.spans.forEach((s, i) => { if (rows[s[0]]) rows[s[0]].push(i); });
const graphs = new Map(data.graphs.map(([bar, nodes]) => [bar, nodes]));
const colors = ["#4a72c9", "#2f9e77", "#c9822b", "#8a5cc2", "#c2475c", "#3d9bb5"];
const hostColors = { api: ["#7b8fb5", "#93a5c8"], nvtx: ["#b98b2f", "#cfa44d"] };
function x(t, w) { return LABEL_W + (t - view.start) / (view.end - view.start) * (w - LABEL_W); }
function timeAt(px, w) { return view.start + (px - LABEL_W) / (w - LABEL_W) * (view.end - view.start); }
// A round step for about `count` ticks over `span`.
function step(span, count) {
  const raw = span / count, p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(k => k * p).find(s => s >= raw) || raw;
}
function duration(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
  return ns.toFixed(0) + " ns";
}
function tickText(v) {
  if (!data.gpu_time) return "#" + Math.round(v / 1000);
  const ns = v - t0;
  if (Math.abs(ns) >= 1e6) return (ns / 1e6).toFixed(ns % 1e6 === 0 ? 0 : 2) + " ms";
  if (Math.abs(ns) >= 1e3) return (ns / 1e3).toFixed(ns % 1e3 === 0 ? 0 : 1) + " µs";
  return ns.toFixed(0) + " ns";
}
function drawAxis(w) {
  ctx.fillStyle = "#687085"; ctx.strokeStyle = "#c8cdd8"; ctx.font = "11px " + FONT;
  ctx.fillText(fit(data.gpu_time ? "GPU time since the first operation" : "issue order (no GPU times): operation #", LABEL_W - 12), 6, 14);
  const span = view.end - view.start, s = data.gpu_time ? step(span, 8) : Math.max(1000, step(span, 8));
  const base = data.gpu_time ? t0 : 0;
  for (let v = base + Math.ceil((view.start - base) / s) * s; v <= view.end; v += s) {
    const px = x(v, w);
    if (px < LABEL_W) continue;
    ctx.beginPath(); ctx.moveTo(px, AXIS_H - 6); ctx.lineTo(px, Math.min(plotBottom, canvas.clientHeight - LEGEND_H)); ctx.stroke();
    ctx.fillText(tickText(v), px + 2, AXIS_H - 8);
  }
}
function barRect(i, w) {
  const op = data.ops[i], y = laneY[op[0]];
  const a = Math.max(LABEL_W, x(op[1], w)), b = Math.min(w, x(op[2], w));
  return { a, b, y };
}
// A graph launch's nodes when its bar is wide enough to show them side by side, else null.
function shownNodes(i, w) {
  const nodes = graphs.get(i);
  if (!nodes) return null;
  const { a, b } = barRect(i, w);
  return Math.max(1, b - a) > 4 * nodes.length ? nodes : null;
}
// Node k of a launch's n shown nodes: an equal part of the bar's time span, in node order.
function nodeSpan(i, k, n, w) {
  const op = data.ops[i], a = x(op[1], w), nw = (x(op[2], w) - a) / n;
  return [a + k * nw, a + (k + 1) * nw];
}
// The first of a lane's bars (indexes into `table`, sorted) that ends at or after time t.
function firstEndingAfter(list, table, t) {
  let lo = 0, hi = list.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (table[list[mid]][2] < t) lo = mid + 1; else hi = mid; }
  return lo;
}
function drawLaneHead(lane, li, y, w) {
  const h = laneH[li];
  ctx.fillStyle = li % 2 ? "#f7f8fb" : "#ffffff"; ctx.fillRect(0, y, w, h);
  ctx.fillStyle = "#1d2330";
  if (lane.kind === "stream") {
    ctx.font = "12px " + FONT; ctx.fillText(fit(lane.title, LABEL_W - 12, true), 6, y + 13);
    ctx.fillStyle = "#687085"; ctx.font = "10px " + FONT; ctx.fillText(fit(lane.detail, LABEL_W - 12), 6, y + 25);
  } else {
    ctx.font = "11px " + FONT; ctx.fillText(fit(lane.title, LABEL_W - 12), 6, y + h - 4);
  }
}
function draw() {
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  canvas.width = w * dpr; canvas.height = h * dpr; ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  let group = -1;
  data.lanes.forEach((lane, li) => {
    const y = laneY[li];
    if (lane.group !== group) {
      group = lane.group;
      ctx.fillStyle = "#e9ecf3"; ctx.fillRect(0, y - GROUP_H, w, GROUP_H);
      ctx.fillStyle = "#1d2330"; ctx.font = "bold 11px " + FONT;
      ctx.fillText(data.groups[group], 6, y - 5);
    }
    drawLaneHead(lane, li, y, w);
    if (lane.kind === "stream") drawStreamBars(li, y, w); else drawHostBars(lane, li, y, w);
  });
  drawAxis(w);
  // Arrows and selections stay inside the plot, clear of the lane labels.
  ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W, 0, w - LABEL_W, h); ctx.clip();
  const marked = new Set(selected ? selected.arrows : []);
  const visible = data.arrows.filter(([f, t]) => data.ops[t][1] >= view.start && data.ops[f][2] <= view.end);
  const arrow = ([f, t, kind], strong) => {
    const from = data.ops[f], to = data.ops[t];
    const fx = x(from[2], w), fy = laneY[from[0]] + laneH[from[0]] / 2;
    const tx = x(to[1], w), ty = laneY[to[0]] + laneH[to[0]] / 2;
    ctx.strokeStyle = ctx.fillStyle = strong ? "#1d2330" : (kind === 0 ? "#7d8597" : "#b8bfcc");
    ctx.lineWidth = strong ? 2.5 : 1; ctx.setLineDash(strong ? [6, 3] : []);
    ctx.beginPath(); ctx.moveTo(fx, fy); ctx.lineTo(tx, ty); ctx.stroke();
    ctx.setLineDash([]);
    ctx.beginPath(); ctx.arc(tx, ty, strong ? 4 : 2.5, 0, 2 * Math.PI); ctx.fill();
  };
  if (visible.length < 3000) for (const a of visible) arrow(a, false);
  for (const i of marked) arrow(data.arrows[i], true);
  if (selected) drawSelection(w);
  ctx.restore();
  drawLegend(w, h);
}
function drawStreamBars(li, y, w) {
  const H = laneH[li], color = colors[li % colors.length], list = lanes[li];
  ctx.font = "11px " + FONT;
  let lastPx = -1;
  for (let k = firstEndingAfter(list, data.ops, view.start); k < list.length; k++) {
    const i = list[k], op = data.ops[i];
    if (op[1] > view.end) break;
    const { a, b } = barRect(i, w);
    // Level of detail: at most one bar per pixel column.
    if (Math.floor(b) <= lastPx) continue;
    const bw = Math.max(1, b - a);
    ctx.fillStyle = color; ctx.fillRect(a, y + 5, bw, H - 10);
    lastPx = Math.floor(b);
    const nodes = shownNodes(i, w);
    if (nodes) {
      // A graph launch: its nodes side by side inside the block (the parts left of the lane labels hidden).
      nodes.forEach((n, k) => {
        const [na, nb] = nodeSpan(i, k, nodes.length, w), left = Math.max(a, na), nw = Math.min(b, nb) - left;
        if (nw <= 0) return;
        ctx.fillStyle = "#ffffff"; if (na >= a) ctx.fillRect(na, y + 5, 1, H - 10);
        if (nw > 24) ctx.fillText(fit(data.names[n], nw - 6), left + 3, y + 19);
      });
    } else if (bw > 24) {
      ctx.fillStyle = "#ffffff"; ctx.fillText(fit(data.names[op[5]], bw - 6), a + 3, y + 19);
    }
  }
}
function drawHostBars(lane, li, y, w) {
  const H = laneH[li], list = rows[li], [c0, c1] = hostColors[lane.kind];
  ctx.font = "10px " + FONT;
  let lastPx = -1;
  for (let k = firstEndingAfter(list, data.spans, view.start); k < list.length; k++) {
    const i = list[k], s = data.spans[i];
    if (s[1] > view.end) break;
    const a = Math.max(LABEL_W, x(s[1], w)), b = Math.min(w, x(s[2], w));
    if (Math.floor(b) <= lastPx) continue;
    const bw = Math.max(1, b - a);
    ctx.fillStyle = k % 2 ? c1 : c0; ctx.fillRect(a, y + 2, bw, H - 4);
    lastPx = Math.floor(b);
    if (bw > 30) { ctx.fillStyle = "#ffffff"; ctx.fillText(fit(data.names[s[3]], bw - 6), a + 3, y + H - 5); }
  }
}
function drawSelection(w) {
  ctx.strokeStyle = "#d0021b"; ctx.lineWidth = 2;
  const ends = [];
  for (const [i, node] of [[selected.earlier, selected.earlier_node], [selected.later, selected.later_node]]) {
    if (i === null || i === undefined) continue;
    const op = data.ops[i], y = laneY[op[0]], H = laneH[op[0]];
    // A node of a graph launch is outlined inside the launch's block, apart from its neighbours.
    const nodes = node === null || node === undefined ? null : shownNodes(i, w);
    if (nodes) {
      const [a, b] = nodeSpan(i, node, nodes.length, w);
      ctx.strokeRect(a + 2, y + 4, Math.max(2, b - a - 4), H - 8);
      ends.push([a, b, y + H / 2, i]);
    } else {
      const a = x(op[1], w), b = x(op[2], w);
      ctx.strokeRect(Math.max(LABEL_W, a) - 3, y + 2, Math.max(3, b - a) + 6, H - 4);
      ends.push([a, b, y + H / 2, i]);
    }
  }
  // Two operations are joined by a dotted line; two nodes of one block need none.
  if (ends.length === 2 && ends[0][3] !== ends[1][3]) {
    ctx.setLineDash([2, 3]); ctx.beginPath(); ctx.moveTo(ends[0][1], ends[0][2]); ctx.lineTo(ends[1][0], ends[1][2]); ctx.stroke(); ctx.setLineDash([]);
  }
}
function drawLegend(w, h) {
  const y = h - LEGEND_H + 4;
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, h - LEGEND_H, w, LEGEND_H);
  ctx.font = "11px " + FONT;
  let px = 6, row = y;
  const item = (draw, text) => {
    // Items that would run past the right edge start a second row.
    if (px + 22 + ctx.measureText(text).width > w - 6 && px > 6) { px = 6; row += 14; }
    draw(px, row); px += 22; ctx.fillStyle = "#1d2330"; ctx.fillText(text, px, row + 9); px += ctx.measureText(text).width + 18;
  };
  item((a, b) => { ctx.strokeStyle = "#d0021b"; ctx.lineWidth = 2; ctx.strokeRect(a, b, 16, 10); }, "the finding picked: " + (selected ? selected.outlined : "its two operations"));
  item((a, b) => { ctx.strokeStyle = "#1d2330"; ctx.lineWidth = 2.5; ctx.setLineDash([6, 3]); ctx.beginPath(); ctx.moveTo(a, b + 5); ctx.lineTo(a + 16, b + 5); ctx.stroke(); ctx.setLineDash([]); }, "last hand-over between their streams (too early)");
  item((a, b) => { ctx.strokeStyle = "#7d8597"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(a, b + 5); ctx.lineTo(a + 16, b + 5); ctx.stroke(); }, "event record -> wait");
  item((a, b) => { ctx.strokeStyle = "#b8bfcc"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(a, b + 5); ctx.lineTo(a + 16, b + 5); ctx.stroke(); }, "host or legacy default stream synchronization");
  if (data.spans.length) {
    item((a, b) => { ctx.fillStyle = hostColors.api[0]; ctx.fillRect(a, b, 16, 10); }, "CUDA API call");
    item((a, b) => { ctx.fillStyle = hostColors.nvtx[0]; ctx.fillRect(a, b, 16, 10); }, "NVTX range");
  }
}
// What is under the pointer: a lane title, a stream bar ("op") or a host row's bar ("span").
function hit(px, py, w) {
  const li = data.lanes.findIndex((_, i) => py >= laneY[i] && py < laneY[i] + laneH[i]);
  if (li < 0) return null;
  if (px < LABEL_W) return { lane: li };
  const stream = data.lanes[li].kind === "stream", list = stream ? lanes[li] : rows[li], table = stream ? data.ops : data.spans;
  const t = timeAt(px, w), slack = 3 / (w - LABEL_W) * (view.end - view.start);
  let best = null, bestGap = Infinity;
  for (let k = firstEndingAfter(list, table, t - slack); k < list.length; k++) {
    const r = table[list[k]];
    if (r[1] > t + slack) break;
    const gap = t < r[1] ? r[1] - t : t > r[2] ? t - r[2] : 0;
    if (gap < bestGap) { best = list[k]; bestGap = gap; }
    if (gap === 0) break;
  }
  return best === null ? null : stream ? { op: best } : { span: best };
}
function when(start, end) {
  if (!data.gpu_time) return "issue position " + Math.round(start / 1000) + " (the trace has no GPU times)";
  return "start " + duration(start - t0) + " · duration " + duration(end - start);
}
function tipText(h) {
  if (h.lane !== undefined) {
    const lane = data.lanes[h.lane];
    return lane.title + "\n" + lane.detail + "\n" + data.groups[lane.group];
  }
  if (h.span !== undefined) {
    const s = data.spans[h.span], lane = data.lanes[s[0]];
    return data.names[s[3]] + "\n" + lane.title + "\n" + when(s[1], s[2]);
  }
  const op = data.ops[h.op], lane = data.lanes[op[0]];
  const lines = [data.names[op[3]]];
  if (data.names[op[5]] !== data.names[op[3]]) lines.push("op: " + data.names[op[5]]);
  lines.push("stream: " + lane.title + " (" + lane.detail + ", " + data.groups[lane.group] + ")");
  lines.push(when(op[1], op[2]));
  lines.push(op[6] === null ? "line: not recorded" : "line: " + data.names[op[6]]);
  const nodes = graphs.get(h.op);
  if (nodes) lines.push("graph nodes: " + nodes.map(n => data.names[n]).join(", "));
  return lines.join("\n");
}
canvas.addEventListener("mousemove", e => {
  if (drag) { tip.style.display = "none"; return; }
  const h = hit(e.offsetX, e.offsetY, canvas.clientWidth);
  if (!h) { tip.style.display = "none"; return; }
  tip.textContent = tipText(h);
  tip.style.display = "block";
  const box = canvas.getBoundingClientRect(), tw = tip.offsetWidth, th = tip.offsetHeight;
  tip.style.left = Math.max(0, Math.min(e.offsetX + 14, box.width - tw - 4)) + "px";
  tip.style.top = (e.offsetY + 16 + th > box.height ? e.offsetY - th - 8 : e.offsetY + 16) + "px";
});
canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
// Text with `code` in backticks, as nodes: every piece through textContent.
function rich(parent, text) {
  text.split("`").forEach((part, i) => {
    if (!part) return;
    if (i % 2) { const c = document.createElement("code"); c.textContent = part; parent.appendChild(c); }
    else parent.appendChild(document.createTextNode(part));
  });
}
const KIND_WORDS = { race: "race", timing_only: "timing only", wait: "wait", candidate: "unordered" };
function badge(kind) {
  const b = document.createElement("span"); b.className = "badge " + kind; b.textContent = KIND_WORDS[kind]; return b;
}
function select(index) {
  const f = data.findings[index];
  selected = f;
  document.querySelectorAll("#findings li").forEach((li, i) => li.classList.toggle("selected", i === index));
  const details = document.getElementById("details");
  details.textContent = ""; details.className = "";
  const h3 = document.createElement("h3"); h3.appendChild(badge(f.kind)); rich(h3, f.title); details.appendChild(h3);
  const dl = document.createElement("dl");
  for (const s of f.sections) {
    const dt = document.createElement("dt"); dt.textContent = s.heading; dl.appendChild(dt);
    for (const line of s.lines) { const dd = document.createElement("dd"); rich(dd, line); dl.appendChild(dd); }
  }
  details.appendChild(dl);
  const seqs = [f.earlier, f.later].filter(i => i !== null && i !== undefined);
  details.dataset.selected = seqs.map(i => data.ops[i][4]).join(",");
  details.dataset.outlined = f.outlined;
  const shown = seqs.concat(f.arrows.flatMap(a => [data.arrows[a][0]]));
  if (shown.length) {
    let a = Math.min(...shown.map(i => data.ops[i][1])), b = Math.max(...shown.map(i => data.ops[i][2]));
    const pad = Math.max((b - a) * 0.5, 1000);
    view = { start: a - pad, end: b + pad };
  }
  if (location.hash !== "#finding=" + index) history.replaceState(null, "", "#finding=" + index);
  draw();
}
const list = document.getElementById("findings");
data.findings.forEach((f, i) => {
  const li = document.createElement("li");
  li.appendChild(badge(f.kind)); rich(li, f.title);
  if (f.count > 1) { const c = document.createElement("span"); c.className = "times"; c.textContent = "×" + f.count; li.appendChild(c); }
  li.addEventListener("click", () => select(i));
  list.appendChild(li);
});
if (!data.findings.length) {
  const li = document.createElement("li"); li.className = "hint";
  li.textContent = data.notice ? "No unordered cross-stream operation pairs." : "No findings."; list.appendChild(li);
}
if (data.notice) { const n = document.getElementById("notice"); n.textContent = data.notice; n.hidden = false; }
const laneList = document.getElementById("lanes");
data.lanes.filter(l => l.kind === "stream").forEach(l => { const li = document.createElement("li"); li.textContent = l.title + " (" + l.detail + ", " + data.groups[l.group] + ")"; laneList.appendChild(li); });
document.getElementById("title").textContent = "streamtrace: " + data.trace;
document.getElementById("summary").textContent = data.summary;
canvas.addEventListener("wheel", e => {
  e.preventDefault();
  const w = canvas.clientWidth, t = timeAt(e.offsetX, w);
  const k = e.deltaY > 0 ? 1.25 : 0.8;
  view = { start: t - (t - view.start) * k, end: t + (view.end - t) * k };
  requestAnimationFrame(draw);
}, { passive: false });
let drag = null;
canvas.addEventListener("mousedown", e => { drag = { x: e.clientX, view: { ...view } }; });
window.addEventListener("mouseup", () => { drag = null; });
window.addEventListener("mousemove", e => {
  if (!drag) return;
  const span = drag.view.end - drag.view.start, dt = (drag.x - e.clientX) / (canvas.clientWidth - LABEL_W) * span;
  view = { start: drag.view.start + dt, end: drag.view.end + dt };
  requestAnimationFrame(draw);
});
window.addEventListener("resize", draw);
window.addEventListener("hashchange", () => { const m = /finding=(\d+)/.exec(location.hash); if (m && data.findings[+m[1]]) select(+m[1]); });
const m = /finding=(\d+)/.exec(location.hash);
draw();
// How long the page took to show the timeline (benches/html_report.sh reads it).
document.body.dataset.firstDrawMs = performance.now().toFixed(1);
// The finding the address names, else the first: the race is marked as soon as the page opens.
if (data.findings.length) select(m && data.findings[+m[1]] ? +m[1] : 0);
document.body.dataset.ready = "1";
"##;

impl Report for HtmlReport {
    fn write(&self, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
        let empty = Timeline::default();
        let timeline = analysis.timeline.as_ref().unwrap_or(&empty);
        let data = script_safe_json(&page_data(analysis, timeline))?;
        write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>streamtrace report</title><style>{STYLE}</style></head>\n\
             <body><header><h1 id=\"title\"></h1><div id=\"summary\"></div><span class=\"hint\">wheel: zoom, drag: pan, hover a bar for its op, stream, times and line; pick a finding to see its two operations (the address keeps it: #finding=N)</span></header>\n\
             <div id=\"timeline\"><canvas id=\"canvas\"></canvas><div id=\"tip\"></div></div>\n\
             <aside><div id=\"notice\" hidden></div><h2>Findings</h2><ul id=\"findings\"></ul><div id=\"details\" class=\"hint\">No finding picked.</div>\
             <h2>Streams</h2><ul id=\"lanes\"></ul></aside>\n\
             <script id=\"data\" type=\"application/json\">{data}</script>\n<script>{SCRIPT}</script></body></html>\n"
        )
    }
}
