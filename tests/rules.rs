//! One test per happens-before rule of DESIGN.md, each with a racy and a race-free twin, so that dropping or
//! inverting a rule fails a test. Traces are hand-written in the JSON trace format.

use streamtrace::analysis::{analyze_source, Analysis};
use streamtrace::findings::{RaceFinding, RaceKind};
use streamtrace::hb::{EngineOptions, HostOrder};
use streamtrace::ingest::json::JsonTraceReader;

use crate::util::scenario::{self, assert_one_race, kernel, rec, wait, Found};

const X: &str = "[\"0x1000\", 256]";
const Y: &str = "[\"0x2000\", 256]";

/// Streams used by most scenarios: the legacy default stream 0, non-blocking streams 1-3, blocking 4-5 and
/// per-thread default 6; events 1-3; allocations X at 0x1000 and Y at 0x2000.
const PRELUDE: &str = r#"{"type":"stream","id":0,"stream_kind":"legacy_default"}
{"type":"stream","id":1,"stream_kind":"non_blocking"}
{"type":"stream","id":2,"stream_kind":"non_blocking"}
{"type":"stream","id":3,"stream_kind":"non_blocking"}
{"type":"stream","id":4,"stream_kind":"blocking"}
{"type":"stream","id":5,"stream_kind":"blocking"}
{"type":"stream","id":6,"stream_kind":"per_thread_default"}
{"type":"event","id":1}
{"type":"event","id":2}
{"type":"event","id":3}
{"type":"alloc","id":1,"addr":"0x1000","size":256,"label":"X"}
{"type":"alloc","id":2,"addr":"0x2000","size":256,"label":"Y"}
"#;

fn run_with(body: &str, host_order: HostOrder) -> Analysis {
    run_traced(body, host_order, false)
}

/// `host_sync`: the header says the trace records the host synchronization between its threads, as a capture
/// with the interposers in place does.
fn run_traced(body: &str, host_order: HostOrder, host_sync: bool) -> Analysis {
    let body = body.replace("$X", X).replace("$Y", Y);
    if !host_sync {
        return scenario::analyze("scenario.json", PRELUDE, &body, host_order);
    }
    // The header a capture with its interposers in place writes.
    let text = format!("{{\"type\":\"streamtrace\",\"version\":1,\"host_sync\":true}}\n{PRELUDE}{body}");
    scenario::analyze_text("scenario.json", &text, host_order).expect("scenario analyzes")
}

/// A race as the rule tests compare them: its kind and its two sites' names.
type Race = (RaceKind, String, String);

/// What a scenario's analysis found, to compare two host orders: every race with its count (those ordered only
/// by timing apart), and the waits before their event's record.
fn verdicts(analysis: &Analysis) -> (Vec<(Race, u64)>, Vec<Race>, usize) {
    let name = |op: &streamtrace::findings::OpOccurrence| analysis.findings.site(op.site).name.to_string();
    let race = |r: &RaceFinding| (r.kind, name(&r.earlier), name(&r.later));
    let races = |list: &[RaceFinding]| list.iter().map(|r| (race(r), r.count)).collect();
    let timing_only = analysis.findings.timing_only_races.iter().map(race).collect();
    (races(&analysis.findings.races), timing_only, analysis.findings.unrecorded_waits.len())
}

/// Runs a scenario in both host orders: a rule about streams gives the same findings in either, every race a
/// plain one (a rule test that came out differently would be testing the host order instead).
fn run(body: &str) -> Analysis {
    let global = run_with(body, HostOrder::Global);
    let per_thread = run_with(body, HostOrder::PerThread);
    assert_eq!(verdicts(&per_thread), verdicts(&global), "the host orders disagree on:\n{body}");
    global
}

fn races(body: &str) -> Found {
    Found(run(body))
}

fn write(stream: u32, name: &str, range: &str) -> String {
    kernel(stream, name, "", range)
}

fn read(stream: u32, name: &str, range: &str) -> String {
    kernel(stream, name, range, "")
}

fn sync(what: &str, id: u32) -> String {
    format!("{{\"type\":\"sync\",\"{what}\":{id}}}\n")
}

// rule 1: operations on one stream run in issue order.
#[test]
fn rule1_same_stream_is_ordered() {
    assert!(races(&(write(1, "a", "$X") + &write(1, "b", "$X") + &read(1, "c", "$X"))).is_empty());
}

#[test]
fn rule1_different_streams_are_not() {
    assert_one_race(&races(&(write(1, "a", "$X") + &write(2, "b", "$X"))), RaceKind::WriteAfterWrite, "a", "b");
}

// rule 2 with rule 5: the host enqueues after what it observed.
#[test]
fn rule2_enqueue_after_stream_sync_is_ordered() {
    assert!(races(&(write(1, "a", "$X") + &sync("stream", 1) + &read(2, "b", "$X"))).is_empty());
}

#[test]
fn rule2_enqueue_before_stream_sync_is_not() {
    let found = races(&(write(1, "a", "$X") + &read(2, "b", "$X") + &sync("stream", 1)));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "a", "b");
}

// rule 3: a record snapshots the stream's clock at that point.
#[test]
fn rule3_access_after_record_is_not_covered_by_the_wait() {
    let body = write(1, "before", "$X") + &rec(1, 1) + &write(1, "after", "$Y") + &wait(2, 1);
    assert!(races(&(body.clone() + &read(2, "reads_x", "$X"))).is_empty());
    assert_one_race(&races(&(body + &read(2, "reads_y", "$Y"))), RaceKind::ReadAfterWrite, "after", "reads_y");
}

#[test]
fn rule3_rerecord_replaces_the_snapshot() {
    // Re-recorded later on the same stream: the wait now covers the later write too.
    let later_on_same = write(1, "w1", "$X") + &rec(1, 1) + &write(1, "w2", "$Y") + &rec(1, 1) + &wait(2, 1);
    assert!(races(&(later_on_same + &read(2, "r", "$Y"))).is_empty());
    // Re-recorded on another stream: the first snapshot is gone, so stream 1's write is no longer covered.
    let moved = write(1, "w1", "$X") + &rec(1, 1) + &rec(1, 3) + &wait(2, 1);
    assert_one_race(&races(&(moved + &read(2, "r", "$X"))), RaceKind::ReadAfterWrite, "w1", "r");
}

// rule 4: waits join the snapshot as it is at the call.
#[test]
fn rule4_transitive_chain_of_events_orders() {
    let body =
        write(1, "produce", "$X") + &rec(1, 1) + &wait(2, 1) + &rec(2, 2) + &wait(3, 2) + &read(3, "consume", "$X");
    assert!(races(&body).is_empty());
}

#[test]
fn rule4_broken_chain_does_not_order() {
    // Stream 2 records event 2 before it waited on event 1: the chain carries nothing from stream 1.
    let body =
        write(1, "produce", "$X") + &rec(1, 1) + &rec(2, 2) + &wait(2, 1) + &wait(3, 2) + &read(3, "consume", "$X");
    assert_one_race(&races(&body), RaceKind::ReadAfterWrite, "produce", "consume");
}

