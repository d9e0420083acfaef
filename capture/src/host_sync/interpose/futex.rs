//! Futexes the program calls through the C library's `syscall`: libstdc++'s header code for C++20's
//! `std::latch`, `std::counting_semaphore`, `std::barrier` and `atomic::wait`/`notify`, its futures
//! (`std::promise` and `std::future` sleep in `_M_futex_wait_until` and wake in `_M_futex_notify_all`, which
//! call `syscall`), the guards of static locals (`__cxa_guard_acquire` when another thread initializes), and
//! any program or library that sleeps on a futex of its own. A wake releases what the waking thread knows into
//! the futex word and a wait that was woken, or found the word changed, acquires it, as a semaphore's post and
//! wait do (the word keeps the join of its wakers' snapshots).
//!
//! Only a waiter that slept, or came to sleep just after the change, is seen: one that finds the value it waits
//! for already there calls nothing, and its hand-over stays ordered only by timing (docs/host-order.md). A
//! `std::barrier`'s last thread to arrive does not wait, so it learns nothing of the others. libstdc++ waits
//! for values that are not 4-byte integers (`atomic<bool>::wait`, `std::barrier`'s phase) on one of 16 shared
//! proxy words picked by address, and two objects that share one hand their wakers' snapshots to each other's
//! waiters. A waiter that a requeue moved to another word acquires the word it waited on, not the one its
//! waker released into (no library seen requeues through `syscall`: glibc's own condition variables no longer do,
//! and make no call of it).
//!
//! Every other system call, and every futex call from code decided not the program's (caller.rs: the CUDA
//! stack, and this library, whose own mutexes, channels and thread parking are Rust's futexes), is passed
//! straight to the C library: on x86_64 by the exported function itself, on aarch64 by the body.

use std::ffi::{c_int, c_long};

use crate::host_sync::caller;
use crate::host_sync::objects::Release;
use crate::host_sync::real;
use crate::host_sync::{acquire, release};

/// `syscall`, in front of the C library's: a call of any other number, or a futex call from a caller decided
/// not the program's, jumps straight to the real function once it is known; a futex call of the program goes to
/// [`syscall_body`] with its return address as an eighth argument. On x86_64 the seventh argument is on the stack
/// already, so the shim builds a frame that copies it and the return address below and calls the body.
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn syscall() {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!(
        // Unwind information for the frame below (a thread cancelled in a wait unwinds through it, a debugger
        // walks it): the return address is at the frame's top until the body's frame is built.
        ".cfi_startproc",
        "cmp rdi, {futex}",
        "je 2f",
        "mov rax, [rip + {real}]",
        "test rax, rax",
        "jz 3f",
        "jmp rax",
        // A futex call: the caller's slot, as the pthread shims find it (interpose/mod.rs).
        "2:",
        "mov r10, [rsp]",
        "mov rax, r10",
        "shr rax, {shift}",
        "xor rax, r10",
        "and eax, {mask}",
        "lea r11, [rip + {decided}]",
        "mov rax, [r11 + rax * 8]",
        "lea r11, [r10 + r10]",
        "cmp rax, r11",
        "jne 3f",
        "mov rax, [rip + {real}]",
        "test rax, rax",
        "jz 3f",
        "jmp rax",
        // The body: the seventh argument and the return address pushed as its seventh and eighth, the stack
        // kept 16-byte aligned at the call.
        "3:",
        "sub rsp, 8",
        ".cfi_adjust_cfa_offset 8",
        "push qword ptr [rsp + 8]",
        ".cfi_adjust_cfa_offset 8",
        "push qword ptr [rsp + 24]",
        ".cfi_adjust_cfa_offset 8",
        "call {body}",
        "add rsp, 24",
        ".cfi_adjust_cfa_offset -24",
        "ret",
        ".cfi_endproc",
        futex = const libc::SYS_futex,
        shift = const caller::SLOT_MIX_SHIFT,
        mask = const caller::SLOTS - 1,
        decided = sym caller::DECIDED,
        real = sym real::address::syscall,
        body = sym syscall_body,
    );
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("mov x7, x30", "b {body}", body = sym syscall_body);
}

