//! Mutexes, spin locks and rwlocks: a successful lock acquires what the object holds, an unlock releases into
//! it, init and destroy forget it. A mutex's or a write lock's unlock replaces what the object holds; readers
//! release into a key of their own (the rwlock's address + 1), which only a writer acquires, as TSan's read
//! clock: readers do not order each other.
//!
//! Every body is called by its shim with the caller's return address after the function's own arguments
//! (interpose/mod.rs); the arguments in between are unused registers.

use std::ffi::c_int;

use libc::{
    clockid_t, pthread_mutex_t, pthread_mutexattr_t, pthread_rwlock_t, pthread_rwlockattr_t, pthread_spinlock_t,
    timespec,
};

use crate::host_sync::objects::Release;
use crate::host_sync::{acquire, bookkeeping, caller, forget, holds_any_for_writing, real, release, with_knowledge};

/// Whether a lock call returned with the lock held (a robust mutex whose owner died is held too).
fn locked(result: c_int) -> bool {
    result == 0 || result == libc::EOWNERDEAD
}

/// The key readers of an rwlock release into.
fn readers_key(rwlock: *mut pthread_rwlock_t) -> usize {
    rwlock as usize + 1
}

/// # Safety
/// Called by the shim `pthread_mutex_init` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_init(
    mutex: *mut pthread_mutex_t,
    attr: *const pthread_mutexattr_t,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_mutex_init() else { return libc::ENOSYS };
    forget(mutex as usize, "pthread_mutex_init", caller);
    // Safety: the program's call, passed on as it came.
    unsafe { real(mutex, attr) }
}

/// # Safety
/// Called by the shim `pthread_mutex_destroy` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_destroy(
    mutex: *mut pthread_mutex_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_mutex_destroy() else { return libc::ENOSYS };
    forget(mutex as usize, "pthread_mutex_destroy", caller);
    // Safety: as above.
    unsafe { real(mutex) }
}

/// # Safety
/// Called by the shim `pthread_mutex_lock` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_lock(
    mutex: *mut pthread_mutex_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    #[cfg(all(test, target_arch = "x86_64"))]
    super::tests::BODY_CALLS.with(|calls| calls.set(calls.get() + 1));
    let Some(real) = real::pthread_mutex_lock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(mutex) };
    if locked(result) {
        acquire(mutex as usize, "pthread_mutex_lock", caller);
    }
    result
}

/// # Safety
/// Called by the shim `pthread_mutex_trylock` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_trylock(
    mutex: *mut pthread_mutex_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_mutex_trylock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(mutex) };
    if locked(result) {
        acquire(mutex as usize, "pthread_mutex_trylock", caller);
    }
    result
}

/// # Safety
/// Called by the shim `pthread_mutex_timedlock` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_timedlock(
    mutex: *mut pthread_mutex_t,
    timeout: *const timespec,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_mutex_timedlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(mutex, timeout) };
    if locked(result) {
        acquire(mutex as usize, "pthread_mutex_timedlock", caller);
    }
    result
}

/// # Safety
/// Called by the shim `pthread_mutex_clocklock` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_clocklock(
    mutex: *mut pthread_mutex_t,
    clock: clockid_t,
    timeout: *const timespec,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_mutex_clocklock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(mutex, clock, timeout) };
    if locked(result) {
        acquire(mutex as usize, "pthread_mutex_clocklock", caller);
    }
    result
}

/// # Safety
/// Called by the shim `pthread_mutex_unlock` with the program's arguments.
pub unsafe extern "C-unwind" fn mutex_unlock(
    mutex: *mut pthread_mutex_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_mutex_unlock() else { return libc::ENOSYS };
    // Before the unlock: whoever locks it next must find the release.
    release(mutex as usize, Release::Store, "pthread_mutex_unlock", caller);
    // Safety: as above.
    unsafe { real(mutex) }
}

/// # Safety
/// Called by the shim `pthread_spin_init` with the program's arguments.
pub unsafe extern "C-unwind" fn spin_init(
    lock: *mut pthread_spinlock_t,
    shared: c_int,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_spin_init() else { return libc::ENOSYS };
    forget(lock as usize, "pthread_spin_init", caller);
    // Safety: as above.
    unsafe { real(lock, shared) }
}

/// # Safety
/// Called by the shim `pthread_spin_destroy` with the program's arguments.
pub unsafe extern "C-unwind" fn spin_destroy(
    lock: *mut pthread_spinlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_spin_destroy() else { return libc::ENOSYS };
    forget(lock as usize, "pthread_spin_destroy", caller);
    // Safety: as above.
    unsafe { real(lock) }
}

/// # Safety
/// Called by the shim `pthread_spin_lock` with the program's arguments.
pub unsafe extern "C-unwind" fn spin_lock(
    lock: *mut pthread_spinlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_spin_lock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(lock) };
    if result == 0 {
        acquire(lock as usize, "pthread_spin_lock", caller);
    }
    result
}

