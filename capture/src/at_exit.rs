//! At exit: the last GPU times and managed faults, the `host_watch` and `capture_stats` records, the source
//! lines of the call sites (frame_lines.rs), and every record not yet written (also those the host watch held
//! back). Registered with
//! atexit by setup.rs; touches the state, its drain and CUPTI's activity buffers.

use std::sync::atomic::Ordering;

use crate::activity;
use crate::control::GPU_TIMES;
use crate::cost::capture_stats;
use crate::origin::{now_ns, thread_id};
use crate::record::Call;
use crate::state::{drain_into, started_here, STATE};

/// Writes out everything recorded, at exit.
pub extern "C" fn flush_at_exit() {
    if GPU_TIMES.load(Ordering::Relaxed) || crate::host_watch::managed_faults::watching() {
        // First, outside the state lock: CUPTI hands over its last buffers, whose GPU times join activity.rs's
        // queue and so the drain below.
        let _ = std::panic::catch_unwind(activity::flush);
    }
    if crate::control::EXACT.load(Ordering::Relaxed) {
        let _ = std::panic::catch_unwind(crate::sanitizer::say_device_memory);
    }
    let _ = std::panic::catch_unwind(|| {
        let writer = {
            // Even after a panic caught in a callback (a poisoned lock): what was recorded is written.
            let mut slot = STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match started_here(&mut slot) {
                Some(state) => {
                    if std::env::var_os("STREAMTRACE_WALK_STATS").is_some() {
                        let s = state.walk_stats();
                        eprintln!(
                            "streamtrace: call-site walks: {} replayed, {} along the tree ({} stack words read), {} open-ended",
                            s.replayed, s.walked, s.frames, s.open_ended
                        );
                    }
                    if let Some(lines) = crate::cost::detail_lines(crate::calls::name_of) {
                        eprint!("{lines}");
                    }
                    let call = Call { tid: thread_id(), time_ns: now_ns(), correlation: 0, site: 0 };
                    crate::host_watch::at_exit(state, call);
                    let mut lines = Vec::new();
                    crate::frame_lines::frame_lines(&state.sites, |record| lines.push(record));
                    for record in lines {
                        state.emit(call, record);
                    }
                    state.emit(call, capture_stats());
                    state.writer.handle()
                }
                None => return,
            }
        };
        drain_into(&writer);
        // The online analyzer gets the rest before the process goes (stream_sink.rs bounds the wait).
        if let Ok(mut file) = writer.lock() {
            file.finish_stream();
        };
    });
}
