//! What people call a trace's streams and events. A handle (`0x21a9b8f0`) means nothing to the program's author;
//! a PyTorch user knows their stream as `side = torch.cuda.Stream()` at `train.py:11`, the default stream or
//! NCCL's stream, a C++ user as the `cudaStreamCreate` at `pipeline.cu:40`. Collected beside the analysis from
//! the records (what each stream is, where it was created, what ran on it: per entity, not per operation), then
//! made a [`NameTable`] by id, which crate::resolve hands to every report (findings hold the ids). The handle
//! stays beside the name everywhere, and is all that is said when nothing better is known.
//!
//! A stream's name comes from the first of: the framework line that created it (a [`Creation`] record, tier
//! T2); being a default stream; carrying only NCCL's kernels (with the process group whose collectives launched
//! them, when the trace says: a [`GroupStream`] record); the creation site the trace gives its declaration
//! (a hand-written `src`, a native call site); for a handle that is a pointer, the first source line of an
//! operation issued on it. Several
//! streams created at one line (a loop, `s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()`) are told apart by
//! their order there (`#2`).
//!
//! The short forms of names, places and handles that timelines and reports both use are in `short`.

pub mod short;

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::model::{
    is_nccl_kernel, Creation, Entity, EventId, GroupStream, NativeSite, OpKind, Operation, SourceLocation, StreamId,
    StreamKind, ThreadId, TraceRecord,
};
use crate::symbols::Symbolizer;
use short::short_place;

/// A stream's or event's name, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Name {
    /// How people know it, as a noun phrase for sentences ("the default stream", "stream `side =
    /// torch.cuda.Stream()` at train.py:11"); None when only the handle is known.
    pub known_as: Option<Arc<str>>,
    /// The same, short, for a timeline lane ("default stream", "side = torch.cuda.Stream()").
    #[serde(skip)]
    pub short: Option<Arc<str>>,
    /// Where it was created, when known.
    pub created_at: Option<SourceLocation>,
}

/// What is known about one stream or event while the records go by.
#[derive(Default)]
struct Facts {
    kind: Option<StreamKind>,
    handle: u64,
    /// The thread id of the host thread that created it (a per-thread default stream's thread).
    tid: Option<u64>,
    device: u32,
    /// The device's number as the trace gave it.
    gpu: u32,
    /// The framework's line for it, its text, and when it arrived (for ordinals).
    framework: Option<(SourceLocation, Option<Arc<str>>, u64)>,
    /// The creation site the declaration gave, and when.
    declared_at: Option<(SourceLocation, u64)>,
    /// The native call site the declaration gave, and when: symbolized at the end, when no line was given.
    declared_native: Option<(NativeSite, u64)>,
    nccl_kernels: u64,
    other_kernels: u64,
    /// The process groups whose collectives ran NCCL's kernels on it, each with when it was first seen.
    process_groups: FxHashMap<Arc<str>, u64>,
    first_use: Option<SourceLocation>,
}

/// Collects what names streams and events, and names them at the end.
#[derive(Default)]
pub struct Names {
    streams: Vec<Facts>,
    events: Vec<Facts>,
    /// Thread ids by dense thread id.
    tids: Vec<u64>,
    /// Counts the creation lines seen, to order the entities created at one place.
    arrivals: u64,
    nccl_names: NcclNames,
}

/// Whether a kernel's name is NCCL's, remembered by the shared string the name came in: the reader thread keeps
/// the reference counts of its shared names beside their bytes, so reading the bytes for every kernel costs a
/// cache line taken from the other core (as `hb::sites` says). Direct-mapped by where the string lives; holding
/// the string keeps that place from being another name's.
#[derive(Default)]
struct NcclNames {
    places: Vec<Option<(Arc<str>, bool)>>,
}

/// Places in [`NcclNames`]: a program's distinct hot kernel names.
const NCCL_NAME_PLACES: usize = 64;

impl NcclNames {
    // Inlined: a name seen before, nearly every kernel's, is one comparison; the rest out of line.
    #[inline(always)]
    fn is_nccl(&mut self, name: &Arc<str>) -> bool {
        let index = (Arc::as_ptr(name) as *const u8 as usize >> 4) % NCCL_NAME_PLACES;
        match self.places.get(index) {
            Some(Some((known, nccl))) if Arc::ptr_eq(known, name) => *nccl,
            _ => self.learn(index, name),
        }
    }

