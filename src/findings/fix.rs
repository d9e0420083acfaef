//! Fix hints: the smallest change that would order two racing operations.

use serde::Serialize;

use super::{OpOccurrence, StreamRef};
use crate::model::StreamKind;

/// A concrete change to the program that orders the earlier operation before the later one.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Fix {
    /// Record an event on `record_on` right after `after`, and make `wait_on` wait on it before `before`.
    /// `after_at` and `before_at` are the two operations' source lines, when the trace has them.
    RecordAndWait {
        record_on: StreamRef,
        after: String,
        wait_on: StreamRef,
        before: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        before_at: Option<String>,
    },
    /// A stream-ordered free was issued before a use on another stream: the free must come after the use.
    FreeAfterUse { free_stream: StreamRef, use_stream: StreamRef, use_op: String },
    /// The host released memory that `after` on `stream` could still be using: synchronize first.
    SyncBeforeRelease { stream: StreamRef, after: String },
    /// The host touched memory that `after` on `stream` could still be using (a copy to or from pinned host
    /// memory): the host must wait for it first.
    HostWaitsFirst {
        stream: StreamRef,
        after: String,
        touch: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        touch_at: Option<String>,
    },
    /// Work was issued that touches memory another host thread is still reading or writing (`touch`): that
    /// thread's access must be handed over first.
    AfterHostAccess { touch: String, stream: StreamRef, before: String },
    /// Add a dependency between two nodes of a graph: an edge (`cudaGraphAddDependencies`) in a graph built
    /// node by node.
    GraphDependency {
        graph: String,
        from: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        from_at: Option<String>,
        to: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        to_at: Option<String>,
        /// Built with the graph API, where the edge is one call.
        explicit: bool,
    },
    /// Two nodes captured from different streams with no join between them: inside the capture, record an event
    /// on `record_on` after `after` and make `wait_on` wait on it before `before`.
    CaptureJoin {
        graph: String,
        record_on: StreamRef,
        after: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        wait_on: StreamRef,
        before: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        before_at: Option<String>,
        /// Captured from framework ops (`torch.cuda.graph`): the fix also says it in the framework's words.
        framework: bool,
    },
    /// Work on the current stream touched a collective's tensor before the collective was waited for
    /// (torch.distributed): `work.wait()` first.
    WaitForCollective {
        collective: String,
        call: Collective,
        before: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        collective_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        before_at: Option<String>,
    },
    /// A collective was issued on a tensor that work on another stream (`stream`) still used: c10d orders the
    /// collective after the current stream only, so the current stream must wait for that one first.
    WaitStreamBeforeCollective {
        stream: StreamRef,
        after: String,
        collective: String,
        call: Collective,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        collective_at: Option<String>,
    },
}

/// A torch.distributed collective or point-to-point op, which c10d runs on its own NCCL stream.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Collective {
    AllReduce,
    AllReduceCoalesced,
    Broadcast,
    Reduce,
    Isend,
    Irecv,
    AllGather,
    AllGatherIntoTensor,
    AllGatherCoalesced,
    ReduceScatter,
    ReduceScatterTensor,
    Gather,
    Scatter,
    AllToAll,
    AllToAllSingle,
    Barrier,
}

impl Collective {
    /// The collective behind a c10d op (`allreduce_.default` is an all-reduce), if the label names one.
    pub fn of_op(label: &str) -> Option<Collective> {
        let op = label.split_once('.').map_or(label, |(op, _)| op);
        Some(match op {
            "allreduce_" => Collective::AllReduce,
            "allreduce_coalesced_" => Collective::AllReduceCoalesced,
            "broadcast_" => Collective::Broadcast,
            "reduce_" => Collective::Reduce,
            "send" => Collective::Isend,
            "recv_" | "recv_any_source_" => Collective::Irecv,
            "allgather_" => Collective::AllGather,
            "_allgather_base_" | "allgather_into_tensor_coalesced_" => Collective::AllGatherIntoTensor,
            "allgather_coalesced_" => Collective::AllGatherCoalesced,
            "reduce_scatter_" => Collective::ReduceScatter,
            "_reduce_scatter_base_" | "reduce_scatter_tensor_coalesced_" => Collective::ReduceScatterTensor,
            "gather_" => Collective::Gather,
            "scatter_" => Collective::Scatter,
            "alltoall_" => Collective::AllToAll,
            "alltoall_base_" => Collective::AllToAllSingle,
            "barrier" => Collective::Barrier,
            _ => return None,
        })
    }

