//! Fix hints: the smallest change that would order two racing operations, decided once, when the engine
//! reports the race. What the fix is, as data (which streams it names; the operations are the race's two);
//! crate::report says it in the words of the program's framework.

use serde::Serialize;

use super::AccessAction;
use crate::model::{StreamId, StreamKind};

/// A concrete change to the program that orders a race's earlier operation before its later one. The two
/// operations it speaks of are the race's; each variant says what they are to each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fix {
    /// Record an event on `record_on` right after the earlier operation, and make `wait_on` wait on it before
    /// the later one.
    RecordAndWait { record_on: StreamId, wait_on: StreamId },
    /// A stream-ordered free (the earlier operation) was issued before a use on another stream (the later one):
    /// the free must come after the use.
    FreeAfterUse { free_stream: StreamId, use_stream: StreamId },
    /// The host released memory that the earlier operation, on `stream`, could still be using: synchronize
    /// first.
    SyncBeforeRelease { stream: StreamId },
    /// The host touched memory (the later operation) that the earlier operation, on `stream`, could still be
    /// using (a copy to or from pinned host memory): the host must wait for it first.
    HostWaitsFirst { stream: StreamId },
    /// The later operation, on `stream`, touches memory another host thread is still reading or writing (the
    /// earlier operation): that thread's access must be handed over first.
    AfterHostAccess { stream: StreamId },
    /// Add a dependency between the two nodes of a graph: an edge (`cudaGraphAddDependencies`) in a graph built
    /// node by node.
    GraphDependency {
        graph: String,
        /// Built with the graph API, where the edge is one call.
        explicit: bool,
    },
    /// Two nodes captured from different streams with no join between them: inside the capture, record an event
    /// on `record_on` after the earlier node and make `wait_on` wait on it before the later one.
    CaptureJoin {
        graph: String,
        record_on: StreamId,
        wait_on: StreamId,
        /// Captured from framework ops (`torch.cuda.graph`): the fix also says it in the framework's words.
        framework: bool,
    },
    /// Work on the current stream (the later operation) touched the tensor of a collective (the earlier one)
    /// before the collective was waited for (torch.distributed): `work.wait()` first.
    WaitForCollective { call: Collective },
    /// A collective (the later operation) was issued on a tensor that the earlier operation, on `stream`, still
    /// used: c10d orders the collective after the current stream only, so the current stream must wait for
    /// that one first.
    WaitStreamBeforeCollective { stream: StreamId, call: Collective },
}

/// One of a race's two operations, as a fix is chosen from it: its stream with that stream's kind (none for the
/// host releasing memory), the framework op it belongs to, and what it did.
#[derive(Copy, Clone, Debug)]
pub struct Party<'a> {
    pub stream: Option<(StreamId, StreamKind)>,
    pub region: Option<&'a str>,
    pub action: AccessAction,
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
    /// The fix for a race between `earlier` and `later`, chosen from their streams, framework ops and actions.
    /// Returns `None` only when the earlier operation ran on no stream, which the engine never reports.
    pub fn for_race(earlier: &Party, later: &Party) -> Option<Fix> {
        let (earlier_stream, earlier_kind) = earlier.stream?;
        if earlier_kind == StreamKind::HostThread {
            return Some(Fix::AfterHostAccess { stream: later.stream.map_or(earlier_stream, |(stream, _)| stream) });
        }
        if later.stream.is_some_and(|(_, kind)| kind == StreamKind::HostThread) {
            return Some(Fix::HostWaitsFirst { stream: earlier_stream });
        }
        // torch.distributed: a collective's end is waited for with its work handle, and its start follows the
        // current stream only.
        let collective = |party: &Party| party.region.and_then(Collective::of_op);
        match (collective(earlier), collective(later), later.stream.is_some()) {
            (Some(call), None, true) => return Some(Fix::WaitForCollective { call }),
            (None, Some(call), _) if earlier.action != AccessAction::Free => {
                return Some(Fix::WaitStreamBeforeCollective { stream: earlier_stream, call })
            }
            _ => {}
        }
        Some(match later.stream {
            None => Fix::SyncBeforeRelease { stream: earlier_stream },
            Some((later_stream, _)) if earlier.action == AccessAction::Free => {
                Fix::FreeAfterUse { free_stream: earlier_stream, use_stream: later_stream }
            }
            Some((later_stream, _)) => Fix::RecordAndWait { record_on: earlier_stream, wait_on: later_stream },
        })
    }

    /// Every stream the fix names, for moving them (a job's merged findings).
    pub(super) fn streams_mut(&mut self) -> Vec<&mut StreamId> {
        match self {
            Fix::RecordAndWait { record_on, wait_on } | Fix::CaptureJoin { record_on, wait_on, .. } => {
                vec![record_on, wait_on]
            }
            Fix::FreeAfterUse { free_stream, use_stream } => vec![free_stream, use_stream],
            Fix::SyncBeforeRelease { stream }
            | Fix::HostWaitsFirst { stream }
            | Fix::AfterHostAccess { stream }
            | Fix::WaitStreamBeforeCollective { stream, .. } => vec![stream],
            Fix::GraphDependency { .. } | Fix::WaitForCollective { .. } => Vec::new(),
        }
    }
}
