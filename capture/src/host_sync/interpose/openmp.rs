//! OpenMP's synchronization, as GCC's OpenMP runtime (libgomp) offers it to compiled code: the `GOMP_*` entry
//! points a `-fopenmp` program calls for `#pragma omp parallel`, `barrier`, the end of a worksharing loop or of
//! `sections`, `single copyprivate`, `critical` and `atomic`, and the `omp_*_lock` functions. libgomp waits on
//! futexes of its own, which no pthread interposer sees; these stand in front of its entry points instead (the
//! program's calls reach them through the PLT, as they reach the pthread interposers).
//!
//! - A parallel region forks and joins: the thread that starts it releases into the region's fork key, every
//!   thread of the team acquires it before the region's body and releases into the join key after it, and the
//!   starting thread acquires the join key when the region is over. The body runs inside `team_thread`, handed
//!   to libgomp in place of the program's outlined function.
//! - A barrier joins the team: each thread releases into it on arrival and acquires it on leaving. OpenMP
//!   requires every thread of a team to meet the same barriers in the same order, so the n-th barrier of a
//!   region has a key of its own (the region and n): a thread that leaves one barrier and reaches the next
//!   before a slower one has left the first does not lend it what it did in between. A thread forgets the key
//!   of barrier n-1 when it leaves barrier n: every thread has left n-1 by then.
//! - `critical` (unnamed, named) and `atomic` are locks: a lock acquires, an unlock releases.
//! - The `omp_*_lock` functions likewise (the lock's address is the object).
//!
//! Keys other than a lock's address have the top bit set, which no address in a process has. Tasks
//! (`GOMP_task`, `taskwait`, `taskgroup`), `ordered`, the pre-4.9 `GOMP_parallel_start`/`_end` pair and LLVM's
//! runtime entry points (`__kmpc_*`) are not stood in front of: what they order is not seen.

use std::cell::Cell;
use std::ffi::{c_int, c_long, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::host_sync::objects::Release;
use crate::host_sync::{acquire, forget, release};

/// A parallel region's outlined body, as libgomp calls it on each thread of the team.
type Body = unsafe extern "C-unwind" fn(*mut c_void);

mod real {
    use super::*;

    /// The version libgomp gives its current lock functions (OpenMP 3.0's nestable lock layout).
    const LOCKS: Option<&std::ffi::CStr> = Some(c"OMP_3.0");

    // PyTorch's wheels carry their own libgomp, loaded outside the global scope with the extension that needs it,
    // and other extensions' wheels theirs: each caller's calls go to its own.
    crate::next_symbol::real_functions! { found by caller:
        GOMP_parallel: fn(Body, *mut c_void, c_uint, c_uint) -> ();
        GOMP_parallel_reductions: fn(Body, *mut c_void, c_uint, c_uint) -> c_uint;
        GOMP_parallel_sections: fn(Body, *mut c_void, c_uint, c_uint, c_uint) -> ();
        GOMP_parallel_loop_static: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_dynamic: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_guided: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_nonmonotonic_dynamic:
            fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_nonmonotonic_guided:
            fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_runtime: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_nonmonotonic_runtime: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_uint) -> ();
        GOMP_parallel_loop_maybe_nonmonotonic_runtime:
            fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_uint) -> ();
        GOMP_barrier: fn() -> ();
        GOMP_barrier_cancel: fn() -> bool;
        GOMP_loop_end: fn() -> ();
        GOMP_loop_end_cancel: fn() -> bool;
        GOMP_sections_end: fn() -> ();
        GOMP_sections_end_cancel: fn() -> bool;
        GOMP_single_copy_start: fn() -> *mut c_void;
        GOMP_single_copy_end: fn(*mut c_void) -> ();
        GOMP_critical_start: fn() -> ();
        GOMP_critical_end: fn() -> ();
        GOMP_critical_name_start: fn(*mut *mut c_void) -> ();
        GOMP_critical_name_end: fn(*mut *mut c_void) -> ();
        GOMP_atomic_start: fn() -> ();
        GOMP_atomic_end: fn() -> ();
        omp_init_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_destroy_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_set_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_unset_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_test_lock [LOCKS]: fn(*mut c_void) -> c_int;
        omp_init_nest_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_destroy_nest_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_set_nest_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_unset_nest_lock [LOCKS]: fn(*mut c_void) -> ();
        omp_test_nest_lock [LOCKS]: fn(*mut c_void) -> c_int;
    }
}

