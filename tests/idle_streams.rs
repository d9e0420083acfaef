//! Streams that were declared but never enqueued on (PyTorch's pools) cost nothing per operation, and order only
//! what their work orders: their first operation starts from what their creator had observed (rule 2's creation
//! clock), but a device or context synchronization (rule 5), a synchronization of the legacy default stream and its
//! barrier (rule 7) wait for no work of a stream that ran nothing, so they teach nothing of what it was created
//! with (only host synchronization orders one thread after another's knowledge). Once the stream runs work, they
//! wait for it, and so for what it was created with. Those synchronizations and a `cudaFree` (rule 6) still count
//! their happens-before edges with the idle streams.
//! Scenarios use per-thread host order, so that threads learn only through CUDA synchronization.

use streamtrace::analysis::Analysis;
use streamtrace::findings::EdgeKind;
use streamtrace::hb::HostOrder;

use crate::util::scenario;

const X: &str = r#"[["0x1000", 256]]"#;

/// Stream 1 (on device 1) writes X; thread 2 learns that by synchronizing stream 1. Stream 2 is on device 0.
const PRELUDE: &str = r#"{"type":"stream","id":0,"stream_kind":"legacy_default"}
{"type":"stream","id":1,"stream_kind":"non_blocking","device":1}
{"type":"stream","id":2,"stream_kind":"non_blocking"}
{"type":"alloc","id":1,"addr":"0x1000","size":256,"label":"X"}
"#;

fn run(body: &str) -> Analysis {
    scenario::analyze("scenario.json", PRELUDE, &body.replace("$X", X), HostOrder::PerThread)
}

fn produce_then_thread2_learns(idle_stream: &str, created_after: bool) -> String {
    let produce = "{\"type\":\"kernel\",\"stream\":1,\"thread\":1,\"name\":\"produce\",\"writes\":$X}\n";
    let learn = "{\"type\":\"sync\",\"thread\":2,\"stream\":1}\n";
    if created_after {
        format!("{produce}{learn}{idle_stream}\n")
    } else {
        format!("{idle_stream}\n{produce}{learn}")
    }
}

fn consume(stream: u32) -> String {
    format!("{{\"type\":\"kernel\",\"stream\":{stream},\"thread\":3,\"name\":\"consume\",\"reads\":$X}}\n")
}

/// Thread 2 learns `produce`, then creates stream 9 (`kind`, on context `context`) and, when `runs_work`, writes Y
/// on it; thread 3 then makes `sync` and reads X on `consume_on`. Whether that read raced.
fn raced_after_idle_stream(kind: &str, context: u32, runs_work: bool, sync: &str, consume_on: u32) -> bool {
    let idle = format!(r#"{{"type":"stream","id":9,"stream_kind":"{kind}","thread":2,"context":{context}}}"#);
    let work = if runs_work {
        "{\"type\":\"kernel\",\"stream\":9,\"thread\":2,\"name\":\"other\",\"writes\":[[\"0x5000\", 64]]}\n"
    } else {
        ""
    };
    let body = produce_then_thread2_learns(&idle, true) + work + sync + &consume(consume_on);
    !run(&body).findings.races.is_empty()
}

#[test]
fn device_sync_waits_for_an_idle_streams_work_not_for_what_it_was_created_with() {
    let sync = "{\"type\":\"sync\",\"thread\":3,\"device\":0}\n";
    assert!(raced_after_idle_stream("non_blocking", 0, false, sync, 2));
    assert!(!raced_after_idle_stream("non_blocking", 0, true, sync, 2));
}

#[test]
fn context_sync_waits_for_an_idle_streams_work_not_for_what_it_was_created_with() {
    let sync = "{\"type\":\"sync\",\"thread\":3,\"context\":4}\n";
    assert!(raced_after_idle_stream("non_blocking", 4, false, sync, 2));
    assert!(!raced_after_idle_stream("non_blocking", 4, true, sync, 2));
}

#[test]
fn legacy_default_stream_waits_for_an_idle_blocking_streams_work_not_for_what_it_was_created_with() {
    // Its barrier: an operation on it.
    assert!(raced_after_idle_stream("blocking", 0, false, "", 0));
    assert!(!raced_after_idle_stream("blocking", 0, true, "", 0));
    // Its synchronization waits for what that operation would.
    let sync = "{\"type\":\"sync\",\"thread\":3,\"stream\":0}\n";
    assert!(raced_after_idle_stream("blocking", 0, false, sync, 2));
    assert!(!raced_after_idle_stream("blocking", 0, true, sync, 2));
}

#[test]
fn idle_streams_count_the_host_synchronizations_that_covered_them() {
    let device_sync = "{\"type\":\"sync\",\"device\":0}\n";
    let body = [
        r#"{"type":"stream","id":8,"stream_kind":"non_blocking"}"#.to_string() + "\n",
        device_sync.repeat(2),
        r#"{"type":"stream","id":9,"stream_kind":"non_blocking"}"#.to_string() + "\n",
        device_sync.repeat(3),
        "{\"type\":\"kernel\",\"stream\":9,\"name\":\"wakes\",\"writes\":$X}\n".to_string(),
        device_sync.to_string(),
        // A `cudaFree` synchronizes the process's streams, `cuCtxSynchronize` the context's.
        "{\"type\":\"alloc\",\"id\":7,\"addr\":\"0x9000\",\"size\":64}\n{\"type\":\"free\",\"id\":7}\n".to_string(),
        "{\"type\":\"sync\",\"context\":0}\n".to_string(),
        r#"{"type":"stream","id":10,"stream_kind":"non_blocking"}"#.to_string() + "\n",
    ]
    .concat();
    let analysis = run(&body);
    let host_syncs = |handle: u64| {
        let named = |id| analysis.lookup().stream(id).is_some_and(|s| s.handle == handle);
        let edge = analysis.findings.edges.iter().find(|e| e.via == EdgeKind::HostSync && named(e.from));
        edge.map(|e| e.count)
    };
    assert_eq!(host_syncs(8), Some(8), "idle from the start: six device synchronizations, a free, a context one");
    assert_eq!(host_syncs(9), Some(6), "three while idle, three after it woke");
    assert_eq!(host_syncs(10), None, "created after the last one");
    assert_eq!(host_syncs(2), Some(8));
}
