//! Conflicts made race findings: the later party as the engine knew it, the race kind, why nothing ordered the
//! two, and the fix. It decides nothing about ordering (the access check found the conflicts) and formats
//! nothing (findings are plain data); it reads the engine's state and writes only the collector and counters.

use super::sites::SiteId;
use super::state::{action_of, Engine, Known, Later};
use crate::findings::{AccessAction, AccessExtent, Fix, OpOccurrence, Party, RaceFinding, RaceKind, Unordered};
use crate::model::ProcessId;

impl Engine {
    /// Turns the conflicts in `self.conflicts` into race findings.
    pub(super) fn report(&mut self, process: ProcessId, later: &Later, known: Known) {
        let Engine {
            conflicts,
            sites,
            collector,
            processes,
            streams,
            host_clocks,
            stats,
            whole_block_sites,
            slot_streams,
            ..
        } = self;
        let known_clock = match known {
            Known::Stream(s) => &streams[s.index()].clock.clock,
            Known::Host(h) => &host_clocks[h].clock,
        };
        let allocations = &processes[process.index()].allocations;
        for conflict in conflicts.iter() {
            let earlier = conflict.earlier;
            let earlier_action = action_of(earlier.effect(), earlier.mode());
            let kind = match (earlier_action, later.action) {
                (AccessAction::Free, _) | (_, AccessAction::Free) => RaceKind::UseAfterFree,
                (AccessAction::Read, _) => RaceKind::WriteAfterRead,
                (_, AccessAction::Read) => RaceKind::ReadAfterWrite,
                _ => RaceKind::WriteAfterWrite,
            };
            stats.race_occurrences += 1;
            collector.race((kind, earlier.site.0, later.site.0), || {
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
                RaceFinding {
                    kind,
                    range: conflict.range,
                    allocation: allocations
                        .describe(conflict.range, Some(earlier.seq), |native| sites.native(native))
                        .map(Box::new),
                    why: Unordered::CrossStream { known: known_clock.get(earlier.slot), position: earlier.tick() },
                    fix,
                    count: 1,
                    earlier: earlier_occurrence,
                    later: later_occurrence,
                    earlier_view: conflict.earlier_view.as_ref().map(|v| v.to_string()),
                    later_view: later.view.as_ref().map(|v| v.to_string()),
                    // Decided here, at the first occurrence, so that a capture range's section says it too.
                    extent: if whole_block_sites.contains(&earlier.site) || whole_block_sites.contains(&later.site) {
                        AccessExtent::WholeBlockArguments
                    } else {
                        AccessExtent::Known
                    },
                }
            });
        }
    }
}