/// Set on every key that is not an object's address.
const TAG: usize = 1 << 63;
/// The unnamed `critical` section's key, and `atomic`'s (one lock each in libgomp).
const CRITICAL: usize = TAG | 1;
const ATOMIC: usize = TAG | 2;
/// A region's keys: its address (below 2^48) and a slot above it.
const SLOT_SHIFT: u32 = 48;
const SLOTS: u32 = 1 << (63 - SLOT_SHIFT);
const FORK: u32 = 0;
const JOIN: u32 = 1;
const FIRST_BARRIER: u32 = 2;

fn region_key(region: usize, slot: u32) -> usize {
    TAG | (slot as usize) << SLOT_SHIFT | region
}

/// The key of a region's barrier `n` (counted from 0). After 2^15 barriers keys come round again, to one
/// forgotten long before.
fn barrier_key(region: usize, n: u32) -> usize {
    region_key(region, FIRST_BARRIER + n % (SLOTS - FIRST_BARRIER))
}

/// One parallel region this library started, on the stack of the thread that started it until the region ends.
struct Region {
    body: Body,
    data: *mut c_void,
    /// The barriers the team passed, stored by each of its threads as it leaves (they all passed the same).
    barriers: AtomicU32,
}

/// The region a thread works in, and the barriers it passed there.
#[derive(Copy, Clone)]
struct Team {
    region: usize,
    barriers: u32,
}

thread_local! {
    /// Where this thread is: set by `team_thread` for the region's body, the enclosing region's kept meanwhile.
    static TEAM: Cell<Option<Team>> = const { Cell::new(None) };
}

/// Runs a parallel region through `start` (the real entry point, given the body and its data), with the
/// region's body inside `team_thread`. Without the real entry point the body runs on this thread alone, a team
/// of one, as OpenMP allows.
fn parallel<T: Default>(
    api: &'static str,
    body: Body,
    data: *mut c_void,
    start: Option<impl FnOnce(Body, *mut c_void) -> T>,
) -> T {
    let Some(start) = start else {
        // Safety: the program's outlined body with its data, run as a team of one would run it.
        unsafe { body(data) };
        return T::default();
    };
    let region = Region { body, data, barriers: AtomicU32::new(0) };
    let at = &region as *const Region as usize;
    release(region_key(at, FORK), Release::Store, api, 0);
    let result = start(team_thread, at as *mut c_void);
    // libgomp returns once every thread of the team finished the body.
    acquire(region_key(at, JOIN), api, 0);
    let barriers = region.barriers.load(Ordering::Relaxed);
    forget(region_key(at, FORK), api, 0);
    forget(region_key(at, JOIN), api, 0);
    if barriers > 0 {
        forget(barrier_key(at, barriers - 1), api, 0);
    }
    result
}

/// What each thread of a team runs in place of the region's body.
unsafe extern "C-unwind" fn team_thread(region: *mut c_void) {
    // Safety: `parallel` handed libgomp its region, which outlives the team's work.
    let region = unsafe { &*region.cast::<Region>() };
    let at = region as *const Region as usize;
    acquire(region_key(at, FORK), "#pragma omp parallel", 0);
    let outer = TEAM.try_with(|team| team.replace(Some(Team { region: at, barriers: 0 }))).ok().flatten();
    // Safety: the program's outlined body with its data, as libgomp would have called it.
    unsafe { (region.body)(region.data) };
    let inner = TEAM.try_with(|team| team.replace(outer)).ok().flatten();
    region.barriers.store(inner.map_or(0, |team| team.barriers), Ordering::Relaxed);
    release(region_key(at, JOIN), Release::Join, "#pragma omp parallel", 0);
}

/// Runs one barrier of this thread's team through `wait`, releasing into it before and acquiring after; a
/// thread in no region this library started (a team of one, or one it did not see start) only waits.
fn barrier<T>(api: &'static str, wait: impl FnOnce() -> T) -> T {
    let Some(team) = TEAM.try_with(Cell::get).ok().flatten() else { return wait() };
    let this = barrier_key(team.region, team.barriers);
    release(this, Release::Join, api, 0);
    let result = wait();
    acquire(this, api, 0);
    if team.barriers > 0 {
        forget(barrier_key(team.region, team.barriers - 1), api, 0);
    }
    let _ = TEAM.try_with(|now| now.set(Some(Team { barriers: team.barriers + 1, ..team })));
    result
}

