//! Findings: plain data describing what is wrong, folded so that one bug is one finding. A finding is ids until
//! it is printed, as ThreadSanitizer's reports are: streams, events and threads by their model ids, operations
//! by the [`SiteId`] of the site they were issued from and native call sites by a [`NativeId`], both into the
//! tables the findings carry (what the engine interned). crate::resolve looks every id up once after the
//! analysis (names, source lines, symbolized frames); reports only format. Nothing here prints, names or decides
//! ordering: the engine hands candidates in and decides the fix (fix.rs) once.

mod collector;
mod fix;
mod merge;

use std::sync::Arc;

use rustc_hash::FxHashSet;
use serde::Serialize;

pub use collector::{FindingCollector, RaceKey};
pub use fix::{Collective, Fix, Party};
pub use merge::IdShift;

use crate::model::{AccessRange, AllocKind, EventId, GraphBuild, NativeSite, SourceLocation, StreamId, ThreadId};

/// The number of an operation site among those the engine interned: an index into [`Findings::sites`]. Shadow
/// memory stores it in 4 bytes instead of a description.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(pub u32);

/// The number of a native call site (the return addresses the capture recorded): an index into
/// [`Findings::natives`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NativeId(pub u32);

impl SiteId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl NativeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where an operation was issued from: what it is, on which stream, by which thread, from which source line.
/// Occurrences of one site in every iteration of a loop fold into one finding.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    pub class: OpClass,
    pub name: Arc<str>,
    pub stream: Option<StreamId>,
    pub thread: ThreadId,
    /// The line the trace gave (a Python line, a hand-written `src`); crate::resolve finds the native call
    /// site's when there is none.
    pub source: Option<SourceLocation>,
    /// The annotated region (NVTX range) the operation was issued in.
    pub region: Option<Arc<str>>,
    /// For a graph node: the graph launch it ran in (its `source` is where the node was captured or added).
    pub graph: Option<Arc<GraphSite>>,
    /// The native call site, which tells apart launches that only their stacks distinguish.
    pub native: Option<NativeId>,
}

impl Site {
    /// What a fix and a sentence call the operation: the framework op it belongs to (`mul_.Tensor`), which says
    /// more to its author than the kernel it launched, else its own name.
    pub fn label(&self) -> &str {
        self.region.as_deref().unwrap_or(&self.name)
    }
}

/// What kind of operation a site issued.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    Kernel,
    Memcpy,
    Memset,
    /// The host thread's own reads and writes of memory the GPU also touches.
    HostAccess,
    /// A host function (`cuLaunchHostFunc`) running in its stream's order.
    HostFunc,
    /// A load or store a host function made, which the capture saw inside it.
    HostFuncAccess,
    /// A stream-ordered allocation.
    Alloc,
    /// A free, stream-ordered or by the host.
    Free,
    StreamWait,
    GraphLaunch,
    /// One node of a graph launch.
    GraphNode,
}

impl OpClass {
    /// How findings and reports name it: "kernel", "host", "graph node", ...
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::Kernel => "kernel",
            OpClass::Memcpy => "memcpy",
            OpClass::Memset => "memset",
            OpClass::HostAccess => "host",
            OpClass::HostFunc => "host function",
            OpClass::HostFuncAccess => "host function access",
            OpClass::Alloc => "alloc",
            OpClass::Free => "free",
            OpClass::StreamWait => "stream wait",
            OpClass::GraphLaunch => "graph launch",
            OpClass::GraphNode => "graph node",
        }
    }
}

impl Serialize for OpClass {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The graph launch a graph node ran in: which graph, and where the launch was issued.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GraphSite {
    pub graph: String,
    pub build: GraphBuild,
    /// The line the trace gave the launch.
    pub launched_at: Option<SourceLocation>,
    /// The launch's native call site, when the capture recorded one.
    pub launched_native: Option<NativeId>,
}

/// What an operation did to the racing bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessAction {
    Read,
    Write,
    /// A stream-ordered free, or the host releasing the block.
    Free,
    /// A stream-ordered allocation.
    Alloc,
}

