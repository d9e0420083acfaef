//! NCCL's collective and point-to-point calls, stood in front of when the capture library is preloaded: what
//! each call reads and writes, by NCCL's own definition of it, handed to the NCCL kernels that carry it out.
//!
//! An NCCL kernel takes one argument, a struct of work descriptors, so its launch names none of the program's
//! buffers: without this, a native program's `ncclAllReduce` reads and writes nothing the analysis can see, and
//! a kernel that reads the result on another stream before the collective is done is no race. Each call here
//! works out its buffers' byte ranges (counts, element size, the communicator's size and the caller's rank) and
//! passes the call on; the ranges wait until the NCCL kernels that carry the call out are launched, which is
//! inside the call itself, or inside the `ncclGroupEnd` that closes the group it was made in (NCCL launches a
//! group's kernels there), and are taken by every NCCL kernel launched meanwhile on the communicator's device.
//! A communicator created non-blocking may launch after `ncclGroupEnd` returns (`ncclInProgress`): its ranges
//! wait for the next NCCL kernel on that device, from any thread.
//!
//! Inside a framework op (PyTorch's c10d collectives) the op's extents already stand for its kernels' accesses:
//! nothing is kept there. Calls the program makes to an NCCL linked into itself never reach these functions.
//! Touches libc's dynamic loader functions, the framework's open ops and, through the process state, the
//! kernel records of NCCL's launches.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::call_buffers::Buffers;
use crate::stand_in::{quietly, say_missing};

/// NCCL's `ncclResult_t` values this file returns or looks for.
const NCCL_SUCCESS: c_int = 0;
const NCCL_INTERNAL_ERROR: c_int = 3;
const NCCL_IN_PROGRESS: c_int = 7;

/// The bytes of one element of NCCL's `ncclDataType_t` (nccl.h: int8, uint8, int32, uint32, int64, uint64,
/// half, float, double, bfloat16, and the two fp8 types); None for a type this table does not know.
pub fn element_bytes(datatype: c_int) -> Option<u64> {
    Some(match datatype {
        0 | 1 | 10 | 11 => 1,
        6 | 9 => 2,
        2 | 3 | 7 => 4,
        4 | 5 | 8 => 8,
        _ => return None,
    })
}

/// A collective or point-to-point call, with the counts it was given.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// `ncclAllReduce(send, recv, count)`: every rank reads `count` and writes `count`.
    AllReduce { send: u64, recv: u64, count: u64 },
    /// `ncclReduce(send, recv, count, root)`: every rank reads `count`; the root writes `count`.
    Reduce { send: u64, recv: u64, count: u64, root: i32 },
    /// `ncclBroadcast(send, recv, count, root)`: the root reads `count`; every rank writes `count` (the root's
    /// copy too, unless in place). `ncclBcast(buff, ...)` is this with both buffers the same.
    Broadcast { send: u64, recv: u64, count: u64, root: i32 },
    /// `ncclAllGather(send, recv, sendcount)`: reads `sendcount`, writes `sendcount` times the ranks.
    AllGather { send: u64, recv: u64, count: u64 },
    /// `ncclReduceScatter(send, recv, recvcount)`: reads `recvcount` times the ranks, writes `recvcount`.
    ReduceScatter { send: u64, recv: u64, count: u64 },
    /// `ncclAlltoAll(send, recv, count)`: `count` to and from each rank, so both hold `count` times the ranks.
    AlltoAll { send: u64, recv: u64, count: u64 },
    /// `ncclGather(send, recv, count, root)`: reads `count`; the root writes `count` times the ranks.
    Gather { send: u64, recv: u64, count: u64, root: i32 },
    /// `ncclScatter(send, recv, count, root)`: the root reads `count` times the ranks; every rank writes `count`.
    Scatter { send: u64, recv: u64, count: u64, root: i32 },
    /// `ncclSend(send, count, peer)`: reads `count`.
    Send { send: u64, count: u64 },
    /// `ncclRecv(recv, count, peer)`: writes `count`.
    Recv { recv: u64, count: u64 },
}

