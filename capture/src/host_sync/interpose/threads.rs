//! Threads: creating one releases what the creating thread knows to it, and its end releases what it knew to
//! whoever joins it (its `pthread_t` is the object). The program's start routine runs inside the capture's
//! trampoline, which the creating thread hands its mark and the routine; threads the CUDA stack creates, or
//! that are created while bookkeeping is off, start untouched.

use std::ffi::{c_int, c_void};

use libc::{clockid_t, pthread_attr_t, pthread_t, timespec};

use crate::host_sync::objects::{self, Release};
use crate::host_sync::real::{self, StartRoutine};
use crate::host_sync::{acquire, acquire_marks, bookkeeping, caller, forget, knowledge_to_release, with_knowledge};
use crate::thread_knowledge::{MarkSet, THREAD};

/// What the trampoline needs: the program's routine and argument, and what the creating thread knew.
struct ThreadStart {
    routine: StartRoutine,
    arg: *mut c_void,
    parent: MarkSet,
}

/// # Safety
/// Called by the shim `pthread_create` with the program's arguments.
pub unsafe extern "C-unwind" fn create(
    thread: *mut pthread_t,
    attr: *const pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_create() else { return libc::EAGAIN };
    let mut start: *mut ThreadStart = std::ptr::null_mut();
    bookkeeping("pthread_create", || {
        if caller::is_programs(caller) {
            let knows = THREAD.with(|k| k.borrow().knows_something());
            let parent = if knows { knowledge_to_release("pthread_create") } else { MarkSet::EMPTY };
            start = Box::into_raw(Box::new(ThreadStart { routine, arg, parent }));
        }
    });
    if start.is_null() {
        // Safety: the program's call, passed on as it came.
        return unsafe { real(thread, attr, routine, arg) };
    }
    // Safety: as above, with the trampoline in front of the routine; it takes `start` over.
    let result = unsafe { real(thread, attr, started, start.cast()) };
    if result != 0 {
        // Safety: no thread was made, so nothing else has `start`.
        drop(unsafe { Box::from_raw(start) });
    }
    result
}

/// The new thread's first frame: it acquires its creator's mark, runs the program's routine, and releases what
/// it knows at its end.
unsafe extern "C-unwind" fn started(start: *mut c_void) -> *mut c_void {
    // Safety: `create` made `start` with Box::into_raw and gave it to this thread alone.
    let ThreadStart { routine, arg, parent } = *unsafe { Box::from_raw(start.cast::<ThreadStart>()) };
    thread_began(parent);
    // Safety: the program's routine with its argument, as it asked pthread_create to run them.
    let value = unsafe { routine(arg) };
    thread_ended("thread exit");
    value
}

#[inline(never)]
fn thread_began(parent: MarkSet) {
    bookkeeping("thread start", || {
        // A thread that ended before with the same pthread_t left its marks: this one has not ended yet.
        // Safety: pthread_self has no preconditions.
        objects::forget(unsafe { libc::pthread_self() } as usize);
        with_knowledge(|k| k.started_by_capture = true);
        acquire_marks(&parent, "pthread_create");
    });
}

/// The thread ends (its routine returned, or it called pthread_exit): its joiner acquires what it knew.
#[inline(never)]
fn thread_ended(api: &'static str) {
    bookkeeping(api, || {
        if with_knowledge(|k| std::mem::take(&mut k.started_by_capture)) != Some(true) {
            return;
        }
        if !THREAD.with(|k| k.borrow().knows_something()) {
            return;
        }
        let known = knowledge_to_release(api);
        if !known.is_empty() {
            // Safety: pthread_self has no preconditions.
            objects::put(unsafe { libc::pthread_self() } as usize, &known, Release::Store);
        }
    });
}

/// A join that returned 0: the joiner acquires what the thread knew at its end.
fn joined(thread: pthread_t, result: c_int, api: &'static str, caller: usize) {
    if result == 0 {
        acquire(thread as usize, api, caller);
        forget(thread as usize, api, caller);
    }
}

/// # Safety
/// Called by the shim `pthread_join` with the program's arguments.
pub unsafe extern "C-unwind" fn join(
    thread: pthread_t,
    value: *mut *mut c_void,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_join() else { return libc::EINVAL };
    // Safety: as above.
    let result = unsafe { real(thread, value) };
    joined(thread, result, "pthread_join", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_tryjoin_np` with the program's arguments.
pub unsafe extern "C-unwind" fn tryjoin(
    thread: pthread_t,
    value: *mut *mut c_void,
    _: usize,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_tryjoin_np() else { return libc::EINVAL };
    // Safety: as above.
    let result = unsafe { real(thread, value) };
    joined(thread, result, "pthread_tryjoin_np", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_timedjoin_np` with the program's arguments.
pub unsafe extern "C-unwind" fn timedjoin(
    thread: pthread_t,
    value: *mut *mut c_void,
    timeout: *const timespec,
    _: usize,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_timedjoin_np() else { return libc::EINVAL };
    // Safety: as above.
    let result = unsafe { real(thread, value, timeout) };
    joined(thread, result, "pthread_timedjoin_np", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_clockjoin_np` with the program's arguments.
pub unsafe extern "C-unwind" fn clockjoin(
    thread: pthread_t,
    value: *mut *mut c_void,
    clock: clockid_t,
    timeout: *const timespec,
    caller: usize,
) -> c_int {
    let Some(real) = real::pthread_clockjoin_np() else { return libc::EINVAL };
    // Safety: as above.
    let result = unsafe { real(thread, value, clock, timeout) };
    joined(thread, result, "pthread_clockjoin_np", caller);
    result
}

/// # Safety
/// Called by the shim `pthread_exit` with the program's argument.
pub unsafe extern "C-unwind" fn exit(value: *mut c_void, _: usize, _: usize, _: usize, _caller: usize) {
    thread_ended("pthread_exit");
    if let Some(real) = real::pthread_exit() {
        // Safety: as above; it does not return.
        unsafe { real(value) };
    }
    std::process::abort()
}
