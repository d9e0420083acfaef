//! The handlers of calls.rs: each reads the parameter block of its calls (the one unsafe step: naming the
//! block's layout, params.rs and graph_params.rs) and records in safe code, through the process's state. A file
//! for each family of calls: launches, copies, sets, synchronization (streams, events, queries), memory
//! (allocations and frees), graphs (capture and the graph API), host functions in streams, and the profiler
//! calls that start and stop capture ranges.

pub mod copies;
pub mod graphs;
pub mod host_funcs;
pub mod launches;
pub mod memory;
pub mod profiler;
pub mod sets;
pub mod sync;

/// Reads through an out-parameter of a call that succeeded; None when it is null.
///
/// # Safety
/// `out` is null or points to a `T` the driver wrote (the call returned CUDA_SUCCESS).
unsafe fn written<T: Copy>(out: *const T) -> Option<T> {
    // Safety: the caller vouches for `out`; null is checked by `as_ref`.
    unsafe { out.as_ref() }.copied()
}