    /// Whether `name`, not at its `index` yet, is NCCL's; it takes that place.
    fn learn(&mut self, index: usize, name: &Arc<str>) -> bool {
        if self.places.is_empty() {
            self.places.resize(NCCL_NAME_PLACES, None);
        }
        let nccl = is_nccl_kernel(name);
        self.places[index] = Some((name.clone(), nccl));
        nccl
    }
}

/// A declared stream as people know it: its handle, kind and GPU, and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    pub handle: u64,
    pub kind: StreamKind,
    /// The device's number as the trace gave it (the CUDA device index).
    pub gpu: u32,
    pub name: Name,
}

/// What the trace's streams, events and host threads are called, by dense id.
#[derive(Clone, Debug, Default)]
pub struct NameTable {
    /// None for an id no stream record declared.
    pub streams: Vec<Option<StreamEntry>>,
    pub events: Vec<Name>,
    /// The thread id of each host thread.
    pub threads: Vec<u64>,
}

impl NameTable {
    pub fn stream(&self, id: StreamId) -> Option<&StreamEntry> {
        self.streams.get(id.index()).and_then(Option::as_ref)
    }

    pub fn event(&self, id: EventId) -> Option<&Name> {
        self.events.get(id.index())
    }

    /// The thread id of a host thread (0 for an id no thread record declared).
    pub fn tid(&self, id: ThreadId) -> u64 {
        self.threads.get(id.index()).copied().unwrap_or_default()
    }

    /// Adds another analysis's names after these (a job's merged timeline): its ids move by as many as these hold.
    pub fn append(&mut self, other: &NameTable) {
        self.streams.extend(other.streams.iter().cloned());
        self.events.extend(other.events.iter().cloned());
        self.threads.extend(other.threads.iter().copied());
    }
}

fn facts(table: &mut Vec<Facts>, index: usize) -> &mut Facts {
    if table.len() <= index {
        table.resize_with(index + 1, Facts::default);
    }
    &mut table[index]
}

impl Names {
    /// Takes note of one record (before or after the engine consumes it).
    // Inlined into the loops over batches: an operation, nearly every record, is taken note of without a call
    // into the match of every other kind.
    #[inline(always)]
    pub fn observe(&mut self, record: &TraceRecord) {
        match record {
            TraceRecord::Op(op) => self.observe_op(op),
            other => self.observe_other(other),
        }
    }

    /// [`Names::observe`] of an operation: what ran on its stream, and its first source line.
    #[inline(always)]
    fn observe_op(&mut self, op: &Operation) {
        let Some(stream) = op.kind.stream() else { return };
        let Some(entry) = self.streams.get_mut(stream.index()) else { return };
        if let OpKind::Kernel { name, .. } = &op.kind {
            if self.nccl_names.is_nccl(name) {
                entry.nccl_kernels += 1;
            } else {
                entry.other_kernels += 1;
            }
        }
        // Assigned only when there is a line: most operations name none, and writing None over None dropped the
        // old value first.
        if let (None, Some(source)) = (&entry.first_use, &op.source) {
            entry.first_use = Some(source.clone());
        }
    }

