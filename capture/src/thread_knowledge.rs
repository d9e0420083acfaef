//! What one host thread knows, as the capture keeps count of it: the marks whose join is its knowledge (its own
//! last snapshot and the snapshots of other threads it acquired since), whether it learned something of its own
//! since (then its next release writes a new snapshot), the acquired snapshots not yet written to the trace,
//! and the few facts the interposers need from one call to the next (the rwlocks it holds for writing, the last
//! object it released into). Plain data in a thread-local with no destructor, so that it is there from the
//! thread's first call to its last, even while the thread exits. The bookkeeping of host_sync/ keeps it; the
//! record writing reads it before every record (`before_record`: the pending acquires go in front), and the
//! host watch's signal handler takes them into the fault it queues (`take_pending_in_signal_handler`: a fault's
//! `host_access` is made later, by whichever thread holds the state lock next, and must come after what the
//! faulting thread acquired). That is why it sits below the state, outside host_sync/, whose interposers write
//! through the state. Touches nothing else.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::record::{Batch, Call, Record};

/// A mark is `serial << SERIAL_SHIFT | sequence`: the releasing thread's serial number and its own count of
/// releases, so that a thread can tell its own marks, and a later mark of a thread holds its earlier ones.
const SERIAL_SHIFT: u32 = 40;
static NEXT_SERIAL: AtomicU32 = AtomicU32::new(1);

/// The thread that released `mark`.
pub fn serial_of(mark: u64) -> u32 {
    (mark >> SERIAL_SHIFT) as u32
}

fn sequence_of(mark: u64) -> u64 {
    mark & ((1 << SERIAL_SHIFT) - 1)
}

/// Marks of distinct threads (a later mark of a thread replaces its earlier one): what an object holds, or
/// what a thread knows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MarkSet {
    marks: [u64; MarkSet::CAPACITY],
    len: usize,
}

impl MarkSet {
    pub const CAPACITY: usize = 16;
    pub const EMPTY: MarkSet = MarkSet { marks: [0; MarkSet::CAPACITY], len: 0 };

    pub fn of(mark: u64) -> MarkSet {
        let mut set = MarkSet::EMPTY;
        set.add(mark);
        set
    }

    pub fn as_slice(&self) -> &[u64] {
        &self.marks[..self.len]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `mark`; false when the set is full and holds nothing of its thread.
    pub fn add(&mut self, mark: u64) -> bool {
        if let Some(same) = self.marks[..self.len].iter_mut().find(|m| serial_of(**m) == serial_of(mark)) {
            *same = (*same).max(mark);
            return true;
        }
        if self.len == MarkSet::CAPACITY {
            return false;
        }
        self.marks[self.len] = mark;
        self.len += 1;
        true
    }

    /// Whether both hold the same marks, in whatever order they were added.
    pub fn same_marks(&self, other: &MarkSet) -> bool {
        self.len == other.len && self.as_slice().iter().all(|mark| other.as_slice().contains(mark))
    }

    /// Adds `mark`, forgetting the oldest mark when full; true when one was forgotten.
    pub fn add_forgetting(&mut self, mark: u64) -> bool {
        if self.add(mark) {
            return false;
        }
        self.marks.copy_within(1.., 0);
        self.marks[MarkSet::CAPACITY - 1] = mark;
        true
    }
}

/// A snapshot acquired and not yet written, with the call that acquired it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub mark: u64,
    pub api: &'static str,
}

impl Pending {
    pub const NONE: Pending = Pending { mark: 0, api: "" };
}

const NO_PENDING: Pending = Pending::NONE;
/// Threads whose latest acquired snapshot is remembered, so that acquiring it again writes nothing.
const ACQUIRED: usize = 8;
/// Rwlocks held for writing at once (more are released as if read).
const WRITE_HELD: usize = 16;
/// Objects whose version was seen when acquired last (objects.rs), by address: unchanged, they are not read
/// again.
const SEEN: usize = 128;
/// Objects released into lately, by address: a thread that unlocks the same few mutexes over and over (an
/// allocator's, a queue's) while it knows the same does not put the same marks into them again.
const STORED: usize = 128;

/// An object this thread released into, with its `known_version` then and the object's version after.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub object: usize,
    pub known_version: u64,
    pub object_version: u64,
}

const NOT_STORED: Stored = Stored { object: 0, known_version: 0, object_version: u64::MAX };

