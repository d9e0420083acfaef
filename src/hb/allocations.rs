//! The allocations of one process that findings can name: every live block, and blocks freed stream-ordered
//! until their range is reused (a use after such a free still names the old block).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::findings::AllocationRef;
use crate::model::{AccessRange, AllocId, Allocation};

#[derive(Default)]
pub struct AllocationTable {
    by_start: BTreeMap<u64, Allocation>,
    start_of: FxHashMap<AllocId, u64>,
    live: usize,
}

impl AllocationTable {
    /// Adds a block, dropping any freed block it reuses. Returns false when it overlaps a live block.
    pub fn insert(&mut self, alloc: Allocation) -> bool {
        let range = alloc.range;
        let overlapping: Vec<u64> = self.overlapping(range).map(|a| a.range.start).collect();
        let mut clean = true;
        for start in overlapping {
            if let Some(old) = self.by_start.remove(&start) {
                if self.start_of.remove(&old.id).is_some() {
                    clean = false; // still live: the trace is inconsistent
                    self.live -= 1;
                }
            }
        }
        self.start_of.insert(alloc.id, range.start);
        self.by_start.insert(range.start, alloc);
        self.live += 1;
        clean
    }

    /// Marks a block freed. With `keep`, it stays nameable until its range is reused.
    pub fn free(&mut self, id: AllocId, keep: bool) -> Option<Allocation> {
        let start = self.start_of.remove(&id)?;
        self.live -= 1;
        if keep {
            self.by_start.get(&start).cloned()
        } else {
            self.by_start.remove(&start)
        }
    }

    pub fn get(&self, id: AllocId) -> Option<&Allocation> {
        self.start_of.get(&id).and_then(|start| self.by_start.get(start))
    }

    /// The block holding the first byte of `range`, live or freed stream-ordered.
    pub fn containing(&self, range: AccessRange) -> Option<&Allocation> {
        let (_, alloc) = self.by_start.range(..=range.start).next_back()?;
        (alloc.range.end() > range.start).then_some(alloc)
    }

    /// The range of the live block holding `address`.
    pub fn live_block_at(&self, address: u64) -> Option<AccessRange> {
        let (_, alloc) = self.by_start.range(..=address).next_back()?;
        (alloc.range.end() > address && self.start_of.contains_key(&alloc.id)).then_some(alloc.range)
    }

    pub fn live(&self) -> usize {
        self.live
    }

    fn overlapping(&self, range: AccessRange) -> impl Iterator<Item = &Allocation> {
        let before = self.by_start.range(..range.start).next_back().map(|(_, a)| a).filter(|a| a.range.end() > range.start);
        before.into_iter().chain(self.by_start.range(range.start..range.end()).map(|(_, a)| a))
    }
}

impl From<&Allocation> for AllocationRef {
    fn from(a: &Allocation) -> AllocationRef {
        AllocationRef { handle: a.handle, range: a.range, kind: a.kind, label: a.label.clone(), source: a.source.clone() }
    }
}
