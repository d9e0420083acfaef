//! Host synchronization between the program's threads, as ThreadSanitizer sees it (DESIGN.md, host threads): thread
//! create and join, mutexes, rwlocks, spin locks, condition variables, barriers, `pthread_once` and semaphores,
//! OpenMP's parallel regions, barriers, critical sections and locks, and futex waits and wakes made through the C
//! library's `syscall` (libstdc++'s futures and C++20 latches, semaphores, barriers and atomic waits).
//! The library defines the pthread and semaphore functions (interpose/); `streamtrace capture` puts it in
//! LD_PRELOAD so that the program's calls reach them (loaded by the driver alone, through
//! CUDA_INJECTION64_PATH, it would see none), and each calls the real function (real.rs) around a little
//! bookkeeping. Calls of the CUDA stack and of the capture itself are passed straight on (caller.rs).
//!
//! What reaches the trace is only what the analyzer needs, an edge where an acquire follows another thread's
//! release. A thread that learned something since its last release (a host synchronization or a successful
//! query, a copy that made it wait, a host access: `Record::teaches_the_host`, or another thread's snapshot)
//! writes a `host_release` of a new snapshot (a mark, thread_knowledge.rs) when it next releases a lock, posts, creates
//! a thread or ends; a thread that learned nothing releases the mark it released last, and one that never
//! learned anything releases nothing. The object released into keeps the marks (objects.rs). A thread that
//! acquires a mark of another thread writes nothing at once: the `host_acquire` is written before its next
//! record (`thread_knowledge::before_record`), where the analyzer needs it; a host access seen through a guard
//! fault, which another thread writes later, takes them with it (the signal handler moves them into the fault:
//! host_watch/faults.rs), and while managed-memory faults may come (CUPTI reports them late and without their
//! thread) they are written at once. Most locks in real programs stay on one thread: their
//! lock and unlock write nothing and take no lock but the program's own.
//!
//! Every interposer works from the process's first call to its last, with or without CUDA, and after fork:
//! before the capture has recorded anything no thread knows anything, so nothing is written, and a process
//! without CUDA only ever passes its calls on. Nothing here panics into the program (`bookkeeping` catches and
//! turns the bookkeeping off), blocks on the capture's state lock for long (`with_state`), or changes errno.

mod caller;
mod cudart_static;
// The shims are written for these two; elsewhere nothing is interposed.
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod interpose;
mod objects;
mod real;
mod renewed;
#[cfg(all(test, target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests;

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::TryLockError;

use objects::Release;

use crate::control::ENABLED;
use crate::cost::HostSyncEvent;
use crate::origin::{now_ns, thread_id};
use crate::process_state::ProcessState;
use crate::record::{Call, Record};
use crate::state::{state_for_this_process, STATE};
use crate::thread_knowledge::{Full, MarkSet, ThreadKnowledge, THREAD};

/// Whether any snapshot was released in this process: until then acquiring is a load of this flag.
static ANY_MARK: AtomicBool = AtomicBool::new(false);
/// Set after an internal error: every interposer only passes its call on from then.
static OFF: AtomicBool = AtomicBool::new(false);
/// How long a release waits for the capture's state lock before it gives up (a program whose own allocator
/// locks with pthread mutexes inside a recorded call would otherwise wait for itself).
const STATE_WAIT_NS: u64 = 20_000_000;

thread_local! {
    /// Set while this thread does bookkeeping: the calls it makes meanwhile are passed on.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// `--no-host-sync` while the library is preloaded for the host watch (`STREAMTRACE_NO_HOST_SYNC`): every
/// interposer only passes its call on. Read once (std's environment lock is no pthread lock).
fn switched_off() -> bool {
    static OFF_BY_USER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF_BY_USER.get_or_init(|| std::env::var_os(streamtrace_format::launch::ENV_NO_HOST_SYNC).is_some())
}

/// Whether the program's pthread calls reach the interposers: the library was preloaded, so the definition of
/// `pthread_mutex_lock` the loader finds first is this library's. Said in the trace's header: only then is the
/// per-thread order exact.
pub fn interposing() -> bool {
    if switched_off() {
        return false;
    }
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // Safety: a lookup by a NUL-terminated name in the global scope.
        let first = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"pthread_mutex_lock".as_ptr()) };
        std::ptr::eq(first.cast_const().cast::<()>(), interpose::pthread_mutex_lock as *const ())
    }
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    false
}