#[test]
fn rule4_wait_before_any_record_orders_nothing_and_is_reported() {
    let body = write(1, "produce", "$X") + &wait(2, 1) + &rec(1, 1) + &read(2, "consume", "$X");
    let found = races(&body);
    assert_one_race(&found, RaceKind::ReadAfterWrite, "produce", "consume");
    assert_eq!(found.0.findings.unrecorded_waits.len(), 1);
    assert_eq!(found.0.findings.unrecorded_waits[0].event, 1);
}

/// A ping-pong pipeline as cuBLAS-XT runs its tiles (captured from NVIDIA's simpleCUBLASXT): each stream waits
/// for the other's last record before it touches the shared buffer, then records its own event. In the first
/// turn neither event has a record yet, so both first waits order nothing, and need not: there is no earlier
/// turn to wait for. They are set aside as info, and every later turn is ordered.
#[test]
fn rule4_a_pipelines_first_wait_before_any_record_is_info_not_a_finding() {
    let turn = |stream: u32, waits_on: u32, records: u32, name: &str| {
        wait(stream, waits_on) + &write(stream, name, "$X") + &rec(records, stream)
    };
    let body = (0..3).map(|_| turn(1, 2, 1, "tile_a") + &turn(2, 1, 2, "tile_b")).collect::<String>();
    let analysis = run(&body);
    assert!(analysis.findings.races.is_empty(), "{:?}", analysis.findings.races);
    assert!(analysis.findings.unrecorded_waits.is_empty(), "{:?}", analysis.findings.unrecorded_waits);
    let first_turn = &analysis.findings.waits_before_a_pipelines_first_record;
    assert_eq!(first_turn.len(), 1, "stream 1's first wait, on event 2: {first_turn:?}");
    assert_eq!(first_turn[0].event, 2);
}

/// The same early wait, once, is an ordering mistake whether or not a race follows from it: reported.
#[test]
fn rule4_an_early_wait_never_followed_by_a_wait_after_a_record_stays_a_finding() {
    let body = wait(2, 1) + &write(1, "produce", "$X") + &rec(1, 1) + &write(2, "elsewhere", "$Y");
    let analysis = run(&body);
    assert!(analysis.findings.races.is_empty());
    assert_eq!(analysis.findings.unrecorded_waits.len(), 1);
    assert!(analysis.findings.waits_before_a_pipelines_first_record.is_empty());
}

/// A loop that waits too early in every turn (each turn ends in a device synchronization): from the second turn
/// on the wait joins the turn before, so the first wait is taken for a pipeline's first turn; what the early
/// waits fail to order is still a race.
#[test]
fn rule4_a_loop_that_waits_too_early_still_races_though_its_first_wait_is_info() {
    let turn = wait(2, 1) + &write(1, "produce", "$X") + &rec(1, 1) + &read(2, "consume", "$X") + &sync("device", 0);
    let found = races(&turn.repeat(3));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "produce", "consume");
    assert!(found.0.findings.unrecorded_waits.is_empty());
    assert_eq!(found.0.findings.waits_before_a_pipelines_first_record.len(), 1);
}

#[test]
fn rule4_wait_after_record_is_not_reported_as_unrecorded() {
    let body = write(1, "produce", "$X") + &rec(1, 1) + &wait(2, 1) + &read(2, "consume", "$X");
    let analysis = run(&body);
    assert!(analysis.findings.races.is_empty());
    assert!(analysis.findings.unrecorded_waits.is_empty());
}

// rule 5: host synchronization.
#[test]
fn rule5_stream_synchronize_orders_only_that_stream() {
    let body =
        write(1, "a", "$X") + &write(2, "b", "$Y") + &sync("stream", 1) + &read(3, "rx", "$X") + &read(3, "ry", "$Y");
    assert_one_race(&races(&body), RaceKind::ReadAfterWrite, "b", "ry");
}

#[test]
fn rule5_event_synchronize_gives_the_snapshot_not_later_work() {
    let body = write(1, "before", "$X") + &rec(1, 1) + &write(1, "after", "$Y") + &sync("event", 1);
    let found = races(&(body + &read(2, "rx", "$X") + &read(2, "ry", "$Y")));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "after", "ry");
}

#[test]
fn rule5_device_synchronize_orders_everything_before_and_nothing_after() {
    let body = write(1, "before", "$X") + &sync("device", 0) + &write(1, "after", "$Y");
    let found = races(&(body + &read(2, "rx", "$X") + &read(2, "ry", "$Y")));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "after", "ry");
}

#[test]
fn rule5_device_synchronize_orders_only_its_own_device() {
    // Two GPUs: cudaDeviceSynchronize waits for the current device's streams, not the other device's (peer
    // memory is reachable from both). Stream 7 runs on device 1.
    let body = |device: u32| {
        "{\"type\":\"stream\",\"id\":7,\"stream_kind\":\"non_blocking\",\"device\":1,\"context\":1}\n".to_string()
            + &write(7, "on_device_1", "$X")
            + &sync("device", device)
            + &read(1, "on_device_0", "$X")
    };
    assert!(races(&body(1)).is_empty(), "synchronizing device 1 orders its stream");
    assert_one_race(&races(&body(0)), RaceKind::ReadAfterWrite, "on_device_1", "on_device_0");
}

#[test]
fn rule5_context_synchronize_orders_the_context() {
    assert!(races(&(write(1, "a", "$X") + &sync("context", 0) + &read(2, "b", "$X"))).is_empty());
}

#[test]
fn rule5_successful_event_query_orders_block_reuse() {
    // PyTorch's allocator: a block used on a side stream is reused only once the event recorded after that use
    // has been queried successfully.
    let body = |ready: bool| {
        read(1, "side_use", "$X")
            + &rec(1, 1)
            + &format!("{{\"type\":\"query\",\"event\":1,\"ready\":{ready}}}\n")
            + &write(2, "reuse", "$X")
    };
    assert!(races(&body(true)).is_empty());
    assert_one_race(&races(&body(false)), RaceKind::WriteAfterRead, "side_use", "reuse");
}

#[test]
fn rule5_successful_stream_query_orders() {
    let body = |ready: bool| {
        write(1, "a", "$X") + &format!("{{\"type\":\"query\",\"stream\":1,\"ready\":{ready}}}\n") + &read(2, "b", "$X")
    };
    assert!(races(&body(true)).is_empty());
    assert_eq!(races(&body(false)).len(), 1);
}

#[test]
fn rule5_stream_created_after_device_synchronize_starts_ordered_after_it() {
    // Strict host order, so that only the stream's creation can carry thread 1's synchronization to thread 2.
    let body = |sync_first: bool| {
        let mut b = write(1, "a", "$X");
        if sync_first {
            b += "{\"type\":\"sync\",\"device\":0,\"thread\":1}\n";
        }
        b + "{\"type\":\"stream\",\"id\":9,\"stream_kind\":\"non_blocking\",\"thread\":1}\n"
            + "{\"type\":\"kernel\",\"stream\":9,\"name\":\"b\",\"reads\":[$X],\"thread\":2}\n"
    };
    assert!(run_with(&body(true), HostOrder::PerThread).findings.races.is_empty());
    assert_eq!(run_with(&body(false), HostOrder::PerThread).findings.races.len(), 1);
}

