//! What timeline reports draw: every stream operation with its time and line, the streams that ran something as
//! lanes grouped by process and GPU, the happens-before edges as arrows, and for traces whose host times are on
//! the GPU's clock (nsys exports) each host thread's CUDA API calls and NVTX ranges as rows of their own. Collected beside the analysis only
//! when a timeline report is asked for, since, unlike the analysis, it grows with the trace.

use std::sync::Arc;

use serde::Serialize;

use crate::findings::{EdgeKind, OpOccurrence, RaceFinding};
use crate::hb::HbEdge;
use crate::model::{AnnotatedRange, NativeSite, OpKind, StreamId, StreamKind, ThreadId, TraceRecord};
use crate::names::short::{short_name, short_op_name, stream_number};
use crate::names::NameTable;

/// Lanes are drawn in groups, one per GPU of a process, and host threads' lanes (their own accesses, their CUDA
/// API calls and NVTX ranges) last in their process. The one place lanes are grouped and ordered: a rank (a
/// distributed job's process) joins the key here when traces carry one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct LaneGroup {
    pub process: u32,
    /// The GPU's number as the trace gave it (the CUDA device index); None for the host threads' lanes.
    pub device: Option<u32>,
    /// The process's rank in a distributed job, in a job's report.
    pub rank: Option<u32>,
}

impl LaneGroup {
    /// The drawing order: by process, its GPUs first, then its host threads.
    pub fn order(&self) -> (u32, bool, Option<u32>) {
        (self.process, self.device.is_none(), self.device)
    }

