//! The allocations of one process that findings can name: every live block, and blocks freed stream-ordered
//! until their range is reused (a use after such a free still names the old block). A framework's caching
//! allocator hands out blocks inside its device segments; those pool blocks are a layer of their own, which
//! names memory before the segment under it does.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::findings::{AllocationRef, NativeId, ReusedBlock};
use crate::model::{AccessRange, AllocId, AllocKind, Allocation, NativeSite, SourceLocation};

#[derive(Default)]
pub struct AllocationTable {
    /// Device, host, managed, stream-ordered and mapped memory: what the driver hands out.
    device: BlockTable,
    /// Caching-allocator blocks, each inside a device block. Freed ones stay nameable until reused.
    pool: BlockTable,
    /// Per pool block in the table: when it was handed out, where it was freed, and the freed block whose
    /// memory it took over. Entries leave with their block, so this follows live state.
    pool_history: FxHashMap<AllocId, PoolHistory>,
    /// Counts the changes of which blocks are live: what pointer arguments resolved to stays right while it
    /// stands.
    generation: u64,
}

struct PoolHistory {
    handed_out: u64,
    freed_at: Option<SourceLocation>,
    previous: Option<ReusedBlock>,
}

impl AllocationTable {
    /// Adds a block (a pool block to the pool layer) handed out by operation `seq`. Returns false when it
    /// overlaps a live block of its layer.
    pub fn insert(&mut self, alloc: Allocation, seq: u64) -> bool {
        self.generation += 1;
        if alloc.kind != AllocKind::PoolBlock {
            return self.device.insert(alloc).0;
        }
        let id = alloc.id;
        let (clean, replaced) = self.pool.insert(alloc);
        // The blocks it replaces leave the table with their history; the first (lowest) is the one it reuses.
        let mut previous = None;
        for old in replaced {
            let freed_at = self.pool_history.remove(&old.id).and_then(|history| history.freed_at);
            if previous.is_none() {
                previous = Some(ReusedBlock { handle: old.handle, range: old.range, source: old.source, freed_at });
            }
        }
        self.pool_history.insert(id, PoolHistory { handed_out: seq, freed_at: None, previous });
        clean
    }

    /// Marks a block freed at `source`. With `keep`, it stays nameable until its range is reused; pool blocks
    /// always stay.
    pub fn free(&mut self, id: AllocId, keep: bool, source: Option<&SourceLocation>) -> Option<Allocation> {
        self.generation += 1;
        match self.pool.free(id, true) {
            Some(block) => {
                if let Some(history) = self.pool_history.get_mut(&id) {
                    history.freed_at = source.cloned();
                }
                Some(block)
            }
            None => self.device.free(id, keep),
        }
    }

    pub fn get(&self, id: AllocId) -> Option<&Allocation> {
        self.pool.get(id).or_else(|| self.device.get(id))
    }

    /// The block holding the first byte of `range`: a pool block (live, or freed and not yet reused) if one
    /// does, otherwise a device block.
    pub fn containing(&self, range: AccessRange) -> Option<&Allocation> {
        self.pool.containing(range).or_else(|| self.device.containing(range))
    }

    /// What a finding says of the memory at `range`. With the earlier access's operation `earlier_seq`, a pool
    /// block handed out after it also names the freed block that access used.
    pub fn describe(
        &self,
        range: AccessRange,
        earlier_seq: Option<u64>,
        native_id: impl FnOnce(&NativeSite) -> NativeId,
    ) -> Option<AllocationRef> {
        let alloc = self.containing(range)?;
        let mut described = AllocationRef {
            handle: alloc.handle,
            range: alloc.range,
            kind: alloc.kind,
            label: alloc.label.clone(),
            source: alloc.source.clone(),
            native: alloc.native.as_ref().map(native_id),
            reuses: None,
        };
        if let (Some(history), Some(earlier)) = (self.pool_history.get(&alloc.id), earlier_seq) {
            if history.handed_out > earlier {
                described.reuses = history.previous.clone().map(Box::new);
            }
        }
        Some(described)
    }

    /// The range of the live block holding `address`, a pool block before the device block under it.
    pub fn live_block_at(&self, address: u64) -> Option<AccessRange> {
        self.pool.live_block_at(address).or_else(|| self.device.live_block_at(address))
    }

    /// Changes when a block is handed out or freed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Live device blocks (pool blocks live inside them).
    pub fn live(&self) -> usize {
        self.device.live
    }
}

/// The blocks of one layer, by start address, with the ids of the live ones.
#[derive(Default)]
struct BlockTable {
    by_start: BTreeMap<u64, Allocation>,
    start_of: FxHashMap<AllocId, u64>,
    live: usize,
}

impl BlockTable {
    /// Adds a block, dropping the blocks it overlaps. Returns false when one of them was still live (the trace
    /// is inconsistent), and the freed blocks it took the place of.
    fn insert(&mut self, alloc: Allocation) -> (bool, Vec<Allocation>) {
        let range = alloc.range;
        let overlapping: Vec<u64> = self.overlapping(range).map(|a| a.range.start).collect();
        let mut clean = true;
        let mut replaced = Vec::new();
        for start in overlapping {
            if let Some(old) = self.by_start.remove(&start) {
                if self.start_of.remove(&old.id).is_some() {
                    clean = false;
                    self.live -= 1;
                } else {
                    replaced.push(old);
                }
            }
        }
        self.start_of.insert(alloc.id, range.start);
        self.by_start.insert(range.start, alloc);
        self.live += 1;
        (clean, replaced)
    }

    /// Marks a block freed. With `keep`, it stays nameable until its range is reused.
    fn free(&mut self, id: AllocId, keep: bool) -> Option<Allocation> {
        let start = self.start_of.remove(&id)?;
        self.live -= 1;
        if keep {
            self.by_start.get(&start).cloned()
        } else {
            self.by_start.remove(&start)
        }
    }

    fn get(&self, id: AllocId) -> Option<&Allocation> {
        self.start_of.get(&id).and_then(|start| self.by_start.get(start))
    }

    /// The block holding the first byte of `range`, live or freed stream-ordered.
    fn containing(&self, range: AccessRange) -> Option<&Allocation> {
        let (_, alloc) = self.by_start.range(..=range.start).next_back()?;
        (alloc.range.end() > range.start).then_some(alloc)
    }

    /// The range of the live block holding `address`.
    fn live_block_at(&self, address: u64) -> Option<AccessRange> {
        let (_, alloc) = self.by_start.range(..=address).next_back()?;
        (alloc.range.end() > address && self.start_of.contains_key(&alloc.id)).then_some(alloc.range)
    }

    fn overlapping(&self, range: AccessRange) -> impl Iterator<Item = &Allocation> {
        let before =
            self.by_start.range(..range.start).next_back().map(|(_, a)| a).filter(|a| a.range.end() > range.start);
        before.into_iter().chain(self.by_start.range(range.start..range.end()).map(|(_, a)| a))
    }
}
