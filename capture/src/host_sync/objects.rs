//! The program's synchronization objects (a mutex, a semaphore, a finished thread: any address) and the marks
//! released into each, ThreadSanitizer's sync clocks reduced to what the trace needs: marks whose join is what
//! the releasing threads knew. A mutex's unlock replaces them (`Store`), a semaphore's post or a read lock's
//! unlock adds to them (`Join`). 256 shards by address, each a futex mutex (Rust's own, never a pthread one)
//! around a map, with a version that changes with every change, so that a thread re-locking a mutex nobody
//! else released does not take the shard's lock. Never held across fork: other libraries' fork handlers lock
//! their mutexes after ours ran (OpenBLAS joins its threads), and those calls come here; the child starts on a
//! new, empty table instead (`start_anew`), leaving the one it inherited (perhaps locked by a thread it does not
//! have) as it is. Touches only its own statics (and counts what it does for the cost split, cost.rs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::renewed::RenewedInChild;
use crate::thread_knowledge::MarkSet;

/// How a release changes what an object holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// The releaser's snapshot replaces what was there (a mutex, a write lock, a thread's end): whoever acquires
    /// it next acquired what was there before it, so its snapshot holds that too.
    Store,
    /// The releaser's snapshot joins the others (a semaphore, a read lock, a barrier): their releasers did not
    /// acquire each other's.
    Join,
}

const SHARDS: usize = 256;
/// Objects a shard holds at most; past that it starts over (counted in `DROPPED`).
const SHARD_OBJECTS: usize = 1 << 12;

type Objects = FxHashMap<usize, MarkSet>;

struct Shard {
    version: AtomicU64,
    objects: Mutex<Objects>,
}

struct Table {
    shards: [Shard; SHARDS],
}

impl Table {
    const fn new() -> Table {
        Table {
            shards: [const {
                Shard { version: AtomicU64::new(0), objects: Mutex::new(FxHashMap::with_hasher(FxBuildHasher)) }
            }; SHARDS],
        }
    }
}

/// A forked child moves to a new table (`start_anew`).
static TABLE: RenewedInChild<Table> = RenewedInChild::new(Table::new());

/// Marks forgotten because a shard was full or an object had too many releasers (a `Join` past
/// `MarkSet::CAPACITY` threads forgets its oldest).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);

fn shard(object: usize) -> &'static Shard {
    // Sync objects are 4- or 8-byte aligned, often in arrays of structs: mix the address.
    &TABLE.get().shards[(object.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) % SHARDS]
}

fn lock(shard: &'static Shard) -> MutexGuard<'static, Objects> {
    TABLE.keep_spare(Table::new);
    shard.objects.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
thread_local! {
    /// Puts made by this thread (the tests' count of the shard locks a release took).
    pub static PUTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The version of `object`'s shard: what it holds may have changed only if this has.
pub fn version_of(object: usize) -> u64 {
    shard(object).version.load(Ordering::Acquire)
}

/// The marks `object` holds, copied out.
pub fn marks_of(object: usize) -> MarkSet {
    crate::cost::host_sync_event(crate::cost::HostSyncEvent::Read);
    lock(shard(object)).get(&object).copied().unwrap_or(MarkSet::EMPTY)
}

/// `marks` released into `object`; returns the shard's version right after. A release that leaves the object's
/// marks as they were changes no version: two threads that know the same and take turns with one mutex (a
/// queue's, an allocator's) then find it unchanged at each lock and unlock, and take the fast paths.
pub fn put(object: usize, marks: &MarkSet, how: Release) -> u64 {
    crate::cost::host_sync_event(crate::cost::HostSyncEvent::Put);
    #[cfg(test)]
    PUTS.with(|puts| puts.set(puts.get() + 1));
    let shard = shard(object);
    let mut objects = lock(shard);
    let cleared = objects.len() >= SHARD_OBJECTS && !objects.contains_key(&object);
    if cleared {
        DROPPED.fetch_add(objects.len() as u64, Ordering::Relaxed);
        objects.clear();
    }
    let held = objects.entry(object).or_insert(MarkSet::EMPTY);
    let before = *held;
    match how {
        Release::Store => *held = *marks,
        Release::Join => {
            for &mark in marks.as_slice() {
                if held.add_forgetting(mark) {
                    DROPPED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    if !cleared && held.same_marks(&before) {
        return shard.version.load(Ordering::Acquire);
    }
    shard.version.fetch_add(1, Ordering::AcqRel) + 1
}

/// `object` is gone or made anew (destroyed, initialized, a joined thread): it holds nothing.
pub fn forget(object: usize) {
    let shard = shard(object);
    if lock(shard).remove(&object).is_some() {
        shard.version.fetch_add(1, Ordering::Release);
    }
}

/// In the child of a fork: the objects start empty, on a new table (the inherited shards may be locked by
/// threads that are not in the child, or be halfway through a change). Its versions go on from the old ones',
/// so that no remembered version matches by chance.
pub fn start_anew() {
    let inherited = TABLE.get();
    TABLE.renew(|fresh| {
        for (new, old) in fresh.shards.iter().zip(&inherited.shards) {
            new.version.store(old.version.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread_knowledge::ThreadKnowledge;

    #[test]
    fn a_store_replaces_and_a_join_adds_one_mark_per_thread() {
        let (mut a, mut b) = (ThreadKnowledge::NEW, ThreadKnowledge::NEW);
        let object = Box::into_raw(Box::new(0u64)) as usize;
        let (a1, a2, b1) = (a.next_mark(), a.next_mark(), b.next_mark());
        put(object, &MarkSet::of(a1), Release::Join);
        put(object, &MarkSet::of(b1), Release::Join);
        put(object, &MarkSet::of(a2), Release::Join);
        assert_eq!(marks_of(object).as_slice(), &[a2, b1], "a2 holds a1");
        let version = version_of(object);
        assert_eq!(put(object, &MarkSet::of(b1), Release::Store), version_of(object));
        assert_ne!(version_of(object), version);
        assert_eq!(marks_of(object).as_slice(), &[b1]);
        let version = version_of(object);
        assert_eq!(put(object, &MarkSet::of(b1), Release::Store), version, "the same marks again change nothing");
        assert_eq!(put(object, &MarkSet::of(b1), Release::Join), version);
        assert_eq!(version_of(object), version);
        forget(object);
        assert!(marks_of(object).is_empty());
        // Safety: the box made above, no longer used.
        drop(unsafe { Box::from_raw(object as *mut u64) });
    }
}
