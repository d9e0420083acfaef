//! A number per clock slot, stored densely while the slots in use are dense and sparsely once they are not.
//!
//! Slots are handed out in the order streams first run work, so in a program of 16 streams every clock is dense
//! and an index is the fastest lookup there is. In a program of 8,000 streams that each run a little, a stream's
//! clock knows its own slot and a few others: a dense vector would be as long as the highest slot it knows, and
//! 8,000 such clocks would hold 32 million zeros. Sparse entries keep each clock as large as what it knows.

/// Slots up to this count are always dense: a clock this short costs little whatever it holds.
const DENSE_ALWAYS: usize = 64;
/// A vector stays (or becomes) dense while at least one slot in this many holds a value.
const DENSITY: usize = 4;

#[derive(Clone, Debug)]
enum Repr {
    /// By slot index; `nonzero` counts the entries that are not 0.
    Dense { values: Vec<u64>, nonzero: usize },
    /// Sorted by slot, no slot twice; entries may hold 0 only where a caller set 0.
    Sparse(Vec<(u32, u64)>),
}

/// A `u64` per slot, 0 where nothing was set.
#[derive(Clone, Debug)]
pub struct SlotValues {
    repr: Repr,
}

impl Default for SlotValues {
    fn default() -> Self {
        SlotValues { repr: Repr::Dense { values: Vec::new(), nonzero: 0 } }
    }
}

/// Whether `nonzero` values over `len` slots are worth a dense vector.
fn dense_enough(nonzero: usize, len: usize) -> bool {
    len <= DENSE_ALWAYS || nonzero * DENSITY >= len
}

impl SlotValues {
    #[inline]
    pub fn get(&self, slot: usize) -> u64 {
        match &self.repr {
            Repr::Dense { values, .. } => values.get(slot).copied().unwrap_or(0),
            Repr::Sparse(entries) => match entries.binary_search_by_key(&(slot as u32), |e| e.0) {
                Ok(i) => entries[i].1,
                Err(_) => 0,
            },
        }
    }

