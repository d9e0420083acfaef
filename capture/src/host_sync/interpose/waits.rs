//! Waits: a condition variable's wait releases its mutex and acquires it again when it returns (the predicate
//! the waiter checks is set under that mutex, which carries the order, as TSan has it; signal and broadcast
//! order nothing by themselves and are not interposed); a barrier releases on arrival and acquires on
//! leaving; `pthread_once` releases when the init function returns and acquires for every caller; a semaphore's
//! post releases and a successful wait acquires.
//!
//! Every body is called by its shim with the caller's return address after the function's own arguments
//! (interpose/mod.rs); the arguments in between are unused registers.

use std::cell::Cell;
use std::ffi::c_int;

use libc::{clockid_t, pthread_barrier_t, pthread_cond_t, pthread_mutex_t, pthread_once_t, sem_t, timespec};

use crate::host_sync::objects::Release;
use crate::host_sync::real::{self, OnceInit};
use crate::host_sync::{acquire, forget, programs_call, release};

/// A function missing from the C library, said as a semaphore call says its errors.
fn missing() -> c_int {
    // Safety: the calling thread's errno.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// # Safety
/// Called by the shim `pthread_cond_wait` with the program's arguments.
pub unsafe extern "C-unwind" fn cond_wait(
    cond: *mut pthread_cond_t,
    mutex: *mut pthread_mutex_t,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_cond_wait() else { return libc::ENOSYS };
    release(mutex as usize, Release::Store, "pthread_cond_wait", caller);
    // Safety: the program's call, passed on as it came.
    let result = unsafe { real(cond, mutex) };
    // The mutex is held again, whatever the wait returned.
    acquire(mutex as usize, "pthread_cond_wait", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_cond_timedwait` with the program's arguments.
pub unsafe extern "C-unwind" fn cond_timedwait(
    cond: *mut pthread_cond_t,
    mutex: *mut pthread_mutex_t,
    timeout: *const timespec,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_cond_timedwait() else { return libc::ENOSYS };
    release(mutex as usize, Release::Store, "pthread_cond_timedwait", caller);
    // Safety: as above.
    let result = unsafe { real(cond, mutex, timeout) };
    acquire(mutex as usize, "pthread_cond_timedwait", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_cond_clockwait` with the program's arguments.
pub unsafe extern "C-unwind" fn cond_clockwait(
    cond: *mut pthread_cond_t,
    mutex: *mut pthread_mutex_t,
    clock: clockid_t,
    timeout: *const timespec,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_cond_clockwait() else { return libc::ENOSYS };
    release(mutex as usize, Release::Store, "pthread_cond_clockwait", caller);
    // Safety: as above.
    let result = unsafe { real(cond, mutex, clock, timeout) };
    acquire(mutex as usize, "pthread_cond_clockwait", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_barrier_wait` with the program's arguments.
pub unsafe extern "C-unwind" fn barrier_wait(
    barrier: *mut pthread_barrier_t,
    _: usize,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_barrier_wait() else { return libc::ENOSYS };
    release(barrier as usize, Release::Join, "pthread_barrier_wait", caller);
    // Safety: as above.
    let result = unsafe { real(barrier) };
    if result == 0 || result == libc::PTHREAD_BARRIER_SERIAL_THREAD {
        acquire(barrier as usize, "pthread_barrier_wait", caller);
    }
    result
}

thread_local! {
    /// The `pthread_once` this thread is in: the program's init function and the once control, for
    /// `once_init`. A plain cell: it must be there whatever else fails, or the init function would not run.
    static ONCE: Cell<Option<(OnceInit, usize)>> = const { Cell::new(None) };
}

/// # Safety
/// Called by the shim `pthread_once` with the program's arguments.
pub unsafe extern "C-unwind" fn once(
    control: *mut pthread_once_t,
    init: OnceInit,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_once() else { return libc::ENOSYS };
    // Called inside every call of the CUDA runtime and every std::call_once: a caller the table knows is
    // decided without the bookkeeping.
    let programs = programs_call("pthread_once", caller);
    // The init function runs (if it does) on this thread, inside the real call: `once_init` finds it here.
    let noted = if programs { ONCE.try_with(|once| once.replace(Some((init, control as usize)))).ok() } else { None };
    let Some(previous) = noted else {
        // Safety: as above.
        return unsafe { real(control, init) };
    };
    // Safety: as above, with `once_init` running the program's init function.
    let result = unsafe { real(control, once_init) };
    let _ = ONCE.try_with(|once| once.set(previous));
    acquire(control as usize, "pthread_once", caller);
    result
}

/// Runs the init function `once` noted on this thread, then releases into its once control.
unsafe extern "C-unwind" fn once_init() {
    let Some((init, control)) = ONCE.try_with(Cell::get).ok().flatten() else { return };
    // Safety: the program's init function, called where pthread_once would have called it.
    unsafe { init() };
    release(control, Release::Store, "pthread_once", 0);
}

/// # Safety
/// Called by the shim `sem_init` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_init(sem: *mut sem_t, shared: c_int, value: u32, _: usize, caller: usize) -> c_int {
    let Some(real) = real::sem_init() else { return missing() };
    forget(sem as usize, "sem_init", caller);
    // Safety: as above.
    unsafe { real(sem, shared, value) }
}

/// # Safety
/// Called by the shim `sem_destroy` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_destroy(sem: *mut sem_t, _: usize, _: usize, _: usize, caller: usize) -> c_int {
    let Some(real) = real::sem_destroy() else { return missing() };
    forget(sem as usize, "sem_destroy", caller);
    // Safety: as above.
    unsafe { real(sem) }
}

/// # Safety
/// Called by the shim `sem_post` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_post(sem: *mut sem_t, _: usize, _: usize, _: usize, caller: usize) -> c_int {
    let Some(real) = real::sem_post() else { return missing() };
    release(sem as usize, Release::Join, "sem_post", caller);
    // Safety: as above.
    unsafe { real(sem) }
}

/// # Safety
/// Called by the shim `sem_wait` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_wait(sem: *mut sem_t, _: usize, _: usize, _: usize, caller: usize) -> c_int {
    let Some(real) = real::sem_wait() else { return missing() };
    // Safety: as above.
    let result = unsafe { real(sem) };
    if result == 0 {
        acquire(sem as usize, "sem_wait", caller);
    }
    result
}

/// # Safety
/// Called by the shim `sem_trywait` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_trywait(sem: *mut sem_t, _: usize, _: usize, _: usize, caller: usize) -> c_int {
    let Some(real) = real::sem_trywait() else { return missing() };
    // Safety: as above.
    let result = unsafe { real(sem) };
    if result == 0 {
        acquire(sem as usize, "sem_trywait", caller);
    }
    result
}

/// # Safety
/// Called by the shim `sem_timedwait` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_timedwait(
    sem: *mut sem_t,
    timeout: *const timespec,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::sem_timedwait() else { return missing() };
    // Safety: as above.
    let result = unsafe { real(sem, timeout) };
    if result == 0 {
        acquire(sem as usize, "sem_timedwait", caller);
    }
    result
}

/// # Safety
/// Called by the shim `sem_clockwait` with the program's arguments.
pub unsafe extern "C-unwind" fn sem_clockwait(
    sem: *mut sem_t,
    clock: clockid_t,
    timeout: *const timespec,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::sem_clockwait() else { return missing() };
    // Safety: as above.
    let result = unsafe { real(sem, clock, timeout) };
    if result == 0 {
        acquire(sem as usize, "sem_clockwait", caller);
    }
    result
}