// rule 6: blocking APIs follow CUDA's "API synchronization behavior" page, not their names.
/// A copy on `stream` whose host side is `host` (a range outside X and Y, the host's buffer).
fn copy(stream: u32, copy: &str, from: (&str, &str), to: (&str, &str), sync: bool) -> String {
    format!(
        "{{\"type\":\"memcpy\",\"stream\":{stream},\"copy\":\"{copy}\",\"from\":{},\"to\":{},\"from_memory\":\"{}\",\"to_memory\":\"{}\",\"sync\":{sync}}}\n",
        from.0, to.0, from.1, to.1
    )
}

const HOST: &str = "[\"0x90000\", 256]";

#[test]
fn rule6_copy_to_the_host_returns_when_done() {
    // Device to pageable host memory: both forms return only once the copy is done.
    for sync in [true, false] {
        let body = copy(1, "DtoH", ("$X", "device"), (HOST, "pageable"), sync) + &write(2, "overwrite", "$X");
        assert!(races(&body).is_empty(), "sync {sync}");
    }
    // To pinned host memory only the plain form waits.
    assert!(
        races(&(copy(1, "DtoH", ("$X", "device"), (HOST, "pinned"), true) + &write(2, "overwrite", "$X"))).is_empty()
    );
    let body = copy(1, "DtoH", ("$X", "device"), (HOST, "pinned"), false) + &write(2, "overwrite", "$X");
    assert_one_race(&races(&body), RaceKind::WriteAfterRead, "memcpy DtoH", "overwrite");
}

#[test]
fn rule6_plain_copy_from_pageable_memory_returns_before_its_dma() {
    // The copy waits for the default stream's earlier work (the host joins that), is staged, and returns: its
    // write of X is not known complete, so a non-blocking stream reading X races with it.
    let body = write(0, "earlier", "$Y")
        + &copy(0, "HtoD", (HOST, "pageable"), ("$X", "device"), true)
        + &read(2, "reader", "$X")
        + &write(2, "after_earlier", "$Y");
    assert_one_race(&races(&body), RaceKind::ReadAfterWrite, "memcpy HtoD", "reader");
    // But its source has been read into the staging buffer when it returns: work the host issues next may
    // overwrite it (a copy back into the same host buffer on a non-blocking stream, graphMemoryNodes's pattern).
    let staged = copy(0, "HtoD", ("$Y", "pageable"), ("$X", "device"), true)
        + &copy(2, "DtoH", ("$X", "device"), ("$Y", "pageable"), false);
    let found = races(&staged);
    // Only the DMA into X is unordered with the copy back (which reads X); Y's read is done.
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].kind, found[0].range.start), (RaceKind::ReadAfterWrite, 0x1000), "{found:?}");
    // From pinned memory the plain copy returns when done.
    let body = copy(0, "HtoD", (HOST, "pinned"), ("$X", "device"), true) + &read(2, "reader", "$X");
    assert!(races(&body).is_empty());
    // The Async form from pinned memory does not wait at all.
    let body = copy(1, "HtoD", (HOST, "pinned"), ("$X", "device"), false) + &read(2, "reader", "$X");
    assert_one_race(&races(&body), RaceKind::ReadAfterWrite, "memcpy HtoD", "reader");
}

#[test]
fn rule6_device_to_device_copies_do_not_make_the_host_wait() {
    let body = copy(0, "DtoD", ("$Y", "device"), ("$X", "device"), true) + &read(2, "reader", "$X");
    assert_one_race(&races(&body), RaceKind::ReadAfterWrite, "memcpy DtoD", "reader");
}

#[test]
fn rule6_host_to_host_copies_are_synchronous_in_both_forms() {
    for sync in [true, false] {
        let body = copy(1, "HtoH", ("$X", "pinned"), ("$Y", "pageable"), sync)
            + &write(2, "reuse", "$X")
            + &read(2, "use", "$Y");
        assert!(races(&body).is_empty(), "sync {sync}");
    }
}

#[test]
fn rule6_plain_memset_waits_only_on_host_or_managed_memory() {
    let set = |memory: &str| {
        format!("{{\"type\":\"memset\",\"stream\":0,\"to\":$X,\"to_memory\":\"{memory}\",\"sync\":true}}\n")
    };
    assert_one_race(&races(&(set("device") + &write(2, "fill", "$X"))), RaceKind::WriteAfterWrite, "memset", "fill");
    for memory in ["pinned", "managed"] {
        assert!(races(&(set(memory) + &write(2, "fill", "$X"))).is_empty(), "{memory}");
    }
}

#[test]
fn rule6_a_copy_of_unknown_memory_blocks_as_its_name_says() {
    // cudaMemcpyDefault with no memory kinds (an older trace): the plain form is taken to block.
    let body = "{\"type\":\"memcpy\",\"stream\":0,\"copy\":\"Default\",\"from\":$Y,\"to\":$X,\"sync\":true}\n"
        .to_string()
        + &read(2, "reader", "$X");
    assert!(races(&body).is_empty());
}

#[test]
fn rule6_cuda_free_synchronizes_the_device() {
    let body = read(1, "last_use", "$X") + "{\"type\":\"free\",\"id\":1}\n";
    assert!(races(&body).is_empty());
}

#[test]
fn rule6_unmap_does_not_synchronize() {
    let body = "{\"type\":\"alloc\",\"id\":9,\"addr\":\"0x8000\",\"size\":256,\"alloc_kind\":\"virtual_map\"}\n"
        .to_string()
        + &read(1, "last_use", "[\"0x8000\", 256]")
        + "{\"type\":\"free\",\"id\":9,\"free_kind\":\"virtual_unmap\"}\n";
    assert_one_race(&races(&body), RaceKind::UseAfterFree, "last_use", "cuMemUnmap");
    let synced = "{\"type\":\"alloc\",\"id\":9,\"addr\":\"0x8000\",\"size\":256,\"alloc_kind\":\"virtual_map\"}\n"
        .to_string()
        + &read(1, "last_use", "[\"0x8000\", 256]")
        + &sync("stream", 1)
        + "{\"type\":\"free\",\"id\":9,\"free_kind\":\"virtual_unmap\"}\n";
    assert!(races(&synced).is_empty());
}

// rule 12: the host is an accessor of pinned memory.
/// A pinned host buffer at 0x90000 and the host thread's access to it.
const PINNED: &str =
    "{\"type\":\"alloc\",\"id\":7,\"addr\":\"0x90000\",\"size\":256,\"alloc_kind\":\"host\",\"label\":\"staging\"}\n";

fn host(name: &str, mode: &str) -> String {
    format!("{{\"type\":\"host_access\",\"name\":\"{name}\",\"{mode}\":[{HOST}],\"src\":\"train.py:9\"}}\n")
}

#[test]
fn rule12_host_reading_a_copy_before_waiting_for_it_races() {
    let download = copy(1, "DtoH", ("$X", "device"), (HOST, "pinned"), false);
    let found = races(&(PINNED.to_string() + &download + &host("numpy", "reads")));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "memcpy DtoH", "numpy");
    let fix = found.fix_text(0);
    assert!(fix.contains("synchronize"), "{fix}");
    // After the host waited for the stream (or an event recorded after the copy), the read is ordered.
    assert!(races(&(PINNED.to_string() + &download + &sync("stream", 1) + &host("numpy", "reads"))).is_empty());
    let event_sync = rec(1, 1) + &sync("event", 1);
    assert!(races(&(PINNED.to_string() + &download + &event_sync + &host("numpy", "reads"))).is_empty());
}