impl Transfer {
    /// What this call reads and writes on the rank `rank` of `ranks`, with elements of `element` bytes.
    pub fn buffers(self, element: u64, ranks: u64, rank: i32) -> Buffers {
        let bytes = |count: u64| count.saturating_mul(element);
        let all = |count: u64| count.saturating_mul(element).saturating_mul(ranks);
        let mut b = Buffers::default();
        match self {
            Transfer::AllReduce { send, recv, count } => {
                b.read(send, bytes(count));
                b.write(recv, bytes(count));
            }
            Transfer::Reduce { send, recv, count, root } => {
                b.read(send, bytes(count));
                if rank == root {
                    b.write(recv, bytes(count));
                }
            }
            Transfer::Broadcast { send, recv, count, root } => {
                if rank == root {
                    b.read(send, bytes(count));
                    if send != recv {
                        b.write(recv, bytes(count));
                    }
                } else {
                    b.write(recv, bytes(count));
                }
            }
            Transfer::AllGather { send, recv, count } => {
                b.read(send, bytes(count));
                b.write(recv, all(count));
            }
            Transfer::ReduceScatter { send, recv, count } => {
                b.read(send, all(count));
                b.write(recv, bytes(count));
            }
            Transfer::AlltoAll { send, recv, count } => {
                b.read(send, all(count));
                b.write(recv, all(count));
            }
            Transfer::Gather { send, recv, count, root } => {
                b.read(send, bytes(count));
                if rank == root {
                    b.write(recv, all(count));
                }
            }
            Transfer::Scatter { send, recv, count, root } => {
                if rank == root {
                    b.read(send, all(count));
                }
                b.write(recv, bytes(count));
            }
            Transfer::Send { send, count } => b.read(send, bytes(count)),
            Transfer::Recv { recv, count } => b.write(recv, bytes(count)),
        }
        b
    }
}

/// Calls whose kernels are being launched: the calling thread's, until the call (or its group's end) returns;
/// a non-blocking communicator's, until an NCCL kernel on its device takes them.
struct Launching {
    tid: u64,
    device: i32,
    buffers: Buffers,
    /// Made by a call that returned `ncclInProgress`: any thread's next NCCL kernel on the device takes it.
    in_progress: bool,
}

static LAUNCHING: Mutex<Vec<Launching>> = Mutex::new(Vec::new());
/// How many entries LAUNCHING holds, read without its lock by every NCCL launch.
static LAUNCHING_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The calling thread's open `ncclGroupStart`s and the calls made inside them (each with its communicator's
/// device), launched when the outermost closes.
struct OpenGroups {
    depth: u32,
    calls: Vec<(i32, Buffers)>,
}

thread_local! {
    static GROUP: RefCell<OpenGroups> = const { RefCell::new(OpenGroups { depth: 0, calls: Vec::new() }) };
}

