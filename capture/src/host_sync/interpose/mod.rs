//! The exported pthread and semaphore functions that stand in front of the C library's when the capture library
//! is preloaded, OpenMP's entry points in front of libgomp's (openmp.rs, which need no shim) and the C library's
//! `syscall`, for the futexes that libstdc++'s futures and C++20 waits sleep on (futex.rs, a shim of its own).
//! Each pthread one is a shim that hands its body the caller's return address as one more argument (whose
//! call it is decides whether its locks are the program's, caller.rs) and jumps there, so that the body returns
//! straight to the caller; the lock and wait shims first pass calls of the CUDA stack straight to the C
//! library. The bodies (threads.rs, locks.rs, waits.rs) call the real function
//! and do their bookkeeping around it; none keeps a value that needs dropping across the real call, so a thread
//! cancelled inside a wait unwinds through them untouched.
//!
//! Which calls, and what each does, follows ThreadSanitizer's interceptors: an unlock, a post, a thread's
//! creation or end releases; a lock, a wait, a join acquires; a condition variable orders through its mutex.
//! Not seen: synchronization without these calls (std::atomic flags, spin loops on plain memory, futexes
//! made with the `syscall` instruction itself rather than the C library's function, C11 `mtx_*`/`thrd_*`,
//! which glibc calls internally, and what openmp.rs and futex.rs leave out).

pub(super) mod futex;
mod locks;
pub(super) mod openmp;
mod openmp_binding;
mod threads;
mod waits;

/// Exports each `$name`, which jumps to `$body` with the return address as the fifth argument (every interposed
/// function takes at most four).
///
/// Under `passing the CUDA stack on:`, for functions whose bodies do nothing but call the real function when the
/// caller was decided already not to be the program's (caller.rs): the CUDA driver, CUPTI and NVIDIA's libraries
/// lock their own bookkeeping several times in every call of theirs, millions of times in a training job, and
/// the body's frame, the real function's lookup and the caller check cost more than the lock itself. On x86_64
/// such a shim looks the return address up in the caller table itself (the slot as `caller::slot_of` finds it)
/// and, when it is decided not the program's and the real function is known, jumps straight there: the real
/// function returns to the caller. Everything else goes to the body.
macro_rules! shims {
    (passing the CUDA stack on: $($name:ident => $body:path;)*) => {
        $(shims!(@one passing_on, $name, $body);)*
    };
    ($($name:ident => $body:path;)*) => {
        $(shims!(@one to_the_body, $name, $body);)*
    };
    (@one $how:ident, $name:ident, $body:path) => {
        #[unsafe(naked)]
        #[no_mangle]
        #[doc = concat!("`", stringify!($name), "`, in front of the C library's (", stringify!($body), ").")]
        pub extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            shims!(@x86_64 $how, $name, $body);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!("mov x4, x30", "b {body}", body = sym $body);
        }
    };
    (@x86_64 to_the_body, $name:ident, $body:path) => {
        core::arch::naked_asm!("mov r8, [rsp]", "jmp {body}", body = sym $body)
    };
    (@x86_64 passing_on, $name:ident, $body:path) => {
        core::arch::naked_asm!(
            "mov r8, [rsp]",
            "test r8, r8",
            "jz 2f",
            // The slot: (address ^ address >> SHIFT) % SLOTS.
            "mov rax, r8",
            "shr rax, {shift}",
            "xor rax, r8",
            "and eax, {mask}",
            "lea r9, [rip + {decided}]",
            "mov rax, [r9 + rax * 8]",
            // Decided not the program's: the slot holds address << 1 with the low bit clear.
            "lea r9, [r8 + r8]",
            "cmp rax, r9",
            "jne 2f",
            "mov rax, [rip + {real}]",
            "test rax, rax",
            "jz 2f",
            "jmp rax",
            "2:",
            "jmp {body}",
            shift = const super::caller::SLOT_MIX_SHIFT,
            mask = const super::caller::SLOTS - 1,
            decided = sym super::caller::DECIDED,
            real = sym super::real::address::$name,
            body = sym $body,
        )
    };
}

