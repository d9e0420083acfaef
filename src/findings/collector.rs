//! Folding: the engine reports every occurrence; the collector keeps one finding per pair of sites, with a count.

use rustc_hash::FxHashMap;

use super::{
    EdgeCount, EdgeKind, Findings, RaceFinding, RaceKind, Site, SiteId, StreamPairCount, StreamPairTotals,
    UnorderedPairGroup, UnrecordedWait,
};
use crate::model::{EventId, NativeSite, StreamId};

/// What makes two race occurrences the same finding: the kind and the two sites, as the engine numbers them.
pub type RaceKey = (RaceKind, u32, u32);

/// Collects findings as the engine streams them, folding repeats.
#[derive(Default)]
pub struct FindingCollector {
    races: Vec<RaceFinding>,
    race_index: FxHashMap<RaceKey, usize>,
    waits: WaitTally,
    never_recorded_waits: Vec<UnrecordedWait>,
    pipeline_first_waits: Vec<UnrecordedWait>,
    unknown_record_waits: WaitTally,
    pair_groups: Vec<UnorderedPairGroup>,
    pair_index: FxHashMap<(u32, u32), usize>,
    stream_pairs: Vec<StreamPairCount>,
    stream_pair_totals: StreamPairTotals,
    edges: FxHashMap<(EdgeKind, StreamId, Option<StreamId>), EdgeCount>,
}

impl FindingCollector {
    /// Counts one occurrence of the race `key`; `describe` builds the finding on its first occurrence only.
    pub fn race(&mut self, key: RaceKey, describe: impl FnOnce() -> RaceFinding) {
        match self.race_index.get(&key) {
            Some(&i) => self.races[i].count += 1,
            None => {
                self.race_index.insert(key, self.races.len());
                self.races.push(describe());
            }
        }
    }

    /// Counts one more occurrence of a race already described; false when none is.
    pub fn count_again(&mut self, key: RaceKey) -> bool {
        match self.race_index.get(&key) {
            Some(&i) => {
                self.races[i].count += 1;
                true
            }
            None => false,
        }
    }

    /// Counts a wait on a never-recorded event at the wait site `site` (engine numbering).
    pub fn unrecorded_wait(&mut self, site: u32, describe: impl FnOnce() -> UnrecordedWait) {
        self.waits.count(site, describe);
    }

    /// Sets aside, as info, the folded waits whose event `never_recorded` says no record ever named, and those
    /// whose event `waited_after_record` says the program waited on again once recorded (a pipeline's first
    /// turn): the others waited before a record that came later, which is an ordering mistake.
    pub fn set_aside_harmless_waits(
        &mut self,
        never_recorded: impl Fn(EventId) -> bool,
        waited_after_record: impl Fn(EventId) -> bool,
    ) {
        for wait in std::mem::take(&mut self.waits.waits) {
            match wait.event_id {
                Some(event) if never_recorded(event) => self.never_recorded_waits.push(wait),
                Some(event) if waited_after_record(event) => self.pipeline_first_waits.push(wait),
                _ => self.waits.waits.push(wait),
            }
        }
        self.waits.index.clear();
    }

    /// Counts a wait whose event record the trace does not hold.
    pub fn wait_with_unknown_record(&mut self, site: u32, describe: impl FnOnce() -> UnrecordedWait) {
        self.unknown_record_waits.count(site, describe);
    }

    /// Adds `pairs` unordered operation pairs between the sites `earlier` and `later` (engine numbering).
    pub fn unordered_pairs(
        &mut self,
        earlier: u32,
        later: u32,
        pairs: u64,
        describe: impl FnOnce() -> UnorderedPairGroup,
    ) {
        match self.pair_index.get(&(earlier, later)) {
            Some(&i) => self.pair_groups[i].pairs += pairs,
            None => {
                self.pair_index.insert((earlier, later), self.pair_groups.len());
                self.pair_groups.push(describe());
            }
        }
    }

    /// The exact unordered-pair counts: the stream pairs with the most, and the totals of all.
    pub fn set_stream_pairs(&mut self, listed: Vec<StreamPairCount>, totals: StreamPairTotals) {
        self.stream_pairs = listed;
        self.stream_pair_totals = totals;
    }

