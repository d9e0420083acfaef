//! Whether the calling thread is inside a framework op whose own record says where its CUDA calls come from
//! (a PyTorch op with its Python line, or one of PyTorch's own): those calls need no native call site, and the
//! callback skips the stack walk for them. Set and cleared by the framework entry points (lib.rs), read by the
//! callback; touches only a thread-local.
//!
//! Ops nest (Python code inside an op, such as a saved-tensor hook, runs ops of its own), so each thread keeps
//! a stack of the open ops' answers, one bit each, innermost lowest: when an inner op ends, the outer op's
//! answer holds again. Ops deeper than 64 forget the outermost answers, which then read as "wanted" (a walk too
//! many, never a site missing).

use std::cell::Cell;

/// One thread's open ops: bit i is set when the op i levels out from the innermost is unsited.
#[derive(Copy, Clone)]
struct OpenOps {
    unsited: u64,
    depth: u32,
}

thread_local! {
    static OPEN_OPS: Cell<OpenOps> = const { Cell::new(OpenOps { unsited: 0, depth: 0 }) };
}

/// An op began on this thread; `sited`: whether its CUDA calls still want their native call sites.
pub fn op_began(sited: bool) {
    OPEN_OPS.with(|open| {
        let ops = open.get();
        open.set(OpenOps { unsited: (ops.unsited << 1) | u64::from(!sited), depth: ops.depth.saturating_add(1) });
    });
}

/// The innermost op running on this thread ended: the op around it, if any, decides again.
pub fn op_ended() {
    OPEN_OPS.with(|open| {
        let ops = open.get();
        if ops.depth > 0 {
            open.set(OpenOps { unsited: ops.unsited >> 1, depth: ops.depth - 1 });
        }
    });
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
        op_began(false);
        assert!(!call_sites_wanted());
        std::thread::spawn(|| assert!(call_sites_wanted(), "another thread")).join().unwrap();
        op_ended();
        assert!(call_sites_wanted());
        op_ended();
        assert!(call_sites_wanted(), "an end with no op open changes nothing");
    }

    #[test]
    fn an_inner_op_decides_while_it_runs_and_the_outer_one_after() {
        op_began(false);
        op_began(true);
        assert!(call_sites_wanted(), "a sited op inside an unsited one");
        op_ended();
        assert!(!call_sites_wanted(), "the unsited outer op again");
        op_began(false);
        op_ended();
        assert!(!call_sites_wanted());
        op_ended();
        assert!(call_sites_wanted());
    }

    #[test]
    fn ops_deeper_than_the_stack_forget_the_outermost_answers() {
        op_began(false);
        for _ in 0..64 {
            op_began(true);
        }
        for _ in 0..64 {
            op_ended();
        }
        assert!(call_sites_wanted(), "the outermost answer was shifted out: a walk too many");
        op_ended();
        assert!(call_sites_wanted());
    }
}
