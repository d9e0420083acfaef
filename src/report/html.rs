//! A self-contained HTML report: a canvas timeline with a time axis, one lane per stream that ran something
//! (named as people know it, grouped by process and device), bars labelled with short op or kernel names
//! where they fit (a graph launch's nodes inside its bar), happens-before arrows, a legend, and the findings
//! beside it; picking a finding zooms to its two operations, outlined (two nodes of one graph launch inside its
//! block), with the hand-over that came too early. Everything is inline; nothing is fetched. Every string from the trace reaches the page as JSON
//! data and is shown through `textContent`, never parsed as HTML.

use std::io;

use serde::Serialize;

use super::fix::fix_text;
use super::{action_word, describe_location, describe_op, describe_why, event_phrase, race_title, Report};
use crate::analysis::Analysis;
use crate::findings::{EdgeKind, RaceFinding};
use crate::timeline::Timeline;

pub struct HtmlReport;

/// Findings listed in the page, most frequent first; the JSON report has them all. A synthetic trace that
/// races everywhere would otherwise put tens of megabytes of sentences into the page.
const FINDINGS_SHOWN: usize = 1000;

/// What a picked finding's outlines hold, unless they are two nodes inside one graph launch.
const TWO_OPERATIONS: &str = "its two operations";

#[derive(Serialize)]
struct Lane {
    title: String,
    detail: String,
    /// Index into `groups`.
    group: usize,
}

#[derive(Serialize)]
struct FindingView {
    title: String,
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
    lines: Vec<String>,
}

#[derive(Serialize)]
struct PageData<'a> {
    trace: &'a str,
    summary: String,
    gpu_time: bool,
    /// Lane groups' titles ("process 0, device 0"), in order.
    groups: Vec<String>,
    lanes: Vec<Lane>,
    /// Interned operation names and bar labels, referenced by index from `ops` and `graphs`.
    names: Vec<&'a str>,
    /// [lane, start_ns, end_ns, name index, seq, label index] per bar.
    ops: Vec<(u32, u64, u64, u32, u64, u32)>,
    /// [bar, [node label indexes]] for each graph launch: its nodes are drawn inside its bar.
    graphs: Vec<(usize, Vec<u32>)>,
    /// [from bar, to bar, kind: 0 event wait, 1 host sync, 2 legacy]
    arrows: Vec<(usize, usize, u8)>,
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