/// One operation taking part in a finding, at its first occurrence.
#[derive(Clone, Debug)]
pub struct OpOccurrence {
    pub site: SiteId,
    pub action: AccessAction,
    /// Position in host issue order over all operations.
    pub seq: u64,
    /// Where the operation is in the input (line of a JSON trace, row of a table).
    pub origin: u64,
    /// Its position among the memory-touching operations of its stream (1-based); none for host actions.
    pub stream_position: Option<u64>,
    /// In a race between two nodes of one graph launch: the node's index among the launch's graph nodes (the
    /// launch is the operation `seq`), so that timelines outline the node inside the launch.
    pub node: Option<u32>,
}

/// The kind of a data race, named from the later access's point of view.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RaceKind {
    ReadAfterWrite,
    WriteAfterRead,
    WriteAfterWrite,
    UseAfterFree,
}

impl RaceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RaceKind::ReadAfterWrite => "read-after-write",
            RaceKind::WriteAfterRead => "write-after-read",
            RaceKind::WriteAfterWrite => "write-after-write",
            RaceKind::UseAfterFree => "use-after-free",
        }
    }
}

/// Why nothing orders the two operations.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Unordered {
    /// The later operation's stream (or host thread) had been ordered after only the first `known` operations of
    /// the earlier operation's stream, and the earlier operation is its `position`-th.
    CrossStream { known: u64, position: u64 },
    /// Two nodes of one graph launch with no dependency path between them.
    GraphNodes { graph: String },
}

/// The allocation the racing bytes belong to.
#[derive(Clone, Debug)]
pub struct AllocationRef {
    pub handle: u64,
    pub range: AccessRange,
    pub kind: AllocKind,
    pub label: Option<String>,
    /// The line the trace gave its allocation.
    pub source: Option<SourceLocation>,
    /// The allocation's native call site.
    pub native: Option<NativeId>,
    /// For a caching-allocator block handed out after the earlier access: the freed block whose memory it
    /// took over, which the earlier access used. This is the block-reuse bug (a tensor freed while another
    /// stream still used it, without `record_stream`).
    pub reuses: Option<Box<ReusedBlock>>,
}

/// A freed caching-allocator block whose memory a later block took over.
#[derive(Clone, Debug, Serialize)]
pub struct ReusedBlock {
    pub handle: u64,
    pub range: AccessRange,
    /// Where it was allocated.
    pub source: Option<SourceLocation>,
    /// Where it was freed (given back to the pool).
    pub freed_at: Option<SourceLocation>,
}

/// What a race's accesses rest on: the bytes the operations touched as far as the trace knows them, or, for a
/// kernel of a default (CUPTI) capture, the whole allocation blocks its pointer arguments point into (tier T1:
/// a kernel working on its own slice of a block races on the block), which `streamtrace capture --exact`
/// confirms or clears.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessExtent {
    /// Copies', sets' and frees' ranges, framework ops' tensor extents (T2), exact bytes (T3), hand-written ranges.
    Known,
    /// At least one of the two is a kernel whose pointer arguments stood for their whole blocks.
    WholeBlockArguments,
}

/// Two accesses to overlapping bytes, at least one a write, with nothing ordering them.
#[derive(Clone, Debug)]
pub struct RaceFinding {
    pub kind: RaceKind,
    /// The operation issued first.
    pub earlier: OpOccurrence,
    /// The operation issued second.
    pub later: OpOccurrence,
    /// The bytes both touched, at the first occurrence.
    pub range: AccessRange,
    /// Boxed: a finding is kept for the whole run, and this would be a third of its bytes.
    pub allocation: Option<Box<AllocationRef>>,
    pub why: Unordered,
    /// What orders `earlier` before `later`.
    pub fix: Fix,
    /// How many times this pair of sites raced.
    pub count: u64,
    /// The earlier access's strided view (tier T2), when it was one: `[512] strides (2) of 4-byte elements`.
    /// Then `range` is where the shared bytes lie, not every byte of it.
    pub earlier_view: Option<String>,
    /// The later access's strided view, when it was one.
    pub later_view: Option<String>,
    /// Whether the race rests on kernels' pointer arguments taken as whole blocks.
    pub extent: AccessExtent,
}

