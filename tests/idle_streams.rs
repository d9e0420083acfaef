//! Streams that were declared but never enqueued on (PyTorch's pools) cost nothing per operation, yet still
//! order what they ordered before: their clock is what their creator had observed (rule 2's creation clock), and
//! a device or context synchronization (rule 5) and the legacy default stream's barrier (rule 7) still join it,
//! and those and a `cudaFree` (rule 6) still count their happens-before edges. Each ordering scenario has a racy
//! twin in which the idle stream was created before its creator learned anything, so that the ordering comes
//! only from it.
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

#[test]
fn device_sync_joins_what_an_idle_stream_was_created_with() {
    let idle = r#"{"type":"stream","id":9,"stream_kind":"non_blocking","thread":2}"#;
    let sync = "{\"type\":\"sync\",\"thread\":3,\"device\":0}\n";
    let ordered = run(&(produce_then_thread2_learns(idle, true) + sync + &consume(2)));
    assert!(ordered.findings.races.is_empty(), "{:#?}", ordered.findings.races);
    let racy = run(&(produce_then_thread2_learns(idle, false) + sync + &consume(2)));
    assert_eq!(racy.findings.races.len(), 1);
}

#[test]
fn context_sync_joins_what_an_idle_stream_was_created_with() {
    let idle = r#"{"type":"stream","id":9,"stream_kind":"non_blocking","thread":2,"context":4}"#;
    let sync = "{\"type\":\"sync\",\"thread\":3,\"context\":4}\n";
    let ordered = run(&(produce_then_thread2_learns(idle, true) + sync + &consume(2)));
    assert!(ordered.findings.races.is_empty(), "{:#?}", ordered.findings.races);
    let racy = run(&(produce_then_thread2_learns(idle, false) + sync + &consume(2)));
    assert_eq!(racy.findings.races.len(), 1);
}

#[test]
fn legacy_default_barrier_joins_an_idle_blocking_stream() {
    let idle = r#"{"type":"stream","id":9,"stream_kind":"blocking","thread":2}"#;
    let ordered = run(&(produce_then_thread2_learns(idle, true) + &consume(0)));
    assert!(ordered.findings.races.is_empty(), "{:#?}", ordered.findings.races);
    let racy = run(&(produce_then_thread2_learns(idle, false) + &consume(0)));
    assert_eq!(racy.findings.races.len(), 1);
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
