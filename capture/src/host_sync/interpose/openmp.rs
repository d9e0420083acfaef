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
//! Which copy of libgomp each call goes to is openmp_binding.rs's: a region's, as its body's object binds; the
//! team's threads take it from their region. A region whose body lies in the CUDA stack's libraries records
//! nothing, as their pthread calls do not (caller.rs): the body's address stands for the caller.
//!
//! Keys other than a lock's address have the top bit set, which no address in a process has. Tasks
//! (`GOMP_task`, `taskwait`, `taskgroup`), `ordered`, nestable locks (whose layout differs between libgomp's
//! symbol versions), the pre-4.9 `GOMP_parallel_start`/`_end` pair and LLVM's runtime entry points (`__kmpc_*`)
//! are not stood in front of: what they order is not seen.

use std::cell::Cell;
use std::ffi::{c_int, c_long, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use super::openmp_binding::{self, Binding, Body};
use crate::host_sync::objects::Release;
use crate::host_sync::{acquire, forget, release};

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

/// One parallel region this library started, on the stack of the thread that started it until the region ends;
/// what libgomp hands each thread of the team in place of the program's data.
#[repr(C)]
struct Region {
    /// The first word of the program's data, where `GOMP_parallel_reductions` reads a task reduction's
    /// descriptors from the data it is handed (null for the other entry points, whose data may be null).
    first_word: *mut c_void,
    body: Body,
    data: *mut c_void,
    binding: &'static Binding,
    /// The barriers the team passed, stored by each of its threads as it leaves (they all passed the same).
    barriers: AtomicU32,
}

/// The region a thread works in, and the barriers it passed there.
#[derive(Copy, Clone)]
struct Team {
    region: usize,
    barriers: u32,
    binding: &'static Binding,
    /// The region's body: the caller, for the bookkeeping's question whose call it is.
    caller: usize,
}

thread_local! {
    /// Where this thread is: set by `team_thread` for the region's body, the enclosing region's kept meanwhile.
    static TEAM: Cell<Option<Team>> = const { Cell::new(None) };
}

fn team() -> Option<Team> {
    TEAM.try_with(Cell::get).ok().flatten()
}

/// The copy of libgomp this thread's calls go to, and whose calls they are (0: the program's).
fn binding_here() -> (&'static Binding, usize) {
    team().map_or_else(|| (openmp_binding::outside_regions(), 0), |team| (team.binding, team.caller))
}

/// A program's call of libgomp with no libgomp to go to: it cannot go on (it would have failed to link).
fn missing(name: &str) -> ! {
    eprintln!("streamtrace: no libgomp defines {name}, which the program called; stopping");
    std::process::abort()
}

/// Runs a parallel region through `start` (libgomp's entry point in `binding`, given the body and data to hand
/// the team), with the region's body inside `team_thread`.
fn parallel<T>(
    api: &'static str,
    body: Body,
    data: *mut c_void,
    first_word: *mut c_void,
    start: impl FnOnce(&Binding, Body, *mut c_void) -> Option<T>,
) -> T {
    // A nested region too: its body may lie in another object, bound to another copy.
    let binding = openmp_binding::of_region(body);
    let region = Region { first_word, body, data, binding, barriers: AtomicU32::new(0) };
    let at = &region as *const Region as usize;
    let caller = body as usize;
    release(region_key(at, FORK), Release::Store, api, caller);
    let Some(result) = start(binding, team_thread, at as *mut c_void) else { missing(api) };
    // libgomp returns once every thread of the team finished the body.
    acquire(region_key(at, JOIN), api, caller);
    let barriers = region.barriers.load(Ordering::Relaxed);
    forget(region_key(at, FORK), api, caller);
    forget(region_key(at, JOIN), api, caller);
    if barriers > 0 {
        forget(barrier_key(at, barriers - 1), api, caller);
    }
    result
}

/// What each thread of a team runs in place of the region's body.
unsafe extern "C-unwind" fn team_thread(region: *mut c_void) {
    // Safety: `parallel` handed libgomp its region, which outlives the team's work.
    let region = unsafe { &*region.cast::<Region>() };
    let at = region as *const Region as usize;
    let caller = region.body as usize;
    acquire(region_key(at, FORK), "#pragma omp parallel", caller);
    let this = Team { region: at, barriers: 0, binding: region.binding, caller };
    let outer = TEAM.try_with(|team| team.replace(Some(this))).ok().flatten();
    // Safety: the program's outlined body with its data, as libgomp would have called it.
    unsafe { (region.body)(region.data) };
    let inner = TEAM.try_with(|team| team.replace(outer)).ok().flatten();
    region.barriers.store(inner.map_or(0, |team| team.barriers), Ordering::Relaxed);
    release(region_key(at, JOIN), Release::Join, "#pragma omp parallel", caller);
}

/// Runs one barrier of this thread's team through `wait` (libgomp's entry point in the binding), releasing into
/// it before and acquiring after; a thread in no region this library started (a team of one, or one it did not
/// see start) only waits.
fn barrier<T>(api: &'static str, wait: impl FnOnce(&Binding) -> Option<T>) -> T {
    let Some(team) = team() else {
        return wait(openmp_binding::outside_regions()).unwrap_or_else(|| missing(api));
    };
    let this = barrier_key(team.region, team.barriers);
    release(this, Release::Join, api, team.caller);
    let result = wait(team.binding).unwrap_or_else(|| missing(api));
    acquire(this, api, team.caller);
    if team.barriers > 0 {
        forget(barrier_key(team.region, team.barriers - 1), api, team.caller);
    }
    let _ = TEAM.try_with(|now| now.set(Some(Team { barriers: team.barriers + 1, ..team })));
    result
}

/// A lock of `key` through `lock` (libgomp's entry point in this thread's binding), acquiring when `held`
/// says it returned with the lock held.
fn locked<T>(
    key: usize,
    api: &'static str,
    lock: impl FnOnce(&Binding) -> Option<T>,
    held: impl FnOnce(&T) -> bool,
) -> T {
    let (binding, caller) = binding_here();
    let result = lock(binding).unwrap_or_else(|| missing(api));
    if held(&result) {
        acquire(key, api, caller);
    }
    result
}

/// An unlock of `key` through `unlock`, releasing into it first.
fn unlocking<T>(key: usize, api: &'static str, unlock: impl FnOnce(&Binding) -> Option<T>) -> T {
    let (binding, caller) = binding_here();
    release(key, Release::Store, api, caller);
    unlock(binding).unwrap_or_else(|| missing(api))
}

/// Defines each parallel entry point: the program's body and data go to `parallel`, the other arguments
/// through to the real function as they came.
macro_rules! parallel_entry_points {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $name(body: Body, data: *mut c_void, $($arg: $ty),*) -> $ret {
            parallel(stringify!($name), body, data, std::ptr::null_mut(), |binding, body, data| {
                // Safety: libgomp's entry point, given the program's arguments with the body wrapped.
                binding.$name.map(|real| unsafe { real(body, data, $($arg),*) })
            })
        }
    )*};
}

