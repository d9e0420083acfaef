//! The JSON report's wire types (docs/json-report.md): each finding as the schema spells it, its ids replaced
//! by what they stand for. Only looking up and copying happens here; the fix's words come from report::fix.

use std::sync::Arc;

use serde::Serialize;

use crate::findings::{
    AccessAction, AccessExtent, AllocationRef, Collective, EdgeCount, EdgeKind, Fix, OpClass, OpOccurrence,
    RaceFinding, RaceKind, ReusedBlock, SiteId, StreamPairCount, Unordered, UnorderedPairGroup, UnrecordedWait,
};
use crate::ingest::{CounterRow, ImportCounter, ImportCounters, Severity};
use crate::model::{AccessRange, AllocKind, GraphBuild, SourceLocation, StreamId, StreamKind};
use crate::report::describe_why;
use crate::report::fix::{fix_text, FixParty};
use crate::resolve::Lookup;
use crate::symbols::SymbolCounts;

/// Whether a finding's streams, events and lines are shown as resolved, or as the engine left them (the info
/// list of waits on never-recorded events, which reports have always listed unnamed and unsymbolized).
#[derive(Copy, Clone, PartialEq, Eq)]
pub enum Naming {
    Resolved,
    AsRecorded,
}

#[derive(Serialize)]
pub struct Stream<'a> {
    handle: u64,
    kind: StreamKind,
    name: Option<&'a Arc<str>>,
    created_at: Option<&'a SourceLocation>,
    device: u32,
}

impl<'a> Stream<'a> {
    /// The stream `id`; none for an id no record declared (which the engine never reports).
    pub fn of(look: Lookup<'a>, id: StreamId, naming: Naming) -> Option<Stream<'a>> {
        let entry = look.stream(id)?;
        let (name, created_at) = match naming {
            Naming::Resolved => (entry.name.known_as.as_ref(), entry.name.created_at.as_ref()),
            Naming::AsRecorded => (None, None),
        };
        Some(Stream { handle: entry.handle, kind: entry.kind, name, created_at, device: entry.gpu })
    }
}

#[derive(Serialize)]
pub struct Thread {
    tid: u64,
}

#[derive(Serialize)]
pub struct Site<'a> {
    class: OpClass,
    name: &'a str,
    stream: Option<Stream<'a>>,
    thread: Thread,
    source: Option<&'a SourceLocation>,
    /// The frames the text report lists, innermost first, where there are more than `source`: a native call
    /// site's frames of the program's own, then the Python line that made the call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    frames: Vec<&'a SourceLocation>,
    region: Option<&'a Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    graph: Option<GraphSite<'a>>,
}

/// A site's frames, when there are more than the one its `source` already gives.
fn more_frames_than_one(frames: Vec<&SourceLocation>) -> Vec<&SourceLocation> {
    if frames.len() > 1 {
        frames
    } else {
        Vec::new()
    }
}

#[derive(Serialize)]
pub struct GraphSite<'a> {
    graph: &'a str,
    build: GraphBuild,
    launched_at: Option<&'a SourceLocation>,
}

impl<'a> Site<'a> {
    pub fn of(look: Lookup<'a>, id: SiteId, naming: Naming) -> Site<'a> {
        let site = look.site(id);
        let resolved = naming == Naming::Resolved;
        Site {
            class: site.class,
            name: &site.name,
            stream: site.stream.and_then(|stream| Stream::of(look, stream, naming)),
            thread: Thread { tid: look.tid(site.thread) },
            source: if resolved { look.source(id) } else { site.source.as_ref() },
            frames: if resolved { more_frames_than_one(look.frames(id)) } else { Vec::new() },
            region: site.region.as_ref(),
            graph: site.graph.as_ref().map(|graph| GraphSite {
                graph: &graph.graph,
                build: graph.build,
                launched_at: if resolved { look.launched_at(id) } else { graph.launched_at.as_ref() },
            }),
        }
    }
}

#[derive(Serialize)]
pub struct Occurrence<'a> {
    site: Site<'a>,
    action: AccessAction,
    seq: u64,
    origin: u64,
    stream_position: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<u32>,
}

impl<'a> Occurrence<'a> {
    fn of(look: Lookup<'a>, op: &OpOccurrence, naming: Naming) -> Occurrence<'a> {
        Occurrence {
            site: Site::of(look, op.site, naming),
            action: op.action,
            seq: op.seq,
            origin: op.origin,
            stream_position: op.stream_position,
            node: op.node,
        }
    }
}

#[derive(Serialize)]
pub struct Allocation<'a> {
    handle: u64,
    range: AccessRange,
    kind: AllocKind,
    label: Option<&'a str>,
    source: Option<&'a SourceLocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reuses: Option<&'a ReusedBlock>,
}

