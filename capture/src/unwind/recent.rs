//! The walks made most recently, replayed before any new walk: a walk is a function of where it starts (the
//! stack pointer, and the frame pointer when a rule used it before a frame restored it) and of the stack words
//! that decided it (the return addresses, and a saved frame pointer that a later frame's CFA was taken from), so
//! when the same start finds the same words at the same addresses, it would find the same frames and the same
//! call site. Checking that is a handful of independent loads and compares (no load waits on
//! another, unlike a walk), and a start from a different depth fails at the first compare. Plain data; the
//! reads go through the caller's `StackWords`.

use super::stack::{StackWords, Start};

/// Walks remembered; the most recently used first.
const KEPT: usize = 8;

/// One walk: where it started, every stack word it read, and the call site it came to.
struct Replay {
    sp: u64,
    /// The start's frame pointer, when the walk used it.
    bp: Option<u64>,
    reads: Box<[(u64, u64)]>,
    site: u32,
}

#[derive(Default)]
pub struct Recent {
    replays: Vec<Replay>,
}

impl Recent {
    /// The call site of a remembered walk that a walk from `start` would repeat.
    #[inline]
    pub fn site(&mut self, start: Start, stack: &StackWords) -> Option<u32> {
        let index = self.replays.iter().position(|replay| {
            replay.sp == start.sp
                && replay.bp.is_none_or(|bp| bp == start.bp)
                && replay.reads.iter().all(|&(address, value)| stack.read(address) == Some(value))
        })?;
        if index > 0 {
            self.replays[..=index].rotate_right(1);
        }
        Some(self.replays[0].site)
    }

    /// Remembers a walk from `start` that read `reads` and came to `site`, first.
    pub fn keep(&mut self, start: Start, start_bp_used: bool, reads: &[(u64, u64)], site: u32) {
        if self.replays.len() == KEPT {
            self.replays.pop();
        }
        let bp = start_bp_used.then_some(start.bp);
        self.replays.insert(0, Replay { sp: start.sp, bp, reads: reads.into(), site });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_is_replayed_only_from_the_same_start_over_the_same_words() {
        let words = [0x1111u64, 0x2222, 0x3333];
        let at = |i: usize| &words[i] as *const u64 as u64;
        let stack = StackWords::above(at(0)).expect("the test's stack");
        let start = Start { pc: 1, sp: at(0), bp: 7 };
        let mut recent = Recent::default();
        recent.keep(start, false, &[(at(1), 0x2222), (at(2), 0x3333)], 5);
        recent.keep(Start { sp: at(0) + 8, ..start }, false, &[(at(1), 0x2222)], 6);
        assert_eq!(recent.site(start, &stack), Some(5));
        assert_eq!(recent.site(Start { bp: 8, ..start }, &stack), Some(5), "the start's frame pointer was not used");
        assert_eq!(recent.site(Start { sp: at(0) + 16, ..start }, &stack), None, "another start");
        let mut other = Recent::default();
        other.keep(start, false, &[(at(1), 0x9999)], 5);
        assert_eq!(other.site(start, &stack), None, "other words");
        other.keep(start, true, &[(at(2), 0x3333)], 9);
        assert_eq!(other.site(Start { bp: 8, ..start }, &stack), None, "the frame pointer was used");
        assert_eq!(other.site(start, &stack), Some(9));
        for site in 10..20 {
            other.keep(Start { sp: at(0) + 8 * site, ..start }, false, &[], site as u32);
        }
        assert_eq!(other.site(start, &stack), None, "pushed out by newer walks");
    }
}