#[test]
fn rule12_refilling_a_staging_buffer_while_its_upload_may_run_races() {
    let upload = copy(1, "HtoD", (HOST, "pinned"), ("$X", "device"), false);
    assert_one_race(
        &races(&(PINNED.to_string() + &upload + &host("fill_", "writes"))),
        RaceKind::WriteAfterRead,
        "memcpy HtoD",
        "fill_",
    );
    assert!(races(&(PINNED.to_string() + &upload + &sync("stream", 1) + &host("fill_", "writes"))).is_empty());
}

#[test]
fn rule12_work_issued_after_a_host_access_is_ordered_after_it() {
    // The host fills the buffer, then uploads it: the upload runs after the fill (rule 2 through the host clock).
    let upload = copy(1, "HtoD", (HOST, "pinned"), ("$X", "device"), false);
    assert!(races(&(PINNED.to_string() + &host("fill_", "writes") + &upload)).is_empty());
}

#[test]
fn rule12_synchronizing_the_device_does_not_order_another_threads_host_access() {
    // Thread 1 fills the pinned buffer; thread 2 synchronizes the device (or its context) and uploads from it.
    // The synchronization waits for the device's streams, not for thread 1's stores: only an edge between the
    // threads (rule 10) orders them.
    let upload = copy(1, "HtoD", (HOST, "pinned"), ("$X", "device"), false);
    let body = |sync_of: &str, hand_over: &str| {
        PINNED.to_string() + &on(1, &host("fill_", "writes")) + hand_over + &on(2, &sync(sync_of, 0)) + &on(2, &upload)
    };
    for sync_of in ["device", "context"] {
        let unordered = run_traced(&body(sync_of, ""), HostOrder::PerThread, true);
        let race = (RaceKind::ReadAfterWrite, "fill_".to_string(), "memcpy HtoD".to_string());
        assert_eq!(verdicts(&unordered), (vec![], vec![race], 0), "{sync_of}");
        let handed_over = body(sync_of, &(release(7, 1) + &acquire(7, 2)));
        assert!(run_traced(&handed_over, HostOrder::PerThread, true).findings.timing_only_races.is_empty());
    }
}

// rule 13: host functions in a stream run in stream order, on a driver thread.
fn host_func(stream: u32, id: u32, name: &str, mode: &str, range: &str) -> String {
    format!("{{\"type\":\"host_func\",\"stream\":{stream},\"id\":{id},\"name\":\"{name}\",\"{mode}\":[{range}]}}\n")
}

/// An access the capture saw from a fault inside host function `id`, recorded on the driver's thread 99.
fn host_func_access(id: u32, mode: &str, range: &str) -> String {
    format!(
        "{{\"type\":\"host_access\",\"name\":\"host read\",\"{mode}\":[{range}],\"host_func\":{id},\"fault\":\"guard\",\"thread\":99}}\n"
    )
}

#[test]
fn rule13_a_host_function_reading_what_another_stream_writes_without_order_races() {
    let found = races(&(write(1, "produce", "$X") + &host_func(2, 1, "consume", "reads", "$X")));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "produce", "consume");
    // An event recorded after the write and waited on by the host function's stream orders it.
    let ordered = write(1, "produce", "$X") + &rec(1, 1) + &wait(2, 1) + &host_func(2, 1, "consume", "reads", "$X");
    assert!(races(&ordered).is_empty());
}

#[test]
fn rule13_a_host_function_starts_after_its_streams_earlier_work_and_later_work_waits_for_it() {
    let body = write(1, "produce", "$X") + &host_func(1, 1, "consume", "reads", "$X") + &write(1, "overwrite", "$X");
    assert!(races(&body).is_empty());
    // Its writes are seen by what later waits for its stream.
    let handed = host_func(1, 1, "fill", "writes", "$X") + &rec(1, 1) + &wait(2, 1) + &read(2, "use", "$X");
    assert!(races(&handed).is_empty());
    assert_one_race(
        &races(&(host_func(1, 1, "fill", "writes", "$X") + &read(2, "use", "$X"))),
        RaceKind::ReadAfterWrite,
        "fill",
        "use",
    );
}

#[test]
fn rule13_the_thread_that_runs_a_host_function_hands_its_place_on() {
    // NVIDIA's simpleCallback: a callback enqueued after the copy into X starts a thread, which then uses X. The
    // driver's thread 98 acquires the function's object as the function starts (the capture's trampoline), and
    // its pthread_create releases what it knows (object 7) to the new thread 3.
    let object = streamtrace_format::host_func_object(1);
    let started = format!("{{\"type\":\"host_acquire\",\"object\":{object},\"thread\":98}}\n");
    let body = |start: &str| {
        on(1, &write(1, "copy_back", "$X"))
            + &on(1, &host_func(1, 1, "callback", "reads", ""))
            + start
            + &release(7, 98)
            + &acquire(7, 3)
            + &on(3, &read(3, "postprocess", "$X"))
    };
    let handed = run_traced(&body(&started), HostOrder::PerThread, true);
    assert!(handed.findings.races.is_empty(), "{:?}", handed.findings.races);
    assert_eq!(handed.stats.host_acquires_of_nothing, 0);
    // Without the function's start, the new thread knows nothing of stream 1.
    let unordered = run_traced(&body(""), HostOrder::PerThread, true);
    assert_eq!(unordered.findings.races.len(), 1);
}

#[test]
fn rule13_the_thread_that_enqueued_a_host_function_learns_nothing_from_it() {
    // The function writes the pinned buffer on a driver thread; the enqueuing thread's read is unordered with it
    // until the thread waits for the function's stream.
    let enqueued = PINNED.to_string() + &host_func(1, 1, "fill", "writes", HOST);
    assert_one_race(&races(&(enqueued.clone() + &host("numpy", "reads"))), RaceKind::ReadAfterWrite, "fill", "numpy");
    assert!(races(&(enqueued + &sync("stream", 1) + &host("numpy", "reads"))).is_empty());
}

#[test]
fn rule13_an_access_seen_inside_a_host_function_is_at_the_functions_place() {
    // What the capture saw from a fault inside the function, recorded by the driver's thread: unordered with
    // another stream's write, ordered with the function's own stream and with what waits for it.
    let faulted = host_func(2, 4, "consume", "reads", "") + &host_func_access(4, "reads", "$X");
    let found = races(&(write(1, "produce", "$X") + &faulted));
    assert_one_race(&found, RaceKind::ReadAfterWrite, "produce", "host read in consume");
    assert!(races(&(write(2, "produce", "$X") + &faulted + &write(2, "overwrite", "$X"))).is_empty());
    // The driver's thread does not take the host's order: a host synchronization made before does not order it.
    let synced = write(1, "produce", "$X") + &sync("stream", 2) + &faulted;
    assert_eq!(races(&synced).len(), 1);
}

