//! The stages every reader shares, as Perfetto's importers share their `importers/common/*_tracker`s: the
//! readers only turn their input into model records; what does not depend on the input's format is done here,
//! once. Dense ids (`ids`) are drawn by the readers as they map handles. Every operation then passes through
//! framework frames (`frames`: held and named, released in issue order) and CUDA graph assembly (`graphs`: work
//! captured into graphs, graph calls made launches), in that order, on its way into the batch; records that
//! are not operations go into the batch as the reader makes them.
//!
//! Streaming: a stage holds what is live (open frames and their operations, graphs and captures), never the
//! records that passed.

pub mod frames;
pub mod graphs;
pub mod ids;

use frames::{EndMatch, EndMismatch, FrameFacts, FrameKind, OpenFrames};
use graphs::{GraphAssembler, GraphProblem};

use super::background::Batch;
use super::record_source::IngestError;
use crate::model::{GraphNode, OpKind, Operation, ProcessId, SharedGraph, ThreadId, TraceRecord};

/// What a reader does with an operation the graphs stage cannot take (at `origin`, the operation's place in
/// the input): end its reading with an error, or count it and go on.
pub type Refuse<'a> = &'a mut dyn FnMut(u64, GraphProblem) -> Result<(), IngestError>;

/// The stages between a reader and its batch.
#[derive(Default)]
pub struct Stages {
    frames: OpenFrames,
    graphs: GraphAssembler,
    /// What the frames stage released and the graphs stage has yet to see, until [`Stages::flush`].
    pending: Vec<TraceRecord>,
}

impl Stages {
    /// An operation in issue order: held by the innermost framework op open on its thread, or on.
    pub fn op(&mut self, thread: ThreadId, op: Operation) {
        self.frames.place(thread, op, &mut self.pending);
    }

    /// Whether an operation of `kind` issued on `thread` goes straight into the batch instead of to
    /// [`Stages::op`]: when no stage would hold, name or take it (no frame open on its thread, no graph being built
    /// from it, nothing waiting before it), as for most operations. A reader asks before it makes the operation,
    /// and builds it where it goes: made first and moved on, every operation was copied once more.
    #[inline(always)]
    pub fn passes_straight(&self, thread: ThreadId, kind: &OpKind) -> bool {
        self.pending.is_empty() && !self.frames.open_on(thread) && !self.graphs.wants(kind)
    }

    /// An operation that only names memory (a caching allocator's block) and so need not wait for the framework
    /// op around it.
    pub fn op_outside_frames(&mut self, op: Operation) {
        self.pending.push(TraceRecord::Op(op));
    }

    pub fn frame_begin(&mut self, thread: ThreadId, process: ProcessId, kind: FrameKind, facts: FrameFacts) {
        self.frames.open(thread, process, kind, facts);
    }

    /// Ends a frame (see [`OpenFrames::close`]); what it held waits for [`Stages::flush`].
    pub fn frame_end(
        &mut self,
        thread: ThreadId,
        process: ProcessId,
        kind: FrameKind,
        ending: FrameFacts,
        strict: bool,
    ) -> Result<EndMatch, EndMismatch> {
        self.frames.close(thread, process, kind, ending, strict, &mut self.pending)
    }

    /// Whether a framework op is open on `thread` (its kernels will take the op's extents).
    pub fn inside_op(&self, thread: ThreadId) -> bool {
        self.frames.inside_op(thread)
    }

    /// A hand-written graph launch's graph (see [`GraphAssembler::inline`]).
    pub fn inline_graph(&mut self, name: String, nodes: Vec<GraphNode>) -> SharedGraph {
        self.graphs.inline(name, nodes)
    }