/// Sets whether the calling thread's interposed calls pass straight on, without bookkeeping, and returns what
/// it was: on while it forks (fork.rs holds the capture's state lock from its fork handler to the end of
/// fork(), and the fork handlers of other libraries that run after it lock and unlock mutexes of their own:
/// OpenBLAS joins its threads).
pub fn pass_calls_on(on: bool) -> bool {
    BUSY.try_with(|busy| busy.replace(on)).unwrap_or(true)
}

/// Runs an interposer's bookkeeping for a call of `api`, once per call (a call made meanwhile by the bookkeeping
/// itself, or by a signal handler, passes through), with errno kept and panics caught.
fn bookkeeping(api: &'static str, work: impl FnOnce()) {
    if OFF.load(Ordering::Relaxed) || switched_off() {
        return;
    }
    let Ok(false) = BUSY.try_with(|busy| busy.replace(true)) else { return };
    crate::cost::host_sync_call(api);
    // Safety: the calling thread's errno, read and written back.
    let errno = unsafe { *libc::__errno_location() };
    let outcome = crate::cost::host_sync_bookkeeping(|| std::panic::catch_unwind(AssertUnwindSafe(work)));
    if outcome.is_err() && !OFF.swap(true, Ordering::SeqCst) {
        eprintln!("streamtrace: host synchronization is no longer recorded (an internal error); capture goes on");
    }
    // Safety: as above.
    unsafe { *libc::__errno_location() = errno };
    let _ = BUSY.try_with(|busy| busy.set(false));
}

/// Before the call that releases `object` (`caller`: its return address).
fn release(object: usize, how: Release, api: &'static str, caller: usize) {
    if caller::known_not_programs(caller) || release_changes_nothing(object) {
        crate::cost::host_sync_event(HostSyncEvent::Unchanged);
        return;
    }
    bookkeeping(api, || {
        if THREAD.with(|k| k.borrow().knows_something()) && caller::is_programs(caller) {
            release_into(object, how, api);
        }
    });
}

/// Whether releasing into `object` now would leave everything as it is: the thread knows nothing, or it learned
/// nothing of its own and its knowledge and the object stand as they were when it last released into it. Most
/// of a program's unlocks are these (a step of a PyTorch loop makes thousands of lock calls, a few of which
/// carry news), and they skip the bookkeeping's errno, unwind guard and caller lookup: this only reads the
/// thread's knowledge and an atomic, cannot panic and leaves errno alone. Whose call it is does not matter
/// here: for a call that is not the program's, nothing is written either.
fn release_changes_nothing(object: usize) -> bool {
    THREAD
        .try_with(|k| {
            k.try_borrow().is_ok_and(|k| {
                !k.knows_something() || !k.taught && k.stored_already(object, objects::version_of(object))
            })
        })
        .unwrap_or(false)
}

/// Whether acquiring `object` now would bring nothing: no mark was ever released, or this thread read the
/// object at its present version already (and has no acquires that a managed-memory watch wants written at
/// once). Read as [`release_changes_nothing`] reads.
fn acquire_brings_nothing(object: usize) -> bool {
    if !ANY_MARK.load(Ordering::Relaxed) {
        return true;
    }
    THREAD
        .try_with(|k| {
            k.try_borrow().is_ok_and(|k| {
                k.saw(object, objects::version_of(object))
                    && !(k.has_pending() && crate::host_watch::managed_faults::expecting())
            })
        })
        .unwrap_or(false)
}

/// Releases what this thread knows into `object`.
fn release_into(object: usize, how: Release, api: &'static str) {
    let known = knowledge_to_release(api);
    if known.is_empty() {
        return;
    }
    if THREAD.with(|k| k.borrow().stored_already(object, objects::version_of(object))) {
        return;
    }
    let version = objects::put(object, &known, how);
    THREAD.with(|k| {
        let mut k = k.borrow_mut();
        k.note_stored(object, version);
        // A stored object holds what this thread knows, nothing more: its next acquire by this thread brings
        // nothing (a join may hold other threads' marks too).
        if how == Release::Store {
            k.note_seen(object, version);
        }
    });
}