/// A lock's acquisition of `key` after `lock` returned with it held.
fn locked<T>(key: usize, api: &'static str, lock: impl FnOnce() -> T, held: impl FnOnce(&T) -> bool) -> T {
    let result = lock();
    if held(&result) {
        acquire(key, api, 0);
    }
    result
}

/// An unlock's release into `key`, before `unlock` runs.
fn unlocking<T>(key: usize, api: &'static str, unlock: impl FnOnce() -> T) -> T {
    release(key, Release::Store, api, 0);
    unlock()
}

/// Defines each parallel entry point: the program's body and data go to `parallel`, the other arguments
/// through to the real function as they came.
macro_rules! parallel_entry_points {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $name(body: Body, data: *mut c_void, $($arg: $ty),*) -> $ret {
            let start = real::$name().map(|real| move |body: Body, data: *mut c_void| {
                // Safety: libgomp's entry point, given the program's arguments with the body wrapped.
                unsafe { real(body, data, $($arg),*) }
            });
            parallel(stringify!($name), body, data, start)
        }
    )*};
}

parallel_entry_points! {
    GOMP_parallel(threads: c_uint, flags: c_uint) -> ();
    GOMP_parallel_reductions(threads: c_uint, flags: c_uint) -> c_uint;
    GOMP_parallel_sections(threads: c_uint, count: c_uint, flags: c_uint) -> ();
    GOMP_parallel_loop_static(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint) -> ();
    GOMP_parallel_loop_dynamic(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint) -> ();
    GOMP_parallel_loop_guided(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint) -> ();
    GOMP_parallel_loop_nonmonotonic_dynamic(
        threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint
    ) -> ();
    GOMP_parallel_loop_nonmonotonic_guided(
        threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint
    ) -> ();
    GOMP_parallel_loop_runtime(threads: c_uint, start: c_long, end: c_long, incr: c_long, flags: c_uint) -> ();
    GOMP_parallel_loop_nonmonotonic_runtime(threads: c_uint, start: c_long, end: c_long, incr: c_long, flags: c_uint) -> ();
    GOMP_parallel_loop_maybe_nonmonotonic_runtime(
        threads: c_uint, start: c_long, end: c_long, incr: c_long, flags: c_uint
    ) -> ();
}

/// Defines each entry point that waits at the team's barrier (libgomp's own error, a missing entry point, is
/// the program's to meet: there is nothing to wait with, and the call returns as a team of one's would).
macro_rules! barrier_entry_points {
    ($($name:ident -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`, in front of libgomp's: one barrier of the team.")]
        #[no_mangle]
        pub extern "C-unwind" fn $name() -> $ret {
            // Safety: libgomp's entry point, called as the program called it.
            barrier(stringify!($name), || real::$name().map(|real| unsafe { real() }).unwrap_or_default())
        }
    )*};
}

barrier_entry_points! {
    GOMP_barrier -> ();
    GOMP_barrier_cancel -> bool;
    GOMP_loop_end -> ();
    GOMP_loop_end_cancel -> bool;
    GOMP_sections_end -> ();
    GOMP_sections_end_cancel -> bool;
}

/// `GOMP_single_copy_start`, in front of libgomp's: the thread that runs the `single` block returns at once
/// (null); the others wait at a barrier, which the runner meets in `GOMP_single_copy_end`.
#[no_mangle]
pub extern "C-unwind" fn GOMP_single_copy_start() -> *mut c_void {
    let Some(real) = real::GOMP_single_copy_start() else { return std::ptr::null_mut() };
    let Some(team) = TEAM.try_with(Cell::get).ok().flatten() else {
        // Safety: libgomp's entry point, called as the program called it.
        return unsafe { real() };
    };
    // Whether this thread waits is known only afterwards: a release before a barrier this thread does not
    // meet here is one it meets in GOMP_single_copy_end, before which nothing it releases is new.
    release(barrier_key(team.region, team.barriers), Release::Join, "GOMP_single_copy_start", 0);
    // Safety: as above.
    let copied = unsafe { real() };
    if copied.is_null() {
        return copied;
    }
    // Released already: the barrier's wait is behind us.
    barrier("GOMP_single_copy_start", || copied)
}

/// `GOMP_single_copy_end`, in front of libgomp's: the `single` block's runner at the barrier the others wait
/// at in `GOMP_single_copy_start`.
#[no_mangle]
pub extern "C-unwind" fn GOMP_single_copy_end(data: *mut c_void) {
    barrier("GOMP_single_copy_end", || {
        if let Some(real) = real::GOMP_single_copy_end() {
            // Safety: libgomp's entry point, given the program's argument.
            unsafe { real(data) }
        }
    })
}

/// Defines lock and unlock entry points of one key each: `$key` is the key, from the arguments.
macro_rules! lock_entry_points {
    ($(lock $lock:ident / unlock $unlock:ident ($($arg:ident: $ty:ty),*) on $key:expr;)*) => {$(
        #[doc = concat!("`", stringify!($lock), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $lock($($arg: $ty),*) {
            // Safety: libgomp's entry point, given the program's arguments.
            let take = || { if let Some(real) = real::$lock() { unsafe { real($($arg),*) } } };
            locked($key, stringify!($lock), take, |_| true)
        }

        #[doc = concat!("`", stringify!($unlock), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $unlock($($arg: $ty),*) {
            // Safety: as above.
            let give = || { if let Some(real) = real::$unlock() { unsafe { real($($arg),*) } } };
            unlocking($key, stringify!($unlock), give)
        }
    )*};
}