#[test]
fn rule13_an_access_of_a_host_function_must_follow_it() {
    let body = host_func(2, 4, "consume", "reads", "") + &write(1, "other", "$Y") + &host_func_access(4, "reads", "$X");
    let text =
        format!("{{\"type\":\"streamtrace\",\"version\":1}}\n{PRELUDE}{}", body.replace("$X", X).replace("$Y", Y));
    let reader = JsonTraceReader::from_text("scenario.json", text);
    let Err(error) = analyze_source("scenario.json", Box::new(reader), EngineOptions::default()) else {
        panic!("a host function's access after another operation was taken")
    };
    assert!(error.to_string().contains("does not follow its host_func record"), "{error}");
}

// rule 7: the legacy default stream.
#[test]
fn rule7_legacy_default_waits_for_blocking_streams() {
    assert!(races(&(write(4, "blocking", "$X") + &read(0, "legacy", "$X"))).is_empty());
}

#[test]
fn rule7_blocking_streams_wait_for_legacy_default() {
    assert!(races(&(write(0, "legacy", "$X") + &read(5, "blocking", "$X"))).is_empty());
}

#[test]
fn rule7_per_thread_default_stream_behaves_as_blocking() {
    assert!(races(&(write(6, "per_thread", "$X") + &read(0, "legacy", "$X"))).is_empty());
    assert!(races(&(write(0, "legacy", "$X") + &read(6, "per_thread", "$X"))).is_empty());
}

#[test]
fn rule7_non_blocking_streams_take_no_part() {
    assert_one_race(
        &races(&(write(1, "nb", "$X") + &read(0, "legacy", "$X"))),
        RaceKind::ReadAfterWrite,
        "nb",
        "legacy",
    );
    assert_one_race(
        &races(&(write(0, "legacy", "$X") + &read(1, "nb", "$X"))),
        RaceKind::ReadAfterWrite,
        "legacy",
        "nb",
    );
}

#[test]
fn rule7_blocking_streams_are_not_ordered_with_each_other_without_legacy_work() {
    assert_eq!(races(&(write(4, "a", "$X") + &read(5, "b", "$X"))).len(), 1);
    // With legacy work in between, the barrier orders them.
    assert!(races(&(write(4, "a", "$X") + &kernel(0, "barrier", "", "") + &read(5, "b", "$X"))).is_empty());
}

#[test]
fn rule7_synchronizing_the_legacy_default_stream_waits_for_blocking_streams() {
    // Nothing ran on the legacy default stream itself: its synchronization still waits for the blocking
    // stream's work, as an operation issued on it would.
    assert!(races(&(write(4, "blocking", "$X") + &sync("stream", 0) + &write(1, "nb", "$X"))).is_empty());
    let query = "{\"type\":\"query\",\"stream\":0,\"ready\":true}\n";
    assert!(races(&(write(5, "blocking", "$X") + query + &read(2, "nb", "$X"))).is_empty());
    // The per-thread default stream is a blocking one.
    assert!(races(&(write(6, "per_thread", "$X") + &sync("stream", 0) + &read(2, "nb", "$X"))).is_empty());
    // Work the legacy default stream already joined before the blocking stream's write: still covered.
    let joined_then_more = write(5, "early", "$Y") + &kernel(0, "barrier", "", "") + &write(4, "blocking", "$X");
    assert!(races(&(joined_then_more + &sync("stream", 0) + &read(2, "nb", "$X") + &read(2, "nb", "$Y"))).is_empty());
}

#[test]
fn rule7_synchronizing_the_legacy_default_stream_does_not_wait_for_non_blocking_streams() {
    assert_one_race(
        &races(&(write(1, "nb", "$X") + &sync("stream", 0) + &write(2, "other", "$X"))),
        RaceKind::WriteAfterWrite,
        "nb",
        "other",
    );
    // Nor does synchronizing a blocking stream wait for another blocking stream.
    assert_one_race(
        &races(&(write(4, "blocking", "$X") + &sync("stream", 5) + &write(1, "nb", "$X"))),
        RaceKind::WriteAfterWrite,
        "blocking",
        "nb",
    );
}

// rule 8: stream-ordered allocation.
const ASYNC_BLOCK: &str =
    "{\"type\":\"alloc\",\"id\":7,\"addr\":\"0x4000\",\"size\":512,\"alloc_kind\":\"stream_ordered\",\"stream\":1}\n";
const B: &str = "[\"0x4000\", 512]";

#[test]
fn rule8_free_while_another_stream_reads_is_use_after_free() {
    let body = ASYNC_BLOCK.to_string()
        + &write(1, "init", B)
        + &rec(1, 1)
        + &wait(2, 1)
        + &read(2, "reader", B)
        + "{\"type\":\"free\",\"id\":7,\"free_kind\":\"stream_ordered\",\"stream\":1}\n";
    assert_one_race(&races(&body), RaceKind::UseAfterFree, "reader", "cudaFreeAsync");
}

#[test]
fn rule8_free_ordered_after_the_reader_is_clean() {
    let body = ASYNC_BLOCK.to_string()
        + &write(1, "init", B)
        + &rec(1, 1)
        + &wait(2, 1)
        + &read(2, "reader", B)
        + &rec(2, 2)
        + &wait(1, 2)
        + "{\"type\":\"free\",\"id\":7,\"free_kind\":\"stream_ordered\",\"stream\":1}\n";
    assert!(races(&body).is_empty());
}

#[test]
fn rule8_use_after_stream_ordered_free() {
    let body = ASYNC_BLOCK.to_string()
        + "{\"type\":\"free\",\"id\":7,\"free_kind\":\"stream_ordered\",\"stream\":1}\n"
        + &read(2, "late_reader", B);
    let found = races(&body);
    assert_one_race(&found, RaceKind::UseAfterFree, "cudaFreeAsync", "late_reader");
    assert_eq!(found[0].allocation.as_ref().map(|a| a.handle), Some(7));
}

#[test]
fn rule8_allocation_is_a_write_on_its_stream() {
    let body = ASYNC_BLOCK.to_string() + &read(2, "too_early", B);
    assert_one_race(&races(&body), RaceKind::ReadAfterWrite, "cudaMallocAsync", "too_early");
    let ordered = ASYNC_BLOCK.to_string() + &rec(1, 1) + &wait(2, 1) + &read(2, "ok", B);
    assert!(races(&ordered).is_empty());
}

// rule 9: graphs.
fn graph(stream: u32, dep: bool) -> String {
    let deps = if dep { "[0]" } else { "[]" };
    format!(
        "{{\"type\":\"graph\",\"stream\":{stream},\"name\":\"step\",\"nodes\":[{{\"name\":\"produce\",\"writes\":[$X]}},{{\"name\":\"consume\",\"reads\":[$X],\"deps\":{deps}}}]}}\n"
    )
}

#[test]
fn rule9_graph_node_dependencies_order_nodes() {
    assert!(races(&graph(1, true)).is_empty());
    assert_one_race(&races(&graph(1, false)), RaceKind::ReadAfterWrite, "produce", "consume");
}

#[test]
fn rule9_graph_runs_in_stream_order() {
    assert!(races(&(write(1, "before", "$X") + &graph(1, true) + &read(1, "after", "$X"))).is_empty());
    assert_eq!(races(&(graph(1, true) + &read(2, "other_stream", "$X"))).len(), 1);
}