fn page_data<'a>(analysis: &'a Analysis, timeline: &'a Timeline) -> PageData<'a> {
    let groups = timeline.groups();
    let lanes = timeline
        .streams
        .iter()
        .map(|s| Lane {
            title: s.title(),
            detail: s.detail(),
            group: groups.iter().position(|(g, _, _)| *g == s.group()).unwrap_or(0),
        })
        .collect();
    let mut names = Interner { names: Vec::new(), index: std::collections::HashMap::new() };
    let ops = timeline
        .ops
        .iter()
        .map(|op| (op.lane, op.start_ns, op.end_ns, names.index(&op.name), op.seq, names.index(&op.label)))
        .collect();
    let graphs = timeline
        .ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| Some((i, op.nodes.as_ref()?)))
        .map(|(i, nodes)| (i, nodes.iter().map(|n| names.index(n)).collect()))
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
    let race_view = |race: &RaceFinding, timing_only: bool| {
        let mut lines = vec![
            format!(
                "{} of {} bytes by {}",
                action_word(race.later.action),
                race.range.len,
                describe_op(look, &race.later)
            ),
            format!("previous {} by {}", action_word(race.earlier.action), describe_op(look, &race.earlier)),
        ];
        for (label, op) in [("later", &race.later), ("earlier", &race.earlier)] {
            if let Some(source) = look.source(op.site) {
                lines.push(format!("{label} issued at {source}"));
            }
        }
        lines.extend(describe_location(look, race));
        lines.push(format!("why: {}", describe_why(look, race)));
        lines.push(format!("fix: {}", fix_text(look, race)));
        if race.count > 1 {
            lines.push(format!("seen {} times", race.count));
        }
        let (earlier, later) = (timeline.mark(&race.earlier), timeline.mark(&race.later));
        let title = if timing_only {
            format!(
                "ordered only by timing, or by host synchronization the capture cannot see: {}",
                race_title(look, race)
            )
        } else {
            race_title(look, race)
        };
        FindingView {
            title,
            earlier: earlier.map(|m| m.bar),
            later: later.map(|m| m.bar),
            earlier_node: earlier.and_then(|m| m.node),
            later_node: later.and_then(|m| m.node),
            outlined: timeline.outlined_nodes(race).unwrap_or_else(|| TWO_OPERATIONS.to_string()),
            arrows: timeline.arrows_for(race).into_iter().filter_map(|i| page_arrow[i]).collect(),
            lines,
        }
    };
    let mut views: Vec<FindingView> =
        findings.races_by_count().into_iter().take(FINDINGS_SHOWN).map(|race| race_view(race, false)).collect();
    views.extend(findings.timing_only_races.iter().take(FINDINGS_SHOWN).map(|race| race_view(race, true)));
    views.extend(findings.unrecorded_waits.iter().take(FINDINGS_SHOWN).map(|w| FindingView {
        title: format!("wait on a never-recorded event: {}", event_phrase(look, w)),
        earlier: None,
        later: None,
        earlier_node: None,
        later_node: None,
        outlined: TWO_OPERATIONS.to_string(),
        arrows: Vec::new(),
        lines: vec![
            describe_op(look, &w.wait),
            "the wait orders nothing: record the event before waiting on it".into(),
        ],
    }));
    let races = findings.races.len();
    let pairs: u64 = findings.stream_pairs.iter().map(|p| p.pairs).sum();
    let omitted = findings.races.len().saturating_sub(FINDINGS_SHOWN);
    let idle = analysis.stats.streams.saturating_sub(timeline.streams.len());
    PageData {
        trace: &analysis.trace,
        summary: format!(
            "{races} race{}, {} wait{} on never-recorded events, {pairs} unordered cross-stream operation pairs; {} operations on {} streams{}{}{}{}",
            if races == 1 { "" } else { "s" },
            findings.unrecorded_waits.len(),
            if findings.unrecorded_waits.len() == 1 { "" } else { "s" },
            analysis.stats.operations,
            analysis.stats.streams,
            if idle > 0 { format!(" ({idle} that ran nothing drawn as no lane)") } else { String::new() },
            if analysis.stats.has_addresses { "" } else { " (no addresses: tier T0)" },
            match findings.timing_only_races.len() {
                0 => String::new(),
                n => format!("; {n} race{} ordered only by timing, or by host synchronization the capture cannot see", if n == 1 { "" } else { "s" }),
            },
            if omitted > 0 { format!("; the {FINDINGS_SHOWN} most frequent races are listed, {omitted} more in the JSON report") } else { String::new() }
        ),
        gpu_time: timeline.gpu_time,
        groups: groups.iter().map(|(g, _, _)| g.label()).collect(),
        lanes,
        names: names.names,
        ops,
        graphs,
        arrows,
        findings: views,
    }
}

