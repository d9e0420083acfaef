//! The library call (a cuBLAS routine, cublas.rs) the calling thread is inside: the ranges it reads and writes,
//! which the kernels it launches take (process_state.rs), and the call site of the program's call, which they
//! take too (recording.rs) rather than walk through the library's own frames. Touches a thread-local and one
//! atomic counter.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::call_buffers::Buffers;

/// What an open call says of the kernels launched inside it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenCall {
    /// None where the call's operands could not be described: its kernels keep their pointer words.
    pub buffers: Option<Buffers>,
    /// The program's call site of the call (0: none).
    pub site: u32,
}

thread_local! {
    static OPEN: RefCell<Option<OpenCall>> = const { RefCell::new(None) };
}

/// How many threads are inside such a call, read without a lock by every launch.
static OPEN_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The calling thread enters `call`; returns whether it was kept (a thread-local being torn down keeps nothing),
/// which [`close`] then needs.
pub fn open(call: OpenCall) -> bool {
    let kept = OPEN.try_with(|open| open.try_borrow_mut().map(|mut slot| *slot = Some(call)).is_ok());
    if kept == Ok(true) {
        OPEN_CALLS.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    false
}

/// The calling thread leaves the call it entered (`kept`: what [`open`] returned).
pub fn close(kept: bool) {
    if kept {
        let _ = OPEN.try_with(|open| open.try_borrow_mut().map(|mut slot| *slot = None));
        OPEN_CALLS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads the calling thread's open call, if any (nearly always answered by one atomic load).
fn with_open<T>(read: impl FnOnce(&OpenCall) -> Option<T>) -> Option<T> {
    if OPEN_CALLS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    OPEN.try_with(|open| open.try_borrow().ok().and_then(|open| open.as_ref().and_then(read))).ok().flatten()
}

/// The ranges of the call the calling thread is inside, for a kernel it launches now.
pub fn buffers_for_launch() -> Option<Buffers> {
    with_open(|call| call.buffers.clone())
}

/// The program's call site of the call the calling thread is inside, for a CUDA call it makes now.
pub fn site_for_call() -> Option<u32> {
    with_open(|call| (call.site != 0).then_some(call.site))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_inside_a_call_sees_its_ranges_and_site_until_it_leaves() {
        assert_eq!((buffers_for_launch(), site_for_call()), (None, None));
        let mut buffers = Buffers::default();
        buffers.read(0x1000, 64);
        let kept = open(OpenCall { buffers: Some(buffers.clone()), site: 7 });
        assert!(kept);
        assert_eq!((buffers_for_launch(), site_for_call()), (Some(buffers), Some(7)));
        // Another thread is inside nothing.
        std::thread::spawn(|| assert_eq!((buffers_for_launch(), site_for_call()), (None, None))).join().unwrap();
        close(kept);
        assert_eq!((buffers_for_launch(), site_for_call()), (None, None));
        // A call that named no ranges and found no site.
        let kept = open(OpenCall::default());
        assert_eq!((buffers_for_launch(), site_for_call()), (None, None));
        close(kept);
    }
}