shims! {
    passing the CUDA stack on:
    pthread_mutex_init => locks::mutex_init;
    pthread_mutex_destroy => locks::mutex_destroy;
    pthread_mutex_lock => locks::mutex_lock;
    pthread_mutex_trylock => locks::mutex_trylock;
    pthread_mutex_timedlock => locks::mutex_timedlock;
    pthread_mutex_clocklock => locks::mutex_clocklock;
    pthread_mutex_unlock => locks::mutex_unlock;
    pthread_spin_init => locks::spin_init;
    pthread_spin_destroy => locks::spin_destroy;
    pthread_spin_lock => locks::spin_lock;
    pthread_spin_trylock => locks::spin_trylock;
    pthread_spin_unlock => locks::spin_unlock;
    pthread_rwlock_init => locks::rwlock_init;
    pthread_rwlock_destroy => locks::rwlock_destroy;
    pthread_rwlock_rdlock => locks::rwlock_rdlock;
    pthread_rwlock_tryrdlock => locks::rwlock_tryrdlock;
    pthread_rwlock_timedrdlock => locks::rwlock_timedrdlock;
    pthread_rwlock_clockrdlock => locks::rwlock_clockrdlock;
    pthread_rwlock_wrlock => locks::rwlock_wrlock;
    pthread_rwlock_trywrlock => locks::rwlock_trywrlock;
    pthread_rwlock_timedwrlock => locks::rwlock_timedwrlock;
    pthread_rwlock_clockwrlock => locks::rwlock_clockwrlock;
    pthread_cond_wait => waits::cond_wait;
    pthread_cond_timedwait => waits::cond_timedwait;
    pthread_cond_clockwait => waits::cond_clockwait;
}

// An rwlock's unlock may end a write lock the program holds (locks.rs), whoever calls it; threads, barriers,
// `pthread_once` and semaphores keep more than a release or an acquire: their bodies see every call.
shims! {
    pthread_create => threads::create;
    pthread_join => threads::join;
    pthread_tryjoin_np => threads::tryjoin;
    pthread_timedjoin_np => threads::timedjoin;
    pthread_clockjoin_np => threads::clockjoin;
    pthread_exit => threads::exit;
    pthread_rwlock_unlock => locks::rwlock_unlock;
    pthread_barrier_wait => waits::barrier_wait;
    pthread_once => waits::once;
    sem_init => waits::sem_init;
    sem_destroy => waits::sem_destroy;
    sem_post => waits::sem_post;
    sem_wait => waits::sem_wait;
    sem_trywait => waits::sem_trywait;
    sem_timedwait => waits::sem_timedwait;
    sem_clockwait => waits::sem_clockwait;
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::cell::Cell;

    use super::super::caller;

    thread_local! {
        /// Calls of `locks::mutex_lock`'s body on this thread.
        pub static BODY_CALLS: Cell<u64> = const { Cell::new(0) };
    }

    /// Calls the `pthread_mutex_lock` shim from one fixed place and returns its result and that place (the
    /// return address the shim sees): never inlined, so that every call is from the same place.
    #[inline(never)]
    fn lock_from_one_place(mutex: *mut libc::pthread_mutex_t) -> (i32, usize) {
        let (result, place): (i32, usize);
        // Safety: a call of the shim with the C calling convention, an initialized mutex as its argument.
        unsafe {
            core::arch::asm!(
                "lea r12, [rip + 2f]",
                "call {lock}",
                "2:",
                lock = sym super::pthread_mutex_lock,
                // Kept across the call by the C convention.
                out("r12") place,
                inout("rdi") mutex => _,
                lateout("eax") result,
                clobber_abi("C"),
            );
        }
        (result, place)
    }

    #[test]
    fn a_caller_decided_not_the_programs_goes_straight_to_the_c_library() {
        let mut mutex = Box::new(libc::PTHREAD_MUTEX_INITIALIZER);
        let mutex: *mut libc::pthread_mutex_t = &mut *mutex;
        let body_calls = || BODY_CALLS.with(Cell::get);
        let unlock = || {
            // Safety: the mutex this thread holds.
            assert_eq!(unsafe { libc::pthread_mutex_unlock(mutex) }, 0);
        };
        let held = || {
            // Safety: an initialized mutex; a normal one this thread holds is busy to it.
            unsafe { libc::pthread_mutex_trylock(mutex) == libc::EBUSY }
        };

        let before = body_calls();
        let (result, place) = lock_from_one_place(mutex);
        assert_eq!((result, body_calls() - before), (0, 1), "an undecided caller goes to the body");
        assert!(held());
        unlock();

        caller::decide_as(place, false);
        let before = body_calls();
        assert_eq!(lock_from_one_place(mutex), (0, place));
        assert_eq!(body_calls(), before, "passed straight on: the body never ran");
        assert!(held(), "and the C library locked it");
        unlock();

        caller::decide_as(place, true);
        let before = body_calls();
        assert_eq!(lock_from_one_place(mutex).0, 0);
        assert_eq!(body_calls() - before, 1, "the program's calls go to the body");
        unlock();
    }
}