    /// "process 0, GPU 0", "rank 1, GPU 1", "process 0, host threads": GPUs numbered as CUDA and the text
    /// report number them.
    pub fn label(&self) -> String {
        let whose = match self.rank {
            Some(rank) => format!("rank {rank}"),
            None => format!("process {}", self.process),
        };
        match self.device {
            Some(gpu) => format!("{whose}, GPU {gpu}"),
            None => format!("{whose}, host threads"),
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
    /// The GPU's number as the trace gave it (the CUDA device index), for people.
    pub gpu: u32,
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
        let device = (self.kind != StreamKind::HostThread).then_some(self.gpu);
        LaneGroup { process: self.process, device, rank: self.rank }
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

    /// "stream 13 (non-blocking, GPU 0)", "default stream (1, legacy default, GPU 0)": one line.
    pub fn label(&self) -> String {
        match self.kind {
            StreamKind::HostThread => self.title(),
            _ => format!("{} ({}, GPU {})", self.title(), self.detail().replace(" · ", ", "), self.gpu),
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
    /// The line it was issued from, for tooltips: the framework's (Python) line, else the native call site's
    /// program frame (`file:line in function`, `module+0x1234` when its binary is not here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub place: Option<Arc<str>>,
    #[serde(skip)]
    pub correlation: Option<u64>,
    /// The native call site, until `finish` turns it into `place`.
    #[serde(skip)]
    native: Option<NativeSite>,
}

/// What a host row of a timeline shows: a thread's CUDA API calls, or one nesting level of its NVTX ranges.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum HostRowKind {
    Api,
    /// Ranges opened inside `depth` others (0: outermost); those nested deeper than [`NVTX_LEVELS`] share the last
    /// level's row.
    Nvtx {
        depth: u32,
    },
}

/// NVTX nesting levels drawn as rows of their own.
pub const NVTX_LEVELS: u32 = 6;

/// A host row: what one host thread did on the host, placed on the GPU's clock (an nsys export's host and GPU
/// times share one).
#[derive(Clone, Debug, Serialize)]
pub struct HostRow {
    pub process: u32,
    /// The thread's id as the trace gave it.
    pub tid: u64,
    pub kind: HostRowKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

impl HostRow {
    pub fn group(&self) -> LaneGroup {
        LaneGroup { process: self.process, device: None, rank: self.rank }
    }

    /// "thread 4242: CUDA API", "thread 4242: NVTX", "thread 4242: NVTX level 2".
    pub fn title(&self) -> String {
        match self.kind {
            HostRowKind::Api => format!("thread {}: CUDA API", self.tid),
            HostRowKind::Nvtx { depth: 0 } => format!("thread {}: NVTX", self.tid),
            HostRowKind::Nvtx { depth } if depth + 1 == NVTX_LEVELS => {
                format!("thread {}: NVTX level {depth} and deeper", self.tid)
            }
            HostRowKind::Nvtx { depth } => format!("thread {}: NVTX level {depth}", self.tid),
        }
    }
}

/// A bar of a host row: one API call (from its call to its return) or one NVTX range.
#[derive(Clone, Debug, Serialize)]
pub struct HostSpan {
    /// Index into `Timeline::host_rows`.
    pub row: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub name: Arc<str>,
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
    /// Host threads' CUDA API calls and NVTX ranges, by thread, when their host times are on the GPU times'
    /// clock (nsys exports); sorted by start within each row.
    pub host_rows: Vec<HostRow>,
    pub host_spans: Vec<HostSpan>,
    /// Host threads by dense id: (process, tid).
    #[serde(skip)]
    threads: Vec<Option<(u32, u64)>>,
    /// API calls as (thread, start, end, function), one per call (its operations share it).
    #[serde(skip)]
    api_calls: Vec<(ThreadId, u64, u64, Arc<str>)>,
    #[serde(skip)]
    last_correlation: Option<(ThreadId, u64)>,
    /// NVTX ranges as the trace gave them.
    #[serde(skip)]
    ranges: Vec<AnnotatedRange>,
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
                    gpu: info.gpu,
                    handle: info.handle,
                    kind: info.kind,
                    name: None,
                    rank: None,
                });
            }
            TraceRecord::Thread(info) => {
                let index = info.id.0 as usize;
                if self.threads.len() <= index {
                    self.threads.resize(index + 1, None);
                }
                self.threads[index] = Some((info.process.0, info.tid));
            }
            TraceRecord::Annotation(range) => self.ranges.push(range.clone()),
            TraceRecord::Op(op) => {
                self.observe_call(op);
                let mut nodes = None;
                let name: Arc<str> = match &op.kind {
                    OpKind::Kernel { name, .. } => name.clone(),
                    OpKind::Memcpy { copy, .. } => Arc::from(copy.op_name()),
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
                    place: op.source.as_ref().map(|source| Arc::from(source.to_string())),
                    correlation: op.correlation_id,
                    native: if op.source.is_none() { op.native.clone() } else { None },
                });
            }
            TraceRecord::GpuTime { correlation, start_ns, end_ns } => {
                self.gpu_times.insert(*correlation, (*start_ns, *end_ns));
            }
            _ => {}
        }
    }

    /// The API call behind `op`, once per call (an nsys call's activities come as consecutive operations).
    fn observe_call(&mut self, op: &crate::model::Operation) {
        let (Some(api), Some(start), Some(end)) = (&op.api, op.host_time_ns, op.host_end_ns) else { return };
        if let Some(correlation) = op.correlation_id {
            if self.last_correlation == Some((op.thread, correlation)) {
                return;
            }
            self.last_correlation = Some((op.thread, correlation));
        }
        self.api_calls.push((op.thread, start, end.max(start), api.clone()));
    }

    /// Places the bars, keeps as lanes the streams that ran something (named by `names`), turns the engine's
    /// edges into arrows between bars, and, where `host_on_gpu_clock` (the trace's host times and GPU times
    /// share a clock, as an nsys export's do), lays out the host threads' API calls and NVTX ranges as rows.
    pub fn finish(
        &mut self,
        edges: &[HbEdge],
        names: &NameTable,
        host_on_gpu_clock: bool,
        symbolizer: crate::symbols::Symbolizer,
    ) {
        self.place_ops(symbolizer);
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
        if host_on_gpu_clock && self.gpu_time {
            self.lay_out_host_rows();
        }
        self.api_calls = Vec::new();
        self.ranges = Vec::new();
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

    /// Each bar's line in words: the native call sites symbolized once each (only those of operations that have
    /// no framework line).
    fn place_ops(&mut self, mut symbolizer: crate::symbols::Symbolizer) {
        let mut placed: rustc_hash::FxHashMap<NativeSite, Option<Arc<str>>> = rustc_hash::FxHashMap::default();
        for op in &mut self.ops {
            if let Some(site) = op.native.take() {
                op.place = placed
                    .entry(site)
                    .or_insert_with_key(|site| symbolizer.locate(site).map(|place| Arc::from(place.to_string())))
                    .clone();
            }
        }
    }

    /// One row of API calls per host thread that made any, and one per nesting level of its NVTX ranges.
    fn lay_out_host_rows(&mut self) {
        let thread = |threads: &[Option<(u32, u64)>], id: ThreadId| threads.get(id.0 as usize).copied().flatten();
        // (process, tid, row kind) -> (start, end, name) of each bar.
        type Bars = Vec<(u64, u64, Arc<str>)>;
        let mut rows: rustc_hash::FxHashMap<(u32, u64, HostRowKind), Bars> = rustc_hash::FxHashMap::default();
        for (id, start, end, api) in self.api_calls.drain(..) {
            if let Some((process, tid)) = thread(&self.threads, id) {
                rows.entry((process, tid, HostRowKind::Api)).or_default().push((start, end, api));
            }
        }
        // Nesting levels per thread: a range is as deep as the ranges still open when it starts.
        let mut ranges = std::mem::take(&mut self.ranges);
        ranges.sort_by_key(|r| (r.thread, r.start_ns, std::cmp::Reverse(r.end_ns)));
        let mut open: Vec<u64> = Vec::new();
        let mut current = None;
        for range in ranges {
            if current != Some(range.thread) {
                current = Some(range.thread);
                open.clear();
            }
            while open.last().is_some_and(|&end| end <= range.start_ns) {
                open.pop();
            }
            let depth = (open.len() as u32).min(NVTX_LEVELS - 1);
            open.push(range.end_ns);
            if let Some((process, tid)) = thread(&self.threads, range.thread) {
                let row = rows.entry((process, tid, HostRowKind::Nvtx { depth })).or_default();
                row.push((range.start_ns, range.end_ns.max(range.start_ns), range.text));
            }
        }
        let mut keys: Vec<(u32, u64, HostRowKind)> = rows.keys().copied().collect();
        // By process and thread; each thread's API calls first, then its NVTX levels outermost first.
        let level = |kind: HostRowKind| match kind {
            HostRowKind::Api => 0,
            HostRowKind::Nvtx { depth } => depth + 1,
        };
        keys.sort_by_key(|&(process, tid, kind)| (process, tid, level(kind)));
        for (row, key) in keys.into_iter().enumerate() {
            let (process, tid, kind) = key;
            self.host_rows.push(HostRow { process, tid, kind, rank: None });
            let mut spans = rows.remove(&key).unwrap_or_default();
            spans.sort_unstable_by_key(|(start, end, _)| (*start, *end));
            self.host_spans.extend(spans.into_iter().map(|(start_ns, end_ns, name)| HostSpan {
                row: row as u32,
                start_ns,
                end_ns,
                name,
            }));
        }
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
