//! Fix hints: the smallest change that would order two racing operations.

use std::fmt;

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
        call: &'static str,
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
        call: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        collective_at: Option<String>,
    },
}

/// The torch.distributed call behind a c10d op (`allreduce_.default` is `dist.all_reduce`), if the label
/// names one.
pub fn collective_call(label: &str) -> Option<&'static str> {
    let op = label.split_once('.').map_or(label, |(op, _)| op);
    Some(match op {
        "allreduce_" => "dist.all_reduce",
        "allreduce_coalesced_" => "dist.all_reduce_coalesced",
        "broadcast_" => "dist.broadcast",
        "reduce_" => "dist.reduce",
        "send" => "dist.isend",
        "recv_" | "recv_any_source_" => "dist.irecv",
        "allgather_" => "dist.all_gather",
        "_allgather_base_" | "allgather_into_tensor_coalesced_" => "dist.all_gather_into_tensor",
        "allgather_coalesced_" => "dist.all_gather_coalesced",
        "reduce_scatter_" => "dist.reduce_scatter",
        "_reduce_scatter_base_" | "reduce_scatter_tensor_coalesced_" => "dist.reduce_scatter_tensor",
        "gather_" => "dist.gather",
        "scatter_" => "dist.scatter",
        "alltoall_" => "dist.all_to_all",
        "alltoall_base_" => "dist.all_to_all_single",
        "barrier" => "dist.barrier",
        _ => return None,
    })
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
        let collective = |op: &OpOccurrence| op.site.region.as_deref().and_then(collective_call);
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

/// Whether a source location ("file:line") is in a Python file.
fn is_python(place: &str) -> bool {
    place.rsplit_once(':').map_or(place, |(file, _)| file).ends_with(".py")
}

/// A stream's number for people: in hex when it is a handle (a pointer) rather than a small id.
pub fn stream_number(handle: u64) -> String {
    if handle > 0xF_FFFF {
        format!("{handle:#x}")
    } else {
        handle.to_string()
    }
}

/// "stream 13" when only the handle is known, else the name with the handle last: "the default stream (1)",
/// "stream `side = torch.cuda.Stream()` at train.py:11 (0x21a9b8f0)". A host thread's lane is "host thread N".
impl fmt::Display for StreamRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.name, self.kind) {
            (_, StreamKind::HostThread) => write!(f, "host thread {}", self.handle),
            (Some(name), _) => write!(f, "{name} ({})", stream_number(self.handle)),
            (None, _) => write!(f, "stream {}", stream_number(self.handle)),
        }
    }
}