/// # Safety
/// Called by the shim `pthread_spin_trylock` with the program's arguments.
pub unsafe extern "C-unwind" fn spin_trylock(
    lock: *mut pthread_spinlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_spin_trylock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(lock) };
    if result == 0 {
        acquire(lock as usize, "pthread_spin_trylock", caller);
    }
    result
}

/// # Safety
/// Called by the shim `pthread_spin_unlock` with the program's arguments.
pub unsafe extern "C-unwind" fn spin_unlock(
    lock: *mut pthread_spinlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_spin_unlock() else { return libc::ENOSYS };
    release(lock as usize, Release::Store, "pthread_spin_unlock", caller);
    // Safety: as above.
    unsafe { real(lock) }
}

/// # Safety
/// Called by the shim `pthread_rwlock_init` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_init(
    rwlock: *mut pthread_rwlock_t,
    attr: *const pthread_rwlockattr_t,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_init() else { return libc::ENOSYS };
    forget(rwlock as usize, "pthread_rwlock_init", caller);
    forget(readers_key(rwlock), "pthread_rwlock_init", caller);
    // Safety: as above.
    unsafe { real(rwlock, attr) }
}

/// # Safety
/// Called by the shim `pthread_rwlock_destroy` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_destroy(
    rwlock: *mut pthread_rwlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_destroy() else { return libc::ENOSYS };
    forget(rwlock as usize, "pthread_rwlock_destroy", caller);
    forget(readers_key(rwlock), "pthread_rwlock_destroy", caller);
    // Safety: as above.
    unsafe { real(rwlock) }
}

/// A read lock acquires what writers released.
fn read_locked(rwlock: *mut pthread_rwlock_t, result: c_int, api: &'static str, caller: usize) {
    if result == 0 {
        acquire(rwlock as usize, api, caller);
    }
}

/// A write lock acquires what writers and readers released, and is remembered: its unlock is a writer's.
fn write_locked(rwlock: *mut pthread_rwlock_t, result: c_int, api: &'static str, caller: usize) {
    if result != 0 {
        return;
    }
    acquire(rwlock as usize, api, caller);
    acquire(readers_key(rwlock), api, caller);
    // The CUDA stack's own rwlocks are never released into: their holders need not be remembered.
    if caller::known_not_programs(caller) {
        return;
    }
    bookkeeping(api, || {
        with_knowledge(|k| k.hold_for_writing(rwlock as usize));
    });
}

/// # Safety
/// Called by the shim `pthread_rwlock_rdlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_rdlock(
    rwlock: *mut pthread_rwlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_rdlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock) };
    read_locked(rwlock, result, "pthread_rwlock_rdlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_tryrdlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_tryrdlock(
    rwlock: *mut pthread_rwlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_tryrdlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock) };
    read_locked(rwlock, result, "pthread_rwlock_tryrdlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_timedrdlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_timedrdlock(
    rwlock: *mut pthread_rwlock_t,
    timeout: *const timespec,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_timedrdlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock, timeout) };
    read_locked(rwlock, result, "pthread_rwlock_timedrdlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_clockrdlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_clockrdlock(
    rwlock: *mut pthread_rwlock_t,
    clock: clockid_t,
    timeout: *const timespec,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_clockrdlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock, clock, timeout) };
    read_locked(rwlock, result, "pthread_rwlock_clockrdlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_wrlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_wrlock(
    rwlock: *mut pthread_rwlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_wrlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock) };
    write_locked(rwlock, result, "pthread_rwlock_wrlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_trywrlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_trywrlock(
    rwlock: *mut pthread_rwlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_trywrlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock) };
    write_locked(rwlock, result, "pthread_rwlock_trywrlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_timedwrlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_timedwrlock(
    rwlock: *mut pthread_rwlock_t,
    timeout: *const timespec,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_timedwrlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock, timeout) };
    write_locked(rwlock, result, "pthread_rwlock_timedwrlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_clockwrlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_clockwrlock(
    rwlock: *mut pthread_rwlock_t,
    clock: clockid_t,
    timeout: *const timespec,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_clockwrlock() else { return libc::ENOSYS };
    // Safety: as above.
    let result = unsafe { real(rwlock, clock, timeout) };
    write_locked(rwlock, result, "pthread_rwlock_clockwrlock", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_rwlock_unlock` with the program's arguments.
pub unsafe extern "C-unwind" fn rwlock_unlock(
    rwlock: *mut pthread_rwlock_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_rwlock_unlock() else { return libc::ENOSYS };
    // Most threads hold no rwlock for writing (a read unlock, or the CUDA stack's): then no bookkeeping.
    let mut writer = false;
    if holds_any_for_writing() {
        bookkeeping("pthread_rwlock_unlock", || {
            writer = with_knowledge(|k| k.release_writing(rwlock as usize)).unwrap_or(false);
        });
    }
    if writer {
        release(rwlock as usize, Release::Store, "pthread_rwlock_unlock", caller);
    } else {
        release(readers_key(rwlock), Release::Join, "pthread_rwlock_unlock", caller);
    }
    // Safety: as above.
    unsafe { real(rwlock) }
}
