//! A self-contained HTML report: a canvas timeline with one lane per stream (grouped by process), bars for
//! operations, happens-before arrows, and the findings beside it; picking a finding zooms to its two
//! operations. Everything is inline; nothing is fetched. Every string from the trace reaches the page as JSON
//! data and is shown through `textContent`, never parsed as HTML.

use std::io;

use serde::Serialize;

use crate::timeline::Timeline;
use super::{describe_location, describe_op, describe_why, Report};
use crate::analysis::Analysis;
use crate::findings::EdgeKind;

pub struct HtmlReport;

/// Findings listed in the page, most frequent first; the JSON report has them all. A synthetic trace that
/// races everywhere would otherwise put tens of megabytes of sentences into the page.
const FINDINGS_SHOWN: usize = 1000;

#[derive(Serialize)]
struct Lane {
    label: String,
    process: u32,
}

#[derive(Serialize)]
struct FindingView {
    title: String,
    /// Indexes of the two bars in `ops`, when both ran on streams.
    earlier: Option<usize>,
    later: Option<usize>,
    lines: Vec<String>,
}

#[derive(Serialize)]
struct PageData<'a> {
    trace: &'a str,
    summary: String,
    gpu_time: bool,
    lanes: Vec<Lane>,
    /// Interned operation names, referenced by index from `ops`.
    names: Vec<&'a str>,
    /// [lane, start_ns, end_ns, name index, seq] per bar, in lane order of appearance.
    ops: Vec<(u32, u64, u64, u32, u64)>,
    /// [from bar, to bar, kind: 0 event wait, 1 host sync, 2 legacy]
    arrows: Vec<(usize, usize, u8)>,
    findings: Vec<FindingView>,
}

