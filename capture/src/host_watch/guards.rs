//! The page ranges the host watch has protected, in a fixed table that the signal handler reads without a lock
//! and without allocating. Arming and lifting in normal context happen under inflight.rs's lock, one at a time;
//! the handler only claims an armed range (lifting its protection so that the faulting access can run again)
//! and never takes a free slot. Touches page protections (the mprotect system call) and this table only.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Ranges guarded at once; an arm past them is not made (and counted as not watched).
const SLOTS: usize = 256;

/// A slot's phase, in the low bits of its state; the rest counts its uses, so that a handler that read a slot's
/// range sees whether the slot changed meanwhile.
const FREE: u64 = 0;
const ARMED: u64 = 1;
/// A handler is lifting the protection.
const LIFTING: u64 = 2;
/// The handler lifted it: the window saw its first access, the pages are as the program had them.
const LIFTED: u64 = 3;
const PHASE: u64 = 3;
const USE: u64 = 4;

struct Slot {
    state: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot { state: AtomicU64::new(FREE), start: AtomicU64::new(0), end: AtomicU64::new(0) };
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// One past the highest slot ever armed: `armed_overlaps` (every I/O call, io_calls.rs) looks at no slot above,
/// and at none in a process that guards nothing. Arming takes the lowest free slot, so this stays near the most
/// ranges guarded at once.
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);

/// The protection pinned host memory has when nothing guards it: the program reads and writes it.
pub const UNGUARDED: i32 = libc::PROT_READ | libc::PROT_WRITE;

/// Sets the protection of `[start, end)` (whole pages) by the system call itself: libc's mprotect may be
/// another library's interposer, and the handler must not run code that is not async-signal-safe.
fn protect(start: u64, end: u64, prot: i32) -> bool {
    // Safety: changes the protection of whole pages of this process that the capture guards (inflight.rs only
    // guards pages entirely inside pinned buffers the program gave to the GPU); no memory is read or written.
    unsafe { libc::syscall(libc::SYS_mprotect, start as usize, (end - start) as usize, prot) == 0 }
}

/// Protects `[start, end)` (page-aligned) with `prot` and files it; None when the table is full or the system
/// refused (the range is then left as it was).
pub fn arm(start: u64, end: u64, prot: i32) -> Option<usize> {
    let index = TABLE.iter().position(|slot| slot.state.load(Ordering::Acquire) & PHASE == FREE)?;
    let slot = &TABLE[index];
    let uses = slot.state.load(Ordering::Acquire) & !PHASE;
    slot.start.store(start, Ordering::Relaxed);
    slot.end.store(end, Ordering::Relaxed);
    // Filed before it is protected: a fault on it is then always found.
    slot.state.store(uses + USE + ARMED, Ordering::Release);
    SLOTS_USED.fetch_max(index + 1, Ordering::Release);
    if protect(start, end, prot) {
        Some(index)
    } else {
        slot.state.store(uses + USE + FREE, Ordering::Release);
        None
    }
}

/// Ends the slot's window: its pages get the protection they had back (unless a fault already lifted it) and
/// the slot is free again.
pub fn lift(index: usize) {
    end_window(index, true);
}

/// Frees the slot without touching its pages: a wider range that covers them is armed in its place.
pub fn forget(index: usize) {
    end_window(index, false);
}

fn end_window(index: usize, restore: bool) {
    let Some(slot) = TABLE.get(index) else { return };
    loop {
        let state = slot.state.load(Ordering::Acquire);
        match state & PHASE {
            FREE => return,
            ARMED => {
                if slot
                    .state
                    .compare_exchange(state, state - ARMED + LIFTING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    if restore {
                        protect(slot.start.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed), UNGUARDED);
                    }
                    slot.state.store((state & !PHASE) + FREE, Ordering::Release);
                    return;
                }
            }
            // A handler is lifting it: wait for that, a few instructions.
            LIFTING => std::hint::spin_loop(),
            _ => {
                if slot
                    .state
                    .compare_exchange(state, state - LIFTED + FREE, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return;
                }
            }
        }
    }
}

