//! The framework ops open on the calling thread: whether each one's own record says where its CUDA calls come
//! from (a PyTorch op with its Python line, or one of PyTorch's own: those calls need no native call site, and
//! the callback skips the stack walk for them), and which of them have not written their `op_begin` yet. Set and
//! cleared by the framework entry points (lib.rs), read by the callback and by the state's record writing;
//! touches only a thread-local.
//!
//! Ops nest (Python code inside an op, such as a saved-tensor hook, runs ops of its own), so each thread keeps
//! a stack of the open ops' answers, one bit each, innermost lowest: when an inner op ends, the outer op's
//! answer holds again. Ops deeper than 64 forget the outermost answers, which then read as "wanted" (a walk too
//! many, never a site missing).
//!
//! An op's `op_begin` is written only when the thread records something inside it (process_state.rs asks before
//! each record): about half of a training step's ops are views and bookkeeping (`t`, `detach`, `view`,
//! `record_stream`) that issue no CUDA work, and an op frame with nothing inside orders and attributes nothing,
//! so the observer drops such an op whole, its `op_end` and Python line included. The ops not yet written are
//! always the innermost ones (an op inside one that wrote its begin has not recorded anything yet either).

use std::cell::Cell;

/// One thread's open ops: bit i is set when the op i levels out from the innermost is unsited; the innermost
/// `unwritten` of the `depth` ops have not written their `op_begin`.
#[derive(Copy, Clone)]
struct OpenOps {
    unsited: u64,
    depth: u32,
    unwritten: u32,
}

thread_local! {
    static OPEN_OPS: Cell<OpenOps> = const { Cell::new(OpenOps { unsited: 0, depth: 0, unwritten: 0 }) };
}

/// An op began on this thread; `sited`: whether its CUDA calls still want their native call sites; `written`:
/// whether it is written at all (an op begun outside a capture range is not, ranges.rs), in which case its
/// `op_begin` waits for the first record made inside it.
pub fn op_began(sited: bool, written: bool) {
    let _ = OPEN_OPS.try_with(|open| {
        let ops = open.get();
        open.set(OpenOps {
            unsited: (ops.unsited << 1) | u64::from(!sited),
            depth: ops.depth.saturating_add(1),
            unwritten: ops.unwritten.saturating_add(u32::from(written)),
        });
    });
}

/// The innermost op running on this thread ended: the op around it, if any, decides again, and a begin it
/// still owed (nothing was recorded inside it) is owed no longer.
pub fn op_ended() {
    let _ = OPEN_OPS.try_with(|open| {
        let ops = open.get();
        if ops.depth > 0 {
            open.set(OpenOps {
                unsited: ops.unsited >> 1,
                depth: ops.depth - 1,
                unwritten: ops.unwritten.saturating_sub(1),
            });
        }
    });
}

/// Whether the innermost op open on this thread wrote its `op_begin` (something was recorded inside it); None
/// when no op is open.
pub fn innermost_written() -> Option<bool> {
    let ops = OPEN_OPS.try_with(Cell::get).ok()?;
    (ops.depth > 0).then_some(ops.unwritten == 0)
}

/// How many `op_begin` records the calling thread owes before its next record, outermost first; they count as
/// written from here on.
#[inline]
pub fn take_unwritten_begins() -> u32 {
    OPEN_OPS
        .try_with(|open| {
            let ops = open.get();
            if ops.unwritten > 0 {
                open.set(OpenOps { unwritten: 0, ..ops });
            }
            ops.unwritten
        })
        .unwrap_or(0)
}

/// Whether a framework op is open on this thread: its kernels take the op's extents when it ends (ingest's
/// frames stage drops their pointer arguments), so their arguments need not be read.
pub fn inside_op() -> bool {
    OPEN_OPS.try_with(|open| open.get().depth > 0).unwrap_or(false)
}

/// Whether this thread's CUDA calls want their native call sites now.
pub fn call_sites_wanted() -> bool {
    OPEN_OPS.with(|open| open.get().unsited & 1 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsited_op_turns_sites_off_on_its_thread_until_it_ends() {
        assert!(call_sites_wanted());
        op_began(false, true);
        assert!(!call_sites_wanted());
        std::thread::spawn(|| assert!(call_sites_wanted(), "another thread")).join().unwrap();
        op_ended();
        assert!(call_sites_wanted());
        op_ended();
        assert!(call_sites_wanted(), "an end with no op open changes nothing");
        assert_eq!(innermost_written(), None);
    }

    #[test]
    fn an_inner_op_decides_while_it_runs_and_the_outer_one_after() {
        op_began(false, true);
        op_began(true, true);
        assert!(call_sites_wanted(), "a sited op inside an unsited one");
        op_ended();
        assert!(!call_sites_wanted(), "the unsited outer op again");
        op_began(false, true);
        op_ended();
        assert!(!call_sites_wanted());
        op_ended();
        assert!(call_sites_wanted());
    }

    #[test]
    fn ops_deeper_than_the_stack_forget_the_outermost_answers() {
        op_began(false, true);
        for _ in 0..64 {
            op_began(true, true);
        }
        for _ in 0..64 {
            op_ended();
        }
        assert!(call_sites_wanted(), "the outermost answer was shifted out: a walk too many");
        op_ended();
        assert!(call_sites_wanted());
    }

    #[test]
    fn a_thread_is_inside_an_op_from_its_begin_to_its_end() {
        assert!(!inside_op());
        op_began(true, true);
        op_began(false, false);
        assert!(inside_op());
        op_ended();
        assert!(inside_op(), "the outer op is still open");
        op_ended();
        assert!(!inside_op());
    }

    #[test]
    fn begins_are_owed_until_the_first_record_inside_and_only_for_the_ops_open_then() {
        op_began(false, true);
        assert_eq!(innermost_written(), Some(false));
        op_began(false, true);
        assert_eq!(take_unwritten_begins(), 2, "the first record inside both writes both begins");
        assert_eq!(innermost_written(), Some(true));
        op_began(false, true);
        assert_eq!(innermost_written(), Some(false), "an inner op that recorded nothing");
        op_ended();
        assert_eq!(take_unwritten_begins(), 0, "and whose begin is no longer owed");
        assert_eq!(innermost_written(), Some(true));
        op_ended();
        op_ended();
        assert_eq!(innermost_written(), None);
    }

    #[test]
    fn an_op_left_out_of_the_trace_owes_no_begin() {
        op_began(true, false);
        assert_eq!(take_unwritten_begins(), 0);
        assert_eq!(innermost_written(), Some(true), "nothing is owed for it: its end is dropped by the range rules");
        op_ended();
        op_began(true, true);
        op_began(true, true);
        assert_eq!(innermost_written(), Some(false));
        op_ended();
        assert_eq!(innermost_written(), Some(false));
        op_ended();
        assert_eq!(take_unwritten_begins(), 0);
    }
}