/// A stream waited on an event that had never been recorded: the wait ordered nothing.
#[derive(Clone, Debug)]
pub struct UnrecordedWait {
    pub wait: OpOccurrence,
    /// The event's handle.
    pub event: u64,
    /// The event's dense id, when the trace declared it (a wait whose record is missing may name none).
    pub event_id: Option<EventId>,
    pub count: u64,
}

/// Unordered pairs of operations on two streams, attributed to the site of the later operation and the site of
/// the most recent unordered operation on the other stream at that time.
#[derive(Clone, Debug)]
pub struct UnorderedPairGroup {
    pub earlier: SiteId,
    pub later: SiteId,
    /// Unordered operation pairs counted into this group.
    pub pairs: u64,
    /// Host issue positions of the first pair.
    pub first: (u64, u64),
}

/// Exact count of unordered operation pairs between two streams.
#[derive(Clone, Debug)]
pub struct StreamPairCount {
    pub a: StreamId,
    pub b: StreamId,
    pub pairs: u64,
}

/// How many stream pairs are listed at most, those with the most unordered pairs: 8,000 streams that never
/// synchronize make 32 million pairs, which no one reads and a report should not hold.
pub const STREAM_PAIRS_LISTED: usize = 100;

/// Every stream pair with unordered operation pairs, counted, listed or not.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamPairTotals {
    /// Stream pairs with at least one unordered operation pair.
    pub stream_pairs: u64,
    /// Unordered cross-stream operation pairs in all.
    pub pairs: u64,
}

/// A happens-before edge between two streams that the trace established: how a wait or a host
/// synchronization carried ordering, counted per kind and stream pair.
#[derive(Clone, Debug)]
pub struct EdgeCount {
    pub via: EdgeKind,
    pub from: StreamId,
    /// The waiting stream; none for a host synchronization (the host thread waited).
    pub to: Option<StreamId>,
    pub count: u64,
}

/// What carried a happens-before edge.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// An event recorded on `from` and waited on by `to`.
    EventWait,
    /// The host synchronized with `from` (stream, event, device or context sync, successful query, blocking call).
    HostSync,
    /// The legacy default stream's implicit barrier.
    LegacyDefault,
}

/// What a CI job makes of an analysis: the exit status and the JSON report's `verdict` say it alike, worst last.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Clean,
    /// The only findings are races ordered only by timing, or by host synchronization the capture cannot see.
    TimingOnly,
    /// Races that no timing could hide, or waits before their event's record.
    Findings,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::TimingOnly => "timing_only",
            Verdict::Findings => "findings",
        }
    }
}

/// Everything an analysis found.
#[derive(Clone, Debug, Default)]
pub struct Findings {
    /// Races that no timing of the run could hide: the timestamp host order finds them too.
    pub races: Vec<RaceFinding>,
    /// Races that only the per-thread host order finds in a trace that records its host synchronization: the
    /// timestamp order has the two calls ordered, so they are ordered only by the timing of this run, or by host
    /// synchronization the capture cannot see (std::atomic flags, spin loops, futexes). Empty otherwise.
    pub timing_only_races: Vec<RaceFinding>,
    pub unrecorded_waits: Vec<UnrecordedWait>,
    /// Waits on events that no record names anywhere in the trace: CUDA makes them no-ops, and libraries make
    /// them on purpose (NCCL waits on its strong streams' serial events, which it records only while a graph
    /// is being captured). Info, not findings: an ordering they fail to give shows up as a race.
    pub waits_on_never_recorded_events: Vec<UnrecordedWait>,
    /// Waits before the first record of an event the program waits on again once it is recorded: a pipeline's
    /// first turn, each stage waiting for the record of the stage before and the first having none (cuBLAS-XT's
    /// tiles, a loop handing buffers over between processes). CUDA makes them no-ops; info, not findings: an
    /// ordering they fail to give shows up as a race.
    pub waits_before_a_pipelines_first_record: Vec<UnrecordedWait>,
    /// Waits whose event record is not in the trace (an nsys export without CUDA_EVENT rows): unknown, not wrong.
    pub waits_with_unknown_record: Vec<UnrecordedWait>,
    pub unordered_pairs: Vec<UnorderedPairGroup>,
    /// The stream pairs with the most unordered operation pairs ([`STREAM_PAIRS_LISTED`] at most).
    pub stream_pairs: Vec<StreamPairCount>,
    pub stream_pair_totals: StreamPairTotals,
    pub edges: Vec<EdgeCount>,
    /// Every site the engine interned, by [`SiteId`].
    pub sites: Vec<Site>,
    /// Every native call site the sites and allocations name, by [`NativeId`].
    pub natives: Vec<NativeSite>,
}