    /// [`Names::observe`] of a record that is not an operation.
    fn observe_other(&mut self, record: &TraceRecord) {
        match record {
            TraceRecord::Thread(info) => {
                if self.tids.len() <= info.id.index() {
                    self.tids.resize(info.id.index() + 1, 0);
                }
                self.tids[info.id.index()] = info.tid;
            }
            TraceRecord::Stream(info) => {
                self.arrivals += 1;
                let tid = info.created_by.and_then(|t| self.tids.get(t.index()).copied());
                let stream = facts(&mut self.streams, info.id.index());
                stream.kind = Some(info.kind);
                stream.handle = info.handle;
                stream.tid = tid;
                stream.device = info.device.0;
                stream.gpu = info.gpu;
                stream.declared_at = info.source.clone().map(|s| (s, self.arrivals));
                stream.declared_native = info.native.clone().map(|n| (n, self.arrivals));
            }
            TraceRecord::Event(info) => {
                self.arrivals += 1;
                let event = facts(&mut self.events, info.id.index());
                event.handle = info.handle;
                event.declared_at = info.source.clone().map(|s| (s, self.arrivals));
                event.declared_native = info.native.clone().map(|n| (n, self.arrivals));
            }
            TraceRecord::Created(Creation { entity, source, text }) => {
                self.arrivals += 1;
                let entry = match entity {
                    Entity::Stream(id) => facts(&mut self.streams, id.index()),
                    Entity::Event(id) => facts(&mut self.events, id.index()),
                };
                // A pool stream handed out again keeps the line that first asked for it.
                if entry.framework.is_none() {
                    entry.framework = Some((source.clone(), text.clone(), self.arrivals));
                }
            }
            TraceRecord::Op(op) => self.observe_op(op),
            TraceRecord::GroupStream(GroupStream { stream, group }) => {
                let groups = &mut facts(&mut self.streams, stream.index()).process_groups;
                let seen = groups.len() as u64;
                groups.entry(group.clone()).or_insert(seen);
            }
            TraceRecord::GpuTime { .. }
            | TraceRecord::Job(_)
            | TraceRecord::HostSyncRecorded
            | TraceRecord::RangeBegin { .. }
            | TraceRecord::RangeEnd { .. }
            | TraceRecord::FrameLine(_)
            | TraceRecord::Annotation(_) => {}
        }
    }

    /// Names every stream and event from what was observed; a creation known only by its native call site is
    /// named by the program's line there (`symbols`).
    pub fn finish(mut self, symbols: &mut Symbolizer) -> NameTable {
        for facts in self.streams.iter_mut().chain(self.events.iter_mut()) {
            if let (None, Some((site, at))) = (&facts.declared_at, &facts.declared_native) {
                facts.declared_at = symbols.locate_program(site).map(|place| (place, *at));
            }
        }
        let stream_places = ordinals(self.streams.iter().map(creation_place));
        let event_places = ordinals(self.events.iter().map(creation_place));
        let legacy_devices = {
            let mut devices: Vec<u32> =
                self.streams.iter().filter(|s| s.kind == Some(StreamKind::LegacyDefault)).map(|s| s.device).collect();
            devices.sort_unstable();
            devices.dedup();
            devices.len()
        };
        let streams = self
            .streams
            .iter()
            .zip(stream_places)
            .map(|(facts, nth)| {
                let kind = facts.kind?;
                let name = stream_name(facts, nth, legacy_devices > 1);
                Some(StreamEntry { handle: facts.handle, kind, gpu: facts.gpu, name })
            })
            .collect();
        let events = self.events.iter().zip(event_places).map(|(facts, nth)| event_name(facts, nth)).collect();
        NameTable { streams, events, threads: self.tids }
    }
}

/// Where an entity was created, by the framework or its declaration, with when that was learned.
fn creation_place(facts: &Facts) -> Option<(&SourceLocation, u64)> {
    match (&facts.framework, &facts.declared_at) {
        (Some((place, _, at)), _) => Some((place, *at)),
        (None, Some((place, at))) => Some((place, *at)),
        (None, None) => None,
    }
}

/// For each entity, its position among those created at the same place (1-based) when there are several.
fn ordinals<'a>(places: impl Iterator<Item = Option<(&'a SourceLocation, u64)>>) -> Vec<Option<usize>> {
    let places: Vec<_> = places.collect();
    let mut by_place: FxHashMap<&SourceLocation, Vec<(u64, usize)>> = FxHashMap::default();
    for (index, place) in places.iter().enumerate() {
        if let Some((place, at)) = place {
            by_place.entry(place).or_default().push((*at, index));
        }
    }
    let mut nth = vec![None; places.len()];
    for mut created in by_place.into_values().filter(|c| c.len() > 1) {
        created.sort_unstable();
        for (position, (_, index)) in created.into_iter().enumerate() {
            nth[index] = Some(position + 1);
        }
    }
    nth
}