    /// Counts a happens-before edge from stream `from` to stream `to` (or to the host).
    pub fn edge(&mut self, via: EdgeKind, from: StreamId, to: Option<StreamId>) {
        self.edges(via, from, to, 1);
    }

    /// Counts `count` such edges at once (those of a stream that ran nothing, counted when it wakes).
    pub fn edges(&mut self, via: EdgeKind, from: StreamId, to: Option<StreamId>, count: u64) {
        self.edges.entry((via, from, to)).or_insert(EdgeCount { via, from, to, count: 0 }).count += count;
    }

    /// Every site a finding collected so far names (the engine keeps them when it drops the sites nothing
    /// refers to).
    pub fn for_each_site(&self, mut each: impl FnMut(SiteId)) {
        for race in &self.races {
            each(race.earlier.site);
            each(race.later.site);
        }
        let waits = (self.waits.waits.iter().chain(&self.never_recorded_waits))
            .chain(&self.pipeline_first_waits)
            .chain(&self.unknown_record_waits.waits);
        waits.for_each(|wait| each(wait.wait.site));
        for group in &self.pair_groups {
            each(group.earlier);
            each(group.later);
        }
    }

    /// Gives every site a finding names its id in the table handed over at the end; no finding is collected
    /// after it (the folding keys keep the engine's numbering).
    pub fn renumber_sites(&mut self, new: impl Fn(SiteId) -> SiteId) {
        for race in &mut self.races {
            race.earlier.site = new(race.earlier.site);
            race.later.site = new(race.later.site);
        }
        let waits = (self.waits.waits.iter_mut().chain(&mut self.never_recorded_waits))
            .chain(&mut self.pipeline_first_waits)
            .chain(&mut self.unknown_record_waits.waits);
        waits.for_each(|wait| wait.wait.site = new(wait.wait.site));
        for group in &mut self.pair_groups {
            group.earlier = new(group.earlier);
            group.later = new(group.later);
        }
    }

    /// The findings, in the order of their first occurrence, with the sites and native call sites the engine
    /// interned; `handle` gives a stream's handle, which orders the stream pairs and edges as people read them.
    pub fn into_findings(
        self,
        sites: Vec<Site>,
        natives: Vec<NativeSite>,
        handle: impl Fn(StreamId) -> u64,
    ) -> Findings {
        let mut races = self.races;
        races.sort_by_key(|r| (r.later.seq, r.earlier.seq));
        let mut unordered_pairs = self.pair_groups;
        unordered_pairs.sort_by(|a, b| b.pairs.cmp(&a.pairs).then(a.first.cmp(&b.first)));
        let mut stream_pairs = self.stream_pairs;
        stream_pairs
            .sort_by(|a, b| b.pairs.cmp(&a.pairs).then((handle(a.a), handle(a.b)).cmp(&(handle(b.a), handle(b.b)))));
        let mut edges: Vec<_> = self.edges.into_values().collect();
        edges.sort_by_key(|e| (e.via as u8, handle(e.from), e.to.map(&handle)));
        Findings {
            races,
            // Set apart afterwards, by comparing with the timestamp order (crate::analysis).
            timing_only_races: Vec::new(),
            unrecorded_waits: self.waits.waits,
            waits_on_never_recorded_events: self.never_recorded_waits,
            waits_before_a_pipelines_first_record: self.pipeline_first_waits,
            waits_with_unknown_record: self.unknown_record_waits.waits,
            unordered_pairs,
            stream_pairs,
            stream_pair_totals: self.stream_pair_totals,
            edges,
            sites,
            natives,
        }
    }
}

/// Waits folded by site: a loop creates a new event each iteration, but it is one bug.
#[derive(Default)]
struct WaitTally {
    waits: Vec<UnrecordedWait>,
    index: FxHashMap<u32, usize>,
}

impl WaitTally {
    fn count(&mut self, site: u32, describe: impl FnOnce() -> UnrecordedWait) {
        match self.index.get(&site) {
            Some(&i) => self.waits[i].count += 1,
            None => {
                self.index.insert(site, self.waits.len());
                self.waits.push(describe());
            }
        }
    }
}
