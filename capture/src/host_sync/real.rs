//! The functions the interposers stand in front of, found as next_symbol.rs says; dlsym is never called from
//! inside another interposer's bookkeeping. Their types say "C-unwind": a thread cancelled while it waits
//! inside one is unwound through the interposer, which holds nothing that needs dropping there. Touches libc's
//! dlsym and dlvsym only.

use std::ffi::{c_int, c_long, c_void, CStr};

use crate::next_symbol::real_functions;

use libc::{
    clockid_t, pthread_attr_t, pthread_barrier_t, pthread_cond_t, pthread_mutex_t, pthread_mutexattr_t, pthread_once_t,
    pthread_rwlock_t, pthread_rwlockattr_t, pthread_spinlock_t, pthread_t, sem_t, timespec,
};

/// The condition variable functions have two versions in glibc on x86_64; programs link the 2.3.2 one (the
/// one TSan asks for too). Elsewhere the default version is the only one.
const COND_VERSION: Option<&CStr> = if cfg!(target_arch = "x86_64") { Some(c"GLIBC_2.3.2") } else { None };

/// A thread's start routine.
pub type StartRoutine = unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void;
/// `pthread_once`'s init function.
pub type OnceInit = unsafe extern "C-unwind" fn();

real_functions! {
    pthread_create: fn(*mut pthread_t, *const pthread_attr_t, StartRoutine, *mut c_void) -> c_int;
    pthread_join: fn(pthread_t, *mut *mut c_void) -> c_int;
    pthread_tryjoin_np: fn(pthread_t, *mut *mut c_void) -> c_int;
    pthread_timedjoin_np: fn(pthread_t, *mut *mut c_void, *const timespec) -> c_int;
    pthread_clockjoin_np: fn(pthread_t, *mut *mut c_void, clockid_t, *const timespec) -> c_int;
    pthread_exit: fn(*mut c_void) -> ();
    pthread_mutex_init: fn(*mut pthread_mutex_t, *const pthread_mutexattr_t) -> c_int;
    pthread_mutex_destroy: fn(*mut pthread_mutex_t) -> c_int;
    pthread_mutex_lock: fn(*mut pthread_mutex_t) -> c_int;
    pthread_mutex_trylock: fn(*mut pthread_mutex_t) -> c_int;
    pthread_mutex_timedlock: fn(*mut pthread_mutex_t, *const timespec) -> c_int;
    pthread_mutex_clocklock: fn(*mut pthread_mutex_t, clockid_t, *const timespec) -> c_int;
    pthread_mutex_unlock: fn(*mut pthread_mutex_t) -> c_int;
    pthread_spin_init: fn(*mut pthread_spinlock_t, c_int) -> c_int;
    pthread_spin_destroy: fn(*mut pthread_spinlock_t) -> c_int;
    pthread_spin_lock: fn(*mut pthread_spinlock_t) -> c_int;
    pthread_spin_trylock: fn(*mut pthread_spinlock_t) -> c_int;
    pthread_spin_unlock: fn(*mut pthread_spinlock_t) -> c_int;
    pthread_rwlock_init: fn(*mut pthread_rwlock_t, *const pthread_rwlockattr_t) -> c_int;
    pthread_rwlock_destroy: fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_rdlock: fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_tryrdlock: fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_timedrdlock: fn(*mut pthread_rwlock_t, *const timespec) -> c_int;
    pthread_rwlock_clockrdlock: fn(*mut pthread_rwlock_t, clockid_t, *const timespec) -> c_int;
    pthread_rwlock_wrlock: fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_trywrlock: fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_timedwrlock: fn(*mut pthread_rwlock_t, *const timespec) -> c_int;
    pthread_rwlock_clockwrlock: fn(*mut pthread_rwlock_t, clockid_t, *const timespec) -> c_int;
    pthread_rwlock_unlock: fn(*mut pthread_rwlock_t) -> c_int;
    pthread_cond_wait [COND_VERSION]: fn(*mut pthread_cond_t, *mut pthread_mutex_t) -> c_int;
    pthread_cond_timedwait [COND_VERSION]: fn(*mut pthread_cond_t, *mut pthread_mutex_t, *const timespec) -> c_int;
    pthread_cond_clockwait: fn(*mut pthread_cond_t, *mut pthread_mutex_t, clockid_t, *const timespec) -> c_int;
    pthread_barrier_wait: fn(*mut pthread_barrier_t) -> c_int;
    pthread_once: fn(*mut pthread_once_t, OnceInit) -> c_int;
    sem_init: fn(*mut sem_t, c_int, u32) -> c_int;
    sem_destroy: fn(*mut sem_t) -> c_int;
    sem_post: fn(*mut sem_t) -> c_int;
    sem_wait: fn(*mut sem_t) -> c_int;
    sem_trywait: fn(*mut sem_t) -> c_int;
    sem_timedwait: fn(*mut sem_t, *const timespec) -> c_int;
    sem_clockwait: fn(*mut sem_t, clockid_t, *const timespec) -> c_int;
    // Variadic in C; the x86_64 and aarch64 conventions pass its arguments as a plain function's.
    syscall: fn(c_long, usize, usize, usize, usize, usize, usize) -> c_long;
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_c_library_defines_what_programs_call() {
        assert!(super::pthread_mutex_lock().is_some());
        assert!(super::pthread_cond_wait().is_some());
        assert!(super::sem_post().is_some());
        assert!(super::pthread_create().is_some());
    }
}