    /// The torch.distributed call that issues it: `dist.all_reduce`.
    pub fn call(self) -> &'static str {
        match self {
            Collective::AllReduce => "dist.all_reduce",
            Collective::AllReduceCoalesced => "dist.all_reduce_coalesced",
            Collective::Broadcast => "dist.broadcast",
            Collective::Reduce => "dist.reduce",
            Collective::Isend => "dist.isend",
            Collective::Irecv => "dist.irecv",
            Collective::AllGather => "dist.all_gather",
            Collective::AllGatherIntoTensor => "dist.all_gather_into_tensor",
            Collective::AllGatherCoalesced => "dist.all_gather_coalesced",
            Collective::ReduceScatter => "dist.reduce_scatter",
            Collective::ReduceScatterTensor => "dist.reduce_scatter_tensor",
            Collective::Gather => "dist.gather",
            Collective::Scatter => "dist.scatter",
            Collective::AllToAll => "dist.all_to_all",
            Collective::AllToAllSingle => "dist.all_to_all_single",
            Collective::Barrier => "dist.barrier",
        }
    }
}

impl Serialize for Collective {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.call())
    }
}

impl Fix {
    /// A graph fix's node lines, where it had none (call sites symbolized after the analysis).
    pub fn place_graph_nodes(&mut self, earlier: Option<String>, later: Option<String>) {
        match self {
            Fix::GraphDependency { from_at, to_at, .. } => {
                *from_at = from_at.take().or(earlier);
                *to_at = to_at.take().or(later);
            }
            Fix::CaptureJoin { after_at, before_at, .. } => {
                *after_at = after_at.take().or(earlier);
                *before_at = before_at.take().or(later);
            }
            _ => {}
        }
    }

    /// The fix for a race between `earlier` and `later`, chosen from their streams and actions.
    /// Returns `None` only when the earlier operation ran on no stream, which the engine never reports.
    pub fn for_race(earlier: &OpOccurrence, later: &OpOccurrence) -> Option<Fix> {
        use super::AccessAction::Free;
        // A framework op (`mul_.Tensor`) says more to its author than the kernel it launched.
        let label = |op: &OpOccurrence| op.site.region.as_deref().map_or_else(|| op.site.name.clone(), str::to_string);
        let earlier_stream = earlier.site.stream.clone()?;
        let source = |op: &OpOccurrence| op.site.source.as_ref().map(ToString::to_string);
        if earlier_stream.kind == StreamKind::HostThread {
            return Some(Fix::AfterHostAccess {
                touch: label(earlier),
                stream: later.site.stream.clone().unwrap_or(earlier_stream),
                before: label(later),
            });
        }
        if later.site.stream.as_ref().is_some_and(|s| s.kind == StreamKind::HostThread) {
            return Some(Fix::HostWaitsFirst {
                stream: earlier_stream,
                after: label(earlier),
                touch: label(later),
                after_at: source(earlier),
                touch_at: source(later),
            });
        }
        // torch.distributed: a collective's end is waited for with its work handle, and its start follows the
        // current stream only.
        let collective = |op: &OpOccurrence| op.site.region.as_deref().and_then(Collective::of_op);
        match (collective(earlier), collective(later), later.site.stream.is_some()) {
            (Some(call), None, true) => {
                return Some(Fix::WaitForCollective {
                    collective: label(earlier),
                    call,
                    before: label(later),
                    collective_at: source(earlier),
                    before_at: source(later),
                })
            }
            (None, Some(call), _) if earlier.action != Free => {
                return Some(Fix::WaitStreamBeforeCollective {
                    stream: earlier_stream,
                    after: label(earlier),
                    collective: label(later),
                    call,
                    after_at: source(earlier),
                    collective_at: source(later),
                })
            }
            _ => {}
        }
        match later.site.stream.clone() {
            None => Some(Fix::SyncBeforeRelease { stream: earlier_stream, after: label(earlier) }),
            Some(later_stream) if earlier.action == Free => {
                Some(Fix::FreeAfterUse { free_stream: earlier_stream, use_stream: later_stream, use_op: label(later) })
            }
            Some(later_stream) => Some(Fix::RecordAndWait {
                record_on: earlier_stream,
                after: label(earlier),
                wait_on: later_stream,
                before: label(later),
                after_at: earlier.site.source.as_ref().map(ToString::to_string),
                before_at: later.site.source.as_ref().map(ToString::to_string),
            }),
        }
    }
}

impl Fix {
    /// Calls `f` on every stream the fix names.
    pub fn each_stream_ref(&mut self, f: &mut impl FnMut(&mut StreamRef)) {
        match self {
            Fix::RecordAndWait { record_on, wait_on, .. } | Fix::CaptureJoin { record_on, wait_on, .. } => {
                f(record_on);
                f(wait_on);
            }
            Fix::FreeAfterUse { free_stream, use_stream, .. } => {
                f(free_stream);
                f(use_stream);
            }
            Fix::SyncBeforeRelease { stream, .. }
            | Fix::HostWaitsFirst { stream, .. }
            | Fix::AfterHostAccess { stream, .. }
            | Fix::WaitStreamBeforeCollective { stream, .. } => f(stream),
            Fix::GraphDependency { .. } | Fix::WaitForCollective { .. } => {}
        }
    }
}
