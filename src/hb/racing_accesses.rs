//! The accesses of one operation that can race: a read inside a range the same operation writes adds nothing
//! (the write conflicts with everything the read would), and would report one bug twice. Kernel launches
//! (`access`) and graph launches (`graph`) both ask it.

use crate::model::{Access, AccessMode};

/// The accesses of `accesses`, one operation's, that can race. A filter of its own rather than a zip with
/// [`can_race`]: it runs on every launch, and the zip's two iterators and the call were 4% of the engine
/// thread's instructions (callgrind, 10 M synthetic operations).
#[inline]
pub(super) fn effective_accesses(accesses: &[Access]) -> impl Iterator<Item = &Access> {
    let writes = Writes::of(accesses);
    accesses.iter().filter(move |a| writes.may_race(a))
}

/// For each access, in order, whether it can race (what [`effective_accesses`] keeps).
pub(super) fn can_race(accesses: &[Access]) -> impl Iterator<Item = bool> + '_ {
    let writes = Writes::of(accesses);
    accesses.iter().map(move |a| writes.may_race(a))
}

/// Whether the write `w` covers every byte the read `a` touches: a plain write covers its whole range, a strided
/// one only its own pattern (the same view read again).
fn covers(w: &Access, a: &Access) -> bool {
    w.mode == AccessMode::Write
        && w.range.contains(a.range)
        && (w.view.is_none() || (a.view.is_some() && a.view == w.view && a.range.start == w.range.start))
}

/// Accesses up to which comparing every read with every write is cheaper than sorting the writes.
const SCAN_AT_MOST: usize = 16;

/// The write ranges of one operation, asked whether one of them contains a range. A kernel may carry 100,000
/// ranges (a gather over a tensor's rows): comparing each read with each write would be quadratic.
enum Writes<'a> {
    /// Few accesses (a launch's usual two reads and a write): the list itself, scanned.
    Few(&'a [Access]),
    /// The plain writes' starts in order, and for each the furthest end among the writes starting there or
    /// before: a range is inside a plain write exactly when the writes starting at or before it reach its end.
    /// Strided writes (few) are asked one by one.
    Sorted { starts: Vec<u64>, reach: Vec<u64>, strided: Vec<&'a Access> },
}

impl<'a> Writes<'a> {
    #[inline]
    fn of(accesses: &'a [Access]) -> Writes<'a> {
        if accesses.len() <= SCAN_AT_MOST {
            return Writes::Few(accesses);
        }
        Writes::sorted(accesses)
    }

    /// [`Writes::Sorted`] of a long list, out of line: a launch's usual few accesses never need it.
    #[inline(never)]
    fn sorted(accesses: &'a [Access]) -> Writes<'a> {
        let plain = |a: &&Access| a.mode == AccessMode::Write && a.view.is_none();
        let mut writes: Vec<(u64, u64)> =
            accesses.iter().filter(plain).map(|a| (a.range.start, a.range.end())).collect();
        let strided = accesses.iter().filter(|a| a.mode == AccessMode::Write && a.view.is_some()).collect();
        writes.sort_unstable();
        let mut furthest = 0;
        let reach = writes.iter().map(|&(_, end)| {
            furthest = furthest.max(end);
            furthest
        });
        let reach = reach.collect();
        Writes::Sorted { starts: writes.iter().map(|&(start, _)| start).collect(), reach, strided }
    }

    /// Whether `access`, of the operation these are the writes of, can race: a write always, a read unless a
    /// write covers it.
    #[inline]
    fn may_race(&self, access: &Access) -> bool {
        access.mode == AccessMode::Write || !self.cover(access)
    }

    /// Whether one of the writes covers every byte the read `read` touches.
    fn cover(&self, read: &Access) -> bool {
        match self {
            Writes::Few(accesses) => accesses.iter().any(|w| covers(w, read)),
            Writes::Sorted { starts, reach, strided } => {
                let in_plain = match starts.partition_point(|&start| start <= read.range.start) {
                    0 => false,
                    before => reach[before - 1] >= read.range.end(),
                };
                in_plain || strided.iter().any(|w| covers(w, read))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AccessRange;

    fn access(start: u64, len: u64, mode: AccessMode) -> Access {
        Access { range: AccessRange::new(start, len).unwrap(), mode, view: None }
    }

    /// The definition, read literally: a read is dropped when some write of the same operation contains it.
    fn by_definition(accesses: &[Access]) -> Vec<Access> {
        let inside_a_write = |a: &Access| accesses.iter().any(|w| covers(w, a));
        accesses.iter().filter(|a| a.mode == AccessMode::Write || !inside_a_write(a)).cloned().collect()
    }

    #[test]
    fn sorted_writes_drop_exactly_the_reads_inside_a_write() {
        // Small coordinates, so that containment, touching edges, empty ranges and nesting all occur.
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for len in [0, 1, 5, SCAN_AT_MOST, SCAN_AT_MOST + 1, 40, 300] {
            for _ in 0..50 {
                let accesses: Vec<Access> = (0..len)
                    .map(|_| {
                        let mode = if next(3) == 0 { AccessMode::Write } else { AccessMode::Read };
                        access(next(64), next(24), mode)
                    })
                    .collect();
                let kept: Vec<Access> = effective_accesses(&accesses).cloned().collect();
                assert_eq!(kept, by_definition(&accesses), "accesses {accesses:?}");
            }
        }
    }
}
