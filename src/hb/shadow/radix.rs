//! A radix table from granule numbers (an address shifted right by a fixed number of bits) to small indices: what
//! finds a shadow bucket from an address without a search.
//!
//! Two levels, as a page table: a leaf is a flat array of [`LEAF_LEN`] entries for that many consecutive
//! granules, and a small hash map finds the leaf of a granule by its upper bits (its window). A program's memory
//! lies in few such windows (64 MiB of address space each at 64 KiB granules), and a direct-mapped array of
//! recent windows in front of the map answers nearly every lookup with one compare: a lookup is then two loads
//! from memory that stays in cache, and no hashing. In front of all that, a smaller direct-mapped array of the
//! granules looked up last answers a granule asked for again soon (most lookups) inline, without the leaf. A leaf
//! whose entries are all empty again is given back (to a free list it is taken from next), so the table follows
//! live state.

use std::cell::Cell;

use rustc_hash::FxHashMap;

const LEAF_BITS: u32 = 10;
const LEAF_LEN: usize = 1 << LEAF_BITS;
const LEAF_MASK: u64 = LEAF_LEN as u64 - 1;

/// Windows the direct-mapped array in front of the map holds (16 bytes each).
const RECENT_LEN: usize = 1024;

/// Granules the direct-mapped array of near ones holds (16 bytes each: it stays in the first-level cache).
const NEAR_LEN: usize = 64;

/// The value of an entry that holds nothing.
pub(super) const EMPTY: u32 = u32::MAX;

struct Leaf {
    entries: Box<[u32; LEAF_LEN]>,
    /// Entries other than [`EMPTY`].
    used: u32,
}

pub(super) struct RadixTable {
    /// `(granule, value)` of a granule looked up lately that maps to this place (`granule % NEAR_LEN`), or of
    /// one that does not (`place ^ 1`) where none. Most lookups ask for a granule asked for a moment before: the
    /// engine's prefetch looks up the bucket that the access then checks, and a split or a merge the bucket its
    /// access just found. Kept equal to the table's value by [`RadixTable::set`] and [`RadixTable::clear`].
    near: Box<[Cell<(u64, u32)>; NEAR_LEN]>,
    /// `(window + 1, leaf)` of a window that maps to this place (`window % RECENT_LEN`), 0 where none: the map's
    /// answers for recent windows. Updated on a lookup that went to the map, on a new leaf and on a freed one.
    recent: Box<[Cell<(u64, u32)>; RECENT_LEN]>,
    /// Leaf index by window, a granule's upper bits (`granule >> LEAF_BITS`).
    leaf_of: FxHashMap<u64, u32>,
    leaves: Vec<Leaf>,
    /// Indices into `leaves` of leaves that hold nothing and belong to no window.
    free_leaves: Vec<u32>,
}

impl Default for RadixTable {
    fn default() -> Self {
        RadixTable {
            near: Box::new(std::array::from_fn(|place| Cell::new((place as u64 ^ 1, EMPTY)))),
            recent: Box::new([const { Cell::new((0, 0)) }; RECENT_LEN]),
            leaf_of: FxHashMap::default(),
            leaves: Vec::new(),
            free_leaves: Vec::new(),
        }
    }
}

impl RadixTable {
    /// The value at `granule`, or [`EMPTY`]. A granule among the near ones is answered inline, with one compare
    /// (a third of the instructions of the call it saves: the engine makes several lookups a record, most of them
    /// of a granule looked up a moment before); any other by a call.
    #[inline(always)]
    pub(super) fn get(&self, granule: u64) -> u32 {
        let (tag, value) = self.near_place(granule).get();
        if tag == granule {
            return value;
        }
        self.get_past_near(granule)
    }

    /// [`RadixTable::get`] for a prefetch, which then makes the granule a near one: inline whole (the engine makes
    /// one for every access an operation ahead, and the call was 2% of its instructions), and [`EMPTY`] for a
    /// window not among the recent ones (the map is not asked: the access looks it up itself).
    #[inline(always)]
    pub(super) fn get_for_prefetch(&self, granule: u64) -> u32 {
        let near = self.near_place(granule);
        let (tag, value) = near.get();
        if tag == granule {
            return value;
        }
        let Some(leaf) = self.recent_leaf(granule >> LEAF_BITS) else { return EMPTY };
        let value = self.entry(leaf, granule);
        near.set((granule, value));
        value
    }

    /// [`RadixTable::get`] of a granule not among the near ones, which it then is. A window among the recent ones
    /// is answered here, any other by a call this one ends with: the map's probe needs registers that every
    /// lookup would otherwise save and restore, half the instructions of one that hits.
    #[inline(never)]
    fn get_past_near(&self, granule: u64) -> u32 {
        let value = match self.recent_leaf(granule >> LEAF_BITS) {
            Some(leaf) => self.entry(leaf, granule),
            None => self.get_through_map(granule),
        };
        self.near_place(granule).set((granule, value));
        value
    }

    /// [`RadixTable::get`] of a granule whose window is not among the recent ones.
    #[cold]
    #[inline(never)]
    fn get_through_map(&self, granule: u64) -> u32 {
        match self.leaf_from_map(granule >> LEAF_BITS) {
            Some(leaf) => self.entry(leaf, granule),
            None => EMPTY,
        }
    }

    /// The place of the near array that `granule` maps to.
    #[inline(always)]
    fn near_place(&self, granule: u64) -> &Cell<(u64, u32)> {
        &self.near[granule as usize % NEAR_LEN]
    }