/// A name from a creation line: "stream `side = torch.cuda.Stream()` at train.py:11", "the stream created at
/// pipeline.cu:40", with "#2" when several were created there.
fn created_name(noun: &str, place: &SourceLocation, text: Option<&str>, nth: Option<usize>) -> Name {
    let at = short_place(place);
    let number = nth.map_or(String::new(), |n| format!(" #{n}"));
    let (known_as, short) = match text.filter(|t| !t.is_empty()) {
        Some(text) if nth.is_some() => (format!("{noun}{number} of `{text}` at {at}"), format!("{text}{number}")),
        Some(text) => (format!("{noun} `{text}` at {at}"), text.to_string()),
        None if nth.is_some() => (format!("{noun}{number} created at {at}"), format!("{noun}{number} created at {at}")),
        // A native creation line also names its function, as the accesses' frames do ("pipeline.cu:40 in main").
        None => {
            let at = match place.function.as_deref().filter(|f| !f.is_empty() && !f.starts_with('<')) {
                Some(function) if place.line.is_some() => format!("{at} in {function}"),
                _ => at,
            };
            (format!("the {noun} created at {at}"), format!("created at {at}"))
        }
    };
    Name { known_as: Some(known_as.into()), short: Some(short.into()), created_at: Some(place.clone()) }
}

fn stream_name(facts: &Facts, nth: Option<usize>, several_devices: bool) -> Name {
    if let Some((place, text, _)) = &facts.framework {
        return created_name("stream", place, text.as_deref(), nth);
    }
    let plain = |known_as: String, short: String| Name {
        known_as: Some(known_as.into()),
        short: Some(short.into()),
        created_at: None,
    };
    match facts.kind {
        Some(StreamKind::LegacyDefault) if several_devices => {
            return plain(
                format!("the default stream of device {}", facts.device),
                format!("default stream, device {}", facts.device),
            );
        }
        Some(StreamKind::LegacyDefault) => return plain("the default stream".into(), "default stream".into()),
        Some(StreamKind::PerThreadDefault) => {
            let thread = facts.tid.map_or(String::new(), |tid| format!(" of host thread {tid}"));
            return plain(
                format!("the per-thread default stream{thread}"),
                format!("per-thread default stream{thread}"),
            );
        }
        Some(StreamKind::HostThread) => {
            return plain(format!("host thread {}", facts.handle), format!("host thread {}", facts.handle));
        }
        _ => {}
    }
    if facts.nccl_kernels > 0 && facts.other_kernels == 0 {
        let (known_as, short) = nccl_stream_name(&facts.process_groups);
        return plain(known_as, short);
    }
    if let Some((place, _)) = &facts.declared_at {
        return created_name("stream", place, None, nth);
    }
    // A small number is a name the trace's author chose (a hand-written trace's stream 2): kept as it is. A
    // pointer (a capture's handle) means nothing to anyone, and the first line that used it says more.
    match facts.first_use.as_ref().filter(|_| facts.handle > 0xF_FFFF) {
        Some(place) => {
            let at = short_place(place);
            plain(format!("the stream first used at {at}"), format!("first used at {at}"))
        }
        None => Name::default(),
    }
}

/// NCCL's stream, of the process groups whose collectives ran on it when the trace says (one, in PyTorch: each
/// group has its own streams). A trace may give several: the first three are named in order of appearance, and
/// the rest counted, so that a name stays a name; the short form for lanes counts them.
fn nccl_stream_name(groups: &FxHashMap<Arc<str>, u64>) -> (String, String) {
    const NAMED: usize = 3;
    let mut ordered: Vec<(&Arc<str>, &u64)> = groups.iter().collect();
    ordered.sort_unstable_by_key(|(_, seen)| **seen);
    let mut quoted: Vec<String> = ordered.iter().take(NAMED).map(|(group, _)| format!("`{group}`")).collect();
    match ordered.as_slice() {
        [] => ("NCCL's stream".into(), "NCCL stream".into()),
        [(only, _)] => (format!("NCCL's stream of process group `{only}`"), format!("NCCL stream, {only}")),
        several => {
            let last = match several.len().checked_sub(NAMED).filter(|&more| more > 0) {
                Some(more) => format!("{more} more"),
                None => quoted.pop().unwrap_or_default(),
            };
            let known_as = format!("NCCL's stream of process groups {} and {last}", quoted.join(", "));
            (known_as, format!("NCCL stream, {} process groups", several.len()))
        }
    }
}

