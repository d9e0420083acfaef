//! A race's fix in words. The finding says what the fix is (which event to record after which operation on
//! which stream, which stream waits before which operation); this says it in the words of the program's
//! framework: CUDA's calls, PyTorch's where both operations' lines are Python, torch.distributed's for a
//! collective. Shared by every report that prints the fix.

use std::fmt::Write;

use super::Words;
use crate::findings::{Collective, Fix, OpOccurrence, RaceFinding};
use crate::names::short::stream_number;
use crate::resolve::Lookup;

/// What a fix's sentence names of one of the race's operations: its label (the framework op, else its own name)
/// and its line, as `file:line`.
pub struct FixParty<'a> {
    pub label: &'a str,
    pub at: Option<String>,
}

impl<'a> FixParty<'a> {
    pub fn of(look: Lookup<'a>, op: &OpOccurrence) -> FixParty<'a> {
        FixParty { label: look.site(op.site).label(), at: look.source(op.site).map(ToString::to_string) }
    }
}

/// One of the race's operations as the sentence names it, in the sentence's words.
struct Party<'a> {
    label: std::borrow::Cow<'a, str>,
    at: Option<String>,
}

impl<'a> Party<'a> {
    fn of(look: Lookup<'a>, op: &OpOccurrence, words: Words) -> Party<'a> {
        let site = look.site(op.site);
        Party { label: words.op(site), at: look.source(op.site).map(|place| words.place(place)) }
    }
}

/// The race's fix as one sentence, without its "Fix:" label.
pub fn fix_text(look: Lookup, race: &RaceFinding) -> String {
    fix_text_in(look, race, Words::Whole)
}

/// [`fix_text`] in the given words.
pub fn fix_text_in(look: Lookup, race: &RaceFinding, words: Words) -> String {
    let earlier = Party::of(look, &race.earlier, words);
    let later = Party::of(look, &race.later, words);
    let stream_phrase = |id| words.stream(look, id);
    let mut text = String::new();
    match &race.fix {
        Fix::RecordAndWait { record_on, wait_on } => {
            let (after, after_at, before, before_at) = (earlier.label, &earlier.at, later.label, &later.at);
            let (record_on, wait_on) = (stream_phrase(*record_on), stream_phrase(*wait_on));
            if [after_at, before_at].iter().all(|p| p.as_ref().is_some_and(|p| is_python(p))) {
                // A PyTorch program: say it with PyTorch's calls.
                let _ = write!(
                    text,
                    "after `{after}`{}, record an event on its stream, {record_on} (`ev = torch.cuda.Event(); ev.record()` on that stream), and before `{before}`{} make {wait_on} wait on it (`torch.cuda.current_stream().wait_event(ev)` there, or `wait_stream` on the whole stream)",
                    at(after_at),
                    at(before_at)
                );
            } else {
                let _ = write!(
                    text,
                    "record an event on {record_on} right after `{after}`{} (cudaEventRecord), and make {wait_on} wait on it before `{before}`{} (cudaStreamWaitEvent)",
                    at(after_at),
                    at(before_at)
                );
            }
        }
        Fix::FreeAfterUse { free_stream, use_stream } => {
            let use_op = later.label;
            let (free_stream, use_stream) = (stream_phrase(*free_stream), stream_phrase(*use_stream));
            let _ = write!(
                text,
                "the block is freed on {free_stream} before `{use_op}` on {use_stream} is done with it: issue the free after `{use_op}`, and order it (record an event on {use_stream} after `{use_op}` and make {free_stream} wait on it before cudaFreeAsync, or free on {use_stream})"
            );
        }
        Fix::SyncBeforeRelease { stream } => {
            let _ = write!(
                text,
                "synchronize {} (or an event recorded after `{}`) before releasing the memory",
                stream_phrase(*stream),
                earlier.label
            );
        }
        Fix::HostWaitsFirst { stream } => {
            let (after, after_at, touch, touch_at) = (earlier.label, &earlier.at, later.label, &later.at);
            let number = look.stream(*stream).map_or("?".to_string(), |s| stream_number(s.handle));
            if touch_at.as_ref().is_some_and(|p| is_python(p)) {
                let _ = write!(
                    text,
                    "the host touches the buffer in `{touch}`{} while `{after}`{} on {} may still be running: wait for it first (`ev.synchronize()` on an event recorded after it, or `torch.cuda.current_stream().synchronize()` / that stream's `synchronize()`), or make the copy blocking (`non_blocking=False`)",
                    at(touch_at),
                    at(after_at),
                    stream_phrase(*stream)
                );
            } else {
                let _ = write!(
                    text,
                    "the host touches the buffer in `{touch}`{} while `{after}`{} on {} may still be running: call cudaEventSynchronize on an event recorded after it, or cudaStreamSynchronize({}), before the host touches it, or use a blocking copy",
                    at(touch_at),
                    at(after_at),
                    stream_phrase(*stream),
                    number
                );
            }
        }
        Fix::AfterHostAccess { stream } => {
            let (touch, before) = (earlier.label, later.label);
            let _ = write!(
                text,
                "issue `{before}` on {} only after the host thread's `{touch}` is done with the buffer (hand it over between the threads first)",
                stream_phrase(*stream)
            );
        }
        Fix::GraphDependency { graph, explicit } => {
            let (from, from_at, to, to_at) = (earlier.label, &earlier.at, later.label, &later.at);
            let _ = write!(
                text,
                "add a dependency edge from node `{from}`{} to node `{to}`{} in {graph}",
                at(from_at),
                at(to_at)
            );
            if *explicit {
                let _ = write!(
                    text,
                    " (cudaGraphAddDependencies, or list `{from}`'s node among `{to}`'s dependencies when adding it)"
                );
            }
        }
        Fix::CaptureJoin { graph, record_on, wait_on, framework } => {
            let (after, after_at, before, before_at) = (earlier.label, &earlier.at, later.label, &later.at);
            let _ = write!(
                text,
                "inside the capture of {graph}, record an event on {} after `{after}`{} and make {} wait on it before `{before}`{}",
                stream_phrase(*record_on),
                at(after_at),
                stream_phrase(*wait_on),
                at(before_at),
            );
            if *framework {
                text.push_str(" (in PyTorch, the consuming stream's `wait_stream` of the producing one inside the `torch.cuda.graph` block)");
            }
            text.push_str(": the join becomes the missing graph edge");
        }
        Fix::WaitForCollective { call } => {
            let (collective, collective_at, before, before_at) = (earlier.label, &earlier.at, later.label, &later.at);
            let name = call.call();
            // Point-to-point ops are asynchronous by name (isend, irecv); collectives by async_op=True.
            let (handle, blocking) = match call {
                Collective::Isend => ("dist.isend(...)".to_string(), "use the blocking `dist.send`".to_string()),
                Collective::Irecv => ("dist.irecv(...)".to_string(), "use the blocking `dist.recv`".to_string()),
                _ => (format!("{name}(..., async_op=True)"), format!("issue `{name}` without async_op")),
            };
            let _ = write!(
                text,
                "`{before}`{} touches the tensor of `{collective}` (`{name}`{}) while it may still run on its NCCL stream: call `work.wait()` on the handle `{handle}` returned before `{before}` (it makes the current stream wait for it), or {blocking}",
                at(before_at),
                at(collective_at)
            );
        }
        Fix::WaitStreamBeforeCollective { stream, call } => {
            let (after, after_at, collective, collective_at) = (earlier.label, &earlier.at, later.label, &later.at);
            let (name, stream) = (call.call(), stream_phrase(*stream));
            let _ = write!(
                text,
                "`{name}`{} (`{collective}`) is ordered after the current stream only (it runs on it, or on NCCL's stream once that waited for it), while `{after}`{} on {stream} may still use its tensor: before `{name}`, make the current stream wait for {stream} (`torch.cuda.current_stream().wait_stream(s)` for that stream s, or an event recorded after `{after}`)",
                at(collective_at),
                at(after_at)
            );
        }
    }
    text
}

/// Whether a source location ("file:line") is in a Python file.
fn is_python(place: &str) -> bool {
    place.rsplit_once(':').map_or(place, |(file, _)| file).ends_with(".py")
}

/// ` at file:line`, or nothing when the place is unknown.
fn at(place: &Option<String>) -> String {
    place.as_ref().map_or(String::new(), |p| format!(" at {p}"))
}