impl StreamRef {
    /// With its kind: "stream 13 (non-blocking)", "the default stream (1, legacy default)".
    pub fn with_kind(&self) -> String {
        match (&self.name, self.kind) {
            (_, StreamKind::HostThread) => self.to_string(),
            (Some(name), kind) => format!("{name} ({}, {})", stream_number(self.handle), kind.as_str()),
            (None, kind) => format!("stream {} ({})", stream_number(self.handle), kind.as_str()),
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

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::RecordAndWait { record_on, after, wait_on, before, after_at, before_at } => {
                if [after_at, before_at].iter().all(|p| p.as_ref().is_some_and(|p| is_python(p))) {
                    // A PyTorch program: say it with PyTorch's calls.
                    write!(
                        f,
                        "after `{after}`{}, record an event on its stream, {record_on} (`ev = torch.cuda.Event(); ev.record()` on that stream), and before `{before}`{} make {wait_on} wait on it (`torch.cuda.current_stream().wait_event(ev)` there, or `wait_stream` on the whole stream)",
                        at(after_at),
                        at(before_at)
                    )
                } else {
                    write!(
                        f,
                        "record an event on {record_on} right after `{after}`{} (cudaEventRecord), and make {wait_on} wait on it before `{before}`{} (cudaStreamWaitEvent)",
                        at(after_at),
                        at(before_at)
                    )
                }
            }
            Fix::FreeAfterUse { free_stream, use_stream, use_op } => write!(
                f,
                "the block is freed on {free_stream} before `{use_op}` on {use_stream} is done with it: issue the free after `{use_op}`, and order it (record an event on {use_stream} after `{use_op}` and make {free_stream} wait on it before cudaFreeAsync, or free on {use_stream})"
            ),
            Fix::SyncBeforeRelease { stream, after } => write!(
                f,
                "synchronize {stream} (or an event recorded after `{after}`) before releasing the memory"
            ),
            Fix::HostWaitsFirst { stream, after, touch, after_at, touch_at } => {
                if touch_at.as_ref().is_some_and(|p| is_python(p)) {
                    write!(
                        f,
                        "the host touches the buffer in `{touch}`{} while `{after}`{} on {stream} may still be running: wait for it first (`ev.synchronize()` on an event recorded after it, or `torch.cuda.current_stream().synchronize()` / that stream's `synchronize()`), or make the copy blocking (`non_blocking=False`)",
                        at(touch_at),
                        at(after_at)
                    )
                } else {
                    write!(
                        f,
                        "the host touches the buffer in `{touch}`{} while `{after}`{} on {stream} may still be running: call cudaEventSynchronize on an event recorded after it, or cudaStreamSynchronize({}), before the host touches it, or use a blocking copy",
                        at(touch_at),
                        at(after_at),
                        stream_number(stream.handle)
                    )
                }
            }
            Fix::AfterHostAccess { touch, stream, before } => write!(
                f,
                "issue `{before}` on {stream} only after the host thread's `{touch}` is done with the buffer (hand it over between the threads first)"
            ),
            Fix::GraphDependency { graph, from, from_at, to, to_at, explicit } => {
                write!(f, "add a dependency edge from node `{from}`{} to node `{to}`{} in {graph}", at(from_at), at(to_at))?;
                if *explicit {
                    write!(f, " (cudaGraphAddDependencies, or list `{from}`'s node among `{to}`'s dependencies when adding it)")?;
                }
                Ok(())
            }
            Fix::CaptureJoin { graph, record_on, after, after_at, wait_on, before, before_at, framework } => {
                write!(
                    f,
                    "inside the capture of {graph}, record an event on {record_on} after `{after}`{} and make {wait_on} wait on it before `{before}`{}",
                    at(after_at),
                    at(before_at),
                )?;
                if *framework {
                    f.write_str(" (in PyTorch, the consuming stream's `wait_stream` of the producing one inside the `torch.cuda.graph` block)")?;
                }
                f.write_str(": the join becomes the missing graph edge")
            }
            Fix::WaitForCollective { collective, call, before, collective_at, before_at } => {
                let at = |place: &Option<String>| place.as_ref().map_or(String::new(), |p| format!(" at {p}"));
                // Point-to-point ops are asynchronous by name (isend, irecv); collectives by async_op=True.
                let (handle, blocking) = match *call {
                    "dist.isend" => ("dist.isend(...)".to_string(), "use the blocking `dist.send`".to_string()),
                    "dist.irecv" => ("dist.irecv(...)".to_string(), "use the blocking `dist.recv`".to_string()),
                    _ => (format!("{call}(..., async_op=True)"), format!("issue `{call}` without async_op")),
                };
                write!(
                    f,
                    "`{before}`{} touches the tensor of `{collective}` (`{call}`{}) while it may still run on its NCCL stream: call `work.wait()` on the handle `{handle}` returned before `{before}` (it makes the current stream wait for it), or {blocking}",
                    at(before_at),
                    at(collective_at)
                )
            }
            Fix::WaitStreamBeforeCollective { stream, after, collective, call, after_at, collective_at } => {
                let at = |place: &Option<String>| place.as_ref().map_or(String::new(), |p| format!(" at {p}"));
                write!(
                    f,
                    "`{call}`{} (`{collective}`) is ordered after the current stream only (it runs on it, or on NCCL's stream once that waited for it), while `{after}`{} on {stream} may still use its tensor: before `{call}`, make the current stream wait for {stream} (`torch.cuda.current_stream().wait_stream(s)` for that stream s, or an event recorded after `{after}`)",
                    at(collective_at),
                    at(after_at)
                )
            }
        }
    }
}

/// ` at file:line`, or nothing when the place is unknown.
fn at(place: &Option<String>) -> String {
    place.as_ref().map_or(String::new(), |p| format!(" at {p}"))
}
