//! fork() in a captured program: the state lock is held across the fork, so that the child does not inherit
//! it locked by a thread that does not exist there; meanwhile the forking thread's own pthread calls (those of
//! fork handlers run after this one) pass the host-synchronization bookkeeping by, which may need that lock.
//! The child notes its own process id, so that its first recorded call starts its own trace file (state.rs),
//! and that it is a forked child, which may end in _exit (its synchronizations write what is pending,
//! callback.rs), and forgets the guard faults its parent's threads had queued (the parent records them).
//! Touches the state lock, the process id, the fault queue and the forking thread's bookkeeping switch only.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::MutexGuard;

use crate::host_sync;
use crate::origin;
use crate::process_state::ProcessState;
use crate::state::STATE;

thread_local! {
    /// The state lock, held by the forking thread across fork().
    static FORK_GUARD: RefCell<Option<MutexGuard<'static, Option<ProcessState>>>> = const { RefCell::new(None) };
    /// Whether the forking thread's calls passed the bookkeeping by before it forked (a fork from inside it).
    static PASSED_BEFORE: Cell<bool> = const { Cell::new(false) };
}

/// Registers the handlers with pthread_atfork (at start-up, once capture is subscribed).
pub fn register_handlers() {
    // Safety: registers plain extern "C" functions that take and release the state lock around fork().
    unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child)) };
}

extern "C" fn before_fork() {
    let _ = std::panic::catch_unwind(|| {
        PASSED_BEFORE.with(|before| before.set(host_sync::pass_calls_on(true)));
        let guard = STATE.lock().ok();
        FORK_GUARD.with(|slot| *slot.borrow_mut() = guard);
    });
}

/// In the parent: release the lock taken before the fork.
extern "C" fn after_fork_in_parent() {
    let _ = std::panic::catch_unwind(|| {
        FORK_GUARD.with(|slot| slot.borrow_mut().take());
        host_sync::pass_calls_on(PASSED_BEFORE.with(Cell::get));
    });
}

/// Whether this process was forked from a captured one (and so may end in _exit, as multiprocessing workers do).
static FORKED_CHILD: AtomicBool = AtomicBool::new(false);

/// Whether this process is a forked child of a captured process.
pub fn in_forked_child() -> bool {
    FORKED_CHILD.load(Ordering::Relaxed)
}

/// In the child: note the new process id and release the lock. The child's first recorded call then finds a
/// state of another process and starts its own trace file.
extern "C" fn after_fork_in_child() {
    FORKED_CHILD.store(true, Ordering::Relaxed);
    let _ = std::panic::catch_unwind(origin::note_pid);
    crate::host_watch::faults::forget_queued_after_fork();
    after_fork_in_parent();
}
