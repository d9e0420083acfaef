//! The streamtrace capture library, injected into a CUDA program through `CUDA_INJECTION64_PATH`.
//!
//! The CUDA driver calls [`InitializeInjection`] while it initializes. The library subscribes one backend to
//! the driver calls that order or touch memory (calls.rs, one table): CUPTI's callbacks by default (cupti.rs,
//! tier T1), or the Compute Sanitizer API's for `--exact` (sanitizer/, tier T3: it also patches every kernel to
//! learn the bytes it touched). Both hand each call to recording.rs, whose handlers (handlers/) turn it into
//! records of the streamtrace trace format (process_state.rs, record.rs) for a writer thread (writer.rs). The PyTorch bootstrap adds its records through the `streamtrace_framework_*` functions.
//! The host watch (host_watch/: guarded pinned pages, managed-memory faults) adds the host's own accesses of memory the GPU touches;
//! preloaded, the library also exports signal functions that keep its fault handler first (host_watch/signals.rs).
//! This file holds only the exported entry points.
//!
//! Capture must never change what the program does: nothing panics or unwinds across the FFI boundary (every
//! entry point catches), and any setup failure (no CUPTI, another CUPTI client such as nsys or ncu already
//! subscribed) is said once on standard error while the program runs on untouched.

#![deny(unsafe_op_in_unsafe_fn)]

mod activity;
pub mod args;
mod at_exit;
mod call_buffers;
mod call_kinds;
pub mod calls;
mod control;
mod cost;
mod cublas;
mod cupti;
mod cupti_owner;
pub mod driver_call;
mod fork;
mod frame_lines;
mod framework;
#[cfg(test)]
mod framework_entry_tests;
mod functions;
pub mod graph_params;
pub mod graph_record;
mod handlers;
mod host_sync;
pub mod host_watch;
mod kernel_name;
mod library_call;
#[cfg(test)]
mod live_capture_tests;
mod nccl;
mod next_symbol;
mod nvtx;
mod origin;
pub mod params;
mod pitched;
mod process_state;
mod python_line;
pub mod ranges;
pub mod record;
mod recording;
mod sanitizer;
mod setup;
pub mod signature;
pub mod sites;
mod stand_in;
mod state;
pub mod stream_sink;
mod thread_knowledge;
pub mod unwind;
mod watch_state;
pub mod writer;

use std::sync::atomic::Ordering;

use control::{say_once, ENABLED};
use origin::{now_ns, thread_id};
use process_state::ProcessState;
use record::Call;
use state::{started_here, state_for_this_process, STATE};

/// Whether the program's work is being recorded on the calling thread now: 1 inside a capture range (or when
/// the whole run is recorded), 0 outside ranges. The PyTorch observer asks before it reads an op's tensors, whose
/// records would not be written.
#[no_mangle]
pub extern "C" fn streamtrace_recording() -> i32 {
    (ENABLED.load(Ordering::Relaxed) && ranges::thread_recording()) as i32
}

/// Entry point the CUDA driver calls for a library named in `CUDA_INJECTION64_PATH`. Returns 1 (success) in every
/// case: a failed capture must not fail the program's CUDA initialization.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> i32 {
    if std::env::var_os(streamtrace_format::launch::ENV_DISABLE).is_some() {
        return 1;
    }
    cupti_owner::injected();
    match std::panic::catch_unwind(|| cost::setup(setup::initialize)) {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => say_once(&reason),
        Err(_) => {
            cupti_owner::capture_could_not_subscribe();
            say_once("an internal error while setting up CUPTI");
        }
    }
    1
}

/// Whether host memory at `address` is pinned, by the blocks the capture saw allocated and registered: 1 pinned,
/// 0 not, -1 when the capture cannot say (not recording). The PyTorch observer asks it of every CPU tensor an op
/// takes, instead of the driver (`isPinnedPtr` makes several driver calls each time). A process that recorded
/// nothing yet pinned nothing the capture saw: it is answered without starting its trace (a forked DataLoader
/// worker asks for every CPU tensor it batches, and would leave a trace of nothing, cut short by its `_exit`).
#[no_mangle]
pub extern "C" fn streamtrace_host_memory_pinned(address: u64) -> i32 {
    if !ENABLED.load(Ordering::Relaxed) {
        return -1;
    }
    let outcome = std::panic::catch_unwind(|| {
        let Ok(mut slot) = STATE.lock() else { return -1 };
        match started_here(&mut slot) {
            Some(state) => i32::from(state.recorded_memory_at(address) == Some(streamtrace_format::MemoryKind::Pinned)),
            None => 0,
        }
    });
    outcome.unwrap_or(-1)
}