/// The body of `syscall` for the calls the shim does not pass on: a futex call of the program, or any call
/// before the real function was looked up.
///
/// # Safety
/// Called by the shim with the program's arguments, passed on as they came. "C-unwind", as the pthread bodies:
/// a thread cancelled inside the call unwinds through it, and nothing here needs dropping across the call.
#[allow(clippy::too_many_arguments)] // the system call's six, its number and the caller
pub unsafe extern "C-unwind" fn syscall_body(
    number: c_long,
    a1: usize,
    a2: usize,
    a3: usize,
    a4: usize,
    a5: usize,
    a6: usize,
    caller: usize,
) -> c_long {
    let Some(real) = real::syscall() else {
        // Safety: the calling thread's errno.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    };
    // Safety: the program's call, passed on as it came.
    let call = || unsafe { real(number, a1, a2, a3, a4, a5, a6) };
    if number != libc::SYS_futex || !programs_futex(caller) {
        return call();
    }
    let operation = FutexOperation::of(a2 as c_int);
    let (word, second_word) = (a1, a5);
    for released in operation.releases(word, second_word).into_iter().flatten() {
        release(released, Release::Join, operation.api(), caller);
    }
    let result = call();
    // Safety: the calling thread's errno, as the call left it.
    let errno = unsafe { *libc::__errno_location() };
    if operation.acquired_after(result, errno) {
        for acquired in operation.acquires(word, second_word).into_iter().flatten() {
            acquire(acquired, operation.api(), caller);
        }
    }
    result
}

/// Whether a futex call returning to `caller` is the program's. This library's own code never is, even where it
/// is linked into a test binary whose other code is the program's: noted as decided, so that the shim passes its
/// next calls on before the body.
fn programs_futex(caller: usize) -> bool {
    if caller::decided_already(caller).is_none() && caller::in_this_object(caller) {
        caller::decide_as(caller, false);
        return false;
    }
    true
}

/// What a futex call does, as far as ordering goes (futex(2)'s operations, without the private and clock flags).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum FutexOperation {
    /// FUTEX_WAIT, FUTEX_WAIT_BITSET: sleeps while the word holds a value.
    Wait,
    /// FUTEX_WAKE, FUTEX_WAKE_BITSET: wakes the word's sleepers.
    Wake,
    /// FUTEX_WAKE_OP: changes the second word and wakes the sleepers of both.
    WakeOp,
    /// FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_CMP_REQUEUE_PI: wakes some sleepers and moves the others to the
    /// second word.
    Requeue,
    /// FUTEX_LOCK_PI, FUTEX_LOCK_PI2, FUTEX_TRYLOCK_PI: takes a priority-inheriting lock.
    LockPi,
    /// FUTEX_UNLOCK_PI.
    UnlockPi,
    /// FUTEX_WAIT_REQUEUE_PI: sleeps on the word and wakes holding the second, a priority-inheriting lock.
    WaitRequeuePi,
    /// FUTEX_FD and operations unknown here: nothing is recorded.
    Other,
}

impl FutexOperation {
    fn of(operation: c_int) -> FutexOperation {
        match operation & libc::FUTEX_CMD_MASK {
            libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET => FutexOperation::Wait,
            libc::FUTEX_WAKE | libc::FUTEX_WAKE_BITSET => FutexOperation::Wake,
            libc::FUTEX_WAKE_OP => FutexOperation::WakeOp,
            libc::FUTEX_REQUEUE | libc::FUTEX_CMP_REQUEUE | libc::FUTEX_CMP_REQUEUE_PI => FutexOperation::Requeue,
            libc::FUTEX_LOCK_PI | libc::FUTEX_LOCK_PI2 | libc::FUTEX_TRYLOCK_PI => FutexOperation::LockPi,
            libc::FUTEX_UNLOCK_PI => FutexOperation::UnlockPi,
            libc::FUTEX_WAIT_REQUEUE_PI => FutexOperation::WaitRequeuePi,
            _ => FutexOperation::Other,
        }
    }