impl<'a> Allocation<'a> {
    fn of(look: Lookup<'a>, allocation: &'a AllocationRef) -> Allocation<'a> {
        Allocation {
            handle: allocation.handle,
            range: allocation.range,
            kind: allocation.kind,
            label: allocation.label.as_deref(),
            source: look.allocation_source(allocation),
            reuses: allocation.reuses.as_deref(),
        }
    }
}

/// A fix as data: its kind, the streams it names, and the two operations' labels and lines in the roles the kind
/// gives them.
#[derive(Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WireFix<'a> {
    RecordAndWait {
        record_on: Option<Stream<'a>>,
        after: &'a str,
        wait_on: Option<Stream<'a>>,
        before: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        before_at: Option<String>,
    },
    FreeAfterUse {
        free_stream: Option<Stream<'a>>,
        use_stream: Option<Stream<'a>>,
        use_op: &'a str,
    },
    SyncBeforeRelease {
        stream: Option<Stream<'a>>,
        after: &'a str,
    },
    HostWaitsFirst {
        stream: Option<Stream<'a>>,
        after: &'a str,
        touch: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        touch_at: Option<String>,
    },
    AfterHostAccess {
        touch: &'a str,
        stream: Option<Stream<'a>>,
        before: &'a str,
    },
    GraphDependency {
        graph: &'a str,
        from: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        from_at: Option<String>,
        to: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        to_at: Option<String>,
        explicit: bool,
    },
    CaptureJoin {
        graph: &'a str,
        record_on: Option<Stream<'a>>,
        after: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        wait_on: Option<Stream<'a>>,
        before: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        before_at: Option<String>,
        framework: bool,
    },
    WaitForCollective {
        collective: &'a str,
        call: Collective,
        before: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        collective_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        before_at: Option<String>,
    },
    WaitStreamBeforeCollective {
        stream: Option<Stream<'a>>,
        after: &'a str,
        collective: &'a str,
        call: Collective,
        #[serde(skip_serializing_if = "Option::is_none")]
        after_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        collective_at: Option<String>,
    },
}

impl<'a> WireFix<'a> {
    fn of(look: Lookup<'a>, race: &'a RaceFinding) -> WireFix<'a> {
        let stream = |id: StreamId| Stream::of(look, id, Naming::Resolved);
        let (earlier, later) = (FixParty::of(look, &race.earlier), FixParty::of(look, &race.later));
        match &race.fix {
            Fix::RecordAndWait { record_on, wait_on } => WireFix::RecordAndWait {
                record_on: stream(*record_on),
                after: earlier.label,
                wait_on: stream(*wait_on),
                before: later.label,
                after_at: earlier.at,
                before_at: later.at,
            },
            Fix::FreeAfterUse { free_stream, use_stream } => WireFix::FreeAfterUse {
                free_stream: stream(*free_stream),
                use_stream: stream(*use_stream),
                use_op: later.label,
            },
            Fix::SyncBeforeRelease { stream: on } => {
                WireFix::SyncBeforeRelease { stream: stream(*on), after: earlier.label }
            }
            Fix::HostWaitsFirst { stream: on } => WireFix::HostWaitsFirst {
                stream: stream(*on),
                after: earlier.label,
                touch: later.label,
                after_at: earlier.at,
                touch_at: later.at,
            },
            Fix::AfterHostAccess { stream: on } => {
                WireFix::AfterHostAccess { touch: earlier.label, stream: stream(*on), before: later.label }
            }
            Fix::GraphDependency { graph, explicit } => WireFix::GraphDependency {
                graph,
                from: earlier.label,
                from_at: earlier.at,
                to: later.label,
                to_at: later.at,
                explicit: *explicit,
            },
            Fix::CaptureJoin { graph, record_on, wait_on, framework } => WireFix::CaptureJoin {
                graph,
                record_on: stream(*record_on),
                after: earlier.label,
                after_at: earlier.at,
                wait_on: stream(*wait_on),
                before: later.label,
                before_at: later.at,
                framework: *framework,
            },
            Fix::WaitForCollective { call } => WireFix::WaitForCollective {
                collective: earlier.label,
                call: *call,
                before: later.label,
                collective_at: earlier.at,
                before_at: later.at,
            },
            Fix::WaitStreamBeforeCollective { stream: on, call } => WireFix::WaitStreamBeforeCollective {
                stream: stream(*on),
                after: earlier.label,
                collective: later.label,
                call: *call,
                after_at: earlier.at,
                collective_at: later.at,
            },
        }
    }
}

