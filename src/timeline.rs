//! What timeline reports draw: every stream operation with its time, the streams that ran something as lanes
//! grouped by process and device, and the happens-before edges as arrows. Collected beside the analysis only
//! when a timeline report is asked for, since, unlike the analysis, it grows with the trace.

use std::sync::Arc;

use serde::Serialize;

use crate::findings::{EdgeKind, OpOccurrence, RaceFinding};
use crate::hb::HbEdge;
use crate::model::{OpKind, StreamId, StreamKind, TraceRecord};
use crate::names::short::{short_name, short_op_name, stream_number};
use crate::names::NameTable;

/// Lanes are drawn in groups, one per device of a process, and host threads' own accesses last in their
/// process. The one place lanes are grouped and ordered: a rank (a distributed job's process) joins the key
/// here when traces carry one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct LaneGroup {
    pub process: u32,
    /// None for the host threads' lanes.
    pub device: Option<u32>,
}

impl LaneGroup {
    /// The drawing order: by process, its devices first, then its host threads.
    fn order(&self) -> (u32, bool, Option<u32>) {
        (self.process, self.device.is_none(), self.device)
    }

    /// "process 0, device 0", "process 0, host threads".
    pub fn label(&self) -> String {
        match self.device {
            Some(device) => format!("process {}, device {device}", self.process),
            None => format!("process {}, host threads", self.process),
        }
    }
}

/// A lane: one stream that ran something.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineStream {
    /// The stream's dense id.
    pub id: u32,
    pub process: u32,
    pub device: u32,
    pub handle: u64,
    pub kind: StreamKind,
    /// The short name people know it by ("default stream", "side = torch.cuda.Stream()"), when known.
    pub name: Option<Arc<str>>,
    /// The rank of its process in a distributed job, in a job's report (src/job.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

impl TimelineStream {
    pub fn group(&self) -> LaneGroup {
        let device = (self.kind != StreamKind::HostThread).then_some(self.device);
        LaneGroup { process: self.process, device }
    }

    /// The lane's title: its name, or "stream 13"; in a job's report preceded by its rank ("rank 1: stream 13").
    pub fn title(&self) -> String {
        let rank = self.rank.map_or(String::new(), |r| format!("rank {r}: "));
        match (&self.name, self.kind) {
            (Some(name), _) => format!("{rank}{name}"),
            (None, StreamKind::HostThread) => format!("{rank}host thread {}", self.handle),
            (None, _) => format!("{rank}stream {}", stream_number(self.handle)),
        }
    }

    /// What follows the title in smaller print: the handle (when the title is a name) and the kind.
    pub fn detail(&self) -> String {
        match (&self.name, self.kind) {
            (_, StreamKind::HostThread) => "its own reads and writes of pinned memory".to_string(),
            (Some(_), kind) => format!("{} · {}", stream_number(self.handle), kind.as_str()),
            (None, kind) => kind.as_str().to_string(),
        }
    }

    /// "stream 13 (non-blocking, device 0)", "default stream (1, legacy default, device 0)": one line.
    pub fn label(&self) -> String {
        match self.kind {
            StreamKind::HostThread => self.title(),
            _ => format!("{} ({}, device {})", self.title(), self.detail().replace(" · ", ", "), self.device),
        }
    }
}

/// A bar: one operation that ran on a stream.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineOp {
    pub seq: u64,
    /// The stream's dense id.
    pub stream: u32,
    /// Its lane: an index into `Timeline::streams`.
    pub lane: u32,
    pub class: &'static str,
    pub name: Arc<str>,
    /// A short label for the bar: the framework op's short name, or the kernel's function name.
    pub label: Arc<str>,
    /// A graph launch's nodes' short names (drawn inside its bar); none for everything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Arc<[Arc<str>]>>,
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(skip)]
    pub correlation: Option<u64>,
}

/// Where one of a race's operations is drawn: its bar, and for a node of a graph launch (a race between two
/// nodes of one launch) the node's place among those drawn inside the bar, which is what gets outlined.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Index into `ops`.
    pub bar: usize,
    /// Index into the bar's `nodes`.
    pub node: Option<usize>,
}

/// An arrow between two bars (indexes into `ops`), or from a bar to the host.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineArrow {
    pub kind: EdgeKind,
    pub from: usize,
    /// The first operation the edge ordered; `None` when nothing ran after it.
    pub to: Option<usize>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    /// The lanes, in drawing order (grouped by [`LaneGroup`]); only streams that ran something.
    pub streams: Vec<TimelineStream>,
    pub ops: Vec<TimelineOp>,
    pub arrows: Vec<TimelineArrow>,
    /// Whether bars are placed by GPU time (every operation had one) or by issue order.
    pub gpu_time: bool,
    /// Every declared stream, by dense id, until `finish` keeps those that ran something.
    #[serde(skip)]
    declared: Vec<Option<TimelineStream>>,
    /// GPU times that arrived after their operations, by correlation id.
    #[serde(skip)]
    gpu_times: rustc_hash::FxHashMap<u64, (u64, u64)>,
    /// Each graph version's node labels, made once for all its launches.
    #[serde(skip)]
    graph_nodes: rustc_hash::FxHashMap<u64, Arc<[Arc<str>]>>,
}

