//! The exported pthread and semaphore functions that stand in front of the C library's when the capture library
//! is preloaded. Each is a two-instruction shim that hands its body the caller's return address as one more
//! argument (whose call it is decides whether its locks are the program's, caller.rs) and jumps there, so that
//! the body returns straight to the caller. The bodies (threads.rs, locks.rs, waits.rs) call the real function
//! and do their bookkeeping around it; none keeps a value that needs dropping across the real call, so a thread
//! cancelled inside a wait unwinds through them untouched.
//!
//! Which calls, and what each does, follows ThreadSanitizer's interceptors: an unlock, a post, a thread's
//! creation or end releases; a lock, a wait, a join acquires; a condition variable orders through its mutex.
//! Not seen: synchronization without these calls (std::atomic flags, spin loops on plain memory, futexes
//! called directly, which is how libstdc++ implements std::latch, std::barrier, std::counting_semaphore,
//! std::future and static initialization, and C11 `mtx_*`/`thrd_*`, which glibc calls internally).

mod locks;
mod threads;
mod waits;

/// Exports `$name`, which jumps to `$body` with the return address as the fifth argument (every interposed
/// function takes at most four).
macro_rules! shims {
    ($($name:ident => $body:path;)*) => {
        $(
            #[unsafe(naked)]
            #[no_mangle]
            #[doc = concat!("`", stringify!($name), "`, in front of the C library's (", stringify!($body), ").")]
            pub extern "C" fn $name() {
                #[cfg(target_arch = "x86_64")]
                core::arch::naked_asm!("mov r8, [rsp]", "jmp {body}", body = sym $body);
                #[cfg(target_arch = "aarch64")]
                core::arch::naked_asm!("mov x4, x30", "b {body}", body = sym $body);
            }
        )*
    };
}

shims! {
    pthread_create => threads::create;
    pthread_join => threads::join;
    pthread_tryjoin_np => threads::tryjoin;
    pthread_timedjoin_np => threads::timedjoin;
    pthread_clockjoin_np => threads::clockjoin;
    pthread_exit => threads::exit;
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
    pthread_rwlock_unlock => locks::rwlock_unlock;
    pthread_cond_wait => waits::cond_wait;
    pthread_cond_timedwait => waits::cond_timedwait;
    pthread_cond_clockwait => waits::cond_clockwait;
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
