//! After the engine, one pass: what the findings' ids stand for, as ThreadSanitizer symbolizes a report's stacks
//! all at once before printing it. It names the streams, events and host threads (crate::names), gives every
//! site the findings show its source line (the trace's, else its native call site's, symbolized by
//! crate::symbols) and, for a graph node, its launch's, and symbolizes the allocations' call sites; what the
//! symbolizer could not read comes out with it. Reports look up here ([`Lookup`]) and format; nothing here
//! formats, and the findings are not changed.

use std::sync::Arc;

use crate::findings::{AllocationRef, Findings, NativeId, Site, SiteId};
use crate::model::{EventId, SourceLocation, StreamId, ThreadId};
use crate::names::{NameTable, Names, StreamEntry};
use crate::symbols::{SymbolCounts, Symbolizer};

/// The names, source lines and symbolized call sites of one analysis's findings, by id.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    pub names: NameTable,
    /// By [`SiteId`]: the line the site is shown at.
    sources: Vec<Option<SourceLocation>>,
    /// By [`SiteId`]: the frames a text report lists for the site (its native call site's, from the frame
    /// `sources` names on), for the sites the findings show that have no line from the trace.
    stacks: Vec<Vec<SourceLocation>>,
    /// By [`SiteId`]: for a graph node, where its graph was launched.
    launches: Vec<Option<SourceLocation>>,
    /// By [`NativeId`]: the native call sites symbolized (those the findings show), where they are in the
    /// program's words.
    natives: Vec<Option<SourceLocation>>,
    /// What the symbolizer could not read.
    pub symbols: SymbolCounts,
}

/// Names what `names` observed, then finds the lines of the call sites that `findings` show: the sites of races
/// (those ordered only by timing too, and their graph launches), of unrecorded waits and of unordered pairs, and the races' allocations. The
/// waits on never-recorded events are info that reports list as the engine left them: their sites keep the
/// trace's lines.
pub fn resolve(findings: &Findings, names: Names, mut symbols: Symbolizer) -> Tables {
    // Names first: the creation sites of streams and events are the first frames asked for.
    let names = names.finish(&mut symbols);
    let mut pass = Pass {
        findings,
        symbols,
        tables: Tables {
            names,
            sources: findings.sites.iter().map(|site| site.source.clone()).collect(),
            stacks: vec![Vec::new(); findings.sites.len()],
            launches: findings
                .sites
                .iter()
                .map(|site| site.graph.as_ref().and_then(|g| g.launched_at.clone()))
                .collect(),
            natives: vec![None; findings.natives.len()],
            symbols: SymbolCounts::default(),
        },
    };
    for race in findings.all_races() {
        pass.show(race.earlier.site);
        pass.show(race.later.site);
        if let Some(allocation) = race.allocation.as_ref().filter(|a| a.source.is_none()) {
            if let Some(native) = allocation.native {
                pass.locate(native);
            }
        }
    }
    for wait in findings.unrecorded_waits.iter().chain(&findings.waits_with_unknown_record) {
        pass.show(wait.wait.site);
    }
    for group in &findings.unordered_pairs {
        pass.show(group.earlier);
        pass.show(group.later);
    }
    pass.tables.symbols = pass.symbols.counts();
    pass.tables
}

/// The tables as the pass fills them.
struct Pass<'a> {
    findings: &'a Findings,
    symbols: Symbolizer,
    tables: Tables,
}

impl Pass<'_> {
    /// Where a native call site is in the program's words.
    fn locate(&mut self, native: NativeId) -> Option<SourceLocation> {
        let located = self.symbols.locate(self.findings.native(native));
        self.tables.natives[native.index()] = located.clone();
        located
    }

    /// Gives a site a report shows its line, and its graph launch's, from their native call sites where the
    /// trace gave none.
    fn show(&mut self, id: SiteId) {
        let site = self.findings.site(id);
        if let Some(native) = site.graph.as_ref().and_then(|graph| graph.launched_native) {
            if self.tables.launches[id.index()].is_none() {
                self.tables.launches[id.index()] = self.locate(native);
            }
        }
        if let (None, Some(native)) = (&self.tables.sources[id.index()], site.native) {
            self.tables.sources[id.index()] = self.locate(native);
            self.tables.stacks[id.index()] = self.symbols.stack(self.findings.native(native));
        }
    }
}

impl Tables {
    /// Adds another analysis's tables after these (a job's merged timeline), as
    /// [`Findings::append`](crate::findings::Findings::append) adds its findings.
    pub fn append(&mut self, other: &Tables) {
        self.names.append(&other.names);
        self.sources.extend(other.sources.iter().cloned());
        self.stacks.extend(other.stacks.iter().cloned());
        self.launches.extend(other.launches.iter().cloned());
        self.natives.extend(other.natives.iter().cloned());
    }
}

/// What a report reads: the findings, and what their ids stand for.
#[derive(Copy, Clone)]
pub struct Lookup<'a> {
    pub findings: &'a Findings,
    pub tables: &'a Tables,
}

impl<'a> Lookup<'a> {
    pub fn site(&self, id: SiteId) -> &'a Site {
        self.findings.site(id)
    }

    /// The line a site is shown at: the trace's, else its native call site's.
    pub fn source(&self, id: SiteId) -> Option<&'a SourceLocation> {
        self.tables.sources.get(id.index()).and_then(Option::as_ref)
    }

    /// The frames a report lists for a site, innermost first: its native call site's program frames, else its
    /// one line (the trace's), else none.
    pub fn frames(&self, id: SiteId) -> Vec<&'a SourceLocation> {
        match self.tables.stacks.get(id.index()) {
            Some(stack) if !stack.is_empty() => stack.iter().collect(),
            _ => self.source(id).into_iter().collect(),
        }
    }

    /// Where a graph node's graph was launched.
    pub fn launched_at(&self, id: SiteId) -> Option<&'a SourceLocation> {
        self.tables.launches.get(id.index()).and_then(Option::as_ref)
    }

    /// Where an allocation was made: the trace's line, else its native call site's.
    pub fn allocation_source(&self, allocation: &'a AllocationRef) -> Option<&'a SourceLocation> {
        let native = || self.tables.natives.get(allocation.native?.index())?.as_ref();
        allocation.source.as_ref().or_else(native)
    }

    pub fn stream(&self, id: StreamId) -> Option<&'a StreamEntry> {
        self.tables.names.stream(id)
    }

    /// The stream a site's operation ran on.
    pub fn stream_of(&self, id: SiteId) -> Option<&'a StreamEntry> {
        self.site(id).stream.and_then(|stream| self.stream(stream))
    }

    pub fn tid(&self, id: ThreadId) -> u64 {
        self.tables.names.tid(id)
    }

    /// The name people know an event by, when known.
    pub fn event_name(&self, id: Option<EventId>) -> Option<&'a Arc<str>> {
        self.tables.names.event(id?)?.known_as.as_ref()
    }
}