    /// Whether every slot holds 0.
    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Dense { nonzero, .. } => *nonzero == 0,
            Repr::Sparse(entries) => entries.iter().all(|e| e.1 == 0),
        }
    }

    pub fn set(&mut self, slot: usize, value: u64) {
        match &mut self.repr {
            Repr::Dense { values, nonzero } => {
                if slot < values.len() {
                    *nonzero = *nonzero + usize::from(values[slot] == 0 && value != 0)
                        - usize::from(values[slot] != 0 && value == 0);
                    values[slot] = value;
                    return;
                }
                if value == 0 {
                    return;
                }
                if dense_enough(*nonzero + 1, slot + 1) {
                    values.resize(slot + 1, 0);
                    values[slot] = value;
                    *nonzero += 1;
                    return;
                }
                let mut entries: Vec<(u32, u64)> = nonzero_entries(values).collect();
                entries.push((slot as u32, value));
                self.repr = Repr::Sparse(entries);
            }
            Repr::Sparse(entries) => {
                match entries.binary_search_by_key(&(slot as u32), |e| e.0) {
                    Ok(i) => entries[i].1 = value,
                    Err(i) if value != 0 => entries.insert(i, (slot as u32, value)),
                    Err(_) => {}
                }
                self.densify_if_worth_it();
            }
        }
    }

    /// Adds `value` to the slot's value and returns the sum. Every stream step adds 1 to its own slot, so the
    /// dense case is one read and one store, without [`SlotValues::set`]'s second lookup.
    #[inline]
    pub fn add(&mut self, slot: usize, value: u64) -> u64 {
        if let Repr::Dense { values, nonzero } = &mut self.repr {
            if let Some(current) = values.get_mut(slot) {
                *nonzero += usize::from(*current == 0 && value != 0);
                *current += value;
                return *current;
            }
        }
        let sum = self.get(slot) + value;
        if value != 0 {
            self.set(slot, sum);
        }
        sum
    }

    /// Raises every slot to at least `other`'s value, calling `raised(slot, old, new)` for each slot raised.
    /// Returns whether anything was.
    #[inline]
    pub fn raise_to(&mut self, other: &SlotValues, mut raised: impl FnMut(usize, u64, u64)) -> bool {
        let mut changed = false;
        if let (Repr::Dense { values: mine, nonzero }, Repr::Dense { values: theirs, .. }) =
            (&mut self.repr, &other.repr)
        {
            // The common case, kept a plain loop.
            if theirs.len() > mine.len() {
                mine.resize(theirs.len(), 0);
            }
            for (slot, (mine, theirs)) in mine.iter_mut().zip(theirs).enumerate() {
                if *theirs > *mine {
                    *nonzero += usize::from(*mine == 0);
                    raised(slot, *mine, *theirs);
                    *mine = *theirs;
                    changed = true;
                }
            }
            return changed;
        }
        match &mut self.repr {
            Repr::Dense { .. } => {
                for (slot, theirs) in other.entries() {
                    // `self` is dense and `other` is not: one lookup and store per slot `other` holds.
                    let mine = self.get(slot);
                    if theirs > mine {
                        raised(slot, mine, theirs);
                        self.set(slot, theirs);
                        changed = true;
                    }
                }
            }
            Repr::Sparse(mine) => {
                // A sorted merge; a new vector only when `other` has slots this one lacks.
                let mut merged: Option<Vec<(u32, u64)>> = None;
                let mut i = 0;
                for (slot, theirs) in other.entries() {
                    let slot32 = slot as u32;
                    while i < mine.len() && mine[i].0 < slot32 {
                        if let Some(m) = merged.as_mut() {
                            m.push(mine[i]);
                        }
                        i += 1;
                    }
                    if i < mine.len() && mine[i].0 == slot32 {
                        if theirs > mine[i].1 {
                            raised(slot, mine[i].1, theirs);
                            mine[i].1 = theirs;
                            changed = true;
                        }
                        if let Some(m) = merged.as_mut() {
                            m.push(mine[i]);
                        }
                        i += 1;
                    } else if theirs > 0 {
                        raised(slot, 0, theirs);
                        changed = true;
                        let m = merged.get_or_insert_with(|| {
                            let mut m = Vec::with_capacity(mine.len() + 1);
                            m.extend_from_slice(&mine[..i]);
                            m
                        });
                        m.push((slot32, theirs));
                    }
                }
                if let Some(mut m) = merged {
                    m.extend_from_slice(&mine[i..]);
                    *mine = m;
                }
                self.densify_if_worth_it();
            }
        }
        changed
    }

    /// The slots holding a value other than 0, in slot order.
    pub fn entries(&self) -> Entries<'_> {
        match &self.repr {
            Repr::Dense { values, .. } => Entries::Dense(values.iter().enumerate()),
            Repr::Sparse(entries) => Entries::Sparse(entries.iter()),
        }
    }

    /// Replaces these values with `other`'s, reusing the allocation where the representations match.
    pub fn assign(&mut self, other: &SlotValues) {
        match (&mut self.repr, &other.repr) {
            (Repr::Dense { values, nonzero }, Repr::Dense { values: theirs, nonzero: n }) => {
                values.clone_from(theirs);
                *nonzero = *n;
            }
            (Repr::Sparse(entries), Repr::Sparse(theirs)) => entries.clone_from(theirs),
            _ => self.repr = other.repr.clone(),
        }
    }

    fn densify_if_worth_it(&mut self) {
        let Repr::Sparse(entries) = &self.repr else { return };
        let len = entries.last().map_or(0, |e| e.0 as usize + 1);
        if dense_enough(entries.len(), len) {
            let mut values = vec![0; len];
            let mut nonzero = 0;
            for &(slot, value) in entries {
                values[slot as usize] = value;
                nonzero += usize::from(value != 0);
            }
            self.repr = Repr::Dense { values, nonzero };
        }
    }

    #[cfg(test)]
    fn is_dense(&self) -> bool {
        matches!(self.repr, Repr::Dense { .. })
    }
}

/// [`SlotValues::entries`].
pub enum Entries<'a> {
    Dense(std::iter::Enumerate<std::slice::Iter<'a, u64>>),
    Sparse(std::slice::Iter<'a, (u32, u64)>),
}

impl Iterator for Entries<'_> {
    type Item = (usize, u64);

    fn next(&mut self) -> Option<(usize, u64)> {
        match self {
            Entries::Dense(values) => values.find(|(_, v)| **v != 0).map(|(s, &v)| (s, v)),
            Entries::Sparse(entries) => entries.find(|e| e.1 != 0).map(|&(s, v)| (s as usize, v)),
        }
    }
}