#[derive(Serialize)]
pub struct Race<'a> {
    kind: RaceKind,
    earlier: Occurrence<'a>,
    later: Occurrence<'a>,
    range: AccessRange,
    allocation: Option<Allocation<'a>>,
    why: &'a Unordered,
    fix: WireFix<'a>,
    count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    earlier_view: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    later_view: Option<&'a str>,
    /// `whole_block_arguments` when a kernel's pointer arguments stood for their whole blocks (tier T1):
    /// `streamtrace capture --exact` confirms the race.
    extent: AccessExtent,
    why_text: String,
    fix_text: String,
}

impl<'a> Race<'a> {
    pub fn of(look: Lookup<'a>, race: &'a RaceFinding) -> Race<'a> {
        Race {
            kind: race.kind,
            earlier: Occurrence::of(look, &race.earlier, Naming::Resolved),
            later: Occurrence::of(look, &race.later, Naming::Resolved),
            range: race.range,
            allocation: race.allocation.as_ref().map(|allocation| Allocation::of(look, allocation)),
            why: &race.why,
            fix: WireFix::of(look, race),
            count: race.count,
            earlier_view: race.earlier_view.as_deref(),
            later_view: race.later_view.as_deref(),
            extent: race.extent,
            why_text: describe_why(look, race),
            fix_text: fix_text(look, race),
        }
    }
}

#[derive(Serialize)]
pub struct Wait<'a> {
    wait: Occurrence<'a>,
    event: u64,
    event_name: Option<&'a Arc<str>>,
    count: u64,
}

impl<'a> Wait<'a> {
    pub fn of(look: Lookup<'a>, wait: &'a UnrecordedWait, naming: Naming) -> Wait<'a> {
        Wait {
            wait: Occurrence::of(look, &wait.wait, naming),
            event: wait.event,
            event_name: match naming {
                Naming::Resolved => look.event_name(wait.event_id),
                Naming::AsRecorded => None,
            },
            count: wait.count,
        }
    }
}

pub fn waits<'a>(look: Lookup<'a>, waits: &'a [UnrecordedWait], naming: Naming) -> Vec<Wait<'a>> {
    waits.iter().map(|wait| Wait::of(look, wait, naming)).collect()
}

#[derive(Serialize)]
pub struct PairGroup<'a> {
    earlier: Site<'a>,
    later: Site<'a>,
    pairs: u64,
    first: (u64, u64),
}

impl<'a> PairGroup<'a> {
    pub fn of(look: Lookup<'a>, group: &UnorderedPairGroup) -> PairGroup<'a> {
        PairGroup {
            earlier: Site::of(look, group.earlier, Naming::Resolved),
            later: Site::of(look, group.later, Naming::Resolved),
            pairs: group.pairs,
            first: group.first,
        }
    }
}

#[derive(Serialize)]
pub struct StreamPair<'a> {
    a: Option<Stream<'a>>,
    b: Option<Stream<'a>>,
    pairs: u64,
}

impl<'a> StreamPair<'a> {
    pub fn of(look: Lookup<'a>, pair: &StreamPairCount) -> StreamPair<'a> {
        StreamPair {
            a: Stream::of(look, pair.a, Naming::Resolved),
            b: Stream::of(look, pair.b, Naming::Resolved),
            pairs: pair.pairs,
        }
    }
}

#[derive(Serialize)]
pub struct Edge<'a> {
    via: EdgeKind,
    from: Option<Stream<'a>>,
    to: Option<Stream<'a>>,
    count: u64,
}

impl<'a> Edge<'a> {
    pub fn of(look: Lookup<'a>, edge: &EdgeCount) -> Edge<'a> {
        Edge {
            via: edge.via,
            from: Stream::of(look, edge.from, Naming::Resolved),
            to: edge.to.and_then(|to| Stream::of(look, to, Naming::Resolved)),
            count: edge.count,
        }
    }
}

/// The import's counters, then the symbolizer's own, as one list of counters.
#[derive(Serialize)]
#[serde(untagged)]
pub enum WireCounter<'a> {
    Import(&'a ImportCounter),
    Symbols(CounterRow<'a>),
}

pub fn counters<'a>(import: &'a ImportCounters, symbols: &'a SymbolCounts) -> Vec<WireCounter<'a>> {
    let mut counters: Vec<WireCounter> = import.iter().map(WireCounter::Import).collect();
    if symbols.unreadable_modules > 0 {
        counters.push(WireCounter::Symbols(CounterRow {
            name: SymbolCounts::UNREADABLE_MODULES,
            severity: Severity::Info,
            count: symbols.unreadable_modules,
            meaning: SymbolCounts::UNREADABLE_MODULES_MEANING,
            first: symbols.first_unreadable.as_deref(),
        }));
    }
    counters
}