    /// Passes what the frames released through the graphs stage into `out`. An operation the graphs stage
    /// cannot take goes to `refuse`; when that ends the reading, what comes after it is dropped.
    // Always inlined: after nearly every record nothing is pending (plain `inline` was not taken).
    #[inline(always)]
    pub fn flush(&mut self, out: &mut Batch, refuse: Refuse) -> Result<(), IngestError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.flush_pending(out, refuse)
    }

    /// [`Stages::flush`] of what is pending.
    fn flush_pending(&mut self, out: &mut Batch, refuse: Refuse) -> Result<(), IngestError> {
        let mut pending = std::mem::take(&mut self.pending);
        let passed = self.pass_to_graphs(&mut pending, out, refuse);
        pending.clear();
        self.pending = pending;
        passed
    }

    fn pass_to_graphs(
        &mut self,
        pending: &mut Vec<TraceRecord>,
        out: &mut Batch,
        refuse: Refuse,
    ) -> Result<(), IngestError> {
        for record in pending.drain(..) {
            let op = match record {
                TraceRecord::Op(op) if self.graphs.wants(&op.kind) => op,
                other => {
                    out.push(Ok(other));
                    continue;
                }
            };
            let origin = op.origin;
            match self.graphs.take(op) {
                Ok(Some(op)) => out.push(Ok(TraceRecord::Op(op))),
                Ok(None) => {}
                Err(problem) => refuse(origin, problem)?,
            }
        }
        Ok(())
    }

    /// At the end of the input: the operations of frames still open are released (flush them); how many
    /// frames were open.
    pub fn finish(&mut self) -> u64 {
        self.frames.finish(&mut self.pending)
    }

    /// Operations that became graph nodes instead of running.
    pub fn captured_ops(&self) -> u64 {
        self.graphs.captured_ops
    }

    /// Captures that ended without a graph.
    pub fn failed_captures(&self) -> u64 {
        self.graphs.failed_captures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{OpKind, StreamId};

    /// What a reader does with an operation: straight into the batch, or through the stages.
    fn op_passing(stages: &mut Stages, thread: ThreadId, op: Operation, out: &mut Batch) {
        if stages.passes_straight(thread, &op.kind) {
            out.push(Ok(TraceRecord::Op(op)));
        } else {
            stages.op(thread, op);
        }
    }

    fn op(seq: u64, thread: ThreadId) -> Operation {
        let kernel =
            OpKind::Kernel { stream: StreamId(0), name: "k".into(), accesses: vec![], pointers: vec![], exact: None };
        Operation { seq, thread, origin: seq, ..Operation::plain(kernel) }
    }

    /// The sequence numbers of the operations in `out`, with the region each was named by.
    fn passed(out: &Batch) -> Vec<(u64, Option<String>)> {
        out.iter()
            .filter_map(|record| match record {
                Ok(TraceRecord::Op(op)) => Some((op.seq, op.region.as_deref().map(str::to_string))),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_operation_passes_straight_on_only_where_no_stage_would_keep_or_name_it() {
        let (mut stages, mut out) = (Stages::default(), Batch::new());
        let (framed, free) = (ThreadId(0), ThreadId(1));
        let mut refuse = |_: u64, problem: GraphProblem| panic!("refused: {}", problem.0);
        op_passing(&mut stages, free, op(0, free), &mut out);
        assert_eq!(passed(&out), [(0, None)], "nothing open: straight into the batch");
        let facts = FrameFacts { name: Some("Event.record".into()), ..FrameFacts::default() };
        stages.frame_begin(framed, ProcessId(0), FrameKind::Call, facts);
        op_passing(&mut stages, framed, op(1, framed), &mut out);
        assert_eq!(passed(&out), [(0, None)], "a call open on its thread names it first");
        op_passing(&mut stages, free, op(2, free), &mut out);
        assert_eq!(passed(&out), [(0, None)], "and what comes after it does not overtake it");
        stages.flush(&mut out, &mut refuse).expect("flushed");
        let named = Some("Event.record".to_string());
        assert_eq!(passed(&out), [(0, None), (1, named), (2, None)]);
        stages.frame_begin(framed, ProcessId(0), FrameKind::Op, FrameFacts::default());
        op_passing(&mut stages, framed, op(3, framed), &mut out);
        op_passing(&mut stages, free, op(4, free), &mut out);
        stages.flush(&mut out, &mut refuse).expect("flushed");
        assert_eq!(passed(&out).len(), 4, "an op open on its thread holds it; another thread's passes");
        assert_eq!(passed(&out)[3].0, 4);
    }
}