parallel_entry_points! {
    GOMP_parallel(threads: c_uint, flags: c_uint) -> ();
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

/// `GOMP_parallel_reductions`, in front of libgomp's: a region with task reductions, whose descriptors libgomp
/// reads from the first word of the data it is handed (the region's copy of the program's).
#[no_mangle]
pub extern "C-unwind" fn GOMP_parallel_reductions(
    body: Body,
    data: *mut c_void,
    threads: c_uint,
    flags: c_uint,
) -> c_uint {
    // Safety: GCC hands this entry point a data block that starts with the reductions' pointer.
    let first_word = if data.is_null() { std::ptr::null_mut() } else { unsafe { *data.cast::<*mut c_void>() } };
    parallel("GOMP_parallel_reductions", body, data, first_word, |binding, body, data| {
        // Safety: libgomp's entry point, given the program's arguments with the body wrapped.
        binding.GOMP_parallel_reductions.map(|real| unsafe { real(body, data, threads, flags) })
    })
}

/// Defines each entry point that waits at the team's barrier.
macro_rules! barrier_entry_points {
    ($($name:ident -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`, in front of libgomp's: one barrier of the team.")]
        #[no_mangle]
        pub extern "C-unwind" fn $name() -> $ret {
            // Safety: libgomp's entry point, called as the program called it.
            barrier(stringify!($name), |binding| binding.$name.map(|real| unsafe { real() }))
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
    const API: &str = "GOMP_single_copy_start";
    let (binding, _) = binding_here();
    let Some(real) = binding.GOMP_single_copy_start else { missing(API) };
    let Some(team) = team() else {
        // Safety: libgomp's entry point, called as the program called it.
        return unsafe { real() };
    };
    // Whether this thread waits is known only afterwards: a release before a barrier this thread does not
    // meet here is one it meets in GOMP_single_copy_end, before which nothing it releases is new.
    release(barrier_key(team.region, team.barriers), Release::Join, API, team.caller);
    // Safety: as above.
    let copied = unsafe { real() };
    if copied.is_null() {
        return copied;
    }
    // Released already: the barrier's wait is behind us.
    barrier(API, |_| Some(copied))
}

/// `GOMP_single_copy_end`, in front of libgomp's: the `single` block's runner at the barrier the others wait
/// at in `GOMP_single_copy_start`.
#[no_mangle]
pub extern "C-unwind" fn GOMP_single_copy_end(data: *mut c_void) {
    // Safety: libgomp's entry point, given the program's argument.
    barrier("GOMP_single_copy_end", |binding| binding.GOMP_single_copy_end.map(|real| unsafe { real(data) }))
}

/// Defines lock and unlock entry points of one key each: `$key` is the key, from the arguments.
macro_rules! lock_entry_points {
    ($(lock $lock:ident / unlock $unlock:ident ($($arg:ident: $ty:ty),*) on $key:expr;)*) => {$(
        #[doc = concat!("`", stringify!($lock), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $lock($($arg: $ty),*) {
            // Safety: libgomp's entry point, given the program's arguments.
            locked($key, stringify!($lock), |binding| binding.$lock.map(|real| unsafe { real($($arg),*) }), |_| true)
        }

        #[doc = concat!("`", stringify!($unlock), "`, in front of libgomp's.")]
        #[no_mangle]
        pub extern "C-unwind" fn $unlock($($arg: $ty),*) {
            // Safety: as above.
            unlocking($key, stringify!($unlock), |binding| binding.$unlock.map(|real| unsafe { real($($arg),*) }))
        }
    )*};
}