    /// The entry of `granule` in its window's leaf, `leaf`.
    #[inline(always)]
    fn entry(&self, leaf: u32, granule: u64) -> u32 {
        self.leaves[leaf as usize].entries[(granule & LEAF_MASK) as usize]
    }

    /// The leaf of `window` when the window is among the recent ones: one compare, no hashing.
    #[inline(always)]
    fn recent_leaf(&self, window: u64) -> Option<u32> {
        let (tag, leaf) = self.recent[window as usize % RECENT_LEN].get();
        (tag == window + 1).then_some(leaf)
    }

    /// The leaf of `window`, through the recent windows first.
    fn leaf(&self, window: u64) -> Option<u32> {
        self.recent_leaf(window).or_else(|| self.leaf_from_map(window))
    }

    /// The leaf of `window` from the map, which the recent windows then hold.
    fn leaf_from_map(&self, window: u64) -> Option<u32> {
        let leaf = *self.leaf_of.get(&window)?;
        self.recent[window as usize % RECENT_LEN].set((window + 1, leaf));
        Some(leaf)
    }

    /// Asks the processor to load the entry of `granule` without waiting for it, when its window is among the
    /// recent ones (the map is not asked: a prefetch must stay a few instructions). The leaves of a program's
    /// windows (4 KiB each) fall out of the cache between two accesses to the same block; loading the entry an
    /// operation ahead keeps that miss off the lookup.
    #[inline]
    pub(super) fn prefetch(&self, granule: u64) {
        let Some(leaf) = self.recent_leaf(granule >> LEAF_BITS) else { return };
        if let Some(leaf) = self.leaves.get(leaf as usize) {
            super::prefetch_address(&leaf.entries[(granule & LEAF_MASK) as usize] as *const u32 as *const u8);
        }
    }

    /// Sets the value at `granule` (not [`EMPTY`]: that is [`RadixTable::clear`]).
    pub(super) fn set(&mut self, granule: u64, value: u32) {
        debug_assert_ne!(value, EMPTY);
        let window = granule >> LEAF_BITS;
        let leaf = match self.leaf(window) {
            Some(leaf) => leaf,
            None => {
                let leaf = match self.free_leaves.pop() {
                    Some(leaf) => leaf,
                    None => {
                        self.leaves.push(Leaf { entries: Box::new([EMPTY; LEAF_LEN]), used: 0 });
                        (self.leaves.len() - 1) as u32
                    }
                };
                self.leaf_of.insert(window, leaf);
                self.recent[window as usize % RECENT_LEN].set((window + 1, leaf));
                leaf
            }
        };
        let leaf = &mut self.leaves[leaf as usize];
        let entry = &mut leaf.entries[(granule & LEAF_MASK) as usize];
        if *entry == EMPTY {
            leaf.used += 1;
        }
        *entry = value;
        self.near_place(granule).set((granule, value));
    }

    /// Empties the entry at `granule`; its leaf goes when it holds nothing more.
    pub(super) fn clear(&mut self, granule: u64) {
        self.near_place(granule).set((granule, EMPTY));
        let window = granule >> LEAF_BITS;
        let Some(index) = self.leaf(window) else { return };
        let leaf = &mut self.leaves[index as usize];
        let entry = &mut leaf.entries[(granule & LEAF_MASK) as usize];
        if *entry == EMPTY {
            return;
        }
        *entry = EMPTY;
        leaf.used -= 1;
        if leaf.used == 0 {
            self.leaf_of.remove(&window);
            self.recent[window as usize % RECENT_LEN].set((0, 0));
            self.free_leaves.push(index);
        }
    }

    /// Leaves in use: the table's own size.
    #[cfg(test)]
    fn leaves_in_use(&self) -> usize {
        self.leaf_of.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Every operation checked against a hash map, over windows that fill and empty again.
    #[test]
    fn agrees_with_a_map_and_gives_empty_leaves_back() {
        let mut table = RadixTable::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x: u64 = 99;
        for round in 0..50_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Granules in a few windows, one far up the address space.
            let granule = match (x >> 60) % 3 {
                0 => (x >> 20) % 3_000,
                1 => 0x7f00_0000 + (x >> 20) % 3_000,
                _ => u64::MAX - (x >> 20) % 100,
            };
            if (x >> 8) % 3 == 0 || round > 40_000 {
                table.clear(granule);
                model.remove(&granule);
            } else {
                table.set(granule, round);
                model.insert(granule, round);
            }
            let probe = granule ^ ((x >> 40) & 3);
            let expected = model.get(&probe).copied().unwrap_or(EMPTY);
            // A prefetch's lookup may not know (a window not among the recent ones), but never says otherwise;
            // half the time it asks for another granule of the probe's near place, which the probe then finds taken.
            let other = probe ^ ((x >> 50) & NEAR_LEN as u64);
            let prefetched = table.get_for_prefetch(other);
            let known = model.get(&other).copied().unwrap_or(EMPTY);
            assert!(prefetched == known || prefetched == EMPTY, "prefetch of {other}: {prefetched}, not {known}");
            assert_eq!(table.get(probe), expected, "at {probe}");
        }
        for (&granule, &value) in &model {
            assert_eq!(table.get(granule), value);
        }
        for granule in model.keys().copied().collect::<Vec<_>>() {
            table.clear(granule);
        }
        assert_eq!(table.leaves_in_use(), 0, "every leaf given back");
        assert!(table.leaves.len() <= 12, "leaves are reused: {}", table.leaves.len());
        assert_eq!(table.get(5), EMPTY);
    }
}
