//! What both capture backends do with a driver call once their callback has it: take the state's lock, walk
//! the native call site, find the call's context and device, and hand the call to its handler (calls.rs), on
//! the application's thread and without I/O (a synchronizing call of a forked child drains what is pending: the
//! program is about to wait anyway); outside a capture range, only the calls a later range needs (ranges.rs). Also the guard that keeps the capture's own driver calls unrecorded.
//! Touches the state, the switches and the cost counters.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

use crate::call_kinds::{OutsideRanges, StreamForm};
use crate::calls::CallSpec;
use crate::control::{disable, CALL_SITES};
use crate::cost;
use crate::driver_call::{CallContext, ContextKey, DriverCall};
use crate::fork;
use crate::origin::{now_ns, thread_id};
use crate::record::Call;
use crate::state::{drain_into, state_for_this_process, STATE};
use crate::unwind::Start;

thread_local! {
    /// Set while this thread runs capture code: driver calls the capture makes itself must not be recorded.
    static IN_CAPTURE: Cell<bool> = const { Cell::new(false) };
}

/// This thread is inside the capture until the guard drops.
pub struct ReentryGuard(());

impl ReentryGuard {
    /// None when the thread is inside the capture already (a driver call the capture itself makes).
    pub fn enter() -> Option<ReentryGuard> {
        (!IN_CAPTURE.with(|flag| flag.replace(true))).then_some(ReentryGuard(()))
    }
}

impl Drop for ReentryGuard {
    fn drop(&mut self) {
        IN_CAPTURE.with(|flag| flag.set(false));
    }
}

/// Where a call came from, as the backend's callback data says.
#[derive(Copy, Clone, Debug)]
pub struct CallOrigin {
    /// CUPTI's correlation id (0 where the backend has none).
    pub correlation: u32,
    pub context: ContextKey,
    /// The device of a context handle, asked once per context.
    pub device_of: fn(*mut c_void) -> Option<u32>,
}

/// Records one driver call the backend's callback received, at the site its spec records it. `walk_from` is
/// the callback's own frame: the capture's frames below it are never walked. Catches: the caller is the
/// program's thread inside a driver call.
pub fn record(spec: &CallSpec, data: &DriverCall<'_>, origin: CallOrigin, walk_from: Start) {
    // Outside a capture range the program's work is not looked at (ranges.rs); nor is the stack walked for a
    // call whose record would not be written.
    let in_range = crate::ranges::thread_recording();
    if !in_range && spec.outside == OutsideRanges::Skipped {
        return;
    }
    if !crate::handlers::graphs::records_anything(data) {
        return;
    }
    let walk = in_range || spec.outside == OutsideRanges::Recorded;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: origin.correlation, site: 0 };
        let start = cost::call_started(call.time_ns);
        let sited = walk && CALL_SITES.load(Ordering::Relaxed);
        // Inside a library call (cuBLAS) the program's site is the call's, found when it began. Else a Python
        // program's call outside any op has its line, read before the lock (the observer reads the thread's
        // Python frames).
        let library_site = if sited { crate::library_call::site_for_call() } else { None };
        let python_line = if sited && library_site.is_none() && !crate::framework::inside_op() {
            crate::python_line::current()
        } else {
            None
        };
        let flush = {
            let Ok(mut slot) = cost::lock_wait(|| STATE.lock()) else { return };
            let Some(state) = state_for_this_process(&mut slot) else { return };
            let call = if sited && crate::framework::call_sites_wanted() {
                let site = library_site.unwrap_or_else(|| {
                    let line = python_line.as_ref().map(crate::python_line::PythonLine::as_str);
                    cost::walk(|| state.call_site(call, walk_from, line))
                });
                Call { site, ..call }
            } else {
                call
            };
            let (context, device) = state.context_of(origin.context, origin.device_of);
            let first = state.pending.entries.len();
            (spec.handler)(state, &CallContext::new(call, context, device, spec.stream == StreamForm::PerThread), data);
            crate::host_watch::recorded(state, first);
            // A forked child (a multiprocessing worker) ends in _exit, with no at-exit flush: at each of its
            // synchronizations, where it is about to wait anyway, it writes what is pending, so that it loses
            // nothing recorded before its last one. Other processes leave that to the writer thread and the
            // at-exit flush: a training loop synchronizes several times a step (DDP did six), and each drain
            // cost the program's thread tens of microseconds.
            (spec.host_waits() && fork::in_forked_child()).then(|| state.writer.handle())
        };
        if let Some(writer) = flush {
            drain_into(&writer);
            // And the online analyzer has it too (its sender thread would die with the child unheard).
            if let Ok(file) = writer.lock() {
                file.flush_stream();
            };
        }
        cost::call_recorded(start, spec.id);
    }));
    if outcome.is_err() {
        disable("an internal error in the capture library");
    }
}

/// Whether the calling thread's CUDA calls are recorded now (the capture on, inside a capture range if any).
pub fn recording_here() -> bool {
    crate::control::ENABLED.load(Ordering::Relaxed) && crate::ranges::thread_recording()
}

/// The program's call site of a library call the capture stands in front of (cublas.rs), walked from `start`,
/// the stand-in's own frame, with the calling thread's Python line; 0 where the capture records no call site
/// for it now (off, outside a capture range, inside a framework op, nothing found). Catches, as [`record`] does:
/// the caller is the program's thread.
pub fn site_of_library_call(start: Start) -> u32 {
    if !recording_here() || !CALL_SITES.load(Ordering::Relaxed) || !crate::framework::call_sites_wanted() {
        return 0;
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let python_line = crate::python_line::current();
        let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: 0, site: 0 };
        let Ok(mut slot) = cost::lock_wait(|| STATE.lock()) else { return 0 };
        let Some(state) = state_for_this_process(&mut slot) else { return 0 };
        let line = python_line.as_ref().map(crate::python_line::PythonLine::as_str);
        cost::walk(|| state.call_site(call, start, line))
    }));
    outcome.unwrap_or_else(|_| {
        disable("an internal error in the capture library");
        0
    })
}
