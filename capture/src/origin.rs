//! Where and when a call is made: this process's id, the calling thread's id and the monotonic clock, the parts
//! of a record's `Call`. Each is read on every recorded call, so none costs a system call there. Touches only
//! libc.

use std::sync::atomic::{AtomicU32, Ordering};

/// This process's id, kept here because getpid is a system call and every callback needs it; set at start-up
/// and anew on the child side of a fork.
static PID: AtomicU32 = AtomicU32::new(0);

/// Notes this process's id: at start-up, and in the child of a fork.
pub fn note_pid() {
    PID.store(std::process::id(), Ordering::SeqCst);
}

pub fn current_pid() -> u32 {
    PID.load(Ordering::Relaxed)
}

thread_local! {
    /// gettid is a system call: ask once per thread.
    static THREAD_ID: u64 = {
        // Safety: gettid has no preconditions.
        unsafe { libc::gettid() as u64 }
    };
}

pub fn thread_id() -> u64 {
    THREAD_ID.with(|tid| *tid)
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // Safety: writes the current time into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
