//! Conflicts made race findings: the later party as the engine knew it, the race kind, why nothing ordered the
//! two, and the fix. It decides nothing about ordering (the access check found the conflicts) and formats
//! nothing (findings are plain data); it reads the engine's state and writes only the collector and counters.
//! Conflicts come from the check on the engine's thread (`access`) or from the checker's thread (`checker`),
//! which hands back with each what its finding reads of the moment it was found.

use super::checker::CheckedConflict;
use super::shadow::Conflict;
use super::sites::SiteId;
use super::state::{action_of, Engine, Known, Later};
use crate::findings::{
    AccessAction, AccessExtent, AllocationRef, Fix, OpOccurrence, Party, RaceFinding, RaceKind, Unordered,
};
use crate::model::ProcessId;

impl Engine {
    /// Turns the conflicts in `self.conflicts` into race findings.
    pub(super) fn report(&mut self, process: ProcessId, later: &Later, known: Known) {
        let conflicts = std::mem::take(&mut self.conflicts);
        for conflict in &conflicts {
            let known_tick = match known {
                Known::Stream(s) => self.streams[s.index()].clock.clock.get(conflict.earlier.slot),
                Known::Host(h) => self.host_clocks[h].clock.get(conflict.earlier.slot),
            };
            self.race(conflict, later, known_tick, |engine| {
                let Engine { processes, sites, .. } = engine;
                let allocations = &processes[process.index()].allocations;
                allocations.describe(conflict.range, Some(conflict.earlier.seq), |native| sites.native(native))
            });
        }
        self.conflicts = conflicts;
    }

    /// Makes findings of the conflicts the checker thread handed back (`checker`), in the order it found them.
    pub(super) fn report_checked(&mut self) {
        let Some(checker) = self.checker.as_mut() else { return };
        let mut checked = std::mem::take(&mut checker.checked);
        for found in checked.drain(..) {
            let CheckedConflict { conflict, later, known, allocation, allocation_native } = found;
            self.race(&conflict, &later, known, |engine| {
                let mut allocation = allocation;
                if let (Some(described), Some(native)) = (allocation.as_mut(), allocation_native) {
                    described.native = Some(engine.sites.native(&native));
                }
                allocation
            });
        }
        if let Some(checker) = self.checker.as_mut() {
            checker.checked = checked;
        }
    }

    /// Waits for the checker thread to check everything sent, and makes findings of what it found: before the
    /// engine changes what those findings read.
    pub(super) fn drain_checker(&mut self) {
        if let Some(checker) = self.checker.as_mut() {
            checker.drain();
            self.report_checked();
        }
    }

    /// Counts one occurrence of the race between `conflict`'s earlier party and `later`, whose clock knew the
    /// earlier party's stream up to `known`; on the key's first occurrence, `allocation` describes the memory.
    fn race(
        &mut self,
        conflict: &Conflict,
        later: &Later,
        known: u64,
        allocation: impl FnOnce(&mut Engine) -> Option<AllocationRef>,
    ) {
        let earlier = conflict.earlier;
        let earlier_action = action_of(earlier.effect(), earlier.mode());
        let kind = match (earlier_action, later.action) {
            (AccessAction::Free, _) | (_, AccessAction::Free) => RaceKind::UseAfterFree,
            (AccessAction::Read, _) => RaceKind::WriteAfterRead,
            (_, AccessAction::Read) => RaceKind::ReadAfterWrite,
            _ => RaceKind::WriteAfterWrite,
        };
        self.stats.race_occurrences += 1;
        let key = (kind, earlier.site.0, later.site.0);
        if self.collector.count_again(key) {
            return;
        }
        let allocation = allocation(self).map(Box::new);
        let Engine { sites, streams, whole_block_sites, slot_streams, collector, .. } = self;
        let party = |site: SiteId, action: AccessAction| {
            let site = sites.get(site);
            let stream = site.stream.map(|s| (s, streams[s.index()].info.kind));
            Party { stream, region: site.region.as_deref(), action }
        };
        let fix = Fix::for_race(&party(earlier.site, earlier_action), &party(later.site, later.action))
            .unwrap_or(Fix::SyncBeforeRelease { stream: slot_streams[earlier.slot.index()] });
        let earlier_occurrence = OpOccurrence {
            site: earlier.site,
            action: earlier_action,
            seq: earlier.seq,
            origin: earlier.origin,
            stream_position: Some(earlier.tick()),
            node: None,
        };
        let later_occurrence = OpOccurrence {
            site: later.site,
            action: later.action,
            seq: later.seq,
            origin: later.origin,
            stream_position: later.position,
            node: None,
        };
        let finding = RaceFinding {
            kind,
            range: conflict.range,
            allocation,
            why: Unordered::CrossStream { known, position: earlier.tick() },
            fix,
            count: 1,
            earlier: earlier_occurrence,
            later: later_occurrence,
            earlier_view: conflict.earlier_view.as_ref().map(|v| v.to_string()),
            later_view: later.view.as_ref().map(|v| v.to_string()),
            // Decided here, at the first occurrence, so that a capture range's section says it too.
            extent: if [earlier.site, later.site]
                .iter()
                .any(|site| whole_block_sites.get(site).is_some_and(|blocks| blocks.covers(conflict.range)))
            {
                AccessExtent::WholeBlockArguments
            } else {
                AccessExtent::Known
            },
        };
        collector.race(key, || finding);
    }
}