lock_entry_points! {
    lock GOMP_critical_start / unlock GOMP_critical_end () on CRITICAL;
    lock GOMP_critical_name_start / unlock GOMP_critical_name_end (name: *mut *mut c_void) on name as usize;
    lock GOMP_atomic_start / unlock GOMP_atomic_end () on ATOMIC;
    lock omp_set_lock / unlock omp_unset_lock (lock: *mut c_void) on lock as usize;
    lock omp_set_nest_lock / unlock omp_unset_nest_lock (lock: *mut c_void) on lock as usize;
}

/// Defines the test and the init and destroy entry points of the `omp_*_lock` functions.
macro_rules! omp_lock_life {
    ($($test:ident, $init:ident, $destroy:ident;)*) => {$(
        #[doc = concat!("`", stringify!($test), "`, in front of libgomp's: nonzero when it took the lock.")]
        #[no_mangle]
        pub extern "C-unwind" fn $test(lock: *mut c_void) -> c_int {
            // Safety: libgomp's entry point, given the program's argument.
            let test = || real::$test().map_or(0, |real| unsafe { real(lock) });
            locked(lock as usize, stringify!($test), test, |&taken| taken != 0)
        }

        #[doc = concat!("`", stringify!($init), "`, in front of libgomp's: a new lock holds nothing.")]
        #[no_mangle]
        pub extern "C-unwind" fn $init(lock: *mut c_void) {
            forget(lock as usize, stringify!($init), 0);
            if let Some(real) = real::$init() {
                // Safety: as above.
                unsafe { real(lock) }
            }
        }

        #[doc = concat!("`", stringify!($destroy), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $destroy(lock: *mut c_void) {
            forget(lock as usize, stringify!($destroy), 0);
            if let Some(real) = real::$destroy() {
                // Safety: as above.
                unsafe { real(lock) }
            }
        }
    )*};
}

omp_lock_life! {
    omp_test_lock, omp_init_lock, omp_destroy_lock;
    omp_test_nest_lock, omp_init_nest_lock, omp_destroy_nest_lock;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_no_address_and_differ_by_region_slot_and_barrier() {
        let region = 0x7ffd_1234_5670;
        let keys = [region_key(region, FORK), region_key(region, JOIN), barrier_key(region, 0), barrier_key(region, 1)];
        for (i, key) in keys.iter().enumerate() {
            assert_ne!(key & TAG, 0, "tagged");
            assert_eq!(key & ((1 << SLOT_SHIFT) - 1), region, "the region's address kept");
            assert!(!keys[..i].contains(key), "{keys:x?}");
            assert!(![CRITICAL, ATOMIC].contains(key));
        }
        assert_ne!(barrier_key(region, 0), barrier_key(region + 64, 0));
        // Round again after the last slot, never onto the fork or join key.
        assert_eq!(barrier_key(region, SLOTS - FIRST_BARRIER), barrier_key(region, 0));
        assert!((0..SLOTS).all(|n| ![keys[0], keys[1]].contains(&barrier_key(region, n))));
    }
}
