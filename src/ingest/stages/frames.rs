//! Framework frames (tier T2): a framework operation (a PyTorch op) between `op_begin` and `op_end`, or a
//! framework call that orders streams or the host (`Event.record`, `Stream.wait_stream`...) between
//! `call_begin` and `call_end`, open on a host thread.
//!
//! An op's name, line and whole read and write sets (outputs included) may come only with `op_end`, so the
//! operations its thread issues inside it are held until then: its kernels then take those exact extents
//! instead of their pointer arguments. A call's name and line come first; the CUDA calls inside take them as
//! they pass.
//!
//! Ops nest: Python code running inside an op (a saved-tensor hook, a `__torch_dispatch__`, a Python kernel)
//! runs ops of its own, each a frame inside the outer one. A kernel belongs to the innermost op that launched
//! it: it takes that op's extents when that op ends, and keeps them when the outer op ends (it is held on until
//! then only to leave in issue order).
//!
//! A stage every reader's operations pass through (`stages`): it holds and names operations and hands them on
//! as records, in the order they are released; it orders nothing.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::model::{
    is_nccl_kernel, refine_with_extents, Access, GroupStream, OpKind, Operation, ProcessId, SourceLocation, StreamId,
    ThreadId, TraceRecord,
};

/// What a framework frame is.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FrameKind {
    Op,
    Call,
}

impl FrameKind {
    /// The record type that opens a frame of this kind.
    pub fn opening_record(self) -> &'static str {
        match self {
            FrameKind::Op => "op_begin",
            FrameKind::Call => "call_begin",
        }
    }
}

/// What a frame's opening or closing record said about it.
#[derive(Default)]
pub struct FrameFacts {
    pub name: Option<Arc<str>>,
    pub accesses: Vec<Access>,
    pub source: Option<SourceLocation>,
    /// A collective's process group (`op_end` of a c10d op): its NCCL kernels' stream is that group's.
    pub process_group: Option<Arc<str>>,
}

struct Frame {
    kind: FrameKind,
    process: ProcessId,
    /// When it opened, counted over all threads: the latest frame open elsewhere is the one a stray end closes.
    opened: u64,
    facts: FrameFacts,
    held: Vec<Held>,
}

/// An operation an op holds until it ends.
struct Held {
    op: Operation,
    /// Released by an op that ended inside this one: its kernels already have that op's extents, which they
    /// keep (only a missing name or line comes from the outer op).
    attributed: bool,
}

/// How a frame end was matched, when it was not simply the innermost frame of its own thread.
#[derive(Debug, PartialEq, Eq)]
pub enum EndMatch {
    /// The innermost frame of the thread, as it should be.
    Innermost,
    /// A frame further out on the same thread: this many frames inside it never ended.
    Outer { unended: usize },
    /// The thread had no frame of that kind open: the latest one open on another thread of the process ended
    /// (PyTorch may run an op's end callback on another thread).
    OtherThread,
}

/// Why a frame end matched nothing.
#[derive(Debug)]
pub enum EndMismatch {
    /// No frame of that kind is open anywhere in the process: its begin was lost.
    NothingOpen,
    /// Strict reading: the innermost frame of the thread is of the other kind.
    WrongKind(FrameKind),
}

/// The frames open on every thread, innermost last.
#[derive(Default)]
pub struct OpenFrames {
    by_thread: HashMap<ThreadId, Vec<Frame>>,
    opened: u64,
}

impl OpenFrames {
    pub fn open(&mut self, thread: ThreadId, process: ProcessId, kind: FrameKind, facts: FrameFacts) {
        self.opened += 1;
        let frame = Frame { kind, process, opened: self.opened, facts, held: Vec::new() };
        self.by_thread.entry(thread).or_default().push(frame);
    }

    /// Whether any frame is open on the thread (an operation issued there is held or named by it).
    // The map's emptiness first: most traces open no frame, and then no thread's is looked up.
    #[inline]
    pub fn open_on(&self, thread: ThreadId) -> bool {
        !self.by_thread.is_empty() && self.by_thread.get(&thread).is_some_and(|frames| !frames.is_empty())
    }

    /// Whether an op is open on the thread (its kernels will take the op's extents).
    #[inline]
    pub fn inside_op(&self, thread: ThreadId) -> bool {
        !self.by_thread.is_empty()
            && self.by_thread.get(&thread).is_some_and(|frames| frames.iter().any(|f| f.kind == FrameKind::Op))
    }

    /// Hands an operation on: named by the open calls inside the innermost open op of its thread (the
    /// innermost call first) and held by that op, or out when no op is open. Copies and sets keep their own
    /// exact addresses; kernels take an op's sets when it ends.
    pub fn place(&mut self, thread: ThreadId, op: Operation, out: &mut Vec<TraceRecord>) {
        self.hold(thread, Held { op, attributed: false }, out);
    }

    /// As [`OpenFrames::place`], for an operation that may already belong to an op that ended.
    fn hold(&mut self, thread: ThreadId, mut held: Held, out: &mut Vec<TraceRecord>) {
        for frame in self.by_thread.get_mut(&thread).into_iter().flatten().rev() {
            match frame.kind {
                FrameKind::Op => {
                    frame.held.push(held);
                    return;
                }
                FrameKind::Call => {
                    held.op.region = held.op.region.or_else(|| frame.facts.name.clone());
                    held.op.source = held.op.source.or_else(|| frame.facts.source.clone());
                }
            }
        }
        out.push(TraceRecord::Op(held.op));
    }

