//! What timeline reports draw: every stream operation with its time, the streams as lanes, and the
//! happens-before edges as arrows. Collected beside the analysis only when a timeline report is asked for,
//! since, unlike the analysis, it grows with the trace.

use std::sync::Arc;

use serde::Serialize;

use crate::findings::EdgeKind;
use crate::hb::HbEdge;
use crate::model::{OpKind, StreamKind, TraceRecord};

/// A lane: one stream.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineStream {
    /// The stream's dense id (index into `streams`).
    pub id: u32,
    pub process: u32,
    pub device: u32,
    pub handle: u64,
    pub kind: StreamKind,
}

impl TimelineStream {
    /// "stream 13 (non-blocking, device 0)".
    pub fn label(&self) -> String {
        format!("stream {} ({}, device {})", crate::findings::stream_number(self.handle), self.kind.as_str(), self.device)
    }
}

/// A bar: one operation that ran on a stream.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineOp {
    pub seq: u64,
    pub stream: u32,
    pub class: &'static str,
    pub name: Arc<str>,
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(skip)]
    pub correlation: Option<u64>,
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
    pub streams: Vec<TimelineStream>,
    pub ops: Vec<TimelineOp>,
    pub arrows: Vec<TimelineArrow>,
    /// Whether bars are placed by GPU time (every operation had one) or by issue order.
    pub gpu_time: bool,
    /// GPU times that arrived after their operations, by correlation id.
    #[serde(skip)]
    gpu_times: rustc_hash::FxHashMap<u64, (u64, u64)>,
}

impl Timeline {
    /// Takes note of one record before the engine consumes it.
    pub fn observe(&mut self, record: &TraceRecord) {
        match record {
            TraceRecord::Stream(info) => self.streams.push(TimelineStream {
                id: info.id.0,
                process: info.process.0,
                device: info.device.0,
                handle: info.handle,
                kind: info.kind,
            }),
            TraceRecord::Op(op) => {
                let name: Arc<str> = match &op.kind {
                    OpKind::Kernel { name, .. } => name.clone(),
                    OpKind::Memcpy { copy, .. } => Arc::from(format!("memcpy {}", copy.as_str())),
                    OpKind::Memset { .. } => Arc::from("memset"),
                    OpKind::GraphLaunch { graph, .. } => Arc::from(graph.name.as_str()),
                    OpKind::Alloc { stream: Some(_), .. } => Arc::from("cudaMallocAsync"),
                    OpKind::Free { stream: Some(_), .. } => Arc::from("cudaFreeAsync"),
                    _ => return,
                };
                let Some(stream) = op.kind.stream() else { return };
                let (start_ns, end_ns) = match (op.gpu_start_ns, op.gpu_end_ns) {
                    (Some(s), Some(e)) => (s, e.max(s)),
                    _ => (u64::MAX, u64::MAX),
                };
                self.ops.push(TimelineOp {
                    seq: op.seq,
                    stream: stream.0,
                    class: op.kind.class(),
                    name,
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

    /// Places the bars and turns the engine's edges into arrows between bars.
    pub fn finish(&mut self, edges: &[HbEdge]) {
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
        let by_seq = |seq: u64| self.ops.binary_search_by_key(&seq, |o| o.seq).ok();
        let mut per_stream: Vec<Vec<(u64, usize)>> = vec![Vec::new(); self.streams.len()];
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
    }

    /// The bar of the operation `seq`, if it ran on a stream.
    pub fn op_index(&self, seq: u64) -> Option<usize> {
        self.ops.binary_search_by_key(&seq, |o| o.seq).ok()
    }
}