/// What this thread releases now: when it learned something of its own since its last snapshot, a new one,
/// written; else the marks it acquired, passed on as they are.
fn knowledge_to_release(api: &'static str) -> MarkSet {
    if THREAD.with(|k| k.borrow().taught) && ENABLED.load(Ordering::Relaxed) {
        write_snapshot(api);
    }
    THREAD.with(|k| k.borrow().known)
}

/// Writes a snapshot of what this thread knows (a `host_release` of a new mark, after the acquires pending on
/// it: `before_record` writes them in front); false when it could not be written.
fn write_snapshot(api: &'static str) -> bool {
    let mark = THREAD.with(|k| k.borrow_mut().next_mark());
    if with_state(|state, call| state.emit(call, Record::HostRelease { object: mark, api })).is_none() {
        return false;
    }
    THREAD.with(|k| k.borrow_mut().snapshot_written(mark));
    crate::cost::host_sync_event(HostSyncEvent::Snapshot);
    ANY_MARK.store(true, Ordering::Relaxed);
    true
}

/// After the call that acquired `object`: the other threads' marks it holds become pending on this thread.
fn acquire(object: usize, api: &'static str, caller: usize) {
    if caller::known_not_programs(caller) || acquire_brings_nothing(object) {
        crate::cost::host_sync_event(HostSyncEvent::Unchanged);
        return;
    }
    bookkeeping(api, || {
        if ANY_MARK.load(Ordering::Relaxed) && caller::is_programs(caller) {
            if let Some((marks, version)) = object_marks(object) {
                acquire_marks(&marks, api);
                note_release_changing_nothing(object, &marks, version);
            }
        }
    });
}

/// The marks `object` holds and the version they were read at, or None when this thread read them at this
/// version already.
fn object_marks(object: usize) -> Option<(MarkSet, u64)> {
    let version = objects::version_of(object);
    if THREAD.with(|k| k.borrow().saw(object, version)) {
        return None;
    }
    let marks = objects::marks_of(object);
    THREAD.with(|k| k.borrow_mut().note_seen(object, version));
    Some((marks, version))
}

/// After this thread acquired `marks` from `object` (read at `version`): when it now knows just those, a release
/// into the object would leave it as it is, and is noted as made. The usual hand-over: a thread locks a mutex
/// another one released news into and unlocks it, which without this would take the object's shard lock to
/// store what is there (half of a PyTorch loop's puts: the autograd thread locking the queues the main thread
/// unlocked).
fn note_release_changing_nothing(object: usize, marks: &MarkSet, version: u64) {
    let _ = with_knowledge(|k| {
        if !marks.is_empty() && k.known.same_marks(marks) {
            k.note_stored(object, version);
        }
    });
}