fn event_name(facts: &Facts, nth: Option<usize>) -> Name {
    match (&facts.framework, &facts.declared_at) {
        (Some((place, text, _)), _) => created_name("event", place, text.as_deref(), nth),
        (None, Some((place, _))) => created_name("event", place, None, nth),
        (None, None) => Name::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn stream(id: u32, handle: u64, kind: StreamKind, source: Option<&str>) -> TraceRecord {
        TraceRecord::Stream(StreamInfo {
            id: StreamId(id),
            handle,
            kind,
            priority: None,
            process: ProcessId(0),
            device: DeviceId(0),
            gpu: 0,
            context: ContextId(0),
            created_by: None,
            source: source.map(SourceLocation::parse),
            native: None,
        })
    }

    fn created(id: u32, at: &str, text: &str) -> TraceRecord {
        TraceRecord::Created(Creation {
            entity: Entity::Stream(StreamId(id)),
            source: SourceLocation::parse(at),
            text: Some(text.into()),
        })
    }

    fn kernel(stream: u32, name: &str, source: Option<&str>) -> TraceRecord {
        let kind = OpKind::Kernel {
            stream: StreamId(stream),
            name: name.into(),
            accesses: vec![],
            pointers: vec![],
            exact: None,
        };
        TraceRecord::Op(Operation { source: source.map(SourceLocation::parse), ..Operation::plain(kind) })
    }

    fn group(stream: u32, group: &str) -> TraceRecord {
        TraceRecord::GroupStream(GroupStream { stream: StreamId(stream), group: group.into() })
    }

    const ALL_REDUCE: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

    fn named(records: &[TraceRecord]) -> NameTable {
        let mut names = Names::default();
        for record in records {
            names.observe(record);
        }
        names.finish(&mut Symbolizer::default())
    }

    fn name(names: &NameTable, stream: u32) -> Option<&Name> {
        names.stream(StreamId(stream)).map(|entry| &entry.name)
    }

    fn known(names: &NameTable, stream: u32) -> Option<String> {
        name(names, stream).and_then(|n| n.known_as.as_deref().map(str::to_string))
    }

    fn short(names: &NameTable, stream: u32) -> Option<&str> {
        name(names, stream).and_then(|n| n.short.as_deref())
    }

    #[test]
    fn each_source_of_a_name_in_its_order() {
        let names = named(&[
            stream(0, 1, StreamKind::LegacyDefault, None),
            stream(1, 0x21a9b8f0, StreamKind::NonBlocking, None),
            stream(2, 0x21a9c000, StreamKind::NonBlocking, None),
            stream(3, 0x21a9d000, StreamKind::Blocking, Some("/src/pipeline.cu:40")),
            stream(4, 0x21a9e000, StreamKind::NonBlocking, None),
            stream(5, 0x21a9f000, StreamKind::NonBlocking, None),
            created(1, "/home/u/train.py:11", "side = torch.cuda.Stream()"),
            kernel(
                2,
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                Some("/home/u/train.py:30"),
            ),
            kernel(4, "scale", Some("/home/u/train.py:20")),
            kernel(4, "scale", Some("/home/u/train.py:21")),
            // The framework line wins over the first use.
            kernel(1, "scale", Some("/home/u/train.py:19")),
        ]);
        assert_eq!(known(&names, 0).as_deref(), Some("the default stream"));
        assert_eq!(known(&names, 1).as_deref(), Some("stream `side = torch.cuda.Stream()` at train.py:11"));
        assert_eq!(short(&names, 1), Some("side = torch.cuda.Stream()"));
        assert_eq!(
            name(&names, 1).and_then(|n| n.created_at.as_ref()).map(ToString::to_string).as_deref(),
            Some("/home/u/train.py:11")
        );
        assert_eq!(known(&names, 2).as_deref(), Some("NCCL's stream"));
        assert_eq!(known(&names, 3).as_deref(), Some("the stream created at pipeline.cu:40"));
        assert_eq!(known(&names, 4).as_deref(), Some("the stream first used at train.py:20"));
        assert_eq!(known(&names, 5), None, "nothing but the handle is known");
    }

    #[test]
    fn streams_created_at_one_line_are_numbered_in_creation_order() {
        let names = named(&[
            stream(0, 0x10, StreamKind::NonBlocking, None),
            stream(1, 0x20, StreamKind::NonBlocking, None),
            stream(2, 0x30, StreamKind::NonBlocking, None),
            created(1, "t.py:9", "s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()"),
            created(0, "t.py:9", "s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()"),
            // Handed out again by the pool: the first line stays.
            created(1, "t.py:30", "again = torch.cuda.Stream()"),
        ]);
        assert_eq!(
            known(&names, 1).as_deref(),
            Some("stream #1 of `s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()` at t.py:9")
        );
        assert_eq!(
            known(&names, 0).as_deref(),
            Some("stream #2 of `s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()` at t.py:9")
        );
        assert_eq!(known(&names, 2), None);
    }

    #[test]
    fn a_stream_running_other_kernels_beside_nccl_is_not_nccls_own() {
        let names = named(&[
            stream(0, 0x10, StreamKind::NonBlocking, None),
            kernel(0, "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", None),
            kernel(0, "scale", None),
        ]);
        assert_eq!(known(&names, 0), None);
    }

    #[test]
    fn nccls_stream_is_named_by_the_process_group_of_its_collectives() {
        let names = named(&[
            stream(0, 1, StreamKind::LegacyDefault, None),
            stream(1, 0x366eecf0, StreamKind::NonBlocking, None),
            stream(2, 0x366ef000, StreamKind::NonBlocking, None),
            kernel(1, ALL_REDUCE, Some("/home/u/train.py:13")),
            group(1, "default_pg"),
            kernel(1, ALL_REDUCE, Some("/home/u/train.py:13")),
            group(1, "default_pg"),
            kernel(2, ALL_REDUCE, Some("/home/u/train.py:20")),
            group(2, "group 1"),
            // A synchronous collective runs on the current stream: that stays the default stream.
            kernel(0, ALL_REDUCE, Some("/home/u/train.py:22")),
            group(0, "default_pg"),
        ]);
        assert_eq!(known(&names, 1).as_deref(), Some("NCCL's stream of process group `default_pg`"));
        assert_eq!(short(&names, 1), Some("NCCL stream, default_pg"));
        assert_eq!(known(&names, 2).as_deref(), Some("NCCL's stream of process group `group 1`"));
        assert_eq!(known(&names, 0).as_deref(), Some("the default stream"));
    }

    #[test]
    fn a_stream_of_several_process_groups_names_three_and_counts_the_rest() {
        let mut records =
            vec![stream(0, 0x10, StreamKind::NonBlocking, None), stream(1, 0x20, StreamKind::NonBlocking, None)];
        for name in ["tp", "dp"] {
            records.extend([kernel(0, ALL_REDUCE, None), group(0, name)]);
        }
        for name in ["a", "b", "c", "b", "d", "e"] {
            records.extend([kernel(1, ALL_REDUCE, None), group(1, name)]);
        }
        let names = named(&records);
        assert_eq!(known(&names, 0).as_deref(), Some("NCCL's stream of process groups `tp` and `dp`"));
        assert_eq!(short(&names, 0), Some("NCCL stream, 2 process groups"));
        assert_eq!(known(&names, 1).as_deref(), Some("NCCL's stream of process groups `a`, `b`, `c` and 2 more"));
        assert_eq!(short(&names, 1), Some("NCCL stream, 5 process groups"));
    }

    #[test]
    fn a_process_group_does_not_make_a_stream_of_other_kernels_nccls() {
        let names = named(&[
            stream(0, 0x21a9e000, StreamKind::NonBlocking, None),
            kernel(0, "scale", Some("/home/u/train.py:20")),
            kernel(0, ALL_REDUCE, None),
            group(0, "default_pg"),
        ]);
        assert_eq!(known(&names, 0).as_deref(), Some("the stream first used at train.py:20"));
    }
}