    /// The name the trace's host sync records give the call.
    fn api(self) -> &'static str {
        match self {
            FutexOperation::Wait => "futex wait",
            FutexOperation::Wake => "futex wake",
            FutexOperation::WakeOp => "futex wake_op",
            FutexOperation::Requeue => "futex requeue",
            FutexOperation::LockPi => "futex lock_pi",
            FutexOperation::UnlockPi => "futex unlock_pi",
            FutexOperation::WaitRequeuePi => "futex wait_requeue_pi",
            FutexOperation::Other => "futex",
        }
    }

    /// The words released into before the call: those whose sleepers it wakes.
    fn releases(self, word: usize, second_word: usize) -> [Option<usize>; 2] {
        match self {
            FutexOperation::Wake | FutexOperation::Requeue | FutexOperation::UnlockPi => [Some(word), None],
            FutexOperation::WakeOp => [Some(word), Some(second_word)],
            FutexOperation::Wait | FutexOperation::LockPi | FutexOperation::WaitRequeuePi | FutexOperation::Other => {
                [None, None]
            }
        }
    }

    /// The words acquired after the call, when [`FutexOperation::acquired_after`] says it acquired.
    fn acquires(self, word: usize, second_word: usize) -> [Option<usize>; 2] {
        match self {
            FutexOperation::Wait | FutexOperation::LockPi => [Some(word), None],
            FutexOperation::WaitRequeuePi => [Some(word), Some(second_word)],
            FutexOperation::Wake
            | FutexOperation::WakeOp
            | FutexOperation::Requeue
            | FutexOperation::UnlockPi
            | FutexOperation::Other => [None, None],
        }
    }

    /// Whether a call that returned `result` (with `errno`) acquired: a wait that was woken or found the word
    /// changed already (EAGAIN), a lock that was taken. A wait that timed out or was interrupted learned
    /// nothing.
    fn acquired_after(self, result: c_long, errno: c_int) -> bool {
        match self {
            FutexOperation::Wait => result == 0 || errno == libc::EAGAIN,
            FutexOperation::LockPi | FutexOperation::WaitRequeuePi => result == 0,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::c_long;

    use super::FutexOperation::{self, *};

    /// The exported `syscall` shim, called as C code calls it.
    fn shim() -> unsafe extern "C" fn(c_long, usize, usize, usize, usize, usize, usize) -> c_long {
        // Safety: the shim takes the C library's `syscall` arguments, as its callers pass them.
        unsafe { std::mem::transmute(super::syscall as extern "C" fn() as *const ()) }
    }

    /// A futex wait with a bitset (the seventh argument, on the stack on x86_64) and a 1 ms timeout on a word
    /// that holds 0: (result, errno).
    #[inline(never)]
    fn wait_with_bitset(word: &u32, expected: u32, bitset: u32) -> (c_long, i32) {
        let timeout = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        // FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC.
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // Safety: an out-pointer to a local.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let deadline = libc::timespec { tv_sec: now.tv_sec, tv_nsec: now.tv_nsec + timeout.tv_nsec };
        let deadline = if deadline.tv_nsec >= 1_000_000_000 {
            libc::timespec { tv_sec: deadline.tv_sec + 1, tv_nsec: deadline.tv_nsec - 1_000_000_000 }
        } else {
            deadline
        };
        let operation = (libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG) as usize;
        let word = word as *const u32 as usize;
        let at = &deadline as *const libc::timespec as usize;
        // Safety: a futex wait on a live word with a live deadline.
        let result = unsafe { shim()(libc::SYS_futex, word, operation, expected as usize, at, 0, bitset as usize) };
        // Safety: this thread's errno.
        (result, unsafe { *libc::__errno_location() })
    }

    #[test]
    fn the_shim_passes_every_argument_and_errno_through() {
        // Any other system call goes straight on.
        // Safety: gettid takes no arguments.
        assert_eq!(unsafe { shim()(libc::SYS_gettid, 0, 0, 0, 0, 0, 0) }, unsafe { libc::gettid() } as c_long);
        let word = 0u32;
        // The first call from this place goes through the body (this test binary's code: not the program's,
        // then noted), the second through the shim's own fast path; both pass all seven arguments on.
        for round in 0..2 {
            assert_eq!(wait_with_bitset(&word, 0, u32::MAX), (-1, libc::ETIMEDOUT), "round {round}: slept");
            assert_eq!(wait_with_bitset(&word, 0, 0), (-1, libc::EINVAL), "round {round}: an empty bitset");
            assert_eq!(wait_with_bitset(&word, 1, u32::MAX), (-1, libc::EAGAIN), "round {round}: the word differs");
        }
    }

    #[test]
    fn operations_are_read_without_their_flags() {
        let private = libc::FUTEX_PRIVATE_FLAG;
        assert_eq!(FutexOperation::of(libc::FUTEX_WAIT | private), Wait);
        assert_eq!(FutexOperation::of(libc::FUTEX_WAIT_BITSET | private | libc::FUTEX_CLOCK_REALTIME), Wait);
        assert_eq!(FutexOperation::of(libc::FUTEX_WAKE), Wake);
        assert_eq!(FutexOperation::of(libc::FUTEX_WAKE_BITSET | private), Wake);
        assert_eq!(FutexOperation::of(libc::FUTEX_WAKE_OP | private), WakeOp);
        assert_eq!(FutexOperation::of(libc::FUTEX_CMP_REQUEUE | private), Requeue);
        assert_eq!(FutexOperation::of(libc::FUTEX_TRYLOCK_PI), LockPi);
        assert_eq!(FutexOperation::of(libc::FUTEX_UNLOCK_PI | private), UnlockPi);
        assert_eq!(FutexOperation::of(libc::FUTEX_WAIT_REQUEUE_PI), WaitRequeuePi);
        assert_eq!(FutexOperation::of(libc::FUTEX_FD), Other);
        assert_eq!(FutexOperation::of(99), Other);
    }

    #[test]
    fn wakes_release_and_waits_that_were_woken_acquire() {
        assert_eq!(Wake.releases(8, 16), [Some(8), None]);
        assert_eq!(WakeOp.releases(8, 16), [Some(8), Some(16)], "both words' sleepers are woken");
        assert_eq!(Wait.releases(8, 16), [None, None], "a waiter hands nothing on by waiting");
        assert_eq!(Wait.acquires(8, 16), [Some(8), None]);
        assert_eq!(Wake.acquires(8, 16), [None, None]);
        assert!(Wait.acquired_after(0, 0), "woken");
        assert!(Wait.acquired_after(-1, libc::EAGAIN), "the word had changed already");
        assert!(!Wait.acquired_after(-1, libc::ETIMEDOUT), "timed out: nothing learned");
        assert!(!Wait.acquired_after(-1, libc::EINTR));
        assert!(LockPi.acquired_after(0, 0) && !LockPi.acquired_after(-1, libc::EAGAIN));
        assert!(!Wake.acquired_after(1, 0));
    }
}