/// Records one framework record (a JSON object such as a PyTorch op's `op_end`, without a `thread` field: the
/// calling thread's is added) in order with the CUDA calls around it. Called by the Python bootstrap through
/// ctypes. Returns 0 when recorded, -1 otherwise.
///
/// # Safety
/// `text` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn streamtrace_framework_record(text: *const u8, len: usize) -> i32 {
    if !ENABLED.load(Ordering::Relaxed) || text.is_null() {
        return -1;
    }
    // Safety: the caller passes `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(text, len) };
    match std::str::from_utf8(bytes) {
        Ok(line) if line.trim_start().starts_with('{') => {
            // Outside a capture range only the allocator's blocks and creation lines are written (ranges.rs).
            if ranges::in_use() && !ranges::keeps_framework_record(ranges::FrameworkRecord::of(line)) {
                return -1;
            }
            framework_record(|call, state| state.push_framework_record(call, line).map_or(-1, |()| 0))
        }
        _ => -1,
    }
}

/// Registers the framework observer's reader of the calling thread's Python line (python_line.rs), with which
/// the native call site of a CUDA call made outside any op also names the Python line that made it; null
/// forgets it. Called by the Python bootstrap once its native observer is loaded. Returns 0.
#[no_mangle]
pub extern "C" fn streamtrace_framework_python_lines(reader: Option<python_line::LineReader>) -> i32 {
    python_line::register(reader);
    0
}

/// Marks the start of a framework operation on the calling thread: its CUDA calls follow, then its `op_end`.
/// A separate entry point with no argument, because it is made once per PyTorch op. Its `op_begin` is written
/// before the first record made inside it (framework.rs), so that an op that records nothing costs no lock.
/// Returns 0 when the op is recorded.
#[no_mangle]
pub extern "C" fn streamtrace_framework_op_begin() -> i32 {
    op_begin(true)
}

/// As [`streamtrace_framework_op_begin`], for an op whose own record says where its CUDA calls come from (a
/// PyTorch op with its Python line, or one of PyTorch's own, whose native frames are PyTorch's): until the op's
/// end ([`streamtrace_framework_op_end`]) the calling thread's CUDA calls get no native call site, which saves
/// the stack walk on each of them. Returns 0 when the op is recorded.
#[no_mangle]
pub extern "C" fn streamtrace_framework_op_begin_unsited() -> i32 {
    op_begin(false)
}

/// Begins an op on the calling thread; `sited`: whether its CUDA calls want their native call sites.
fn op_begin(sited: bool) -> i32 {
    if !ENABLED.load(Ordering::Relaxed) {
        return -1;
    }
    // An op begun outside a capture range is left out whole, its kernels too (ranges.rs).
    let written = ranges::frame_began();
    framework::op_began(sited, written);
    if written {
        0
    } else {
        -1
    }
}

/// Records an op's `op_end` record (as [`streamtrace_framework_record`]; its `op_begin` first, if the op
/// recorded nothing before) and ends the op on the calling thread: its CUDA calls get native call sites again.
/// Returns 0 when recorded, -1 otherwise.
///
/// # Safety
/// `text` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn streamtrace_framework_op_end(text: *const u8, len: usize) -> i32 {
    // Safety: passed on from the caller.
    let recorded = unsafe { streamtrace_framework_record(text, len) };
    framework::op_ended();
    recorded
}

/// Whether the innermost framework op open on the calling thread has recorded anything (a CUDA call, a block
/// of the allocator): 1 yes, 0 not yet (ended now by [`streamtrace_framework_op_close`], nothing of it is
/// written), -1 when no op is open or the capture is off. The PyTorch observer asks at an op's end, before it
/// builds the op's record and finds its Python line.
#[no_mangle]
pub extern "C" fn streamtrace_framework_op_recorded() -> i32 {
    if !ENABLED.load(Ordering::Relaxed) {
        return -1;
    }
    match framework::innermost_written() {
        Some(true) => 1,
        Some(false) => 0,
        None => -1,
    }
}

/// Ends the innermost framework op on the calling thread without a record of its own: one that recorded
/// nothing leaves nothing in the trace. One that did (the caller did not ask first) gets an `op_end` with empty
/// sets, so that its frame still closes. Returns 0.
#[no_mangle]
pub extern "C" fn streamtrace_framework_op_close() -> i32 {
    if framework::innermost_written() == Some(true) {
        const EMPTY_END: &[u8] = br#"{"type":"op_end","reads":[],"writes":[]}"#;
        // Safety: a static text of that length.
        unsafe { streamtrace_framework_op_end(EMPTY_END.as_ptr(), EMPTY_END.len()) };
        return 0;
    }
    // Its range frame ends with it (ranges.rs keeps one per op, written or not).
    ranges::frame_ended();
    framework::op_ended();
    0
}

/// Records a framework record for the calling thread through `add`, in order with its CUDA calls; returns what
/// `add` returns (0: recorded). Catches: the caller is the program's Python.
fn framework_record(add: impl FnOnce(Call, &mut ProcessState) -> i32 + std::panic::UnwindSafe) -> i32 {
    let outcome = std::panic::catch_unwind(|| {
        let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: 0, site: 0 };
        let Ok(mut slot) = cost::lock_wait(|| STATE.lock()) else { return -1 };
        let Some(state) = state_for_this_process(&mut slot) else { return -1 };
        add(call, state)
    });
    outcome.unwrap_or(-1)
}
