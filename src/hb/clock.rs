//! Vector clocks over streams, and epochs (one stream's tick), as in FastTrack (Flanagan and Freund, PLDI 2009).
//!
//! Only streams execute memory accesses, so only streams own a component. Host threads and events hold clocks
//! too, but as sync objects: what they have observed complete, or what they captured.

use crate::model::StreamId;

/// A point in one stream's history: its `tick`-th memory-touching operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Epoch {
    pub stream: StreamId,
    pub tick: u64,
}

/// For every stream, the last of its operations known to have happened before.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorClock {
    ticks: Vec<u64>,
}

impl VectorClock {
    pub fn new() -> VectorClock {
        VectorClock::default()
    }

    /// The last tick of `stream` covered by this clock (0: none of its operations).
    pub fn get(&self, stream: StreamId) -> u64 {
        self.ticks.get(stream.index()).copied().unwrap_or(0)
    }

    /// Whether the operation at `epoch` happened before whatever holds this clock: the O(1) epoch check.
    pub fn covers(&self, epoch: Epoch) -> bool {
        self.get(epoch.stream) >= epoch.tick
    }

    pub fn set(&mut self, stream: StreamId, tick: u64) {
        let i = stream.index();
        if i >= self.ticks.len() {
            self.ticks.resize(i + 1, 0);
        }
        self.ticks[i] = tick;
    }

    /// Advances `stream`'s own component and returns the new epoch.
    pub fn tick(&mut self, stream: StreamId) -> Epoch {
        let tick = self.get(stream) + 1;
        self.set(stream, tick);
        Epoch { stream, tick }
    }

    /// Pointwise maximum (acquire). Returns whether anything changed.
    pub fn join(&mut self, other: &VectorClock) -> bool {
        if other.ticks.len() > self.ticks.len() {
            self.ticks.resize(other.ticks.len(), 0);
        }
        let mut changed = false;
        for (mine, theirs) in self.ticks.iter_mut().zip(&other.ticks) {
            if *theirs > *mine {
                *mine = *theirs;
                changed = true;
            }
        }
        changed
    }

    /// Replaces this clock with `other` (release-store), reusing the allocation.
    pub fn assign(&mut self, other: &VectorClock) {
        self.ticks.clone_from(&other.ticks);
    }

    /// Streams with a non-zero component, and their ticks.
    pub fn iter(&self) -> impl Iterator<Item = (StreamId, u64)> + '_ {
        self.ticks.iter().enumerate().filter(|(_, t)| **t > 0).map(|(i, t)| (StreamId(i as u32), *t))
    }
}

/// A clock with a version that changes whenever the clock does, so that a join from it can be skipped when the
/// receiver already joined that version. Host threads and streams are joined from on every enqueue; most of
/// those joins would change nothing.
#[derive(Clone, Debug, Default)]
pub struct VersionedClock {
    pub clock: VectorClock,
    pub version: u64,
}

impl VersionedClock {
    pub fn join(&mut self, other: &VectorClock) {
        if self.clock.join(other) {
            self.version += 1;
        }
    }

    pub fn tick(&mut self, stream: StreamId) -> Epoch {
        self.version += 1;
        self.clock.tick(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: StreamId = StreamId(0);
    const B: StreamId = StreamId(3);

    #[test]
    fn covers_is_per_component() {
        let mut c = VectorClock::new();
        c.set(A, 4);
        assert!(c.covers(Epoch { stream: A, tick: 4 }));
        assert!(!c.covers(Epoch { stream: A, tick: 5 }));
        assert!(!c.covers(Epoch { stream: B, tick: 1 }));
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
        assert_eq!(c.tick(B), Epoch { stream: B, tick: 1 });
        assert_eq!(c.tick(B), Epoch { stream: B, tick: 2 });
        assert_eq!(c.get(A), 0);
    }
}
