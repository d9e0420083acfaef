//! Tier T0's finding: operations of different streams that nothing orders, counted per stream pair even when
//! no addresses are known (an nsys export).
//!
//! The exact count is computed at the end, not per step. Two operations `a` on stream `o` and `b` on stream `s`
//! are ordered when the one issued later covers the other in its clock, so the unordered pairs of `s` and `o` are
//! `n_s * n_o` less the ordered ones, and the ordered pairs with `b` the later are `C_b[o]`, the component of
//! `o` in `b`'s clock. Summed over `s`'s steps, `C_b[o]` changes only when a join raises it, so each stream
//! keeps, per slot it learned of after stepping, the sum of every raise times its step count then
//! (`ordered_debit`); `n_s * C_s[o]` less that debit is the sum. A step costs nothing here and the fold costs
//! what the clocks hold, however many streams ran. After a capture range's end the count begins again: each
//! stream's position then is subtracted from its steps and from what other clocks know of it. Only the pairs with the most are listed (the report's table
//! stays small with 8,000 streams), with the totals beside.
//!
//! Operations without addresses also name the sites of the pairs, which needs a walk over the other active
//! streams at each such step. It touches each stream's books and the collector; it reads clocks and never
//! changes them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::sites::SiteId;
use super::state::Engine;
use crate::findings::{StreamPairCount, StreamPairTotals, UnorderedPairGroup, STREAM_PAIRS_LISTED};
use crate::model::{Operation, StreamId};

impl Engine {
    /// For an operation without addresses (tier T0), just stepped on `stream` at `site`: groups the operations
    /// of other streams it is unordered with by their stream's latest site. With addresses, races say more and
    /// the exact per-stream-pair count, folded at the end, suffices.
    #[inline]
    pub(super) fn group_unordered_pairs(
        &mut self,
        stream: StreamId,
        site: SiteId,
        op: &Operation,
        has_addresses: bool,
    ) {
        if has_addresses {
            return;
        }
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
            if let Some(earlier) = streams[o].last_site {
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

    /// Starts the count again from here (a capture range's end): only operations from now on are counted.
    pub(super) fn restart_unordered_pairs(&mut self) {
        for state in &mut self.streams {
            state.counted_from = state.position();
            state.ordered_debit = Default::default();
            if let Some(slot) = state.slot {
                self.counted_from.set(slot.index(), state.counted_from);
            }
        }
    }

    /// Computes the exact per-stream-pair counts at the end of the analysis: the totals, and the pairs with the
    /// most (ties: by the slots, the order streams first ran work).
    pub(super) fn fold_unordered_pairs(&mut self) {
        let mut totals = StreamPairTotals::default();
        // (pairs, lower slot, higher slot)
        let mut listed: Vec<(u64, u32, u32)> = Vec::new();
        for process in &self.processes {
            let stream_of = |slot: u32| &self.streams[self.slot_streams[slot as usize].index()];
            let steps_of = |slot: u32| stream_of(slot).counted_steps();
            // The streams that ran counted operations: only they are in pairs.
            let active: Vec<_> = process.active_streams.iter().filter(|&&(_, slot)| steps_of(slot.0) > 0).collect();
            let in_process: rustc_hash::FxHashSet<u32> = active.iter().map(|(_, slot)| slot.0).collect();
            // Ordered operation pairs per slot pair (lower slot first), for the pairs with any.
            let mut ordered: FxHashMap<(u32, u32), u64> = FxHashMap::default();
            for &&(stream, slot) in &active {
                let state = &self.streams[stream.index()];
                let steps = state.counted_steps();
                for (other, known) in state.clock.clock.components() {
                    if other == slot || !in_process.contains(&other.0) {
                        continue;
                    }
                    let known = known.saturating_sub(stream_of(other.0).counted_from);
                    let before_mine = steps * known - state.ordered_debit.get(other.index());
                    if before_mine > 0 {
                        *ordered.entry((slot.0.min(other.0), slot.0.max(other.0))).or_insert(0) += before_mine;
                    }
                }
            }
            let (sum, sum_of_squares) = active.iter().fold((0u128, 0u128), |(sum, squares), &&(_, slot)| {
                let n = u128::from(steps_of(slot.0));
                (sum + n, squares + n * n)
            });
            let all_pairs = (sum * sum - sum_of_squares) / 2;
            let ordered_pairs: u128 = ordered.values().map(|&p| u128::from(p)).sum();
            totals.pairs += u64::try_from(all_pairs - ordered_pairs).unwrap_or(u64::MAX);
            let streams = active.len() as u64;
            let mut stream_pairs = streams * streams.saturating_sub(1) / 2;
            for (&(a, b), &pairs) in &ordered {
                let unordered = steps_of(a) * steps_of(b) - pairs;
                if unordered == 0 {
                    stream_pairs -= 1;
                } else {
                    listed.push((unordered, a, b));
                }
            }
            totals.stream_pairs += stream_pairs;
            // The pairs with no ordered operations at all have n_a * n_b unordered ones: the largest products,
            // in decreasing order, from a heap over the streams sorted by steps (each stream's next partner).
            let mut by_steps: Vec<(u64, u32)> = active.iter().map(|&&(_, slot)| (steps_of(slot.0), slot.0)).collect();
            by_steps.sort_unstable_by_key(|&(steps, slot)| (Reverse(steps), slot));
            let mut heap: BinaryHeap<(u64, Reverse<usize>, Reverse<usize>)> = (0..by_steps.len().saturating_sub(1))
                .map(|i| (by_steps[i].0 * by_steps[i + 1].0, Reverse(i), Reverse(i + 1)))
                .collect();
            let mut taken = 0;
            while let (true, Some((pairs, Reverse(i), Reverse(j)))) = (taken < STREAM_PAIRS_LISTED, heap.pop()) {
                if j + 1 < by_steps.len() {
                    heap.push((by_steps[i].0 * by_steps[j + 1].0, Reverse(i), Reverse(j + 1)));
                }
                let (a, b) = (by_steps[i].1, by_steps[j].1);
                let key = (a.min(b), a.max(b));
                if !ordered.contains_key(&key) {
                    listed.push((pairs, key.0, key.1));
                    taken += 1;
                }
            }
        }
        listed.sort_unstable_by_key(|&(pairs, a, b)| (Reverse(pairs), a, b));
        listed.truncate(STREAM_PAIRS_LISTED);
        let pairs = listed
            .into_iter()
            .map(|(pairs, a, b)| {
                let (a, b) = (self.slot_streams[a as usize], self.slot_streams[b as usize]);
                StreamPairCount { a: a.min(b), b: a.max(b), pairs }
            })
            .collect();
        self.collector.set_stream_pairs(pairs, totals);
    }
}