    /// Ends a frame of `kind` on `thread`, with what its closing record said, and releases the operations it held.
    /// Strictly, only the innermost frame of the thread may end. Tolerantly (a recording), the innermost frame
    /// of that kind on the thread ends (frames inside it never ended: theirs are released as they are), or, with
    /// none there, the latest of that kind open on another thread of the process.
    pub fn close(
        &mut self,
        thread: ThreadId,
        process: ProcessId,
        kind: FrameKind,
        ending: FrameFacts,
        strict: bool,
        out: &mut Vec<TraceRecord>,
    ) -> Result<EndMatch, EndMismatch> {
        let (owner, depth, matched) = self.find_ending(thread, process, kind, strict)?;
        let Some(frames) = self.by_thread.get_mut(&owner) else { return Err(EndMismatch::NothingOpen) };
        let unended: Vec<Frame> = frames.drain(depth + 1..).collect();
        let Some(mut frame) = frames.pop() else { return Err(EndMismatch::NothingOpen) };
        for inner in unended.into_iter().rev() {
            // Released into the frame that is ending, as if they had ended without saying what they were.
            frame.held.extend(inner.held);
        }
        frame.held.sort_by_key(|held| held.op.seq);
        // What the op was, its line and its outputs may be known only now. (An op's sets come whole with its end,
        // as the observers write them: then the end's list is taken as it is, not copied.)
        if frame.facts.accesses.is_empty() {
            frame.facts.accesses = ending.accesses;
        } else {
            frame.facts.accesses.extend(ending.accesses);
        }
        if ending.name.is_some() {
            frame.facts.name = ending.name;
        }
        if ending.source.is_some() {
            frame.facts.source = ending.source;
        }
        if ending.process_group.is_some() {
            frame.facts.process_group = ending.process_group;
        }
        let group_streams = frame.facts.process_group.as_ref().map(|group| nccl_streams(&frame.held, group));
        let is_op = frame.kind == FrameKind::Op;
        for Held { mut op, attributed } in std::mem::take(&mut frame.held) {
            // The op's extents stand for its kernels' accesses (tier T2); where the exact-access capture saw a
            // kernel's own bytes (tier T3), the two together say which of the op's tensors it touched and how, and
            // what it touched beyond them. A kernel an op inside this one already gave its extents keeps them.
            match &mut op.kind {
                _ if !is_op || attributed => {}
                OpKind::Kernel { accesses, exact: Some(exact), .. } if exact.saw_accesses() => {
                    *accesses = refine_with_extents(&frame.facts.accesses, accesses);
                }
                OpKind::Kernel { accesses, pointers, .. } => {
                    accesses.clone_from(&frame.facts.accesses);
                    pointers.clear();
                }
                _ => {}
            }
            op.region = op.region.or_else(|| frame.facts.name.clone());
            op.source = op.source.or_else(|| frame.facts.source.clone());
            // Held on by an enclosing op, if any, until it ends: out in issue order, with this op's extents.
            self.hold(owner, Held { op, attributed: attributed || is_op }, out);
        }
        out.extend(group_streams.into_iter().flatten().map(TraceRecord::GroupStream));
        Ok(matched)
    }

    /// The thread and stack depth of the frame an end of `kind` on `thread` closes.
    fn find_ending(
        &self,
        thread: ThreadId,
        process: ProcessId,
        kind: FrameKind,
        strict: bool,
    ) -> Result<(ThreadId, usize, EndMatch), EndMismatch> {
        let own = self.by_thread.get(&thread).map(Vec::as_slice).unwrap_or_default();
        if strict {
            return match own.last() {
                Some(frame) if frame.kind == kind => Ok((thread, own.len() - 1, EndMatch::Innermost)),
                Some(frame) => Err(EndMismatch::WrongKind(frame.kind)),
                None => Err(EndMismatch::NothingOpen),
            };
        }
        if let Some(depth) = own.iter().rposition(|f| f.kind == kind) {
            let unended = own.len() - 1 - depth;
            let matched = if unended == 0 { EndMatch::Innermost } else { EndMatch::Outer { unended } };
            return Ok((thread, depth, matched));
        }
        // Only the innermost frame of another thread can end there: one further out has frames inside it
        // still running on that thread.
        let latest = self
            .by_thread
            .iter()
            .filter(|(&other, _)| other != thread)
            .filter_map(|(&other, frames)| frames.last().map(|f| (other, frames.len() - 1, f)))
            .filter(|(_, _, f)| f.kind == kind && f.process == process)
            .max_by_key(|(_, _, f)| f.opened);
        latest.map(|(other, depth, _)| (other, depth, EndMatch::OtherThread)).ok_or(EndMismatch::NothingOpen)
    }

    /// At the end of the trace: the operations of frames still open (the program exited inside them), in
    /// issue order with their pointer arguments, and how many frames were open.
    pub fn finish(&mut self, out: &mut Vec<TraceRecord>) -> u64 {
        let frames: Vec<Frame> = self.by_thread.drain().flat_map(|(_, frames)| frames).collect();
        let open = frames.len() as u64;
        let mut held: Vec<Operation> = frames.into_iter().flat_map(|f| f.held).map(|held| held.op).collect();
        held.sort_by_key(|op| op.seq);
        out.extend(held.into_iter().map(TraceRecord::Op));
        open
    }
}

/// The streams the NCCL kernels among `held` ran on, each once, as streams of `group`.
fn nccl_streams(held: &[Held], group: &Arc<str>) -> Vec<GroupStream> {
    let mut streams: Vec<StreamId> = held
        .iter()
        .filter_map(|held| match &held.op.kind {
            OpKind::Kernel { stream, name, .. } if is_nccl_kernel(name) => Some(*stream),
            _ => None,
        })
        .collect();
    streams.sort_unstable();
    streams.dedup();
    streams.into_iter().map(|stream| GroupStream { stream, group: group.clone() }).collect()
}