/// A bar's label: the framework op it belongs to, else its own short name.
fn bar_label(region: Option<&Arc<str>>, name: &Arc<str>) -> Arc<str> {
    match region {
        Some(region) => {
            let short = short_op_name(region);
            if short.len() == region.len() {
                region.clone()
            } else {
                Arc::from(short)
            }
        }
        None => match short_name(name) {
            std::borrow::Cow::Borrowed(_) => name.clone(),
            std::borrow::Cow::Owned(short) => Arc::from(short),
        },
    }
}

impl Timeline {
    /// Takes note of one record before the engine consumes it.
    pub fn observe(&mut self, record: &TraceRecord) {
        match record {
            TraceRecord::Stream(info) => {
                let index = info.id.index();
                if self.declared.len() <= index {
                    self.declared.resize(index + 1, None);
                }
                self.declared[index] = Some(TimelineStream {
                    id: info.id.0,
                    process: info.process.0,
                    device: info.device.0,
                    handle: info.handle,
                    kind: info.kind,
                    name: None,
                    rank: None,
                });
            }
            TraceRecord::Op(op) => {
                let mut nodes = None;
                let name: Arc<str> = match &op.kind {
                    OpKind::Kernel { name, .. } => name.clone(),
                    OpKind::Memcpy { copy, .. } => Arc::from(format!("memcpy {}", copy.as_str())),
                    OpKind::Memset { .. } => Arc::from("memset"),
                    OpKind::GraphLaunch { graph, .. } => {
                        let labels = self.graph_nodes.entry(graph.key).or_insert_with(|| {
                            // A node captured from a framework op is labelled by the op, as the op's own bars are.
                            let region =
                                |node: &crate::model::GraphNode| node.made_at.as_ref().and_then(|m| m.region.clone());
                            graph
                                .nodes
                                .iter()
                                .map(|node| bar_label(region(node).as_ref(), &Arc::from(node.name.as_str())))
                                .collect()
                        });
                        nodes = Some(labels.clone());
                        Arc::from(graph.name.as_str())
                    }
                    OpKind::Alloc { stream: Some(_), .. } => Arc::from("cudaMallocAsync"),
                    OpKind::Free { stream: Some(_), .. } => Arc::from("cudaFreeAsync"),
                    // The host thread's own reads and writes of pinned memory, on its host-access lane.
                    OpKind::HostAccess { name, .. } => name.clone(),
                    OpKind::HostFunc { name, .. } | OpKind::HostFuncAccess { name, .. } => name.clone(),
                    _ => return,
                };
                let Some(stream) = op.kind.stream() else { return };
                let (start_ns, end_ns) = match (op.gpu_start_ns, op.gpu_end_ns) {
                    (Some(s), Some(e)) => (s, e.max(s)),
                    _ => (u64::MAX, u64::MAX),
                };
                // A host access is named after the framework op that made it.
                let region =
                    if matches!(op.kind, OpKind::HostAccess { .. }) { Some(&name) } else { op.region.as_ref() };
                let label = bar_label(region, &name);
                self.ops.push(TimelineOp {
                    seq: op.seq,
                    stream: stream.0,
                    lane: u32::MAX,
                    class: op.kind.class(),
                    name,
                    label,
                    nodes,
                    start_ns,
                    end_ns,
                    correlation: op.correlation_id,
                });
            }
            TraceRecord::GpuTime { correlation, start_ns, end_ns } => {
                self.gpu_times.insert(*correlation, (*start_ns, *end_ns));
            }
            _ => {}
        }
    }

    /// Places the bars, keeps as lanes the streams that ran something (named by `names`), and turns the
    /// engine's edges into arrows between bars.
    pub fn finish(&mut self, edges: &[HbEdge], names: &NameTable) {
        for op in &mut self.ops {
            if let Some(&(start, end)) = op.correlation.and_then(|c| self.gpu_times.get(&c)) {
                (op.start_ns, op.end_ns) = (start, end.max(start));
            }
        }
        self.gpu_time = !self.ops.is_empty() && self.ops.iter().all(|o| o.start_ns != u64::MAX);
        if !self.gpu_time {
            // Issue order: one microsecond per operation, so that bars never overlap on a lane.
            for op in &mut self.ops {
                op.start_ns = op.seq * 1000;
                op.end_ns = op.start_ns + 800;
            }
        }
        self.lay_out_lanes(names);
        let by_seq = |seq: u64| self.ops.binary_search_by_key(&seq, |o| o.seq).ok();
        let mut per_stream: Vec<Vec<(u64, usize)>> = vec![Vec::new(); self.declared.len()];
        for (i, op) in self.ops.iter().enumerate() {
            if let Some(list) = per_stream.get_mut(op.stream as usize) {
                list.push((op.seq, i));
            }
        }
        let next_after = |list: &[(u64, usize)], seq: u64| {
            let at = list.partition_point(|(s, _)| *s <= seq);
            list.get(at).map(|(_, i)| *i)
        };
        let mut arrows = Vec::with_capacity(edges.len());
        for edge in edges {
            let Some(from) = by_seq(edge.from_seq) else { continue };
            let to = match edge.to_stream {
                Some(stream) => per_stream.get(stream.index()).and_then(|list| next_after(list, edge.at_seq)),
                None => {
                    let at = self.ops.partition_point(|o| o.seq <= edge.at_seq);
                    (at < self.ops.len()).then_some(at)
                }
            };
            arrows.push(TimelineArrow { kind: edge.kind, from, to });
        }
        self.arrows = arrows;
        self.declared = Vec::new();
    }

