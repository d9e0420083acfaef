//! Vector clocks over streams, and epochs (one stream's tick), as in FastTrack (Flanagan and Freund, PLDI 2009).
//!
//! Only streams execute memory accesses, so only streams own a component. Host threads and events hold clocks
//! too, but as sync objects: what they have observed complete, or what they captured.
//!
//! A stream's component is not its id but a [`Slot`], handed out when the stream runs its first memory-touching
//! operation, as TSan hands a thread a slot when it starts rather than one per thread ever created. A program
//! that declares 100,000 streams (PyTorch's pools, one per GPU and priority) and runs work on 100 has clocks of
//! 100 components: a join, a copy and a snapshot cost what the active streams need, whatever the ids.

use super::slot_values::SlotValues;
use crate::model::StreamId;

/// A stream's component in every clock: the order in which streams ran their first memory-touching operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slot(pub u32);

impl Slot {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A point in one stream's history: its `tick`-th memory-touching operation. `stream` names it for reports;
/// `slot` is its component in clocks. (Both fit in the 16 bytes the epoch took with the stream alone.)
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Epoch {
    pub stream: StreamId,
    pub slot: Slot,
    pub tick: u64,
}

/// For every stream that has run work, the last of its operations known to have happened before, by slot.
/// Dense while the slots it knows are, sparse otherwise (`slot_values`): a clock costs what it knows, not the
/// number of streams that ever ran.
#[derive(Clone, Debug, Default)]
pub struct VectorClock {
    ticks: SlotValues,
}

impl VectorClock {
    pub fn new() -> VectorClock {
        VectorClock::default()
    }

    /// The last tick of the stream at `slot` covered by this clock (0: none of its operations).
    #[inline]
    pub fn get(&self, slot: Slot) -> u64 {
        self.ticks.get(slot.index())
    }

    /// Whether the operation at `epoch` happened before whatever holds this clock: the O(1) epoch check.
    #[inline]
    pub fn covers(&self, epoch: Epoch) -> bool {
        self.get(epoch.slot) >= epoch.tick
    }

    /// Whether no operation at all is covered.
    pub fn is_empty(&self) -> bool {
        self.ticks.is_empty()
    }

    pub fn set(&mut self, slot: Slot, tick: u64) {
        self.ticks.set(slot.index(), tick);
    }

    /// Advances the own component of `stream`, whose slot is `slot`, and returns the new epoch.
    pub fn tick(&mut self, stream: StreamId, slot: Slot) -> Epoch {
        let tick = self.ticks.add(slot.index(), 1);
        Epoch { stream, slot, tick }
    }

    /// Pointwise maximum (acquire). Returns whether anything changed.
    pub fn join(&mut self, other: &VectorClock) -> bool {
        self.ticks.raise_to(&other.ticks, |_, _, _| {})
    }

    /// [`VectorClock::join`], calling `raised(slot, old, new)` for every component it raises.
    pub fn join_observed(&mut self, other: &VectorClock, raised: impl FnMut(Slot, u64, u64)) -> bool {
        let mut raised = raised;
        self.ticks.raise_to(&other.ticks, |slot, old, new| raised(Slot(slot as u32), old, new))
    }

    /// Replaces this clock with `other` (release-store), reusing the allocation.
    pub fn assign(&mut self, other: &VectorClock) {
        self.ticks.assign(&other.ticks);
    }

    /// The components other than 0, by slot.
    pub fn components(&self) -> impl Iterator<Item = (Slot, u64)> + '_ {
        self.ticks.entries().map(|(slot, tick)| (Slot(slot as u32), tick))
    }
}

/// A clock with a version that changes whenever the clock does, so that a join from it can be skipped when the
/// receiver already joined that version. Host threads and streams are joined from on every enqueue; most of
/// those joins would change nothing.
/// `raised` counts the changes other than the clock's own steps (joins, and an idle stream's clock adopted), so
/// that a replica (`checker`) is brought up to date only when one happened.
#[derive(Clone, Debug, Default)]
pub struct VersionedClock {
    pub clock: VectorClock,
    pub version: u64,
    pub raised: u64,
}

impl VersionedClock {
    pub fn join(&mut self, other: &VectorClock) {
        if self.clock.join(other) {
            self.version += 1;
            self.raised += 1;
        }
    }

    /// [`VersionedClock::join`], calling `raised(slot, old, new)` for every component it raises.
    pub fn join_observed(&mut self, other: &VectorClock, raised: impl FnMut(Slot, u64, u64)) {
        if self.clock.join_observed(other, raised) {
            self.version += 1;
            self.raised += 1;
        }
    }

    /// Takes `clock` as it is (an idle stream's creation clock, when it wakes), keeping the version.
    pub fn adopt(&mut self, clock: VectorClock) {
        self.clock = clock;
        self.raised += 1;
    }

    pub fn tick(&mut self, stream: StreamId, slot: Slot) -> Epoch {
        self.version += 1;
        self.clock.tick(stream, slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Slot = Slot(0);
    const B: Slot = Slot(3);

    #[test]
    fn covers_is_per_component() {
        let mut c = VectorClock::new();
        c.set(A, 4);
        assert!(c.covers(Epoch { stream: StreamId(9), slot: A, tick: 4 }));
        assert!(!c.covers(Epoch { stream: StreamId(9), slot: A, tick: 5 }));
        assert!(!c.covers(Epoch { stream: StreamId(7), slot: B, tick: 1 }));
    }

    #[test]
    fn join_takes_maximum_and_reports_change() {
        let mut a = VectorClock::new();
        a.set(A, 2);
        let mut b = VectorClock::new();
        b.set(A, 1);
        b.set(B, 7);
        assert!(a.join(&b));
        assert_eq!((a.get(A), a.get(B)), (2, 7));
        assert!(!a.join(&b));
    }

    #[test]
    fn tick_advances_own_component() {
        let mut c = VectorClock::new();
        let s = StreamId(99_999);
        assert_eq!(c.tick(s, B), Epoch { stream: s, slot: B, tick: 1 });
        assert_eq!(c.tick(s, B), Epoch { stream: s, slot: B, tick: 2 });
        assert_eq!(c.get(A), 0);
    }
}
