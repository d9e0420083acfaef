//! Guard faults as the signal handler queues them. The handler fills one slot of a fixed queue (the thread, the
//! time, the address, read or write, the host function running, the registers, a copy of the stack above the
//! stack pointer, and the snapshots the thread acquired and has not written yet: its `host_access` must come
//! after them, and it is written by another thread, which cannot reach them) and returns; the next thread to hold the state lock takes the slots (fault_records.rs
//! makes each a `host_access` record, walking its call site over the copy: the walk looks modules up, which a
//! signal handler may not). Touches the queue and nothing of the state, so that the hold (hold.rs) can ask
//! whether faults wait without importing what records them.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use super::driver_code::in_driver_code;
use super::{counters, host_funcs, inflight};
use crate::record::{Batch, Entry, Record};
use crate::thread_knowledge::{take_pending_in_signal_handler, MarkSet, Pending};
use crate::unwind::{StackWords, Start};

/// Faults waiting for the state lock; past them a fault is counted as dropped.
const SLOTS: usize = 16;
/// The stack copied above a fault's stack pointer: enough for the frames a call site keeps.
const STACK_BYTES: usize = 16 << 10;
const PAGE: usize = 4096;

const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

/// One fault as the handler saw it.
pub(super) struct Fault {
    pub(super) tid: u64,
    pub(super) time: u64,
    pub(super) address: u64,
    pub(super) write: bool,
    /// The wrapped host function the faulting thread was running (0: none).
    pub(super) host_func: u64,
    /// The registers the call site's walk starts from.
    pub(super) start: Start,
    /// What the thread acquired from other threads before the access and had not written yet (none inside a
    /// host function, whose accesses belong to its place in its stream, not to the thread's clock).
    acquired: [Pending; MarkSet::CAPACITY],
    acquired_len: usize,
    stack_len: usize,
    stack: [u8; STACK_BYTES],
}

impl Fault {
    /// The stack copied above the fault's stack pointer, for the call site's walk.
    pub(super) fn stack(&self) -> StackWords<'_> {
        StackWords::copied(self.start.sp, &self.stack[..self.stack_len.min(STACK_BYTES)])
    }

    /// The snapshots the faulting thread had acquired and not written, as the records that go before its access.
    pub(super) fn acquires(&self) -> impl Iterator<Item = Record> + '_ {
        let acquired = &self.acquired[..self.acquired_len.min(MarkSet::CAPACITY)];
        acquired.iter().map(|a| Record::HostAcquire { object: a.mark, api: a.api })
    }
}

struct Slot {
    state: AtomicU8,
    fault: UnsafeCell<Fault>,
}

// Safety: a slot's fault is written only by the thread that moved it from FREE to WRITING, and read only by
// the one that takes it READY, under the state lock.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU8::new(FREE),
    fault: UnsafeCell::new(Fault {
        tid: 0,
        time: 0,
        address: 0,
        write: false,
        host_func: 0,
        start: Start { pc: 0, sp: 0, bp: 0 },
        acquired: [Pending::NONE; MarkSet::CAPACITY],
        acquired_len: 0,
        stack_len: 0,
        stack: [0; STACK_BYTES],
    }),
};
static QUEUE: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Whether any slot may be READY: the state lock's holders look at the queue only then.
static WAITING: AtomicBool = AtomicBool::new(false);

/// The registers a walk starts from and whether the access wrote, from the signal context.
#[cfg(target_arch = "x86_64")]
fn registers(context: *mut c_void) -> Option<(Start, bool)> {
    // Safety: the kernel passes the interrupted context as a ucontext_t (SA_SIGINFO); read only.
    let context = unsafe { (context as *const libc::ucontext_t).as_ref()? };
    let regs = &context.uc_mcontext.gregs;
    let reg = |index: libc::c_int| regs[index as usize] as u64;
    // The page fault's error code: bit 1 is set for a write.
    let write = reg(libc::REG_ERR) & 2 != 0;
    Some((Start { pc: reg(libc::REG_RIP), sp: reg(libc::REG_RSP), bp: reg(libc::REG_RBP) }, write))
}

#[cfg(not(target_arch = "x86_64"))]
fn registers(_context: *mut c_void) -> Option<(Start, bool)> {
    None
}