thread_local! {
    /// Set while the thread is inside one of these stand-ins: NCCL calls its own exported functions through its
    /// PLT (`ncclBcast` calls `ncclBroadcast`), which must not count the call twice.
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Enters a stand-in: whether this is the outermost (the program's own call), which does the bookkeeping.
fn enter() -> bool {
    !INSIDE.try_with(|inside| inside.replace(true)).unwrap_or(true)
}

/// Leaves the outermost stand-in.
fn leave() {
    let _ = INSIDE.try_with(|inside| inside.set(false));
}

fn launching() -> std::sync::MutexGuard<'static, Vec<Launching>> {
    LAUNCHING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The ranges the NCCL kernel that thread `tid` launches now on `device` carries out: those of the calls that
/// thread is inside (or closing the group of) on that device, and those a non-blocking communicator left there
/// (taken now). None when there are none, nearly always found without a lock.
pub fn buffers_for_launch(tid: u64, device: Option<u32>) -> Option<Buffers> {
    if LAUNCHING_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let device = device.and_then(|d| i32::try_from(d).ok())?;
    let mut table = launching();
    let mut found = Buffers::default();
    table.retain(|entry| {
        if entry.device != device {
            return true;
        }
        if entry.in_progress {
            found.extend(&entry.buffers);
            return false;
        }
        if entry.tid == tid {
            found.extend(&entry.buffers);
        }
        true
    });
    LAUNCHING_COUNT.store(table.len(), Ordering::Relaxed);
    (!found.is_empty()).then_some(found)
}

/// The ranges of `transfer` on `comm`'s rank, and the CUDA device the communicator is on; None inside a
/// framework op, or where NCCL does not answer.
fn buffers_of(transfer: Transfer, datatype: c_int, comm: *mut c_void) -> Option<(i32, Buffers)> {
    if crate::framework::inside_op() {
        return None;
    }
    let element = element_bytes(datatype)?;
    let (mut ranks, mut rank, mut device) = (0 as c_int, 0 as c_int, -1 as c_int);
    // Safety: NCCL's own getters, each given the program's communicator and a local to fill.
    unsafe {
        if real::ncclCommCount()?(comm, &mut ranks) != NCCL_SUCCESS
            || real::ncclCommUserRank()?(comm, &mut rank) != NCCL_SUCCESS
            || real::ncclCommCuDevice()?(comm, &mut device) != NCCL_SUCCESS
        {
            return None;
        }
    }
    Some((device, transfer.buffers(element, u64::try_from(ranks).ok()?, rank)))
}

/// Before a call: inside a group, its ranges join the group's; outside one, they are launching until it
/// returns. Returns whether a launching entry was added.
fn before_call(transfer: Transfer, datatype: c_int, comm: *mut c_void) -> bool {
    quietly(|| {
        let mut call = buffers_of(transfer, datatype, comm);
        let _ = GROUP.try_with(|group| {
            if let Ok(mut group) = group.try_borrow_mut() {
                if group.depth > 0 {
                    group.calls.extend(call.take());
                }
            }
        });
        let Some(call) = call else { return false };
        add_launching(vec![call]);
        true
    })
}

fn add_launching(calls: Vec<(i32, Buffers)>) {
    let tid = crate::origin::thread_id();
    let mut table = launching();
    table.extend(calls.into_iter().map(|(device, buffers)| Launching { tid, device, buffers, in_progress: false }));
    LAUNCHING_COUNT.store(table.len(), Ordering::Relaxed);
}

/// After a call whose ranges were launching: dropped, unless NCCL launches later (`ncclInProgress`).
fn after_call(added: bool, result: c_int) {
    if !added {
        return;
    }
    quietly(|| {
        let tid = crate::origin::thread_id();
        let mut table = launching();
        if result == NCCL_IN_PROGRESS {
            for entry in table.iter_mut().filter(|entry| entry.tid == tid) {
                entry.in_progress = true;
            }
        } else {
            table.retain(|entry| entry.tid != tid || entry.in_progress);
        }
        LAUNCHING_COUNT.store(table.len(), Ordering::Relaxed);
    });
}

/// NCCL's own functions that the bookkeeping and the group stand-ins call, found even where NCCL was loaded
/// outside the global scope.
mod real {
    use super::*;

    type Comm = *mut c_void;

    crate::next_symbol::real_functions! { found anywhere:
        ncclCommCount: fn(Comm, *mut c_int) -> c_int;
        ncclCommUserRank: fn(Comm, *mut c_int) -> c_int;
        ncclCommCuDevice: fn(Comm, *mut c_int) -> c_int;
        ncclGroupStart: fn() -> c_int;
        ncclGroupEnd: fn() -> c_int;
        ncclGroupSimulateEnd: fn(*mut c_void) -> c_int;
    }
}

/// What a call of `name` returns where no NCCL defines it: NCCL's "internal error", said once.
fn missing(name: &str) -> c_int {
    static SAID: std::sync::Once = std::sync::Once::new();
    say_missing(&SAID, "NCCL", name, "NCCL's internal error");
    NCCL_INTERNAL_ERROR
}

/// Exports each call in front of NCCL's: its ranges are worked out from the arguments named in brackets (its
/// data type and communicator) by the `Transfer` after `=>`, then the call is passed on to NCCL's function of the
/// same name (`real_calls::NAME`, found as `real`'s are).
macro_rules! stand_in_front {
    ($($name:ident($($arg:ident: $ty:ty),*) [$datatype:ident, $comm:ident] => $transfer:expr;)*) => {
        mod real_calls {
            use super::*;
            crate::next_symbol::real_functions! { found anywhere: $($name: fn($($ty),*) -> c_int;)* }
        }
        $(
            #[doc = concat!("`", stringify!($name), "`, in front of NCCL's.")]
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub extern "C-unwind" fn $name($($arg: $ty),*) -> c_int {
                let outermost = enter();
                let added = outermost && before_call($transfer, $datatype, $comm);
                let result = match real_calls::$name() {
                    // Safety: NCCL's function of this name, given the program's own arguments.
                    Some(real) => unsafe { real($($arg),*) },
                    None => missing(stringify!($name)),
                };
                after_call(added, result);
                if outermost {
                    leave();
                }
                result
            }
        )*
    };
}

type Comm = *mut c_void;
type Stream = *mut c_void;
type Send = *const c_void;
type Recv = *mut c_void;

// The counts are elements; `nccl.h` declares each.
stand_in_front! {
    ncclAllReduce(send: Send, recv: Recv, count: usize, dtype: c_int, op: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::AllReduce { send: send as u64, recv: recv as u64, count: count as u64 };
    ncclReduce(send: Send, recv: Recv, count: usize, dtype: c_int, op: c_int, root: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Reduce { send: send as u64, recv: recv as u64, count: count as u64, root };
    ncclBroadcast(send: Send, recv: Recv, count: usize, dtype: c_int, root: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Broadcast { send: send as u64, recv: recv as u64, count: count as u64, root };
    // The in-place broadcast.
    ncclBcast(buffer: Recv, count: usize, dtype: c_int, root: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Broadcast { send: buffer as u64, recv: buffer as u64, count: count as u64, root };
    ncclAllGather(send: Send, recv: Recv, count: usize, dtype: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::AllGather { send: send as u64, recv: recv as u64, count: count as u64 };
    ncclReduceScatter(send: Send, recv: Recv, count: usize, dtype: c_int, op: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::ReduceScatter { send: send as u64, recv: recv as u64, count: count as u64 };
    // NCCL 2.28 and later.
    ncclAlltoAll(send: Send, recv: Recv, count: usize, dtype: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::AlltoAll { send: send as u64, recv: recv as u64, count: count as u64 };
    ncclGather(send: Send, recv: Recv, count: usize, dtype: c_int, root: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Gather { send: send as u64, recv: recv as u64, count: count as u64, root };
    ncclScatter(send: Send, recv: Recv, count: usize, dtype: c_int, root: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Scatter { send: send as u64, recv: recv as u64, count: count as u64, root };
    ncclSend(send: Send, count: usize, dtype: c_int, peer: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Send { send: send as u64, count: count as u64 };
    ncclRecv(recv: Recv, count: usize, dtype: c_int, peer: c_int, comm: Comm, stream: Stream)
        [dtype, comm] => Transfer::Recv { recv: recv as u64, count: count as u64 };
}

/// `ncclGroupStart`, in front of NCCL's: the calls up to the matching end are launched there.
#[no_mangle]
pub extern "C-unwind" fn ncclGroupStart() -> c_int {
    let outermost = enter();
    // Safety: NCCL's function, which takes nothing.
    let result = real::ncclGroupStart().map_or_else(|| missing("ncclGroupStart"), |f| unsafe { f() });
    if outermost {
        if result == NCCL_SUCCESS {
            let _ = GROUP.try_with(|group| {
                if let Ok(mut group) = group.try_borrow_mut() {
                    group.depth = group.depth.saturating_add(1);
                }
            });
        }
        leave();
    }
    result
}

/// Closes one level of the thread's groups; the calls of the outermost, once it closes.
fn close_group() -> Vec<(i32, Buffers)> {
    quietly(|| {
        GROUP
            .try_with(|group| {
                let Ok(mut group) = group.try_borrow_mut() else { return Vec::new() };
                group.depth = group.depth.saturating_sub(1);
                if group.depth == 0 {
                    std::mem::take(&mut group.calls)
                } else {
                    Vec::new()
                }
            })
            .unwrap_or_default()
    })
}

/// `ncclGroupEnd`, in front of NCCL's: closing the outermost group launches its calls' kernels.
#[no_mangle]
pub extern "C-unwind" fn ncclGroupEnd() -> c_int {
    let outermost = enter();
    let calls = if outermost { close_group() } else { Vec::new() };
    let added = !calls.is_empty();
    if added {
        quietly(|| add_launching(calls));
    }
    // Safety: NCCL's function, which takes nothing.
    let result = real::ncclGroupEnd().map_or_else(|| missing("ncclGroupEnd"), |f| unsafe { f() });
    after_call(added, result);
    if outermost {
        leave();
    }
    result
}

/// `ncclGroupSimulateEnd`, in front of NCCL's: it closes the group as `ncclGroupEnd` does, launching nothing, so
/// the calls made in it are dropped.
#[no_mangle]
pub extern "C-unwind" fn ncclGroupSimulateEnd(info: *mut c_void) -> c_int {
    let outermost = enter();
    if outermost {
        drop(close_group());
    }
    // Safety: NCCL's function, given the program's own argument.
    let result = real::ncclGroupSimulateEnd().map_or_else(|| missing("ncclGroupSimulateEnd"), |f| unsafe { f(info) });
    if outermost {
        leave();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    use streamtrace_format::ByteRuns;

    fn run(first: u64, len: u64) -> ByteRuns {
        ByteRuns { first, len, step: 0, count: 1 }
    }

    #[test]
    fn each_call_reads_and_writes_what_nccl_defines_on_its_rank() {
        let (send, recv) = (0x1000, 0x9000);
        let on = |transfer: Transfer, rank| transfer.buffers(4, 4, rank);
        let b = on(Transfer::AllReduce { send, recv, count: 10 }, 1);
        assert_eq!((b.reads, b.writes), (vec![run(send, 40)], vec![run(recv, 40)]));
        // Only the root of a reduce writes; every rank of a gather reads its part, the root writes them all.
        assert!(on(Transfer::Reduce { send, recv, count: 10, root: 0 }, 1).writes.is_empty());
        assert_eq!(on(Transfer::Reduce { send, recv, count: 10, root: 1 }, 1).writes, vec![run(recv, 40)]);
        let b = on(Transfer::Gather { send, recv, count: 10, root: 2 }, 2);
        assert_eq!((b.reads, b.writes), (vec![run(send, 40)], vec![run(recv, 160)]));
        let b = on(Transfer::Scatter { send, recv, count: 10, root: 2 }, 0);
        assert_eq!((b.reads, b.writes), (vec![], vec![run(recv, 40)]));
        // The ranks multiply the gathered and scattered side.
        let b = on(Transfer::AllGather { send, recv, count: 10 }, 0);
        assert_eq!((b.reads, b.writes), (vec![run(send, 40)], vec![run(recv, 160)]));
        let b = on(Transfer::ReduceScatter { send, recv, count: 10 }, 0);
        assert_eq!((b.reads, b.writes), (vec![run(send, 160)], vec![run(recv, 40)]));
        let b = on(Transfer::AlltoAll { send, recv, count: 10 }, 3);
        assert_eq!((b.reads, b.writes), (vec![run(send, 160)], vec![run(recv, 160)]));
        // A broadcast's root reads; the others write; an in-place root (ncclBcast) writes nothing of its own.
        let b = on(Transfer::Broadcast { send, recv: send, count: 10, root: 0 }, 0);
        assert_eq!((b.reads, b.writes), (vec![run(send, 40)], vec![]));
        let b = on(Transfer::Broadcast { send, recv, count: 10, root: 0 }, 3);
        assert_eq!((b.reads, b.writes), (vec![], vec![run(recv, 40)]));
        assert_eq!(on(Transfer::Send { send, count: 10 }, 0).reads, vec![run(send, 40)]);
        assert_eq!(on(Transfer::Recv { recv, count: 10 }, 0).writes, vec![run(recv, 40)]);
        // No buffer, or nothing to move: no range.
        assert!(on(Transfer::Recv { recv: 0, count: 10 }, 0).is_empty());
        assert!(on(Transfer::Send { send, count: 0 }, 0).is_empty());
    }

    #[test]
    fn only_the_outermost_stand_in_keeps_books() {
        // ncclBcast's own call of ncclBroadcast (NCCL's PLT) comes back here inside it.
        assert!(enter(), "the program's call");
        assert!(!enter(), "NCCL's call of its own exported function");
        leave();
        assert!(enter(), "the next call of the program");
        leave();
    }

    #[test]
    fn element_sizes_follow_nccl_h() {
        let sizes: Vec<_> = (0..12).map(element_bytes).collect();
        let expected = [1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1].map(Some);
        assert_eq!(sizes, expected);
        assert_eq!(element_bytes(12), None);
    }

    #[test]
    fn a_launch_takes_its_threads_calls_on_its_device_and_what_a_non_blocking_communicator_left() {
        let buffers = |address| Buffers { reads: vec![run(address, 8)], writes: vec![] };
        {
            let mut table = launching();
            table.clear();
            table.push(Launching { tid: 1, device: 0, buffers: buffers(0x100), in_progress: false });
            table.push(Launching { tid: 1, device: 1, buffers: buffers(0x200), in_progress: false });
            table.push(Launching { tid: 2, device: 0, buffers: buffers(0x300), in_progress: false });
            table.push(Launching { tid: 3, device: 0, buffers: buffers(0x400), in_progress: true });
            LAUNCHING_COUNT.store(table.len(), Ordering::Relaxed);
        }
        let taken = buffers_for_launch(1, Some(0)).expect("thread 1's call on device 0");
        assert_eq!(taken.reads, vec![run(0x100, 8), run(0x400, 8)]);
        // The in-progress entry was taken; thread 1's stays until its call returns.
        assert_eq!(buffers_for_launch(1, Some(0)).map(|b| b.reads), Some(vec![run(0x100, 8)]));
        assert_eq!(buffers_for_launch(4, Some(0)), None);
        assert_eq!(buffers_for_launch(1, None), None);
        launching().clear();
        LAUNCHING_COUNT.store(0, Ordering::Relaxed);
    }
}