#[test]
fn rule9_repeated_graph_launches_fold_into_one_finding() {
    let found = races(&(graph(1, false) + &graph(1, false) + &graph(1, false)));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].count, 3);
}

// rule 10: host threads.
#[test]
fn rule10_host_threads_ordered_by_time_in_global_mode_only() {
    let body = "{\"type\":\"kernel\",\"stream\":1,\"name\":\"a\",\"writes\":[$X],\"thread\":1}\n".to_string()
        + "{\"type\":\"sync\",\"stream\":1,\"thread\":1}\n"
        + "{\"type\":\"kernel\",\"stream\":2,\"name\":\"b\",\"reads\":[$X],\"thread\":2}\n";
    assert!(run_with(&body, HostOrder::Global).findings.races.is_empty());
    assert_eq!(run_with(&body, HostOrder::PerThread).findings.races.len(), 1);
}

#[test]
fn rule10_event_hand_over_between_threads_orders_in_strict_mode() {
    let body = "{\"type\":\"kernel\",\"stream\":1,\"name\":\"a\",\"writes\":[$X],\"thread\":1}\n".to_string()
        + "{\"type\":\"record\",\"event\":1,\"stream\":1,\"thread\":1}\n"
        + "{\"type\":\"wait\",\"event\":1,\"stream\":2,\"thread\":2}\n"
        + "{\"type\":\"kernel\",\"stream\":2,\"name\":\"b\",\"reads\":[$X],\"thread\":2}\n";
    assert!(run_with(&body, HostOrder::PerThread).findings.races.is_empty());
}

// rule 10 with the host synchronization recorded (host_release / host_acquire, as the capture's interposers
// write them): each thread its own clock, the edges joining them; the per-thread order is then exact, and the
// default where the header says the trace records it all.
fn on(thread: u32, record: &str) -> String {
    record.replace("}\n", &format!(",\"thread\":{thread}}}\n"))
}

fn release(object: u64, thread: u32) -> String {
    format!("{{\"type\":\"host_release\",\"object\":{object},\"thread\":{thread}}}\n")
}

fn acquire(object: u64, thread: u32) -> String {
    format!("{{\"type\":\"host_acquire\",\"object\":{object},\"thread\":{thread}}}\n")
}

/// Thread 1 writes X on stream 1 and synchronizes it, then `hand_over`; thread 2 reads X on stream 2.
fn handed_over(hand_over: &str) -> String {
    on(1, &write(1, "a", "$X")) + &on(1, &sync("stream", 1)) + hand_over + &on(2, &read(2, "b", "$X"))
}

#[test]
fn rule10_a_recorded_release_and_acquire_order_two_threads() {
    let body = handed_over(&(release(7, 1) + &acquire(7, 2)));
    for order in [HostOrder::Global, HostOrder::PerThread] {
        assert!(run_with(&body, order).findings.races.is_empty(), "{order:?}");
    }
    let recorded = run_traced(&body, HostOrder::Auto, true);
    assert_eq!(verdicts(&recorded), (vec![], vec![], 0));
    assert_eq!((recorded.stats.host_releases, recorded.stats.host_acquires), (1, 1));
    // Without the edge, nothing but the calls' timestamps orders the two threads.
    let unordered = handed_over("");
    assert_eq!(run_with(&unordered, HostOrder::PerThread).findings.races.len(), 1);
    assert!(run_with(&unordered, HostOrder::Global).findings.races.is_empty());
}

#[test]
fn rule10_an_acquire_takes_in_what_the_thread_knew_at_its_release_not_after() {
    let early = on(1, &write(1, "a", "$X"))
        + &release(7, 1)
        + &on(1, &sync("stream", 1))
        + &acquire(7, 2)
        + &on(2, &read(2, "b", "$X"));
    assert_one_race(&Found(run_with(&early, HostOrder::PerThread)), RaceKind::ReadAfterWrite, "a", "b");
}

#[test]
fn rule10_edges_pass_on_through_a_thread_between() {
    let through_3 = handed_over(&(release(7, 1) + &acquire(7, 3) + &release(8, 3) + &acquire(8, 2)));
    assert!(run_with(&through_3, HostOrder::PerThread).findings.races.is_empty());
    let broken = handed_over(&(release(7, 1) + &acquire(7, 3) + &acquire(8, 2)));
    assert_eq!(run_with(&broken, HostOrder::PerThread).findings.races.len(), 1);
}

#[test]
fn rule10_an_object_joins_every_release_into_it() {
    // Two threads post one semaphore; the waiter is ordered after both.
    let body = on(1, &write(1, "a", "$X"))
        + &on(3, &write(3, "c", "$Y"))
        + &on(1, &sync("stream", 1))
        + &release(5, 1)
        + &on(3, &sync("stream", 3))
        + &release(5, 3)
        + &acquire(5, 2)
        + &on(2, &read(2, "b", "$X"))
        + &on(2, &read(2, "d", "$Y"));
    assert!(run_with(&body, HostOrder::PerThread).findings.races.is_empty());
}

#[test]
fn rule10_an_acquire_before_any_release_orders_nothing() {
    let body = acquire(7, 2) + &handed_over(&release(7, 1));
    let analysis = run_with(&body, HostOrder::PerThread);
    assert_eq!(analysis.findings.races.len(), 1);
    assert_eq!(analysis.stats.host_acquires_of_nothing, 1);
}

#[test]
fn rule10_what_a_thread_that_only_polled_learned_reaches_another_through_an_edge() {
    let body = on(1, &write(1, "a", "$X"))
        + &on(1, &rec(1, 1))
        + &on(2, "{\"type\":\"query\",\"event\":1,\"ready\":true}\n")
        + &release(7, 2)
        + &acquire(7, 1)
        + &on(1, &read(2, "b", "$X"));
    for order in [HostOrder::Global, HostOrder::PerThread] {
        assert!(run_with(&body, order).findings.races.is_empty(), "{order:?}");
    }
    let without = body.replace(&release(7, 2), "");
    assert_eq!(run_with(&without, HostOrder::PerThread).findings.races.len(), 1, "the poll alone orders nothing");
}

#[test]
fn rule10_the_trace_decides_the_default_order_and_races_only_timing_orders_are_set_apart() {
    let unordered = handed_over("");
    let timestamps = run_traced(&unordered, HostOrder::Auto, false);
    assert_eq!((timestamps.host_order, timestamps.host_sync_recorded), (HostOrder::Global, false));
    assert!(timestamps.findings.races.is_empty() && timestamps.findings.timing_only_races.is_empty());
    let recorded = run_traced(&unordered, HostOrder::Auto, true);
    assert_eq!((recorded.host_order, recorded.host_sync_recorded), (HostOrder::PerThread, true));
    assert!(recorded.findings.races.is_empty());
    assert_eq!(verdicts(&recorded).1, vec![(RaceKind::ReadAfterWrite, "a".to_string(), "b".to_string())]);
    // A race that the timestamps do not order either stays a plain race.
    let both_early = on(1, &write(1, "a", "$X")) + &on(2, &read(2, "b", "$X")) + &on(1, &sync("stream", 1));
    let plain = run_traced(&both_early, HostOrder::Auto, true);
    assert_eq!((plain.findings.races.len(), plain.findings.timing_only_races.len()), (1, 0));
    // Asked for, the timestamp order keeps its meaning on a trace that records host synchronization.
    assert!(run_traced(&unordered, HostOrder::Global, true).findings.timing_only_races.is_empty());
}

