//! Findings of several analyses as one (a job's timeline lists every rank's races): each analysis's ids move
//! past those of the analyses before it, so that they still index the merged tables.

use std::sync::Arc;

use super::{Findings, NativeId, OpOccurrence, RaceFinding, SiteId};
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
    /// Adds `other`'s races (those ordered only by timing too) and unrecorded waits (what a job's timeline shows) with the sites and native call
    /// sites they name, every id moved by `shift`.
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
        self.unrecorded_waits.extend(other.unrecorded_waits.iter().cloned().map(|mut wait| {
            occurrence(&mut wait.wait);
            wait.event_id = wait.event_id.map(|e| EventId(e.0 + shift.events));
            wait
        }));
    }
}
