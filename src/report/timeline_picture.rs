//! The timeline as a picture (`analyze --png`): a time axis (GPU time, or issue order when the trace has no GPU
//! times, said on the axis), one lane per stream that ran something, named as people know it and grouped by
//! process and device, bars labelled with short op or kernel names where they fit (a graph launch's nodes
//! inside its bar), happens-before arrows in grey, and the most frequent races numbered: both operations
//! outlined in red (two nodes of one graph launch inside its bar), the last hand-over between their streams
//! (which came too early) in black, and a legend with each numbered race's title below.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::png::render;
use super::race_title;
use crate::analysis::Analysis;
use crate::resolve::Lookup;
use crate::timeline::{Mark, Timeline, TimelineOp};

const WIDTH: u32 = 1600;
const LABEL_W: i32 = 300;
const TITLE_H: u32 = 36;
const AXIS_H: u32 = 24;
const GROUP_H: u32 = 20;
const LANE_H: u32 = 32;
const LEGEND_H: u32 = 30;
const RACE_ROW_H: u32 = 18;
/// Races numbered in the picture, the most frequent first (the reports in text or JSON have them all).
const RACES_SHOWN: usize = 9;
/// Arrows are drawn while there are at most this many: past it they would cover the bars.
const ARROWS_DRAWN: usize = 2000;

const INK: RGBColor = RGBColor(29, 35, 48);
const GREY: RGBColor = RGBColor(104, 112, 133);
const PALETTE: [RGBColor; 4] =
    [RGBColor(74, 114, 201), RGBColor(47, 158, 119), RGBColor(201, 130, 43), RGBColor(138, 92, 194)];

/// The picture's height for `lanes` lanes in `groups` groups and `races` numbered races.
pub fn timeline_height(lanes: usize, groups: usize, races: usize) -> u32 {
    TITLE_H
        + AXIS_H
        + groups as u32 * GROUP_H
        + lanes.max(1) as u32 * LANE_H
        + 10
        + LEGEND_H
        + races.min(RACES_SHOWN) as u32 * RACE_ROW_H
        + 10
}

/// A round step giving about `count` ticks over `span`.
fn tick_step(span: u64, count: u64) -> u64 {
    let raw = (span / count).max(1);
    let mut power = 1u64;
    while power.saturating_mul(10) <= raw {
        power *= 10;
    }
    [1, 2, 5, 10].iter().map(|k| k * power).find(|s| *s >= raw).unwrap_or(raw)
}

/// A tick's text: time since the first operation, or an operation number in issue order.
fn tick_text(value: u64, t0: u64, gpu_time: bool) -> String {
    if !gpu_time {
        return format!("#{}", value / 1000);
    }
    let ns = value - t0;
    match ns {
        n if n >= 1_000_000 => format!("{:.2} ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} us", n as f64 / 1e3),
        n => format!("{n} ns"),
    }
}

/// Where things go: the time scale and each lane's top.
struct Layout {
    t0: u64,
    t1: u64,
    lane_top: Vec<i32>,
    plot_bottom: i32,
}

impl Layout {
    fn new(timeline: &Timeline) -> Layout {
        let (t0, t1) = timeline.ops.iter().fold((u64::MAX, 0u64), |(a, b), op| (a.min(op.start_ns), b.max(op.end_ns)));
        let (t0, t1) = if t0 > t1 { (0, 1) } else { (t0, t1.max(t0 + 1)) };
        // A little room after the last bar.
        let t1 = t1 + (t1 - t0) / 50;
        let mut lane_top = Vec::with_capacity(timeline.streams.len());
        let mut y = (TITLE_H + AXIS_H) as i32;
        let mut group = None;
        for stream in &timeline.streams {
            if group != Some(stream.group()) {
                group = Some(stream.group());
                y += GROUP_H as i32;
            }
            lane_top.push(y);
            y += LANE_H as i32;
        }
        Layout { t0, t1, lane_top, plot_bottom: y }
    }

    fn x(&self, t: u64) -> i32 {
        let plot_w = (WIDTH as i32 - LABEL_W - 20) as f64;
        LABEL_W + (t.saturating_sub(self.t0) as f64 / (self.t1 - self.t0) as f64 * plot_w) as i32
    }

    fn lane_middle(&self, lane: u32) -> i32 {
        self.lane_top.get(lane as usize).copied().unwrap_or(0) + LANE_H as i32 / 2
    }
}