/// Copies the stack from `sp` up into `out` with process_vm_readv, page by page, so that the copy stops at the
/// first page that is not mapped instead of faulting; returns the bytes copied.
fn copy_stack(sp: u64, out: &mut [u8; STACK_BYTES]) -> usize {
    let mut remote = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; STACK_BYTES / PAGE + 1];
    let mut at = sp;
    let mut total = 0usize;
    let mut count = 0usize;
    while total < STACK_BYTES && count < remote.len() {
        let to_page_end = PAGE - (at as usize % PAGE);
        let len = to_page_end.min(STACK_BYTES - total);
        remote[count] = libc::iovec { iov_base: at as *mut c_void, iov_len: len };
        at += len as u64;
        total += len;
        count += 1;
    }
    let local = libc::iovec { iov_base: out.as_mut_ptr().cast(), iov_len: total };
    // Safety: reads this process's own memory into `out` (`total` bytes); the kernel refuses unmapped pages
    // instead of faulting. Async-signal-safe: system calls only.
    let read = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), count as libc::c_ulong, 0) };
    read.max(0) as usize
}

/// Called by the signal handler for a fault whose guard it lifted. Decides whether the access is the program's
/// (not the driver's inside a CUDA call) and queues it. Async-signal-safe.
pub fn note(address: u64, context: *mut c_void, _start: u64, _end: u64) {
    let Some((start, write)) = registers(context) else { return };
    if inflight::in_driver_call() || in_driver_code(start.pc) {
        counters::IGNORED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Some(slot) =
        QUEUE.iter().find(|s| s.state.compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok())
    else {
        counters::DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // Safety: this thread moved the slot to WRITING; nobody else touches it until it is READY.
    let fault = unsafe { &mut *slot.fault.get() };
    // Safety: gettid has no preconditions.
    fault.tid = unsafe { libc::gettid() } as u64;
    fault.time = crate::origin::now_ns();
    fault.address = address;
    fault.write = write;
    fault.host_func = host_funcs::running();
    fault.start = start;
    // Taken out only once the fault has its slot (a dropped fault leaves them for the thread's next record).
    (fault.acquired, fault.acquired_len) = match fault.host_func {
        0 => take_pending_in_signal_handler().unwrap_or(([Pending::NONE; MarkSet::CAPACITY], 0)),
        _ => ([Pending::NONE; MarkSet::CAPACITY], 0),
    };
    fault.stack_len = copy_stack(start.sp, &mut fault.stack);
    slot.state.store(READY, Ordering::Release);
    WAITING.store(true, Ordering::Release);
}

/// In a forked child: the faults queued, and those whose handlers were being written, are the parent's (of
/// threads the child does not have); the parent records them, the child must not.
pub fn forget_queued_after_fork() {
    forget_queued(&QUEUE, &WAITING);
}

fn forget_queued(queue: &[Slot], waiting: &AtomicBool) {
    for slot in queue {
        slot.state.store(FREE, Ordering::Release);
    }
    waiting.store(false, Ordering::Release);
}

/// How many faults wait for the state lock.
pub fn queued() -> usize {
    QUEUE.iter().filter(|s| s.state.load(Ordering::Acquire) == READY).count()
}

/// Hands each queued fault to `record`, oldest first, freeing its slot after; fault_records.rs calls it under
/// the state lock, which makes it the queue's one reader.
pub(super) fn take_queued(mut record: impl FnMut(&Fault)) {
    // A load first: this runs at every recorded call, and a swap would write the line each time.
    if !WAITING.load(Ordering::Acquire) || !WAITING.swap(false, Ordering::AcqRel) {
        return;
    }
    let mut ready: Vec<&Slot> = QUEUE.iter().filter(|s| s.state.load(Ordering::Acquire) == READY).collect();
    // Safety: READY slots are no longer written (see `Slot`).
    ready.sort_by_key(|s| unsafe { (*s.fault.get()).time });
    for slot in ready {
        // Safety: as above; the slot is freed only after this read.
        let fault = unsafe { &*slot.fault.get() };
        record(fault);
        slot.state.store(FREE, Ordering::Release);
    }
}

/// Puts `entries` into `batch` after its last record made at or before `time` (records are in lock order, and
/// a fault waited for the next lock): for a fault of the thread itself (fault_records.rs) and for late records
/// placed among held batches (hold.rs). The declarations after that place come up to it, ahead of `entries`.
pub fn insert_at_time(batch: &mut Batch, time: u64, entries: Vec<Entry>) {
    let at = batch.entries.iter().rposition(|e| e.call.time_ns != 0 && e.call.time_ns <= time).map_or(0, |i| i + 1);
    let mut placed = take_declarations(batch, at);
    placed.extend(entries);
    batch.entries.splice(at..at, placed);
}

/// Takes the declarations (modules, call sites) out of `batch` from entry `from` on, in their order. Records
/// placed by their time can go before records made earlier: a fault queued while an earlier one's handler was
/// still copying its stack is taken first and declares the site (and the module) both share; the earlier one,
/// taken next, belongs before that declaration, which the reader must have seen first. A declaration orders
/// nothing, so it moves up to the late record instead of the record moving down past the thread's later work.
pub(super) fn take_declarations(batch: &mut Batch, from: usize) -> Vec<Entry> {
    let is_declaration = |e: &Entry| matches!(e.record, Record::Module { .. } | Record::Callsite { .. });
    if !batch.entries.iter().skip(from).any(is_declaration) {
        return Vec::new();
    }
    let later: Vec<Entry> = batch.entries.drain(from..).collect();
    let (declarations, rest): (Vec<Entry>, Vec<Entry>) = later.into_iter().partition(is_declaration);
    batch.entries.extend(rest);
    declarations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Call;
    use streamtrace_format::FaultKind;

    fn entry(time: u64) -> Entry {
        Entry { call: Call { tid: 1, time_ns: time, correlation: 0, site: 0 }, record: Record::Event { handle: time } }
    }

    #[test]
    fn late_records_go_after_the_last_record_made_before_them() {
        let mut batch = Batch::default();
        batch.entries.extend([entry(10), entry(20), entry(30)]);
        insert_at_time(&mut batch, 25, vec![entry(25)]);
        insert_at_time(&mut batch, 5, vec![entry(5)]);
        insert_at_time(&mut batch, 40, vec![entry(40)]);
        let times: Vec<u64> = batch.entries.iter().map(|e| e.call.time_ns).collect();
        assert_eq!(times, [5, 10, 20, 25, 30, 40]);
    }

    #[test]
    fn a_late_record_goes_at_its_time_and_the_declarations_it_needs_come_up_to_it() {
        let sited = |time, site, record| Entry { call: Call { tid: 2, time_ns: time, correlation: 0, site }, record };
        let access =
            || Record::HostAccess { address: 0x7000, bytes: 1, write: false, fault: FaultKind::Guard, host_func: 0 };
        let module =
            || Record::Module { path: "/lib/a.so".into(), bias: 0, start: 0x5000, size: 0x1000, build_id: None };
        let site = || Record::Callsite { id: 3, frames: std::sync::Arc::from(&[0x5123u64][..]), python_line: None };
        let mut batch = Batch::default();
        batch.entries.extend([entry(10), entry(20), entry(40)]);
        // The fault at 30 is taken first: it declares its module and site 3 and goes in at its time.
        insert_at_time(&mut batch, 30, vec![sited(30, 0, module()), sited(30, 3, site()), sited(30, 3, access())]);
        // The one at 15, taken next, names site 3 too: it goes in at its time (before the thread's record at 20),
        // and the two declarations come up ahead of it, in their order.
        insert_at_time(&mut batch, 15, vec![sited(15, 3, access())]);
        let kind = |e: &Entry| match e.record {
            Record::Module { .. } => "module",
            Record::Callsite { .. } => "site",
            Record::HostAccess { .. } => "access",
            _ => "other",
        };
        let placed: Vec<(u64, &str)> = batch.entries.iter().map(|e| (e.call.time_ns, kind(e))).collect();
        assert_eq!(
            placed,
            [(10, "other"), (30, "module"), (30, "site"), (15, "access"), (20, "other"), (30, "access"), (40, "other")]
        );
    }

    #[test]
    fn a_forked_child_forgets_the_faults_its_parent_queued() {
        let queue = [EMPTY, EMPTY, EMPTY];
        let waiting = AtomicBool::new(true);
        queue[0].state.store(READY, Ordering::Release);
        queue[2].state.store(WRITING, Ordering::Release);
        forget_queued(&queue, &waiting);
        assert!(queue.iter().all(|slot| slot.state.load(Ordering::Acquire) == FREE));
        assert!(!waiting.load(Ordering::Acquire));
    }

    #[test]
    fn a_copied_stack_stops_at_the_first_page_it_cannot_read() {
        // Safety: two fresh pages; the second is unmapped to make a hole.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as u64;
        // Safety: the test's own pages. The hole is made inaccessible rather than unmapped: an unmapped hole
        // could be mapped again by another test's thread before the copy.
        unsafe {
            *((base + 8) as *mut u64) = 0x5eed;
            libc::mprotect((base + PAGE as u64) as *mut c_void, PAGE, libc::PROT_NONE);
        }
        let mut out = Box::new([0u8; STACK_BYTES]);
        let copied = copy_stack(base + 8, &mut out);
        assert_eq!(copied, PAGE - 8, "up to the hole");
        assert_eq!(u64::from_ne_bytes(out[..8].try_into().unwrap()), 0x5eed);
        // Safety: the test's own pages.
        unsafe { libc::munmap(base as *mut c_void, 2 * PAGE) };
    }
}