impl Findings {
    pub fn site(&self, id: SiteId) -> &Site {
        &self.sites[id.index()]
    }

    pub fn native(&self, id: NativeId) -> &NativeSite {
        &self.natives[id.index()]
    }

    /// The races, most frequent first (ties: first seen first), for reports that show only the top ones.
    pub fn races_by_count(&self) -> Vec<&RaceFinding> {
        by_count(&self.races)
    }

    /// As [`Findings::races_by_count`], then the races ordered only by timing, the same way: for timelines,
    /// which mark them all.
    pub fn all_races_by_count(&self) -> Vec<&RaceFinding> {
        let mut races = by_count(&self.races);
        races.extend(by_count(&self.timing_only_races));
        races
    }

    /// Whether anything was found that no timing of the run could hide.
    pub fn has_problems(&self) -> bool {
        !self.races.is_empty() || !self.unrecorded_waits.is_empty()
    }

    pub fn verdict(&self) -> Verdict {
        if self.has_problems() {
            Verdict::Findings
        } else if !self.timing_only_races.is_empty() {
            Verdict::TimingOnly
        } else {
            Verdict::Clean
        }
    }

    /// Moves the races that the same trace's findings in the timestamp host order (`by_timestamps`) do not
    /// hold, by kind and the pair of sites, to `timing_only_races`.
    /// The two engines number their sites and native call sites each in its own tables, so sites are compared
    /// by what they are ([`SiteKey`]).
    pub fn set_apart_timing_only(&mut self, by_timestamps: &Findings) {
        fn key<'a>(findings: &'a Findings, race: &RaceFinding) -> (RaceKind, SiteKey<'a>, SiteKey<'a>) {
            (race.kind, findings.site_key(race.earlier.site), findings.site_key(race.later.site))
        }
        let found: FxHashSet<_> = by_timestamps.races.iter().map(|race| key(by_timestamps, race)).collect();
        let (plain, timing_only): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.races).into_iter().partition(|race| found.contains(&key(self, race)));
        self.races = plain;
        self.timing_only_races = timing_only;
    }

    /// What a site is, its native call sites given as themselves rather than by this table's ids.
    pub fn site_key(&self, id: SiteId) -> SiteKey<'_> {
        let site = self.site(id);
        SiteKey {
            class: site.class,
            name: &site.name,
            stream: site.stream,
            thread: site.thread,
            source: site.source.as_ref(),
            region: site.region.as_ref(),
            graph: site.graph.as_deref().map(|graph| {
                let launched_native = graph.launched_native.map(|native| self.native(native));
                (graph.graph.as_str(), graph.build, graph.launched_at.as_ref(), launched_native)
            }),
            native: site.native.map(|native| self.native(native)),
        }
    }

    /// Every race, those ordered only by timing after the others.
    pub fn all_races(&self) -> impl Iterator<Item = &RaceFinding> {
        self.races.iter().chain(&self.timing_only_races)
    }
}

/// A site as it compares across analyses of one trace: every part of it, the native call sites by the
/// records they are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SiteKey<'a> {
    class: OpClass,
    name: &'a str,
    stream: Option<StreamId>,
    thread: ThreadId,
    source: Option<&'a SourceLocation>,
    region: Option<&'a Arc<str>>,
    graph: Option<(&'a str, GraphBuild, Option<&'a SourceLocation>, Option<&'a NativeSite>)>,
    native: Option<&'a NativeSite>,
}

/// `races`, most frequent first (ties: first seen first).
fn by_count(races: &[RaceFinding]) -> Vec<&RaceFinding> {
    let mut races: Vec<&RaceFinding> = races.iter().collect();
    races.sort_by(|a, b| b.count.cmp(&a.count).then(a.later.seq.cmp(&b.later.seq)));
    races
}
