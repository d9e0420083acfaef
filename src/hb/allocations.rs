//! The allocations of one process that findings can name: every live block, and blocks freed stream-ordered
//! until their range is reused (a use after such a free still names the old block). A framework's caching
//! allocator hands out blocks inside its device segments; those pool blocks are a layer of their own, which
//! names memory before the segment under it does.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::sorted_keys::SortedKeys;
use crate::findings::{AllocationRef, NativeId, ReusedBlock};
use crate::model::{AccessRange, AllocId, AllocKind, Allocation, NativeSite, SourceLocation};

/// A block as the table keeps it: what every lookup reads, with what names it in a finding kept apart, so that the
/// maps' entries stay a line (a hundred thousand live blocks: 6 MB of map instead of 17, which matters most while
/// the maps grow, each growth touching fresh memory).
#[derive(Clone, Debug)]
struct Block {
    id: AllocId,
    kind: AllocKind,
    handle: u64,
    range: AccessRange,
    named: Option<Box<BlockNames>>,
}

/// What names a block in findings: its label and where it was allocated.
#[derive(Clone, Debug)]
struct BlockNames {
    label: Option<String>,
    source: Option<SourceLocation>,
    native: Option<NativeSite>,
}

impl Block {
    fn of(alloc: Allocation) -> Block {
        let Allocation { id, handle, range, kind, label, source, native, process: _ } = alloc;
        let named = (label.is_some() || source.is_some() || native.is_some())
            .then(|| Box::new(BlockNames { label, source, native }));
        Block { id, kind, handle, range, named }
    }

    fn label(&self) -> Option<&String> {
        self.named.as_ref().and_then(|n| n.label.as_ref())
    }

    fn source(&self) -> Option<&SourceLocation> {
        self.named.as_ref().and_then(|n| n.source.as_ref())
    }