/// The pixels a bar spans, at least one.
fn bar_span(layout: &Layout, op: &TimelineOp) -> (i32, i32) {
    let a = layout.x(op.start_ns);
    (a, layout.x(op.end_ns).max(a + 1))
}

/// The pixels of node `k` of the `n` drawn side by side inside a graph launch's bar spanning `a` to `b`; None
/// when the bar is too narrow to show its nodes (it is drawn, and outlined, whole).
fn node_span(a: i32, b: i32, k: usize, n: usize) -> Option<(i32, i32)> {
    if n == 0 || k >= n || b - a <= 4 * n as i32 {
        return None;
    }
    let node_w = (b - a) / n as i32;
    let start = a + k as i32 * node_w;
    Some((start, start + node_w))
}

/// The pixels a race's mark spans: its node inside the launch's bar when it is one and shown, else the bar.
fn mark_span(timeline: &Timeline, layout: &Layout, mark: Mark) -> (i32, i32) {
    let op = &timeline.ops[mark.bar];
    let (a, b) = bar_span(layout, op);
    let nodes = op.nodes.as_ref().map_or(0, |nodes| nodes.len());
    mark.node.and_then(|k| node_span(a, b, k, nodes)).unwrap_or((a, b))
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn text(area: &Area, text: &str, at: (i32, i32), size: u32, color: &RGBColor) -> anyhow::Result<()> {
    area.draw(&Text::new(text.to_string(), at, ("sans-serif", size).into_font().color(color)))
        .context("drawing text")?;
    Ok(())
}

/// Whether `label` fits in `width` pixels at `size`.
fn fits(area: &Area, label: &str, size: u32, width: i32) -> bool {
    width > 20
        && area
            .estimate_text_size(label, &("sans-serif", size).into_font().into_text_style(area))
            .is_ok_and(|(w, _)| (w as i32) < width - 4)
}

pub fn write_timeline(analysis: &Analysis, path: &Path) -> anyhow::Result<()> {
    let empty = Timeline::default();
    let timeline = analysis.timeline.as_ref().unwrap_or(&empty);
    let groups = timeline.groups();
    let races: Vec<_> = analysis.findings.all_races_by_count().into_iter().take(RACES_SHOWN).collect();
    let height = timeline_height(timeline.streams.len(), groups.len(), races.len());
    let layout = Layout::new(timeline);
    render(path, (WIDTH, height), |root| {
        let idle = analysis.stats.streams.saturating_sub(timeline.streams.len());
        let title = format!(
            "{}: {} race{}, {} operations on {} streams{}",
            analysis.trace,
            analysis.findings.all_races().count(),
            if analysis.findings.all_races().count() == 1 { "" } else { "s" },
            analysis.stats.operations,
            analysis.stats.streams,
            if idle > 0 { format!(" ({idle} that ran nothing drawn as no lane)") } else { String::new() },
        );
        root.draw(&Text::new(title, (10, 10), ("sans-serif", 18).into_font())).context("drawing the title")?;
        draw_axis(root, timeline, &layout)?;
        draw_lanes(root, timeline, &layout, &groups)?;
        draw_bars(root, timeline, &layout)?;
        draw_arrows(root, timeline, &layout)?;
        draw_races(root, timeline, &layout, &races)?;
        draw_legend(root, analysis.lookup(), timeline, &layout, &races)
    })
}

fn draw_axis(root: &Area, timeline: &Timeline, layout: &Layout) -> anyhow::Result<()> {
    let axis_y = TITLE_H as i32;
    let what = if timeline.gpu_time {
        "GPU time since the first operation"
    } else {
        "issue order (no GPU times): operation #"
    };
    text(root, what, (8, axis_y + 4), 12, &GREY)?;
    let step = tick_step(layout.t1 - layout.t0, 10);
    let step = if timeline.gpu_time { step } else { step.max(1000) / 1000 * 1000 };
    let base = if timeline.gpu_time { layout.t0 } else { 0 };
    let mut value = base + (layout.t0.saturating_sub(base)).div_ceil(step) * step;
    while value <= layout.t1 {
        let x = layout.x(value);
        root.draw(&PathElement::new(
            vec![(x, axis_y + AXIS_H as i32 - 4), (x, layout.plot_bottom)],
            RGBColor(214, 218, 226),
        ))?;
        text(root, &tick_text(value, layout.t0, timeline.gpu_time), (x + 3, axis_y + 4), 11, &GREY)?;
        value += step;
    }
    Ok(())
}

fn draw_lanes(
    root: &Area,
    timeline: &Timeline,
    layout: &Layout,
    groups: &[(crate::timeline::LaneGroup, usize, usize)],
) -> anyhow::Result<()> {
    for (group, first, _) in groups {
        let y = layout.lane_top[*first] - GROUP_H as i32;
        root.draw(&Rectangle::new([(0, y), (WIDTH as i32, y + GROUP_H as i32)], RGBColor(233, 236, 243).filled()))?;
        text(root, &group.label(), (8, y + 4), 12, &INK)?;
    }
    for (lane, stream) in timeline.streams.iter().enumerate() {
        let y = layout.lane_top[lane];
        if lane % 2 == 1 {
            root.draw(&Rectangle::new([(0, y), (WIDTH as i32, y + LANE_H as i32)], RGBColor(246, 247, 250).filled()))?;
        }
        text(root, &super::png::fit(&stream.title(), 44), (8, y + 3), 13, &INK)?;
        text(root, &super::png::fit(&stream.detail(), 52), (8, y + 18), 10, &GREY)?;
    }
    Ok(())
}

fn draw_bars(root: &Area, timeline: &Timeline, layout: &Layout) -> anyhow::Result<()> {
    // At most one bar per pixel column per lane keeps large traces quick to draw.
    let mut last_px = vec![i32::MIN; timeline.streams.len()];
    for op in &timeline.ops {
        let lane = op.lane as usize;
        let (a, b) = bar_span(layout, op);
        if lane >= last_px.len() || b <= last_px[lane] {
            continue;
        }
        last_px[lane] = b;
        let y = layout.lane_top[lane];
        root.draw(&Rectangle::new([(a, y + 5), (b, y + LANE_H as i32 - 5)], PALETTE[lane % PALETTE.len()].filled()))?;
        let label_y = y + LANE_H as i32 / 2 - 6;
        let nodes = op.nodes.as_deref().unwrap_or_default();
        if node_span(a, b, 0, nodes.len()).is_some() {
            // A graph launch: its nodes side by side inside the block.
            for (k, node) in nodes.iter().enumerate() {
                let Some((nx, end)) = node_span(a, b, k, nodes.len()) else { continue };
                root.draw(&Rectangle::new([(nx, y + 5), (nx + 1, y + LANE_H as i32 - 5)], WHITE.filled()))?;
                if fits(root, node, 11, end - nx) {
                    text(root, node, (nx + 3, label_y), 11, &WHITE)?;
                }
            }
        } else if fits(root, &op.label, 11, b - a) {
            text(root, &op.label, (a + 3, label_y), 11, &WHITE)?;
        }
    }
    Ok(())
}

fn draw_arrows(root: &Area, timeline: &Timeline, layout: &Layout) -> anyhow::Result<()> {
    let drawn: Vec<_> =
        timeline.arrows.iter().filter_map(|a| Some((&timeline.ops[a.from], &timeline.ops[a.to?]))).collect();
    if drawn.len() > ARROWS_DRAWN {
        return Ok(());
    }
    for (from, to) in drawn {
        let start = (layout.x(from.end_ns), layout.lane_middle(from.lane));
        let end = (layout.x(to.start_ns), layout.lane_middle(to.lane));
        root.draw(&PathElement::new(vec![start, end], RGBColor(160, 167, 182)))?;
        root.draw(&Circle::new(end, 2, RGBColor(160, 167, 182).filled()))?;
    }
    Ok(())
}

fn draw_races(
    root: &Area,
    timeline: &Timeline,
    layout: &Layout,
    races: &[&crate::findings::RaceFinding],
) -> anyhow::Result<()> {
    for (number, race) in races.iter().enumerate() {
        for arrow in timeline.arrows_for(race) {
            let arrow = &timeline.arrows[arrow];
            let Some(to) = arrow.to else { continue };
            let (from, to) = (&timeline.ops[arrow.from], &timeline.ops[to]);
            let start = (layout.x(from.end_ns), layout.lane_middle(from.lane));
            let end = (layout.x(to.start_ns), layout.lane_middle(to.lane));
            root.draw(&PathElement::new(vec![start, end], INK.stroke_width(3)))?;
            root.draw(&Circle::new(end, 4, INK.filled()))?;
        }
        let (Some(e), Some(l)) = (timeline.mark(&race.earlier), timeline.mark(&race.later)) else { continue };
        let (e_span, l_span) = (mark_span(timeline, layout, e), mark_span(timeline, layout, l));
        for (mark, (a, b)) in [(e, e_span), (l, l_span)] {
            let y = layout.lane_top[timeline.ops[mark.bar].lane as usize];
            // A node sits between its neighbours in the block: outlined inside its own part (two pixels in,
            // where it is wide enough), apart from a neighbour's outline.
            let (pad, inset) = match mark.node {
                Some(_) if b - a > 6 => (-2, 4),
                Some(_) => (0, 4),
                None => (3, 2),
            };
            root.draw(&Rectangle::new(
                [(a - pad, y + inset), (b + pad, y + LANE_H as i32 - inset)],
                RED.stroke_width(2),
            ))?;
        }
        let (e_lane, l_lane) = (timeline.ops[e.bar].lane, timeline.ops[l.bar].lane);
        if e.bar != l.bar {
            let from = (e_span.1 + 3, layout.lane_middle(e_lane));
            let to = (l_span.0 - 3, layout.lane_middle(l_lane));
            root.draw(&PathElement::new(vec![from, to], RED.stroke_width(1)))?;
        }
        // The race's number, after the later operation's bar (a node's neighbours fill the bar up to its end).
        let tag = (bar_span(layout, &timeline.ops[l.bar]).1 + 5, layout.lane_top[l_lane as usize] + 2);
        root.draw(&Rectangle::new([tag, (tag.0 + 14, tag.1 + 14)], RED.filled()))?;
        root.draw(&Text::new(
            (number + 1).to_string(),
            (tag.0 + 7, tag.1 + 7),
            ("sans-serif", 11).into_font().color(&WHITE).pos(Pos::new(HPos::Center, VPos::Center)),
        ))?;
    }
    Ok(())
}

fn draw_legend(
    root: &Area,
    look: Lookup,
    timeline: &Timeline,
    layout: &Layout,
    races: &[&crate::findings::RaceFinding],
) -> anyhow::Result<()> {
    let y = layout.plot_bottom + 14;
    let mut x = 10;
    root.draw(&Rectangle::new([(x, y), (x + 18, y + 12)], RED.stroke_width(2)))?;
    text(root, "a race's two operations, numbered as listed below", (x + 26, y), 12, &INK)?;
    x += 360;
    root.draw(&PathElement::new(vec![(x, y + 6), (x + 22, y + 6)], INK.stroke_width(3)))?;
    text(root, "the last hand-over between their streams (it came too early)", (x + 30, y), 12, &INK)?;
    x += 420;
    root.draw(&PathElement::new(vec![(x, y + 6), (x + 22, y + 6)], RGBColor(160, 167, 182)))?;
    text(root, "other happens-before edges (event waits, synchronizations)", (x + 30, y), 12, &INK)?;
    for (number, race) in races.iter().enumerate() {
        let row = layout.plot_bottom + 10 + LEGEND_H as i32 + number as i32 * RACE_ROW_H as i32;
        let count = if race.count > 1 { format!(" (seen {} times)", race.count) } else { String::new() };
        let nodes = timeline.outlined_nodes(race).map_or(String::new(), |nodes| format!(": {nodes}"));
        let title = super::png::fit(&format!("{}{nodes}", race_title(look, race)), 170);
        text(root, &format!("{}. {title}{count}", number + 1), (10, row), 12, &INK)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_say_what_they_count() {
        assert_eq!(tick_step(1_000_000, 10), 100_000);
        assert_eq!(tick_step(1_300_000, 10), 200_000);
        assert_eq!(tick_step(7, 10), 1);
        assert_eq!(tick_text(5_000, 0, false), "#5");
        assert_eq!(tick_text(1_500_000 + 10, 10, true), "1.50 ms");
        assert_eq!(tick_text(2_500 + 10, 10, true), "2.5 us");
    }

    #[test]
    fn a_node_is_drawn_and_outlined_in_its_own_part_of_the_launch() {
        let spans: Vec<_> = (0..3).map(|k| node_span(100, 400, k, 3)).collect();
        assert_eq!(spans, [Some((100, 200)), Some((200, 300)), Some((300, 400))]);
        assert_eq!(node_span(100, 400, 3, 3), None, "no fourth node");
        assert_eq!(node_span(100, 110, 0, 3), None, "too narrow to show nodes: the bar is outlined whole");
    }
}