/// JSON that can sit inside a `<script>` element: no `<`, `>` or `&` can end it or start a tag.
fn script_safe_json<T: Serialize>(value: &T) -> io::Result<String> {
    let json = serde_json::to_string(value).map_err(io::Error::other)?;
    Ok(json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026"))
}

const STYLE: &str = r##"
body { margin: 0; font: 13px system-ui, sans-serif; color: #1d2330; display: grid; grid-template-columns: 1fr 380px; grid-template-rows: auto 1fr; height: 100vh; }
header { grid-column: 1 / 3; padding: 8px 12px; border-bottom: 1px solid #d8dce5; }
header h1 { font-size: 15px; margin: 0 0 2px 0; }
#timeline { position: relative; overflow: hidden; border-right: 1px solid #d8dce5; }
canvas { display: block; width: 100%; height: 100%; cursor: grab; }
aside { overflow: auto; padding: 8px 12px; }
#findings li { cursor: pointer; padding: 4px 6px; border-radius: 4px; margin-bottom: 2px; list-style: none; }
#findings li:hover { background: #eef1f7; }
#findings li.selected { background: #fde8e8; }
#findings { padding: 0; margin: 0; }
#details { white-space: pre-wrap; overflow-wrap: anywhere; margin-top: 10px; border-top: 1px solid #d8dce5; padding-top: 8px; }
.hint { color: #687085; }
"##;

const SCRIPT: &str = r##"
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const canvas = document.getElementById("canvas");
const ctx = canvas.getContext("2d");
const LANE_H = 30, GROUP_H = 18, LABEL_W = 250, AXIS_H = 30, LEGEND_H = 34;
let t0 = Infinity, t1 = -Infinity;
for (const op of data.ops) { if (op[1] < t0) t0 = op[1]; if (op[2] > t1) t1 = op[2]; }
if (!isFinite(t0)) { t0 = 0; t1 = 1; }
if (t1 <= t0) t1 = t0 + 1;
let view = { start: t0, end: t1 + (t1 - t0) * 0.02 };
let selected = null;
// Each lane's top: group headers sit above their first lane.
const laneY = [];
{
  let y = AXIS_H, group = -1;
  data.lanes.forEach((lane, li) => {
    if (lane.group !== group) { group = lane.group; y += GROUP_H; }
    laneY[li] = y; y += LANE_H;
  });
}
// Bars per lane, sorted by start, for level-of-detail drawing.
const lanes = data.lanes.map(() => []);
data.ops.forEach((op, i) => { if (lanes[op[0]]) lanes[op[0]].push(i); });
for (const l of lanes) l.sort((a, b) => data.ops[a][1] - data.ops[b][1]);
const graphs = new Map(data.graphs.map(([bar, nodes]) => [bar, nodes]));
const colors = ["#4a72c9", "#2f9e77", "#c9822b", "#8a5cc2", "#c2475c", "#3d9bb5"];
function x(t, w) { return LABEL_W + (t - view.start) / (view.end - view.start) * (w - LABEL_W); }
// A round step for about `count` ticks over `span`.
function step(span, count) {
  const raw = span / count, p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(k => k * p).find(s => s >= raw) || raw;
}
function tickText(v) {
  if (!data.gpu_time) return "#" + Math.round(v / 1000);
  const ns = v - t0;
  if (Math.abs(ns) >= 1e6) return (ns / 1e6).toFixed(ns % 1e6 === 0 ? 0 : 2) + " ms";
  if (Math.abs(ns) >= 1e3) return (ns / 1e3).toFixed(ns % 1e3 === 0 ? 0 : 1) + " µs";
  return ns.toFixed(0) + " ns";
}
function drawAxis(w) {
  ctx.fillStyle = "#687085"; ctx.strokeStyle = "#c8cdd8"; ctx.font = "11px system-ui, sans-serif";
  ctx.fillText(data.gpu_time ? "GPU time since the first operation" : "issue order (no GPU times): operation #", 6, 14, LABEL_W - 12);
  const span = view.end - view.start, s = data.gpu_time ? step(span, 8) : Math.max(1000, step(span, 8));
  const base = data.gpu_time ? t0 : 0;
  for (let v = base + Math.ceil((view.start - base) / s) * s; v <= view.end; v += s) {
    const px = x(v, w);
    if (px < LABEL_W) continue;
    ctx.beginPath(); ctx.moveTo(px, AXIS_H - 6); ctx.lineTo(px, canvas.clientHeight - LEGEND_H); ctx.stroke();
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
function draw() {
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  canvas.width = w * dpr; canvas.height = h * dpr; ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  drawAxis(w);
  let group = -1;
  data.lanes.forEach((lane, li) => {
    const y = laneY[li];
    if (lane.group !== group) {
      group = lane.group;
      ctx.fillStyle = "#e9ecf3"; ctx.fillRect(0, y - GROUP_H, w, GROUP_H);
      ctx.fillStyle = "#1d2330"; ctx.font = "bold 11px system-ui, sans-serif";
      ctx.fillText(data.groups[group], 6, y - 5);
    }
    ctx.fillStyle = li % 2 ? "#f7f8fb" : "#ffffff"; ctx.fillRect(0, y, w, LANE_H);
    ctx.fillStyle = "#1d2330"; ctx.font = "12px system-ui, sans-serif";
    ctx.fillText(lane.title, 6, y + 13, LABEL_W - 12);
    ctx.fillStyle = "#687085"; ctx.font = "10px system-ui, sans-serif";
    ctx.fillText(lane.detail, 6, y + 25, LABEL_W - 12);
    ctx.font = "11px system-ui, sans-serif";
    const color = colors[li % colors.length];
    let lastPx = -1;
    for (const i of lanes[li]) {
      const op = data.ops[i];
      if (op[2] < view.start || op[1] > view.end) continue;
      const { a, b } = barRect(i, w);
      // Level of detail: at most one bar per pixel column.
      if (Math.floor(b) <= lastPx) continue;
      const bw = Math.max(1, b - a);
      ctx.fillStyle = color; ctx.fillRect(a, y + 5, bw, LANE_H - 10);
      lastPx = Math.floor(b);
      const nodes = shownNodes(i, w);
      if (nodes) {
        // A graph launch: its nodes side by side inside the block (the parts left of the lane labels hidden).
        nodes.forEach((n, k) => {
          const [na, nb] = nodeSpan(i, k, nodes.length, w), left = Math.max(a, na), nw = Math.min(b, nb) - left;
          if (nw <= 0) return;
          ctx.fillStyle = "#ffffff"; if (na >= a) ctx.fillRect(na, y + 5, 1, LANE_H - 10);
          const text = data.names[n];
          if (nw > 24 && ctx.measureText(text).width < nw - 4) ctx.fillText(text, left + 3, y + 19);
        });
      } else if (bw > 24) {
        const text = data.names[op[5]];
        if (ctx.measureText(text).width < bw - 4) { ctx.fillStyle = "#ffffff"; ctx.fillText(text, a + 2, y + 19); }
      }
    }
  });
  // Arrows and selections stay inside the plot, clear of the lane labels.
  ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W, 0, w - LABEL_W, h); ctx.clip();
  const marked = new Set(selected ? selected.arrows : []);
  const visible = data.arrows.filter(([f, t]) => data.ops[t][1] >= view.start && data.ops[f][2] <= view.end);
  const arrow = ([f, t, kind], strong) => {
    const from = data.ops[f], to = data.ops[t];
    const fx = x(from[2], w), fy = laneY[from[0]] + LANE_H / 2;
    const tx = x(to[1], w), ty = laneY[to[0]] + LANE_H / 2;
    ctx.strokeStyle = ctx.fillStyle = strong ? "#1d2330" : (kind === 0 ? "#7d8597" : "#b8bfcc");
    ctx.lineWidth = strong ? 2.5 : 1; ctx.setLineDash(strong ? [6, 3] : []);
    ctx.beginPath(); ctx.moveTo(fx, fy); ctx.lineTo(tx, ty); ctx.stroke();
    ctx.setLineDash([]);
    ctx.beginPath(); ctx.arc(tx, ty, strong ? 4 : 2.5, 0, 2 * Math.PI); ctx.fill();
  };
  if (visible.length < 3000) for (const a of visible) arrow(a, false);
  for (const i of marked) arrow(data.arrows[i], true);
  if (selected) {
    ctx.strokeStyle = "#d0021b"; ctx.lineWidth = 2;
    const ends = [];
    for (const [i, node] of [[selected.earlier, selected.earlier_node], [selected.later, selected.later_node]]) {
      if (i === null || i === undefined) continue;
      const op = data.ops[i], y = laneY[op[0]];
      // A node of a graph launch is outlined inside the launch's block, apart from its neighbours.
      const nodes = node === null || node === undefined ? null : shownNodes(i, w);
      if (nodes) {
        const [a, b] = nodeSpan(i, node, nodes.length, w);
        ctx.strokeRect(a + 2, y + 4, Math.max(2, b - a - 4), LANE_H - 8);
        ends.push([a, b, y + LANE_H / 2, i]);
      } else {
        const a = x(op[1], w), b = x(op[2], w);
        ctx.strokeRect(Math.max(LABEL_W, a) - 3, y + 2, Math.max(3, b - a) + 6, LANE_H - 4);
        ends.push([a, b, y + LANE_H / 2, i]);
      }
    }
    // Two operations are joined by a dotted line; two nodes of one block need none.
    if (ends.length === 2 && ends[0][3] !== ends[1][3]) {
      ctx.setLineDash([2, 3]); ctx.beginPath(); ctx.moveTo(ends[0][1], ends[0][2]); ctx.lineTo(ends[1][0], ends[1][2]); ctx.stroke(); ctx.setLineDash([]);
    }
  }
  ctx.restore();
  drawLegend(w, h);
}
function drawLegend(w, h) {
  const y = h - LEGEND_H + 4;
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, h - LEGEND_H, w, LEGEND_H);
  ctx.font = "11px system-ui, sans-serif";
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
}
function select(index) {
  const f = data.findings[index];
  selected = f;
  document.querySelectorAll("#findings li").forEach((li, i) => li.classList.toggle("selected", i === index));
  const details = document.getElementById("details");
  details.textContent = f.title + "\n\n" + f.lines.join("\n");
  const seqs = [f.earlier, f.later].filter(i => i !== null && i !== undefined);
  details.dataset.selected = seqs.map(i => data.ops[i][4]).join(",");
  details.dataset.outlined = f.outlined;
  const shown = seqs.concat(f.arrows.flatMap(a => [data.arrows[a][0]]));
  if (shown.length) {
    let a = Math.min(...shown.map(i => data.ops[i][1])), b = Math.max(...shown.map(i => data.ops[i][2]));
    const pad = Math.max((b - a) * 0.5, 1000);
    view = { start: a - pad, end: b + pad };
  }
  draw();
}
const list = document.getElementById("findings");
data.findings.forEach((f, i) => {
  const li = document.createElement("li");
  li.textContent = f.title;
  li.addEventListener("click", () => select(i));
  list.appendChild(li);
});
if (!data.findings.length) {
  const li = document.createElement("li"); li.className = "hint"; li.textContent = "No findings."; list.appendChild(li);
}
const laneList = document.getElementById("lanes");
data.lanes.forEach(l => { const li = document.createElement("li"); li.textContent = l.title + " (" + l.detail + ", " + data.groups[l.group] + ")"; laneList.appendChild(li); });
document.getElementById("title").textContent = "streamtrace: " + data.trace;
document.getElementById("summary").textContent = data.summary;
canvas.addEventListener("wheel", e => {
  e.preventDefault();
  const w = canvas.clientWidth, t = view.start + (e.offsetX - LABEL_W) / (w - LABEL_W) * (view.end - view.start);
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
const m = /finding=(\d+)/.exec(location.hash);
draw();
// How long the page took to show the timeline (benches/html_report.sh reads it).
document.body.dataset.firstDrawMs = performance.now().toFixed(1);
if (m && data.findings[+m[1]]) select(+m[1]);
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
             <body><header><h1 id=\"title\"></h1><div id=\"summary\"></div><span class=\"hint\">wheel: zoom, drag: pan, pick a finding to see its two operations</span></header>\n\
             <div id=\"timeline\"><canvas id=\"canvas\"></canvas></div>\n\
             <aside><h2>Findings</h2><ul id=\"findings\"></ul><div id=\"details\" class=\"hint\">No finding picked.</div>\
             <h2>Streams</h2><ul id=\"lanes\"></ul></aside>\n\
             <script id=\"data\" type=\"application/json\">{data}</script>\n<script>{SCRIPT}</script></body></html>\n"
        )
    }
}