fn page_data<'a>(analysis: &'a Analysis, timeline: &'a Timeline) -> PageData<'a> {
    let lanes = timeline.streams.iter().map(|s| Lane { label: s.label(), process: s.process }).collect();
    let mut names: Vec<&str> = Vec::new();
    let mut index: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let ops = timeline
        .ops
        .iter()
        .map(|op| {
            let next = names.len() as u32;
            let name = *index.entry(&op.name).or_insert_with(|| {
                names.push(&op.name);
                next
            });
            (op.stream, op.start_ns, op.end_ns, name, op.seq)
        })
        .collect();
    let arrows = timeline
        .arrows
        .iter()
        .filter_map(|a| {
            let kind = match a.kind {
                EdgeKind::EventWait => 0,
                EdgeKind::HostSync => 1,
                EdgeKind::LegacyDefault => 2,
            };
            a.to.map(|to| (a.from, to, kind))
        })
        .collect();
    let findings = &analysis.findings;
    let mut views: Vec<FindingView> = findings
        .races_by_count()
        .into_iter()
        .take(FINDINGS_SHOWN)
        .map(|race| {
            let mut lines = vec![
                format!("{} of {} bytes by {}", race.later.action_word(), race.range.len, describe_op(&race.later)),
                format!("previous {} by {}", race.earlier.action_word(), describe_op(&race.earlier)),
            ];
            for (label, op) in [("later", &race.later), ("earlier", &race.earlier)] {
                if let Some(source) = &op.site.source {
                    lines.push(format!("{label} issued at {source}"));
                }
            }
            lines.extend(describe_location(race));
            lines.push(format!("why: {}", describe_why(race)));
            lines.push(format!("fix: {}", race.fix));
            if race.count > 1 {
                lines.push(format!("seen {} times", race.count));
            }
            FindingView {
                title: format!("{} race: {} / {}", race.kind.as_str(), race.earlier.site.name, race.later.site.name),
                earlier: timeline.op_index(race.earlier.seq),
                later: timeline.op_index(race.later.seq),
                lines,
            }
        })
        .collect();
    views.extend(findings.unrecorded_waits.iter().take(FINDINGS_SHOWN).map(|w| FindingView {
        title: format!("wait on never-recorded event {}", w.event),
        earlier: None,
        later: None,
        lines: vec![describe_op(&w.wait), "the wait orders nothing: record the event before waiting on it".into()],
    }));
    let races = findings.races.len();
    let pairs: u64 = findings.stream_pairs.iter().map(|p| p.pairs).sum();
    let omitted = findings.races.len().saturating_sub(FINDINGS_SHOWN);
    PageData {
        trace: &analysis.trace,
        summary: format!(
            "{races} race{}, {} wait{} on never-recorded events, {pairs} unordered cross-stream operation pairs; {} operations on {} streams{}{}",
            if races == 1 { "" } else { "s" },
            findings.unrecorded_waits.len(),
            if findings.unrecorded_waits.len() == 1 { "" } else { "s" },
            analysis.stats.operations,
            analysis.stats.streams,
            if analysis.stats.has_addresses { "" } else { " (no addresses: tier T0)" },
            if omitted > 0 { format!("; the {FINDINGS_SHOWN} most frequent races are listed, {omitted} more in the JSON report") } else { String::new() }
        ),
        gpu_time: timeline.gpu_time,
        lanes,
        names,
        ops,
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
#details { white-space: pre-wrap; margin-top: 10px; border-top: 1px solid #d8dce5; padding-top: 8px; }
.hint { color: #687085; }
"##;

const SCRIPT: &str = r##"
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const canvas = document.getElementById("canvas");
const ctx = canvas.getContext("2d");
const LANE_H = 22, LABEL_W = 230, TOP = 18;
let t0 = Infinity, t1 = -Infinity;
for (const op of data.ops) { if (op[1] < t0) t0 = op[1]; if (op[2] > t1) t1 = op[2]; }
if (!isFinite(t0)) { t0 = 0; t1 = 1; }
if (t1 <= t0) t1 = t0 + 1;
let view = { start: t0, end: t1 + (t1 - t0) * 0.02 };
let selected = null;
// Bars per lane, sorted by start, for level-of-detail drawing.
const lanes = data.lanes.map(() => []);
data.ops.forEach((op, i) => { if (lanes[op[0]]) lanes[op[0]].push(i); });
for (const l of lanes) l.sort((a, b) => data.ops[a][1] - data.ops[b][1]);
const colors = ["#4a72c9", "#2f9e77", "#c9822b", "#8a5cc2", "#c2475c", "#3d9bb5"];
function x(t, w) { return LABEL_W + (t - view.start) / (view.end - view.start) * (w - LABEL_W); }
function draw() {
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  canvas.width = w * dpr; canvas.height = h * dpr; ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = "11px system-ui, sans-serif";
  data.lanes.forEach((lane, li) => {
    const y = TOP + li * LANE_H;
    ctx.fillStyle = li % 2 ? "#f7f8fb" : "#ffffff"; ctx.fillRect(0, y, w, LANE_H);
    ctx.fillStyle = "#1d2330"; ctx.fillText(lane.label, 6, y + 15, LABEL_W - 10);
    ctx.fillStyle = colors[li % colors.length];
    let lastPx = -1;
    for (const i of lanes[li]) {
      const op = data.ops[i];
      if (op[2] < view.start || op[1] > view.end) continue;
      const a = Math.max(LABEL_W, x(op[1], w)), b = Math.min(w, x(op[2], w));
      // Level of detail: at most one bar per pixel column.
      if (Math.floor(b) <= lastPx) continue;
      ctx.fillRect(a, y + 4, Math.max(1, b - a), LANE_H - 8);
      lastPx = Math.floor(b);
    }
  });
  // Arrows and selections stay inside the plot, clear of the lane labels.
  ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W, 0, w - LABEL_W, h); ctx.clip();
  ctx.strokeStyle = "#1d2330"; ctx.lineWidth = 1;
  const visible = data.arrows.filter(([f, t]) => data.ops[t][1] >= view.start && data.ops[f][2] <= view.end);
  if (visible.length < 3000) {
    for (const [f, t, kind] of visible) {
      const from = data.ops[f], to = data.ops[t];
      const fx = x(from[2], w), fy = TOP + from[0] * LANE_H + LANE_H / 2;
      const tx = x(to[1], w), ty = TOP + to[0] * LANE_H + LANE_H / 2;
      ctx.strokeStyle = kind === 0 ? "#1d2330" : "#9aa3b5";
      ctx.beginPath(); ctx.moveTo(fx, fy); ctx.lineTo(tx, ty); ctx.stroke();
      ctx.beginPath(); ctx.arc(tx, ty, 2.5, 0, 2 * Math.PI); ctx.fill();
    }
  }
  if (selected) {
    ctx.strokeStyle = "#d0021b"; ctx.lineWidth = 2;
    for (const i of [selected.earlier, selected.later]) {
      if (i === null || i === undefined) continue;
      const op = data.ops[i], a = x(op[1], w), b = x(op[2], w), y = TOP + op[0] * LANE_H;
      ctx.strokeRect(Math.max(LABEL_W, a) - 2, y + 2, Math.max(3, b - a) + 4, LANE_H - 4);
    }
  }
  ctx.restore();
  ctx.fillStyle = "#687085";
  ctx.fillText(data.gpu_time ? "GPU time" : "issue order (no GPU times in this trace)", LABEL_W + 4, 12);
}
function select(index) {
  const f = data.findings[index];
  selected = f;
  document.querySelectorAll("#findings li").forEach((li, i) => li.classList.toggle("selected", i === index));
  const details = document.getElementById("details");
  details.textContent = f.title + "\n\n" + f.lines.join("\n");
  const seqs = [f.earlier, f.later].filter(i => i !== null && i !== undefined);
  details.dataset.selected = seqs.map(i => data.ops[i][4]).join(",");
  if (seqs.length) {
    let a = Math.min(...seqs.map(i => data.ops[i][1])), b = Math.max(...seqs.map(i => data.ops[i][2]));
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
data.lanes.forEach(l => { const li = document.createElement("li"); li.textContent = l.label; laneList.appendChild(li); });
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