/// Acquires each of `marks` this thread does not know yet.
fn acquire_marks(marks: &MarkSet, api: &'static str) {
    for &mark in marks.as_slice() {
        if !THREAD.with(|k| k.borrow().is_news(mark)) {
            continue;
        }
        let kept = match THREAD.with(|k| k.borrow_mut().acquire(mark, api)) {
            Ok(()) => true,
            // Written out, there is room again.
            Err(Full::Pending) => write_pending(),
            Err(Full::Known) => write_snapshot(api),
        };
        if !kept || THREAD.with(|k| k.borrow_mut().acquire(mark, api)).is_err() {
            objects::DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
    // A host access of managed memory comes from CUPTI, late and without its thread (host_watch/
    // managed_faults.rs), and is placed by its time among the records: what the thread acquired must be in the
    // trace by then, at the time it was acquired. (A guard fault's handler takes them into the fault instead.)
    if crate::host_watch::managed_faults::expecting() && THREAD.with(|k| k.borrow().has_pending()) {
        write_pending();
    }
}

/// A host function (`host_func` record `id`) starts on the driver's thread that runs it: the thread learns the
/// function's place in its stream (DESIGN.md, host functions; the analysis holds that place in the function's
/// object), so that what it hands on (a thread it starts, a mutex it unlocks) carries it.
pub fn host_function_started(id: u64) {
    bookkeeping("host function", || {
        let object = streamtrace_format::host_func_object(id);
        // Written at once, and not a mark of the thread's knowledge: places of different streams do not hold
        // each other as a thread's later marks hold its earlier ones. What it teaches the thread is its own news,
        // which the thread's next release writes in a snapshot of its own.
        let written = with_state(|state, call| {
            state.pending.push(call, Record::HostAcquire { object, api: "host function" });
        });
        if written.is_some() {
            let _ = with_knowledge(|k| k.taught = true);
        }
    });
}

/// Writes this thread's pending acquires now; false when they could not be written (they are dropped).
fn write_pending() -> bool {
    let (pending, len) = THREAD.with(|k| k.borrow_mut().take_pending());
    // Pushed as they are: what they teach the thread is in the marks it knows, not a reason for a new snapshot.
    with_state(|state, call| {
        for acquired in &pending[..len] {
            state.pending.push(call, Record::HostAcquire { object: acquired.mark, api: acquired.api });
        }
    })
    .is_some()
}

/// `object` was destroyed or made anew (`api`): whatever it held is gone. Before any mark was released no
/// object holds one, and objects of callers known not to be the program's are never released into: both pass
/// on at once (the CUDA stack makes and destroys its own locks inside its calls).
fn forget(object: usize, api: &'static str, caller: usize) {
    if !ANY_MARK.load(Ordering::Relaxed) || caller::known_not_programs(caller) {
        crate::cost::host_sync_event(HostSyncEvent::Unchanged);
        return;
    }
    bookkeeping(api, || {
        if ANY_MARK.load(Ordering::Relaxed) && caller::is_programs(caller) {
            objects::forget(object);
        }
    });
}

/// Runs `write` with this process's capture state and a call of this thread, taking the state lock for at
/// most `STATE_WAIT_NS` (a thread of the program may hold its own lock while it waits here); None when the
/// capture is off or the lock could not be had.
fn with_state<T>(write: impl FnOnce(&mut ProcessState, Call) -> T) -> Option<T> {
    let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: 0, site: 0 };
    let deadline = call.time_ns.saturating_add(STATE_WAIT_NS);
    let mut slot = loop {
        match STATE.try_lock() {
            Ok(slot) => break slot,
            Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
            Err(TryLockError::WouldBlock) if now_ns() < deadline => std::thread::yield_now(),
            Err(TryLockError::WouldBlock) => return None,
        }
    };
    let state = state_for_this_process(&mut slot)?;
    Some(write(state, call))
}

/// Run when the library is loaded: the fork handler is registered then, so that in a forked child it runs before
/// every other child handler (they run in the order they were registered), whose pthread calls may come here;
/// and the real functions are looked up then (real.rs), never later inside a call that may hold up the loader.
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    // Safety: registers a plain extern "C" function for the child of a fork.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    real::resolve_all();
}

/// In the child of a fork: its trace starts empty, and the tables a thread the child does not have may have
/// held locked start anew.
extern "C" fn after_fork_in_child() {
    let _ = std::panic::catch_unwind(|| {
        objects::start_anew();
        caller::start_anew();
        ANY_MARK.store(false, Ordering::Relaxed);
        let _ = THREAD.try_with(|k| k.try_borrow_mut().map(|mut k| k.forget_all()));
    });
}

/// Whether this thread holds an rwlock for writing (one the program locked so, not yet unlocked); read as
/// [`release_changes_nothing`] reads, and true when it cannot be read (the bookkeeping then decides).
fn holds_any_for_writing() -> bool {
    THREAD.try_with(|k| k.try_borrow().map_or(true, |k| k.holds_any_for_writing())).unwrap_or(true)
}

/// Whether a call of `api` returning to `caller` is the program's, with bookkeeping on for this thread now (not
/// inside the bookkeeping itself); decided without the bookkeeping's guards where the caller table knows it.
fn programs_call(api: &'static str, caller: usize) -> bool {
    if OFF.load(Ordering::Relaxed) || switched_off() || BUSY.try_with(Cell::get).unwrap_or(true) {
        return false;
    }
    if let Some(programs) = caller::decided_already(caller) {
        return programs;
    }
    let mut programs = false;
    bookkeeping(api, || programs = caller::is_programs(caller));
    programs
}

/// What this thread knows, for the interposers that keep more than a release or an acquire (threads, rwlocks);
/// None while it is borrowed.
fn with_knowledge<T>(work: impl FnOnce(&mut ThreadKnowledge) -> T) -> Option<T> {
    THREAD.try_with(|k| k.try_borrow_mut().ok().map(|mut k| work(&mut k))).ok().flatten()
}