/// Why an acquired mark could not be kept.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Full {
    /// The thread knows too many threads' marks: it must write a snapshot of its own, which holds them.
    Known,
    /// Too many acquires wait to be written: write them now.
    Pending,
}

pub struct ThreadKnowledge {
    serial: u32,
    sequence: u64,
    /// The marks whose join is what this thread knows (empty: nothing): its own last snapshot, and the other
    /// threads' snapshots it acquired since. A release that finds nothing new passes these on.
    pub known: MarkSet,
    /// Changes whenever `known` does.
    pub known_version: u64,
    /// Whether it learned something of its own since its last snapshot (a record that teaches the host).
    pub taught: bool,
    pending: [Pending; MarkSet::CAPACITY],
    pending_len: usize,
    /// Per releasing thread: its serial and the latest sequence acquired from it.
    acquired: [(u32, u64); ACQUIRED],
    acquired_next: usize,
    /// Objects the thread released into lately (by address, one slot each): while the thread's knowledge and
    /// the object's version stand, releasing into it again changes nothing.
    stored: [Stored; STORED],
    write_held: [usize; WRITE_HELD],
    seen: [(usize, u64); SEEN],
    /// Whether the thread was started through the capture's trampoline (its end is then released).
    pub started_by_capture: bool,
}

impl ThreadKnowledge {
    pub const NEW: ThreadKnowledge = ThreadKnowledge {
        serial: 0,
        sequence: 0,
        known: MarkSet::EMPTY,
        known_version: 0,
        taught: false,
        pending: [NO_PENDING; MarkSet::CAPACITY],
        pending_len: 0,
        acquired: [(0, 0); ACQUIRED],
        acquired_next: 0,
        stored: [NOT_STORED; STORED],
        write_held: [0; WRITE_HELD],
        seen: [(0, u64::MAX); SEEN],
        started_by_capture: false,
    };

    /// Whether this thread knows anything at all.
    pub fn knows_something(&self) -> bool {
        self.taught || !self.known.is_empty()
    }

    /// The next mark of this thread (its serial taken on first use).
    pub fn next_mark(&mut self) -> u64 {
        if self.serial == 0 {
            self.serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed).max(1);
        }
        self.sequence += 1;
        (u64::from(self.serial) << SERIAL_SHIFT) | (self.sequence & ((1 << SERIAL_SHIFT) - 1))
    }

    /// A snapshot of its own was written as `mark`: it holds everything the thread knew.
    pub fn snapshot_written(&mut self, mark: u64) {
        self.known = MarkSet::of(mark);
        self.known_version += 1;
        self.taught = false;
    }

    /// Whether `mark` tells this thread something: another thread's, later than what it acquired from it.
    pub fn is_news(&self, mark: u64) -> bool {
        let serial = serial_of(mark);
        if mark == 0 || serial == self.serial && self.serial != 0 {
            return false;
        }
        !self.acquired.iter().any(|&(s, seq)| s == serial && seq >= sequence_of(mark))
    }

    /// Notes `mark` acquired: known from now on, and pending until the thread's next record.
    pub fn acquire(&mut self, mark: u64, api: &'static str) -> Result<(), Full> {
        let serial = serial_of(mark);
        let pending = self.pending[..self.pending_len].iter().position(|p| serial_of(p.mark) == serial);
        if pending.is_none() && self.pending_len == MarkSet::CAPACITY {
            return Err(Full::Pending);
        }
        if !self.known.add(mark) {
            return Err(Full::Known);
        }
        self.known_version += 1;
        match pending {
            // A later mark of the same thread holds the earlier one.
            Some(i) => self.pending[i] = Pending { mark: self.pending[i].mark.max(mark), api },
            None => {
                self.pending[self.pending_len] = Pending { mark, api };
                self.pending_len += 1;
            }
        }
        match self.acquired.iter_mut().find(|(s, _)| *s == serial) {
            Some(known) => known.1 = known.1.max(sequence_of(mark)),
            None => {
                self.acquired[self.acquired_next] = (serial, sequence_of(mark));
                self.acquired_next = (self.acquired_next + 1) % ACQUIRED;
            }
        }
        Ok(())
    }

    /// The snapshots acquired since the thread's last record, taken out.
    pub fn take_pending(&mut self) -> ([Pending; MarkSet::CAPACITY], usize) {
        let taken = (self.pending, self.pending_len);
        self.pending_len = 0;
        taken
    }

    /// Whether snapshots acquired since the thread's last record wait to be written (checked before every
    /// record: cheaper than taking them out).
    pub fn has_pending(&self) -> bool {
        self.pending_len > 0
    }

    /// Notes that this thread now holds `rwlock` for writing.
    pub fn hold_for_writing(&mut self, rwlock: usize) {
        if let Some(free) = self.write_held.iter_mut().find(|held| **held == 0) {
            *free = rwlock;
        }
    }

    /// Whether this thread holds any rwlock for writing.
    pub fn holds_any_for_writing(&self) -> bool {
        self.write_held.iter().any(|&held| held != 0)
    }

    /// Whether this thread held `rwlock` for writing (forgotten now: it is being unlocked).
    pub fn release_writing(&mut self, rwlock: usize) -> bool {
        match self.write_held.iter_mut().find(|held| **held == rwlock) {
            Some(held) => {
                *held = 0;
                true
            }
            None => false,
        }
    }

    /// Whether releasing into `object`, now at `object_version`, would change nothing: this thread put what it
    /// knows now into it, and nobody changed it since.
    pub fn stored_already(&self, object: usize, object_version: u64) -> bool {
        self.stored[slot_of(object, STORED)] == Stored { object, known_version: self.known_version, object_version }
    }

    /// This thread put what it knows now into `object`, which is at `object_version` after.
    pub fn note_stored(&mut self, object: usize, object_version: u64) {
        self.stored[slot_of(object, STORED)] = Stored { object, known_version: self.known_version, object_version };
    }

    /// Whether `object` was read at `version` already by this thread.
    pub fn saw(&self, object: usize, version: u64) -> bool {
        self.seen[slot_of(object, SEEN)] == (object, version)
    }

    pub fn note_seen(&mut self, object: usize, version: u64) {
        self.seen[slot_of(object, SEEN)] = (object, version);
    }

    /// In the child of a fork: its trace starts empty, so nothing this thread knew counts there.
    pub fn forget_all(&mut self) {
        let (serial, sequence, started) = (self.serial, self.sequence, self.started_by_capture);
        *self = ThreadKnowledge::NEW;
        (self.serial, self.sequence, self.started_by_capture) = (serial, sequence, started);
    }
}

