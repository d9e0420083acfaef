//! Tier T0's finding: operations of different streams that nothing orders, counted per stream pair even when
//! no addresses are known (an nsys export). Each stream step counts the operations of other active streams its
//! clock does not cover; at the end the counts become findings.
//!
//! It touches each stream's pair counts and the collector; it reads clocks and never changes them.

use super::sites::SiteId;
use super::state::Engine;
use crate::findings::UnorderedPairGroup;
use crate::model::{Operation, StreamId};

impl Engine {
    /// Counts the operations of other streams that `op`, just stepped on `stream` at `site`, is unordered with.
    /// Pairs are grouped by site only for operations without addresses (tier T0), where they are the finding;
    /// with addresses, races say more and the exact per-stream-pair count suffices.
    // Once the body of the stream step (`tick`), called from it alone on every memory-touching operation:
    // inlined back into it across the module boundary.
    #[inline]
    pub(super) fn count_unordered_pairs(
        &mut self,
        stream: StreamId,
        site: SiteId,
        op: &Operation,
        has_addresses: bool,
    ) {
        let s = stream.index();
        let Engine { streams, processes, collector, .. } = self;
        for &(other, slot) in &processes[op.process.index()].active_streams {
            let o = other.index();
            if o == s {
                continue;
            }
            let latest = streams[o].clock.clock.get(slot);
            let known = streams[s].clock.clock.get(slot);
            if latest <= known {
                continue;
            }
            let pairs = latest - known;
            let counts = &mut streams[s].unordered_with;
            if slot.index() >= counts.len() {
                counts.resize(slot.index() + 1, 0);
            }
            counts[slot.index()] += pairs;
            if let (false, Some(earlier)) = (has_addresses, streams[o].last_site) {
                let first = (streams[o].last_seq, op.seq);
                collector.unordered_pairs(earlier.0, site.0, pairs, || UnorderedPairGroup {
                    earlier,
                    later: site,
                    pairs,
                    first,
                });
            }
        }
    }

    /// Folds the per-stream counts into findings, at the end of the analysis.
    pub(super) fn fold_unordered_pairs(&mut self) {
        for s in 0..self.streams.len() {
            for (slot, &pairs) in self.streams[s].unordered_with.iter().enumerate() {
                if pairs > 0 {
                    let other = self.slot_streams[slot].index();
                    self.collector.stream_pair(self.streams[s].info.id, self.streams[other].info.id, pairs);
                }
            }
        }
    }
}