// rule 11: what memory operations access.
#[test]
fn rule11_memcpy_reads_source_and_writes_destination() {
    let copy = "{\"type\":\"memcpy\",\"stream\":1,\"copy\":\"DtoD\",\"from\":$X,\"to\":$Y}\n";
    assert!(races(&(copy.to_string() + &read(2, "read_src", "$X"))).is_empty(), "read/read");
    assert_one_race(
        &races(&(copy.to_string() + &write(2, "write_src", "$X"))),
        RaceKind::WriteAfterRead,
        "memcpy DtoD",
        "write_src",
    );
    assert_one_race(
        &races(&(copy.to_string() + &read(2, "read_dst", "$Y"))),
        RaceKind::ReadAfterWrite,
        "memcpy DtoD",
        "read_dst",
    );
}

#[test]
fn rule11_memset_writes() {
    let set = "{\"type\":\"memset\",\"stream\":1,\"to\":$X}\n";
    assert_one_race(&races(&(set.to_string() + &read(2, "r", "$X"))), RaceKind::ReadAfterWrite, "memset", "r");
}

// The race definition itself.
#[test]
fn read_read_is_never_a_race() {
    assert!(races(&(read(1, "a", "$X") + &read(2, "b", "$X") + &read(3, "c", "$X"))).is_empty());
}

#[test]
fn write_is_checked_against_every_read_since_the_last_write() {
    // Stream 3 is ordered after stream 1's read but not stream 2's.
    let body = read(1, "r1", "$X") + &read(2, "r2", "$X") + &rec(1, 1) + &wait(3, 1) + &write(3, "w", "$X");
    assert_one_race(&races(&body), RaceKind::WriteAfterRead, "r2", "w");
    let both = read(1, "r1", "$X")
        + &read(2, "r2", "$X")
        + &rec(1, 1)
        + &wait(3, 1)
        + &rec(2, 2)
        + &wait(3, 2)
        + &write(3, "w", "$X");
    assert!(races(&both).is_empty());
}

#[test]
fn disjoint_ranges_never_race_and_partial_overlap_reports_the_shared_bytes() {
    assert!(races(&(write(1, "a", "[\"0x1000\", 128]") + &write(2, "b", "[\"0x1080\", 128]"))).is_empty());
    let found = races(&(write(1, "a", "[\"0x1000\", 128]") + &write(2, "b", "[\"0x1040\", 128]")));
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].range.start, found[0].range.len), (0x1040, 64));
}

#[test]
fn a_loop_of_the_same_race_is_one_finding_with_a_count() {
    let iteration = write(1, "produce", "$X") + &read(2, "consume", "$X");
    let found = races(&iteration.repeat(5));
    // Two bugs, each folded: produce -> consume in every iteration, and consume -> the next produce in four.
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!((found[0].kind, found[0].count), (RaceKind::ReadAfterWrite, 5));
    assert_eq!((found[1].kind, found[1].count), (RaceKind::WriteAfterRead, 4));
}

#[test]
fn finding_names_allocation_why_and_fix() {
    let found = races(&(write(1, "produce", "$X") + &read(2, "consume", "$X")));
    let race = &found[0];
    let alloc = race.allocation.as_ref().expect("allocation named");
    assert_eq!(alloc.label.as_deref(), Some("X"));
    let fix = found.fix_text(0);
    assert!(fix.contains("record an event on stream 1 right after `produce`"), "{fix}");
    assert!(fix.contains("make stream 2 wait on it before `consume`"), "{fix}");
}

#[test]
fn unordered_pairs_are_counted_exactly_per_stream_pair() {
    // Three operations on stream 1, then two on stream 2 with no ordering: 3 * 2 = 6 unordered pairs.
    let body = kernel(1, "a", "", "").repeat(3) + &kernel(2, "b", "", "").repeat(2);
    let analysis = run(&body);
    let pairs = &analysis.findings.stream_pairs;
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].pairs, 6);
    // No addresses: the pairs are also grouped by site.
    assert_eq!(analysis.findings.unordered_pairs.iter().map(|g| g.pairs).sum::<u64>(), 6);
    let ordered = kernel(1, "a", "", "").repeat(3) + &rec(1, 1) + &wait(2, 1) + &kernel(2, "b", "", "").repeat(2);
    assert!(run(&ordered).findings.stream_pairs.is_empty());
}

#[test]
fn unordered_pairs_count_what_a_wait_orders_from_then_on() {
    // a1-a3, then b1 b2 unordered with them; b3 b4 wait for a3; a4 is unordered with all four b.
    let body = kernel(1, "a", "", "").repeat(3)
        + &rec(1, 1)
        + &kernel(2, "b", "", "").repeat(2)
        + &wait(2, 1)
        + &kernel(2, "b", "", "").repeat(2)
        + &kernel(1, "a", "", "");
    let findings = run(&body).findings;
    assert_eq!(findings.stream_pairs.len(), 1);
    assert_eq!(findings.stream_pairs[0].pairs, 2 * 3 + 4);
    assert_eq!((findings.stream_pair_totals.stream_pairs, findings.stream_pair_totals.pairs), (1, 10));
    assert_eq!(findings.unordered_pairs.iter().map(|g| g.pairs).sum::<u64>(), 10);
}

#[test]
fn the_stream_pair_list_keeps_the_pairs_with_the_most_and_counts_all() {
    // 120 streams (ids 10-129) that each run one kernel and stream 10 two more: 7,140 stream pairs, 119 of them
    // with three pairs.
    let streams = 10..130u32;
    let mut body: String = streams
        .clone()
        .map(|s| format!("{{\"type\":\"stream\",\"id\":{s},\"stream_kind\":\"non_blocking\"}}\n"))
        .collect();
    body += &kernel(10, "first", "", "").repeat(2);
    body.extend(streams.map(|s| kernel(s, "k", "", "")));
    let findings = run(&body).findings;
    let all = 120 * 119 / 2;
    assert_eq!(findings.stream_pair_totals.stream_pairs, all);
    assert_eq!(findings.stream_pair_totals.pairs, all + 2 * 119);
    assert_eq!(findings.stream_pairs.len(), streamtrace::findings::STREAM_PAIRS_LISTED);
    assert!(findings.stream_pairs.iter().all(|p| p.pairs == 3), "the pairs with stream 10 come first");
}

// Caching-allocator blocks (tier T2): a block given back to the pool keeps the accesses made to its memory, so
// a new block handed out over it while another stream still reads it is a race; an event hand-over makes the
// reuse safe. The finding names the new block and the freed one.
const BLOCK: &str = "[\"0x1000\", 128]";

fn pool_alloc(id: u32, line: u32) -> String {
    format!("{{\"type\":\"alloc\",\"id\":{id},\"addr\":\"0x1000\",\"size\":128,\"alloc_kind\":\"pool_block\",\"src\":\"t.py:{line}\"}}\n")
}

