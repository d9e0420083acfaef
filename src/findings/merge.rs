//! Findings of several analyses as one (a job's timeline lists every rank's races): each analysis's ids move
//! past those of the analyses before it, so that they still index the merged tables. Also the parts of one
//! analysis as one (the capture ranges of a trace), whose ids need no moving.

use std::sync::Arc;

use super::{Findings, NativeId, OpOccurrence, RaceFinding, SiteId, StreamPairTotals, STREAM_PAIRS_LISTED};
use crate::model::{EventId, StreamId, ThreadId};

/// How far the ids of one analysis move when its findings join others': by how many streams, events and host
/// threads the analyses before it declared, and how many operations they issued. Sites and native call sites
/// move by as many as the merged findings already hold.
#[derive(Copy, Clone, Debug, Default)]
pub struct IdShift {
    pub streams: u32,
    pub events: u32,
    pub threads: u32,
    pub seq: u64,
}

impl Findings {
    /// Adds the findings of a later part of the same analysis (a capture range that ended after this one's):
    /// its site tables extend this one's, since the engine's ids only grow, so they replace them; counts of the
    /// same stream pair or edge add up.
    pub fn extend_with_later(&mut self, later: Findings) {
        self.races.extend(later.races);
        self.timing_only_races.extend(later.timing_only_races);
        self.unrecorded_waits.extend(later.unrecorded_waits);
        self.waits_on_never_recorded_events.extend(later.waits_on_never_recorded_events);
        self.waits_before_a_pipelines_first_record.extend(later.waits_before_a_pipelines_first_record);
        self.waits_with_unknown_record.extend(later.waits_with_unknown_record);
        self.unordered_pairs.extend(later.unordered_pairs);
        // Stream pairs in both lists are one pair. Where a list left pairs out, a pair left out of both may
        // be counted twice: the merged count is then at most that much too high.
        let complete = |totals: StreamPairTotals, listed: usize| totals.stream_pairs == listed as u64;
        let both_complete = complete(self.stream_pair_totals, self.stream_pairs.len())
            && complete(later.stream_pair_totals, later.stream_pairs.len());
        let mut shared = 0;
        for pair in later.stream_pairs {
            match self.stream_pairs.iter_mut().find(|p| (p.a, p.b) == (pair.a, pair.b)) {
                Some(known) => {
                    known.pairs += pair.pairs;
                    shared += 1;
                }
                None => self.stream_pairs.push(pair),
            }
        }
        self.stream_pair_totals = StreamPairTotals {
            stream_pairs: if both_complete {
                self.stream_pairs.len() as u64
            } else {
                self.stream_pair_totals.stream_pairs + later.stream_pair_totals.stream_pairs - shared
            },
            pairs: self.stream_pair_totals.pairs + later.stream_pair_totals.pairs,
        };
        if self.stream_pairs.len() > STREAM_PAIRS_LISTED {
            self.stream_pairs.sort_by_key(|p| std::cmp::Reverse(p.pairs));
            self.stream_pairs.truncate(STREAM_PAIRS_LISTED);
        }
        for edge in later.edges {
            match self.edges.iter_mut().find(|e| (e.via, e.from, e.to) == (edge.via, edge.from, edge.to)) {
                Some(known) => known.count += edge.count,
                None => self.edges.push(edge),
            }
        }
        if later.sites.len() >= self.sites.len() {
            self.sites = later.sites;
        }
        if later.natives.len() >= self.natives.len() {
            self.natives = later.natives;
        }
    }

    /// Adds `other`'s races (those ordered only by timing too), unrecorded waits and unordered pairs (what a job's
    /// timeline shows) with the sites and native call sites they name, every id moved by `shift`.
    pub fn append(&mut self, other: &Findings, shift: IdShift) {
        let (sites, natives) = (self.sites.len() as u32, self.natives.len() as u32);
        let native = |id: NativeId| NativeId(id.0 + natives);
        let stream = |id: &mut StreamId| id.0 += shift.streams;
        let occurrence = |op: &mut OpOccurrence| {
            op.site = SiteId(op.site.0 + sites);
            op.seq += shift.seq;
        };
        self.sites.extend(other.sites.iter().cloned().map(|mut site| {
            site.stream = site.stream.map(|s| StreamId(s.0 + shift.streams));
            site.thread = ThreadId(site.thread.0 + shift.threads);
            site.native = site.native.map(native);
            if let Some(graph) = &mut site.graph {
                let launched_native = graph.launched_native.map(native);
                Arc::make_mut(graph).launched_native = launched_native;
            }
            site
        }));
        self.natives.extend(other.natives.iter().cloned());
        let race = |race: &RaceFinding| {
            let mut race = race.clone();
            occurrence(&mut race.earlier);
            occurrence(&mut race.later);
            if let Some(allocation) = &mut race.allocation {
                allocation.native = allocation.native.map(native);
            }
            race.fix.streams_mut().into_iter().for_each(stream);
            race
        };
        self.races.extend(other.races.iter().map(race));
        self.timing_only_races.extend(other.timing_only_races.iter().map(race));
        self.stream_pairs.extend(other.stream_pairs.iter().cloned().map(|mut pair| {
            stream(&mut pair.a);
            stream(&mut pair.b);
            pair
        }));
        self.unordered_pairs.extend(other.unordered_pairs.iter().cloned().map(|mut group| {
            group.earlier = SiteId(group.earlier.0 + sites);
            group.later = SiteId(group.later.0 + sites);
            group.first = (group.first.0 + shift.seq, group.first.1 + shift.seq);
            group
        }));
        self.unrecorded_waits.extend(other.unrecorded_waits.iter().cloned().map(|mut wait| {
            occurrence(&mut wait.wait);
            wait.event_id = wait.event_id.map(|e| EventId(e.0 + shift.events));
            wait
        }));
    }
}
