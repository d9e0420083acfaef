//! One access as the shadow remembers it, packed into 32 bytes: the epoch's tick shares a word with the access's
//! kind (its mode and effect), and the stream is not kept (its slot names it: the engine maps slots to streams).
//! The word is never 0, so an absent stamp costs no tag, and a segment is 72 bytes where it was 88 (a shadow
//! bucket of two, 176 where it was 208): fewer lines to load for each access.

use std::num::NonZeroU64;

use super::Effect;
use crate::hb::clock::{Epoch, Slot, VectorClock};
use crate::hb::sites::SiteId;
use crate::model::AccessMode;

/// Bits of the word the tick takes. A stream reaches 2^60 ticks after as many operations: no trace does.
const TICK_BITS: u32 = 60;
const TICK_MASK: u64 = (1 << TICK_BITS) - 1;
/// Set in every word, so that it is never 0 whatever the tick.
const PRESENT: NonZeroU64 = match NonZeroU64::new(1 << 63) {
    Some(bit) => bit,
    None => panic!("the bit is not 0"),
};
const WRITE: u64 = 1 << 62;
/// The effect, two bits at [`TICK_BITS`].
const EFFECT_SHIFT: u32 = TICK_BITS;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// [`PRESENT`], the write bit, the effect and the tick.
    tick_and_kind: NonZeroU64,
    /// The stream's component in clocks.
    pub slot: Slot,
    pub site: SiteId,
    /// The operation's position in host issue order.
    pub seq: u64,
    /// Where the operation is in the input, for messages.
    pub origin: u64,
}

impl Stamp {
    pub fn new(epoch: Epoch, seq: u64, origin: u64, site: SiteId, mode: AccessMode, effect: Effect) -> Stamp {
        debug_assert!(epoch.tick <= TICK_MASK, "tick {} past the stamp's bits", epoch.tick);
        let write = if mode == AccessMode::Write { WRITE } else { 0 };
        let effect = match effect {
            Effect::Access => 0,
            Effect::Free => 1,
            Effect::Alloc => 2,
        };
        let tick_and_kind = PRESENT | write | (effect << EFFECT_SHIFT) | (epoch.tick & TICK_MASK);
        Stamp { tick_and_kind, slot: epoch.slot, site, seq, origin }
    }

    /// The operation's position in its stream.
    pub fn tick(&self) -> u64 {
        self.tick_and_kind.get() & TICK_MASK
    }

    pub fn mode(&self) -> AccessMode {
        if self.is_write() {
            AccessMode::Write
        } else {
            AccessMode::Read
        }
    }

    pub(super) fn is_write(&self) -> bool {
        self.tick_and_kind.get() & WRITE != 0
    }

    pub fn effect(&self) -> Effect {
        match (self.tick_and_kind.get() >> EFFECT_SHIFT) & 3 {
            1 => Effect::Free,
            2 => Effect::Alloc,
            _ => Effect::Access,
        }
    }

    /// Whether the access happened before whatever holds `clock`: the O(1) epoch check.
    #[inline]
    pub fn covered_by(&self, clock: &VectorClock) -> bool {
        clock.get(self.slot) >= self.tick()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StreamId;

    #[test]
    fn every_field_comes_back() {
        let modes = [AccessMode::Read, AccessMode::Write];
        let effects = [Effect::Access, Effect::Free, Effect::Alloc];
        for tick in [1, 2, 7, 1 << 31, (1 << 32) + 5, TICK_MASK] {
            for mode in modes {
                for effect in effects {
                    let epoch = Epoch { stream: StreamId(3), slot: Slot(u32::MAX - 1), tick };
                    let stamp = Stamp::new(epoch, u64::MAX, 17, SiteId(u32::MAX), mode, effect);
                    assert_eq!(
                        (stamp.tick(), stamp.mode(), stamp.effect(), stamp.slot, stamp.site, stamp.seq, stamp.origin),
                        (tick, mode, effect, Slot(u32::MAX - 1), SiteId(u32::MAX), u64::MAX, 17)
                    );
                }
            }
        }
    }

    #[test]
    fn covered_by_compares_the_slots_tick() {
        let epoch = Epoch { stream: StreamId(0), slot: Slot(2), tick: 5 };
        let stamp = Stamp::new(epoch, 0, 0, SiteId(0), AccessMode::Write, Effect::Free);
        let mut clock = VectorClock::new();
        clock.set(Slot(2), 4);
        assert!(!stamp.covered_by(&clock));
        clock.set(Slot(2), 5);
        assert!(stamp.covered_by(&clock));
        assert!(!stamp.covered_by(&VectorClock::new()));
    }

    #[test]
    fn absent_stamps_and_segments_cost_no_tag() {
        assert_eq!(size_of::<Stamp>(), 32);
        assert_eq!(size_of::<Option<Stamp>>(), 32);
        assert_eq!(size_of::<super::super::Reads>(), 32);
        assert_eq!(size_of::<super::super::Segment>(), 72);
    }
}
