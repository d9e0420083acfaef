//! Whether the calling thread is inside a framework op whose own record says where its CUDA calls come from
//! (a PyTorch op with its Python line, or one of PyTorch's own): those calls need no native call site, and the
//! callback skips the stack walk for them. Set and cleared by the framework entry points (lib.rs), read by the
//! callback; touches only a thread-local.

use std::cell::Cell;

thread_local! {
    static IN_UNSITED_OP: Cell<bool> = const { Cell::new(false) };
}

/// An op began on this thread; `sited`: whether its CUDA calls still want their native call sites.
pub fn op_began(sited: bool) {
    IN_UNSITED_OP.with(|flag| flag.set(!sited));
}

/// The op running on this thread ended.
pub fn op_ended() {
    IN_UNSITED_OP.with(|flag| flag.set(false));
}

/// Whether this thread's CUDA calls want their native call sites now.
pub fn call_sites_wanted() -> bool {
    !IN_UNSITED_OP.with(Cell::get)
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
        op_began(false);
        op_began(true);
        assert!(call_sites_wanted(), "a sited op begun after it (its end was not seen)");
    }
}