/// The slot of `object` in a per-thread table of `slots` (a power of two) entries.
fn slot_of(object: usize, slots: usize) -> usize {
    // Sync objects are aligned and often neighbours: mix the address before taking the slot.
    (object.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (slots - 1)
}

thread_local! {
    /// This thread's knowledge. No destructor: it lasts as long as the thread's last call needs it.
    pub static THREAD: RefCell<ThreadKnowledge> = const { RefCell::new(ThreadKnowledge::NEW) };
}

// A signal handler reads `THREAD` (below): with a constant initializer and no drop glue, reaching it is an
// address computation, with no lazy initialization and no destructor to register (which could allocate).
const _: () = assert!(!std::mem::needs_drop::<RefCell<ThreadKnowledge>>());

/// The snapshots the calling thread acquired and has not written yet, taken out, for the signal handler of a
/// guard fault (host_watch/faults.rs): the fault's `host_access` is written after them, by whichever thread
/// takes the state lock next. The access is the thread's own news, as any record that teaches the host: its
/// next release writes a snapshot, placed after the access (a thread that ends, or unlocks, right after reading a
/// buffer hands that read over). None while this thread's own bookkeeping holds its knowledge (a fault inside it:
/// the bookkeeping touches none of the program's memory, so this does not happen; the acquires then stay for
/// the thread's next record).
///
/// Async-signal-safe: no allocation, no lock; the thread-local needs no initialization (above), and the
/// capture library is preloaded whenever the handler is installed (host_watch/signals.rs), so its
/// thread-locals are in the static TLS block, there from each thread's start. The fault interrupts the
/// program's own code, outside every function of the capture, whose stores to `THREAD` are all done by then;
/// the borrow flag covers the rest.
pub fn take_pending_in_signal_handler() -> Option<([Pending; MarkSet::CAPACITY], usize)> {
    THREAD
        .try_with(|knowledge| {
            knowledge.try_borrow_mut().ok().map(|mut k| {
                k.taught = true;
                k.take_pending()
            })
        })
        .ok()
        .flatten()
}

/// Before each record the calling thread adds to the process's batch: the snapshots it acquired since its last
/// record go first, and `teaches`: whether the record tells the thread something (its next release then writes
/// a new snapshot).
pub fn before_record(call: Call, teaches: bool, batch: &mut Batch) {
    let _ = THREAD.try_with(|knowledge| {
        // Borrowed already: this thread's own bookkeeping is writing, and writes what is pending itself.
        let Ok(mut knowledge) = knowledge.try_borrow_mut() else { return };
        knowledge.taught |= teaches;
        if !knowledge.has_pending() {
            return;
        }
        let (pending, len) = knowledge.take_pending();
        for acquired in &pending[..len] {
            let record = Record::HostAcquire { object: acquired.mark, api: acquired.api };
            batch.push(Call { correlation: 0, site: 0, ..call }, record);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_name_their_thread_and_grow() {
        let mut a = ThreadKnowledge::NEW;
        let first = a.next_mark();
        let second = a.next_mark();
        assert_eq!(serial_of(first), serial_of(second));
        assert!(second > first);
        assert!(!a.is_news(first), "a thread's own mark tells it nothing");
    }

    #[test]
    fn a_mark_acquired_once_is_news_once_and_a_later_one_replaces_it() {
        let (mut a, mut b) = (ThreadKnowledge::NEW, ThreadKnowledge::NEW);
        let (a1, a2) = (a.next_mark(), a.next_mark());
        assert!(b.is_news(a1));
        assert_eq!(b.acquire(a1, "lock"), Ok(()));
        assert!(!b.is_news(a1));
        assert!(b.is_news(a2));
        assert_eq!(b.acquire(a2, "lock"), Ok(()));
        let (pending, len) = b.take_pending();
        assert_eq!(&pending[..len], &[Pending { mark: a2, api: "lock" }], "one pending per releasing thread");
        assert_eq!(b.known.as_slice(), &[a2], "what b knows, to pass on");
        assert!(!b.is_news(a1) && !b.is_news(a2));
        assert_eq!(b.take_pending().1, 0);
    }

    #[test]
    fn a_snapshot_of_its_own_holds_what_a_thread_acquired() {
        let (mut a, mut b) = (ThreadKnowledge::NEW, ThreadKnowledge::NEW);
        assert!(!b.knows_something());
        b.acquire(a.next_mark(), "sem_wait").unwrap();
        assert!(b.knows_something() && !b.taught);
        let own = b.next_mark();
        b.snapshot_written(own);
        assert_eq!(b.known.as_slice(), &[own]);
    }

    #[test]
    fn full_sets_say_what_must_be_written() {
        let mut b = ThreadKnowledge::NEW;
        let mut others: Vec<ThreadKnowledge> = (0..=MarkSet::CAPACITY).map(|_| ThreadKnowledge::NEW).collect();
        for other in &mut others[..MarkSet::CAPACITY] {
            assert_eq!(b.acquire(other.next_mark(), "sem_wait"), Ok(()));
        }
        assert_eq!(b.acquire(others[MarkSet::CAPACITY].next_mark(), "sem_wait"), Err(Full::Pending));
        b.take_pending();
        assert_eq!(b.acquire(others[MarkSet::CAPACITY].next_mark(), "sem_wait"), Err(Full::Known));
    }

    #[test]
    fn a_full_set_forgets_its_oldest_when_asked() {
        let mut set = MarkSet::EMPTY;
        let mut threads: Vec<ThreadKnowledge> = (0..=MarkSet::CAPACITY).map(|_| ThreadKnowledge::NEW).collect();
        let marks: Vec<u64> = threads.iter_mut().map(|t| t.next_mark()).collect();
        for &mark in &marks[..MarkSet::CAPACITY] {
            assert!(!set.add_forgetting(mark));
        }
        assert!(set.add_forgetting(marks[MarkSet::CAPACITY]));
        assert_eq!(set.as_slice(), &marks[1..]);
    }

    #[test]
    fn write_held_rwlocks_are_told_from_read_held_ones() {
        let mut t = ThreadKnowledge::NEW;
        t.hold_for_writing(0x1000);
        assert!(!t.release_writing(0x2000));
        assert!(t.release_writing(0x1000));
        assert!(!t.release_writing(0x1000), "released once");
    }

    #[test]
    fn a_forked_child_keeps_its_serial_and_forgets_the_rest() {
        let mut t = ThreadKnowledge::NEW;
        let mark = t.next_mark();
        t.snapshot_written(mark);
        t.taught = true;
        t.forget_all();
        assert!(!t.knows_something());
        assert!(t.next_mark() > mark, "marks keep growing");
    }
}