fn pool_free(id: u32, line: u32) -> String {
    format!("{{\"type\":\"free\",\"id\":{id},\"free_kind\":\"pool_block\",\"src\":\"t.py:{line}\"}}\n")
}

#[test]
fn pool_block_reuse_while_another_stream_reads_is_a_race() {
    let body =
        pool_alloc(1, 9) + &read(1, "sum", BLOCK) + &pool_free(1, 14) + &pool_alloc(2, 15) + &write(0, "fill", BLOCK);
    let found = races(&body);
    assert_one_race(&found, RaceKind::WriteAfterRead, "sum", "fill");
    let alloc = found[0].allocation.as_ref().expect("allocation named");
    assert_eq!((alloc.kind, alloc.handle, alloc.range.len), (streamtrace::model::AllocKind::PoolBlock, 2, 128));
    assert_eq!(found.0.lookup().allocation_source(alloc).and_then(|s| s.line), Some(15));
    let reused = alloc.reuses.as_ref().expect("the freed block is named");
    assert_eq!((reused.handle, reused.freed_at.as_ref().and_then(|s| s.line)), (1, Some(14)));
}

#[test]
fn pool_block_reuse_after_an_event_hand_over_is_clean() {
    let body = pool_alloc(1, 9)
        + &read(1, "sum", BLOCK)
        + &rec(1, 1)
        + &pool_free(1, 14)
        + &pool_alloc(2, 15)
        + &wait(0, 1)
        + &write(0, "fill", BLOCK);
    assert!(races(&body).is_empty());
}

#[test]
fn pointer_arguments_resolve_to_the_pool_block_not_the_segment() {
    // A tier-T1 kernel (a Triton kernel outside any op) passing a pointer into a pool block accesses that block.
    let body = pool_alloc(1, 9)
        + &write(1, "torch_op", BLOCK)
        + "{\"type\":\"kernel\",\"stream\":2,\"name\":\"triton\",\"pointers\":[[\"0x1010\",\"r\"]]}\n";
    let found = races(&body);
    assert_one_race(&found, RaceKind::ReadAfterWrite, "torch_op", "triton");
    assert_eq!((found[0].range.start, found[0].range.len), (0x1000, 128), "the block, not the 256-byte X under it");
}

// rule 10 without timing luck (issue 14, docs/host-order.md): in the default (global) host order, a thread that
// has only polled keeps what it learned to itself, so a race is reported whether or not such a thread happened to
// see the work done before the racing call; threads that issue work still hand over through host queues. Each
// side is a hand-written trace in samples/json, analyzed in both host orders.
mod host_order {
    use super::*;
    use streamtrace::analysis::analyze_path;

    fn sample(name: &str, host_order: HostOrder) -> Analysis {
        let path = crate::util::repo().join("samples/json").join(name);
        analyze_path(&path, EngineOptions { host_order, ..Default::default() }).expect("sample analyzes")
    }

    #[test]
    fn a_thread_that_only_polls_orders_no_other_thread() {
        for order in [HostOrder::Global, HostOrder::PerThread] {
            let found = Found(sample("host_order_watchdog_poll.json", order));
            assert_one_race(&found, RaceKind::WriteAfterWrite, "all_reduce", "mul_");
        }
        let analysis = sample("host_order_watchdog_poll.json", HostOrder::Global);
        assert_eq!(analysis.stats.unshared_observations, 1, "the watchdog's query is counted as kept to itself");
    }

    #[test]
    fn the_wait_the_program_makes_orders_it_whatever_the_poller_saw() {
        for order in [HostOrder::Global, HostOrder::PerThread] {
            assert!(sample("host_order_watchdog_poll_waited.json", order).findings.races.is_empty(), "{order:?}");
        }
    }

    #[test]
    fn two_threads_with_their_own_streams_hand_over_through_a_queue_and_an_event() {
        for order in [HostOrder::Global, HostOrder::PerThread] {
            let analysis = sample("host_order_event_handover.json", order);
            assert!(analysis.findings.races.is_empty(), "{order:?}: {:#?}", analysis.findings.races);
        }
    }

    #[test]
    fn a_worker_that_synchronized_hands_over_through_a_host_queue_in_the_global_order_only() {
        assert!(sample("host_order_sync_handover.json", HostOrder::Global).findings.races.is_empty());
        let strict = Found(sample("host_order_sync_handover.json", HostOrder::PerThread));
        assert_one_race(&strict, RaceKind::ReadAfterWrite, "produce", "consume");
    }

    #[test]
    fn a_poller_that_issues_work_publishes_what_it_knows_from_that_call_on() {
        // Thread 2 polls the collective done, then launches a kernel of its own: from that call on, thread 1's
        // calls come after what thread 2 knew (the timestamp order stands for a host-side hand-over), before it
        // they do not.
        let body = "{\"type\":\"kernel\",\"stream\":2,\"name\":\"all_reduce\",\"writes\":[$X],\"thread\":1}\n"
            .to_string()
            + "{\"type\":\"record\",\"event\":1,\"stream\":2,\"thread\":1}\n"
            + "{\"type\":\"query\",\"event\":1,\"ready\":true,\"thread\":2}\n"
            + "{\"type\":\"kernel\",\"stream\":1,\"name\":\"too_early\",\"writes\":[$X],\"thread\":1}\n"
            + "{\"type\":\"kernel\",\"stream\":3,\"name\":\"own_work\",\"writes\":[$Y],\"thread\":2}\n"
            + "{\"type\":\"kernel\",\"stream\":0,\"name\":\"after_hand_over\",\"writes\":[$X],\"thread\":1}\n";
        let found = Found(run_with(&body, HostOrder::Global));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found
                .iter()
                .all(|r| &*found.site(&r.later).name == "too_early" || &*found.site(&r.earlier).name == "too_early"),
            "{found:#?}"
        );
        // Without the early write: the hand-over orders the later write after the collective, in the global
        // order only (in the per-thread order nothing thread 2 learns reaches thread 1).
        let handed_over = body
            .replace("{\"type\":\"kernel\",\"stream\":1,\"name\":\"too_early\",\"writes\":[$X],\"thread\":1}\n", "");
        assert!(run_with(&handed_over, HostOrder::Global).findings.races.is_empty());
        let strict = Found(run_with(&handed_over, HostOrder::PerThread));
        assert_one_race(&strict, RaceKind::WriteAfterWrite, "all_reduce", "after_hand_over");
    }

    #[test]
    fn a_workers_successful_query_orders_the_other_threads_later_work() {
        // PyTorch's caching allocator queries an event on the thread that then reuses the block; the same query on a
        // thread that issues work reaches other threads too.
        let body = "{\"type\":\"kernel\",\"stream\":1,\"name\":\"a\",\"writes\":[$X],\"thread\":1}\n".to_string()
            + "{\"type\":\"record\",\"event\":1,\"stream\":1,\"thread\":1}\n"
            + "{\"type\":\"query\",\"event\":1,\"ready\":true,\"thread\":1}\n"
            + "{\"type\":\"kernel\",\"stream\":2,\"name\":\"b\",\"reads\":[$X],\"thread\":2}\n";
        assert!(run_with(&body, HostOrder::Global).findings.races.is_empty());
        assert_eq!(run_with(&body, HostOrder::PerThread).findings.races.len(), 1);
    }
}