/// Calls `found` with the first byte of `[start, end)` inside each armed range that it overlaps. Lock-free: a
/// range armed or lifted meanwhile may be seen either way.
pub fn armed_overlaps(start: u64, end: u64, mut found: impl FnMut(u64)) {
    let used = SLOTS_USED.load(Ordering::Acquire);
    for slot in TABLE.iter().take(used) {
        if slot.state.load(Ordering::Acquire) & PHASE != ARMED {
            continue;
        }
        let (armed_start, armed_end) = (slot.start.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed));
        if armed_start < end && start < armed_end {
            found(start.max(armed_start));
        }
    }
}

/// Whether the slot's window saw its access (a fault lifted it).
pub fn lifted(index: usize) -> bool {
    TABLE.get(index).is_some_and(|slot| slot.state.load(Ordering::Acquire) & PHASE == LIFTED)
}

/// What the handler found at a faulting address.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The address is in an armed range, whose protection this call lifted: the access may run again.
    Lifted { start: u64, end: u64 },
    /// Another thread is lifting the range this address is in: running the access again will do.
    Busy,
    /// No armed range holds it: the fault is the program's.
    NotOurs,
}

/// Claims the armed range holding `address`, lifting its protection. Async-signal-safe: atomics and one
/// system call.
pub fn claim(address: u64) -> Claim {
    for slot in &TABLE {
        let state = slot.state.load(Ordering::Acquire);
        let phase = state & PHASE;
        if phase != ARMED && phase != LIFTING {
            continue;
        }
        let (start, end) = (slot.start.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed));
        if slot.state.load(Ordering::Acquire) != state || address < start || address >= end {
            continue;
        }
        if phase == LIFTING {
            return Claim::Busy;
        }
        if slot.state.compare_exchange(state, state - ARMED + LIFTING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Claim::Busy;
        }
        let lifted = protect(start, end, UNGUARDED);
        slot.state.store(state - ARMED + if lifted { LIFTED } else { FREE }, Ordering::Release);
        return if lifted { Claim::Lifted { start, end } } else { Claim::NotOurs };
    }
    Claim::NotOurs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages of this process, mapped for the test.
    fn pages() -> (u64, u64) {
        // Safety: a fresh anonymous mapping; unmapped by the caller.
        let address = unsafe {
            libc::mmap(std::ptr::null_mut(), 8192, UNGUARDED, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(address, libc::MAP_FAILED);
        (address as u64, address as u64 + 8192)
    }

    #[test]
    fn an_armed_range_is_claimed_once_then_freed() {
        let (start, end) = pages();
        let index = arm(start, end, libc::PROT_READ).expect("armed");
        assert_eq!(claim(end), Claim::NotOurs, "past its end");
        assert_eq!(claim(start + 100), Claim::Lifted { start, end });
        assert!(lifted(index));
        // Safety: the pages are writable again.
        unsafe { *(start as *mut u8) = 7 };
        assert_eq!(claim(start + 100), Claim::NotOurs, "a lifted range is no longer armed");
        lift(index);
        assert!(!lifted(index));
        let again = arm(start, end, libc::PROT_NONE).expect("armed again");
        lift(again);
        // Safety: lifted: readable and writable as mapped.
        assert_eq!(unsafe { *(start as *const u8) }, 7);
        // Safety: the test's own mapping.
        unsafe { libc::munmap(start as *mut libc::c_void, 8192) };
    }

    #[test]
    fn a_refused_protection_files_nothing() {
        // Not page-aligned: the system refuses.
        assert_eq!(arm(0x1001, 0x2001, libc::PROT_NONE), None);
        assert_eq!(claim(0x1500), Claim::NotOurs);
    }
}
