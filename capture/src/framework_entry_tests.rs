//! The framework entry points (lib.rs) with the capture on: an op's `op_begin` is written before the first
//! record made inside it, and an op that recorded nothing leaves nothing in the trace (framework.rs).

use crate::live_capture_tests::{alone, capture_on, trace_lines_of};
use crate::origin::thread_id;
use crate::{
    streamtrace_framework_op_begin_unsited, streamtrace_framework_op_close, streamtrace_framework_op_end,
    streamtrace_framework_op_recorded, streamtrace_framework_record,
};

fn record(text: &str) -> i32 {
    // Safety: a live string of that length.
    unsafe { streamtrace_framework_record(text.as_ptr(), text.len()) }
}

fn end(text: &str) -> i32 {
    // Safety: as above.
    unsafe { streamtrace_framework_op_end(text.as_ptr(), text.len()) }
}

/// The (type, name) of this thread's lines of the trace, without the host synchronization records (the
/// thread's end releases what it knew).
fn kinds_of(thread: u64) -> Vec<(String, String)> {
    trace_lines_of(&[thread])
        .iter()
        .filter(|v| !v["type"].as_str().is_some_and(|kind| kind.starts_with("host_") && kind != "host_access"))
        .map(|v| (v["type"].as_str().unwrap_or("").into(), v["name"].as_str().unwrap_or("").into()))
        .collect()
}

fn pair(kind: &str, name: &str) -> (String, String) {
    (kind.into(), name.into())
}

#[test]
fn an_op_that_records_nothing_leaves_nothing_and_one_that_does_begins_before_its_first_record() {
    capture_on();
    // A thread of its own: other tests of this binary record on theirs.
    let thread = std::thread::spawn(|| {
        assert_eq!(streamtrace_framework_op_recorded(), -1, "no op open");
        // A view: nothing inside it.
        assert_eq!(streamtrace_framework_op_begin_unsited(), 0);
        assert_eq!(streamtrace_framework_op_recorded(), 0);
        assert_eq!(streamtrace_framework_op_close(), 0);
        // An op that allocates a block: its begin comes before the block's record.
        streamtrace_framework_op_begin_unsited();
        assert_eq!(record(r#"{"type":"alloc","id":1,"addr":4096,"size":256,"alloc_kind":"pool_block"}"#), 0);
        assert_eq!(streamtrace_framework_op_recorded(), 1);
        // Python code inside it runs an op of its own that records nothing, then one that does.
        streamtrace_framework_op_begin_unsited();
        streamtrace_framework_op_close();
        streamtrace_framework_op_begin_unsited();
        record(r#"{"type":"host_access","name":"inner","reads":[[4096,8]],"writes":[]}"#);
        assert_eq!(end(r#"{"type":"op_end","name":"inner","reads":[],"writes":[]}"#), 0);
        assert_eq!(end(r#"{"type":"op_end","name":"outer","reads":[],"writes":[]}"#), 0);
        // Nested ops that record nothing until the innermost one does: both begins, outermost first.
        streamtrace_framework_op_begin_unsited();
        streamtrace_framework_op_begin_unsited();
        record(r#"{"type":"free","id":1,"free_kind":"pool_block"}"#);
        end(r#"{"type":"op_end","name":"b","reads":[],"writes":[]}"#);
        end(r#"{"type":"op_end","name":"a","reads":[],"writes":[]}"#);
        // A caller that ends an op with a record without asking first: its begin is written with its end.
        streamtrace_framework_op_begin_unsited();
        end(r#"{"type":"op_end","name":"asked_nothing","reads":[],"writes":[]}"#);
        // Closing an op that did record something still ends its frame.
        streamtrace_framework_op_begin_unsited();
        record(r#"{"type":"alloc","id":2,"addr":8192,"size":256,"alloc_kind":"pool_block"}"#);
        streamtrace_framework_op_close();
        assert_eq!(streamtrace_framework_op_recorded(), -1, "every op ended");
        thread_id()
    });
    let thread = thread.join().unwrap();
    assert_eq!(
        kinds_of(thread),
        [
            pair("op_begin", ""),
            pair("alloc", ""),
            pair("op_begin", ""),
            pair("host_access", "inner"),
            pair("op_end", "inner"),
            pair("op_end", "outer"),
            pair("op_begin", ""),
            pair("op_begin", ""),
            pair("free", ""),
            pair("op_end", "b"),
            pair("op_end", "a"),
            pair("op_begin", ""),
            pair("op_end", "asked_nothing"),
            pair("op_begin", ""),
            pair("alloc", ""),
            pair("op_end", ""),
        ]
    );
}

#[test]
fn a_process_that_recorded_nothing_is_told_nothing_is_pinned_without_a_trace_of_its_own() {
    // A process of its own, whose capture state no other test made. A forked DataLoader worker asks for every
    // CPU tensor it batches; answering used to start the worker's trace, which its `_exit` left cut short.
    if !alone(
        "framework_entry_tests::a_process_that_recorded_nothing_is_told_nothing_is_pinned_without_a_trace_of_its_own",
    ) {
        return;
    }
    capture_on();
    assert_eq!(crate::streamtrace_host_memory_pinned(0x7f00_0000_1000), 0);
    assert!(crate::state::STATE.lock().expect("the state").is_none(), "no trace started");
}