    /// The lanes: the declared streams that ran something, named, in group order (then default streams first,
    /// then in creation order), and each bar's lane.
    fn lay_out_lanes(&mut self, names: &NameTable) {
        let mut used = vec![false; self.declared.len()];
        for op in &self.ops {
            if let Some(flag) = used.get_mut(op.stream as usize) {
                *flag = true;
            }
        }
        let mut lanes: Vec<TimelineStream> = self
            .declared
            .iter()
            .zip(&used)
            .filter_map(|(stream, used)| stream.clone().filter(|_| *used))
            .map(|mut stream| {
                stream.name = names.stream(StreamId(stream.id)).and_then(|entry| entry.name.short.clone());
                stream
            })
            .collect();
        let default_first =
            |kind: StreamKind| !matches!(kind, StreamKind::LegacyDefault | StreamKind::PerThreadDefault);
        lanes.sort_by_key(|s| (s.group().order(), default_first(s.kind), s.id));
        let mut lane_of = vec![u32::MAX; self.declared.len()];
        for (lane, stream) in lanes.iter().enumerate() {
            lane_of[stream.id as usize] = lane as u32;
        }
        for op in &mut self.ops {
            op.lane = lane_of.get(op.stream as usize).copied().unwrap_or(u32::MAX);
        }
        // An operation on a stream the trace never declared has no lane (the engine refuses such traces).
        self.ops.retain(|op| op.lane != u32::MAX);
        self.streams = lanes;
    }

    /// The bar of the operation `seq`, if it ran on a stream.
    pub fn op_index(&self, seq: u64) -> Option<usize> {
        self.ops.binary_search_by_key(&seq, |o| o.seq).ok()
    }

    /// Where `op`, one of a race's operations, is drawn, when it ran on a stream.
    pub fn mark(&self, op: &OpOccurrence) -> Option<Mark> {
        let bar = self.op_index(op.seq)?;
        let drawn = self.ops[bar].nodes.as_ref().map_or(0, |nodes| nodes.len());
        let node = op.node.map(|n| n as usize).filter(|n| *n < drawn);
        Some(Mark { bar, node })
    }

    /// For a race between two nodes of one graph launch, what its outlines hold, for legends: "nodes `add_`
    /// and `mul` inside one graph launch". None for a race whose two operations are outlined whole.
    pub fn outlined_nodes(&self, race: &RaceFinding) -> Option<String> {
        let node = |op: &OpOccurrence| {
            let mark = self.mark(op)?;
            Some((mark.bar, self.ops[mark.bar].nodes.as_ref()?.get(mark.node?)?.clone()))
        };
        match (node(&race.earlier)?, node(&race.later)?) {
            ((a, earlier), (b, later)) if a == b => {
                Some(format!("nodes `{earlier}` and `{later}` inside one graph launch"))
            }
            _ => None,
        }
    }

    /// The lanes' groups, in order, each with its first lane and number of lanes.
    pub fn groups(&self) -> Vec<(LaneGroup, usize, usize)> {
        let mut groups: Vec<(LaneGroup, usize, usize)> = Vec::new();
        for (lane, stream) in self.streams.iter().enumerate() {
            match groups.last_mut() {
                Some((group, _, count)) if *group == stream.group() => *count += 1,
                _ => groups.push((stream.group(), lane, 1)),
            }
        }
        groups
    }

    /// The happens-before arrows that matter for a race: the last one from the earlier operation's stream into
    /// the later operation's stream before the later operation (it ordered only what ran before the earlier
    /// operation: the hand-over the race lacks came too early). Indexes into `arrows`.
    pub fn arrows_for(&self, race: &RaceFinding) -> Vec<usize> {
        let (Some(earlier), Some(later)) = (self.op_index(race.earlier.seq), self.op_index(race.later.seq)) else {
            return Vec::new();
        };
        let (earlier_lane, later) = (self.ops[earlier].lane, &self.ops[later]);
        let last = self
            .arrows
            .iter()
            .enumerate()
            .filter_map(|(i, arrow)| Some((i, &self.ops[arrow.from], &self.ops[arrow.to?])))
            .filter(|(_, from, to)| from.lane == earlier_lane && to.lane == later.lane && to.seq <= later.seq)
            .max_by_key(|(_, _, to)| to.seq);
        last.map(|(i, _, _)| vec![i]).unwrap_or_default()
    }
}