fn nonzero_entries(values: &[u64]) -> impl Iterator<Item = (u32, u64)> + '_ {
    values.iter().enumerate().filter(|(_, v)| **v != 0).map(|(s, &v)| (s as u32, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(usize, u64)]) -> SlotValues {
        let mut v = SlotValues::default();
        for &(s, x) in pairs {
            v.set(s, x);
        }
        v
    }

    #[test]
    fn far_slots_go_sparse_and_near_ones_stay_dense() {
        assert!(of(&[(0, 1), (63, 2)]).is_dense());
        let far = of(&[(0, 1), (7_000, 2)]);
        assert!(!far.is_dense());
        assert_eq!((far.get(0), far.get(7_000), far.get(5)), (1, 2, 0));
        // Filling in the slots below makes it dense again.
        let mut filling = far.clone();
        for s in 1..2_000 {
            filling.set(s, 1);
        }
        assert!(filling.is_dense());
        assert_eq!((filling.get(7_000), filling.get(1_999), filling.get(2_000)), (2, 1, 0));
    }

    #[test]
    fn raising_agrees_in_every_representation() {
        let cases = [
            (of(&[(0, 5), (2, 1)]), of(&[(0, 3), (1, 4), (2, 2)])),
            (of(&[(0, 5), (9_000, 1)]), of(&[(0, 3), (1, 4), (9_000, 2)])),
            (of(&[(0, 5), (2, 1)]), of(&[(3, 3), (9_000, 2)])),
            (of(&[(100, 1), (9_000, 1)]), of(&[(50, 2), (100, 7), (9_001, 1)])),
        ];
        for (mine, theirs) in cases {
            let mut raised = Vec::new();
            let mut joined = mine.clone();
            assert!(joined.raise_to(&theirs, |s, old, new| raised.push((s, old, new))));
            let slots: Vec<usize> = mine.entries().chain(theirs.entries()).map(|e| e.0).collect();
            for &s in &slots {
                assert_eq!(joined.get(s), mine.get(s).max(theirs.get(s)), "slot {s}");
            }
            let expected: Vec<_> = {
                let mut e: Vec<_> = slots
                    .iter()
                    .filter(|&&s| theirs.get(s) > mine.get(s))
                    .map(|&s| (s, mine.get(s), theirs.get(s)))
                    .collect();
                e.sort();
                e.dedup();
                e
            };
            raised.sort();
            assert_eq!(raised, expected);
            assert!(!joined.clone().raise_to(&theirs, |_, _, _| {}), "a second join changes nothing");
        }
    }

    #[test]
    fn assign_and_emptiness() {
        let mut a = of(&[(0, 1)]);
        a.assign(&of(&[(8_000, 3)]));
        assert_eq!((a.get(0), a.get(8_000)), (0, 3));
        assert!(!a.is_empty());
        assert!(SlotValues::default().is_empty());
        assert_eq!(a.add(8_000, 2), 5);
        assert_eq!(a.get(8_000), 5);
    }

    #[test]
    fn adding_counts_the_slots_that_hold_a_value_in_every_representation() {
        for mut values in [of(&[(0, 1), (2, 4)]), of(&[(0, 1), (9_000, 4)])] {
            let dense = values.is_dense();
            assert_eq!(values.add(0, 1), 2, "a slot that held a value");
            assert_eq!(values.add(1, 0), 0, "adding nothing to an empty slot");
            assert_eq!(values.add(1, 3), 3, "a slot that held none");
            assert_eq!(values.add(20_000, 1), 1, "past the end");
            assert_eq!((values.get(0), values.get(1), values.get(20_000)), (2, 3, 1));
            // The count of slots holding a value decides dense or sparse: 4 slots hold one now.
            assert_eq!(values.entries().filter(|e| e.1 != 0).count(), 4, "dense at first: {dense}");
            if let Repr::Dense { nonzero, .. } = &values.repr {
                assert_eq!(*nonzero, 4, "the dense count agrees");
            }
        }
    }
}