    fn native(&self) -> Option<&NativeSite> {
        self.named.as_ref().and_then(|n| n.native.as_ref())
    }
}

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
        let block = Block::of(alloc);
        if block.kind != AllocKind::PoolBlock {
            return self.device.insert(block).0;
        }
        let id = block.id;
        let (clean, replaced) = self.pool.insert(block);
        // The blocks it replaces leave the table with their history; the first (lowest) is the one it reuses.
        let mut previous = None;
        for old in replaced {
            let freed_at = self.pool_history.remove(&old.id).and_then(|history| history.freed_at);
            if previous.is_none() {
                let source = old.source().cloned();
                previous = Some(ReusedBlock { handle: old.handle, range: old.range, source, freed_at });
            }
        }
        self.pool_history.insert(id, PoolHistory { handed_out: seq, freed_at: None, previous });
        clean
    }

    /// Marks a block freed at `source`; false when no live block has the id. With `keep`, it stays nameable
    /// until its range is reused; pool blocks always stay.
    pub fn free(&mut self, id: AllocId, keep: bool, source: Option<&SourceLocation>) -> bool {
        self.generation += 1;
        if self.pool.free(id, true) {
            if let Some(history) = self.pool_history.get_mut(&id) {
                history.freed_at = source.cloned();
            }
            return true;
        }
        self.device.free(id, keep)
    }

    /// The range of the live block `id`.
    pub fn range_of(&self, id: AllocId) -> Option<AccessRange> {
        self.pool.get(id).or_else(|| self.device.get(id)).map(|block| block.range)
    }

    /// The block holding the first byte of `range`: a pool block (live, or freed and not yet reused) if one
    /// does, otherwise a device block.
    fn containing(&self, range: AccessRange) -> Option<&Block> {
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
            label: alloc.label().cloned(),
            source: alloc.source().cloned(),
            native: alloc.native().map(native_id),
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

/// The blocks of one layer, by start address, with the ids of the live ones. The starts are ordered apart from
/// the blocks (`SortedKeys`: the block an address falls in), and a block is found by its start through a hash
/// map: a lookup by id or by start costs two probes where a `BTreeMap` of 100,000 blocks walked five nodes, each
/// a cache miss.
#[derive(Default)]
struct BlockTable {
    starts: SortedKeys,
    by_start: FxHashMap<u64, Block>,
    start_of: FxHashMap<AllocId, u64>,
    live: usize,
}

impl BlockTable {
    /// Adds a block, dropping the blocks it overlaps. Returns false when one of them was still live (the trace
    /// is inconsistent), and the freed blocks it took the place of. A caching allocator hands a freed block's
    /// address out again and again: the block it replaces at its own start is replaced in place (its start stays
    /// in the ordered set), and the lists stay off the heap for the usual one block replaced.
    fn insert(&mut self, alloc: Block) -> (bool, SmallVec<[Block; 1]>) {
        let range = alloc.range;
        let overlapping: SmallVec<[u64; 2]> = self.overlapping(range).map(|a| a.range.start).collect();
        let mut clean = true;
        let mut replaced = SmallVec::new();
        for start in overlapping {
            let old = if start == range.start { self.by_start.remove(&start) } else { self.remove_start(start) };
            if let Some(old) = old {
                if self.start_of.remove(&old.id).is_some() {
                    clean = false;
                    self.live -= 1;
                } else {
                    replaced.push(old);
                }
            }
        }
        self.start_of.insert(alloc.id, range.start);
        self.starts.insert(range.start);
        self.by_start.insert(range.start, alloc);
        self.live += 1;
        (clean, replaced)
    }

    fn remove_start(&mut self, start: u64) -> Option<Block> {
        let old = self.by_start.remove(&start)?;
        self.starts.remove(start);
        Some(old)
    }

    /// Marks a block freed; false when no live block has the id. With `keep`, it stays nameable until its range
    /// is reused.
    fn free(&mut self, id: AllocId, keep: bool) -> bool {
        let Some(start) = self.start_of.remove(&id) else { return false };
        self.live -= 1;
        if !keep {
            self.remove_start(start);
        }
        true
    }

    fn get(&self, id: AllocId) -> Option<&Block> {
        self.start_of.get(&id).and_then(|start| self.by_start.get(start))
    }

    /// The block whose start is the greatest at or below `address`, if any.
    fn last_at_or_below(&self, address: u64) -> Option<&Block> {
        let start = match self.by_start.get(&address) {
            Some(exact) => return Some(exact),
            None => self.starts.last_before(address)?,
        };
        self.by_start.get(&start)
    }

    /// The block holding the first byte of `range`, live or freed stream-ordered.
    fn containing(&self, range: AccessRange) -> Option<&Block> {
        let alloc = self.last_at_or_below(range.start)?;
        (alloc.range.end() > range.start).then_some(alloc)
    }

    /// The range of the live block holding `address`.
    fn live_block_at(&self, address: u64) -> Option<AccessRange> {
        let alloc = self.last_at_or_below(address)?;
        (alloc.range.end() > address && self.start_of.contains_key(&alloc.id)).then_some(alloc.range)
    }

    fn overlapping(&self, range: AccessRange) -> impl Iterator<Item = &Block> {
        let before = (self.starts.last_before(range.start))
            .and_then(|start| self.by_start.get(&start))
            .filter(|a| a.range.end() > range.start);
        let inside = self.starts.in_range(range.start, range.end()).filter_map(|start| self.by_start.get(&start));
        before.into_iter().chain(inside)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::ProcessId;

    fn allocation(id: u32, start: u64, len: u64) -> Allocation {
        Allocation {
            id: AllocId(id),
            handle: u64::from(id),
            process: ProcessId(0),
            range: AccessRange { start, len },
            kind: AllocKind::Device,
            label: None,
            source: None,
            native: None,
        }
    }

    fn block(id: u32, start: u64, len: u64) -> Block {
        Block::of(allocation(id, start, len))
    }

    /// A finding names a block by what its allocation said, kept apart from the block (and nothing kept for a
    /// block that says nothing).
    #[test]
    fn a_block_is_described_by_its_allocations_label_and_line() {
        let mut table = AllocationTable::default();
        let source = SourceLocation::parse("train.py:12");
        let named =
            Allocation { label: Some("weights".into()), source: Some(source.clone()), ..allocation(1, 4096, 64) };
        assert!(table.insert(named, 1));
        assert!(table.insert(allocation(2, 8192, 64), 2));
        let described = table.describe(AccessRange { start: 4100, len: 4 }, None, |_| NativeId(0)).expect("named");
        assert_eq!(
            (described.handle, described.label.as_deref(), described.source),
            (1, Some("weights"), Some(source))
        );
        assert!(table.device.get(AllocId(2)).is_some_and(|block| block.named.is_none()));
        assert_eq!(table.range_of(AllocId(2)), Some(AccessRange { start: 8192, len: 64 }));
        assert!(table.free(AllocId(2), false, None) && !table.free(AllocId(2), false, None));
        assert_eq!(table.range_of(AllocId(2)), None);
    }

    /// A layer's blocks checked against an ordered map of the same blocks through allocations that replace
    /// freed blocks, frees that keep a block nameable and frees that drop it: the block an address falls in,
    /// live or not, and the live one.
    #[test]
    fn a_layer_agrees_with_an_ordered_map() {
        let mut table = BlockTable::default();
        // start -> (block, live)
        let mut model: BTreeMap<u64, (Block, bool)> = BTreeMap::new();
        let mut x: u64 = 99;
        let mut next_id = 0;
        for round in 0..20_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let start = (x >> 33) % 4_000 * 64;
            let len = 64 * (1 + (x >> 20) % 6);
            if x % 3 != 0 {
                let new = block(next_id, start, len);
                next_id += 1;
                let overlapping: Vec<u64> = (model.iter())
                    .filter(|(s, (a, _))| **s < start + len && a.range.end() > start)
                    .map(|(s, _)| *s)
                    .collect();
                let clean = overlapping.iter().all(|s| !model[s].1);
                let mut replaced: Vec<u32> =
                    overlapping.iter().filter(|s| !model[s].1).map(|s| model[s].0.id.0).collect();
                overlapping.iter().for_each(|s| drop(model.remove(s)));
                model.insert(start, (new.clone(), true));
                let (got_clean, got_replaced) = table.insert(new);
                let mut got_replaced: Vec<u32> = got_replaced.iter().map(|a| a.id.0).collect();
                replaced.sort_unstable();
                got_replaced.sort_unstable();
                assert_eq!((got_clean, got_replaced), (clean, replaced), "round {round}");
            } else if let Some((&at, _)) = model.iter().find(|(s, (_, live))| **s >= start && *live) {
                let id = model[&at].0.id;
                let keep = x % 2 == 0;
                assert!(table.free(id, keep));
                if keep {
                    model.get_mut(&at).expect("present").1 = false;
                } else {
                    model.remove(&at);
                }
            }
            let probe = (x >> 7) % (4_000 * 64 + 512);
            let holder = model.range(..=probe).next_back().filter(|(_, (a, _))| a.range.end() > probe);
            let containing = table.containing(AccessRange { start: probe, len: 1 }).map(|a| a.id);
            assert_eq!(containing, holder.map(|(_, (a, _))| a.id), "containing {probe}");
            let live = holder.filter(|(_, (_, live))| *live).map(|(_, (a, _))| a.range);
            assert_eq!(table.live_block_at(probe), live, "live at {probe}");
        }
        assert_eq!(table.live, model.values().filter(|(_, live)| *live).count());
    }
}