lock_entry_points! {
    lock GOMP_critical_start / unlock GOMP_critical_end () on CRITICAL;
    lock GOMP_critical_name_start / unlock GOMP_critical_name_end (name: *mut *mut c_void) on name as usize;
    lock GOMP_atomic_start / unlock GOMP_atomic_end () on ATOMIC;
    lock omp_set_lock / unlock omp_unset_lock (lock: *mut c_void) on lock as usize;
}

/// `omp_test_lock`, in front of libgomp's: nonzero when it took the lock.
#[no_mangle]
pub extern "C-unwind" fn omp_test_lock(lock: *mut c_void) -> c_int {
    // Safety: libgomp's entry point, given the program's argument.
    let test = |binding: &Binding| binding.omp_test_lock.map(|real| unsafe { real(lock) });
    locked(lock as usize, "omp_test_lock", test, |&taken| taken != 0)
}

/// Defines the init and destroy entry points of the simple locks: a new or destroyed lock holds nothing.
macro_rules! omp_lock_life {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`, in front of libgomp's: the lock holds nothing after it.")]
        #[no_mangle]
        pub extern "C-unwind" fn $name(lock: *mut c_void) {
            let (binding, caller) = binding_here();
            forget(lock as usize, stringify!($name), caller);
            let Some(real) = binding.$name else { missing(stringify!($name)) };
            // Safety: libgomp's entry point, given the program's argument.
            unsafe { real(lock) }
        }
    )*};
}

omp_lock_life! {
    omp_init_lock;
    omp_destroy_lock;
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
