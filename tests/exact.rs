//! Traces recorded by `streamtrace capture --exact` (tier T3, the Compute Sanitizer backend) on the GPU machine
//! (samples/capture/exact, samples/capture/torch-t3; samples/capture/README.md): every verdict, and the bytes
//! the exact accesses narrow a race to, checked on every CI run without a GPU. Beside them the same programs'
//! tier-T1 captures (samples/capture/cuda), whose verdicts rest on whole allocation blocks.

use serde_json::Value;

use crate::util::{analyze_json as analyze, analyze_text as text};

/// The races of a trace as (kind, range length), sorted.
fn races(json: &Value) -> Vec<(String, u64)> {
    let mut found: Vec<(String, u64)> = json["races"]
        .as_array()
        .expect("races")
        .iter()
        .map(|r| (r["kind"].as_str().unwrap_or_default().to_string(), r["range"]["len"].as_u64().unwrap_or(0)))
        .collect();
    found.sort();
    found
}

#[test]
fn slices_of_one_buffer_are_clean_at_t3_and_their_overlap_is_the_race() {
    let (code, json) = analyze("samples/capture/exact/exact_slices_per_stream.json");
    assert_eq!((code, races(&json)), (0, vec![]), "four streams, four disjoint slices");
    // The same program at tier T1: one pointer into one block per launch, every pair of streams a race.
    let (code, json) = analyze("samples/capture/cuda/exact_slices_per_stream.json");
    assert_eq!(code, 1);
    assert_eq!(races(&json).len(), 3);
    assert!(races(&json).iter().all(|(_, len)| *len == 4 << 20), "T1 reports the whole 4 MiB block");

    let (code, json) = analyze("samples/capture/exact/exact_slices_per_stream-overlap.json");
    assert_eq!(code, 1);
    assert_eq!(races(&json), vec![("write-after-write".to_string(), 1024); 3], "the 1 KiB each pair shares");
}

#[test]
fn a_struct_of_pointers_races_only_on_the_member_written_twice() {
    let (code, json) = analyze("samples/capture/exact/exact_struct_members.json");
    assert_eq!((code, races(&json)), (0, vec![]), "b and c are different buffers");
    let (code, json) = analyze("samples/capture/cuda/exact_struct_members.json");
    assert_eq!((code, races(&json).len()), (1, 1), "T1 takes every pointer in the struct as a write");

    let (code, json) = analyze("samples/capture/exact/exact_struct_members-same-member.json");
    assert_eq!(code, 1);
    assert_eq!(races(&json), vec![("write-after-write".to_string(), 4 << 20)]);
}

#[test]
fn a_write_through_a_pointer_loaded_from_memory_is_seen_at_t3_only() {
    // write_through_table gets a table of pointers, not the buffer: T1 sees no argument pointing into buf.
    let (code, json) = analyze("samples/capture/exact/exact_pointer_from_memory.json");
    assert_eq!(code, 1);
    assert_eq!(races(&json).len(), 1);
    let race = &json["races"][0];
    assert_eq!(race["kind"], "read-after-write");
    assert!(race["earlier"]["site"]["name"].as_str().is_some_and(|n| n.starts_with("write_through_table")), "{race:#}");
    assert!(race["later"]["site"]["name"].as_str().is_some_and(|n| n.starts_with("read_kernel")), "{race:#}");
    let (code, json) = analyze("samples/capture/cuda/exact_pointer_from_memory.json");
    assert_eq!((code, races(&json)), (0, vec![]), "T1 misses it: the reason for --exact");
}

#[test]
fn a_library_kernel_racing_with_a_copy_is_found_on_what_it_wrote() {
    let (code, json) = analyze("samples/capture/exact/exact_cublas_copy_race.json");
    assert_eq!(code, 1);
    let found = races(&json);
    assert_eq!(found, vec![("read-after-write".to_string(), 4 << 20)], "C, 1024 x 1024 floats");
    let race = &json["races"][0];
    assert!(race["earlier"]["site"]["name"].as_str().is_some_and(|n| n.contains("gemm")), "{race:#}");
    assert_eq!(race["later"]["site"]["class"], "memcpy");
}

#[test]
fn every_earlier_sample_keeps_its_verdict_under_exact() {
    // (trace, races): the tier-T1 captures' verdicts, which were right for these.
    let expected = [
        ("two_streams_race", 1),
        ("two_streams_event", 0),
        ("legacy_blocking", 0),
        ("legacy_nonblocking", 1),
        ("free_async_while_reading", 1),
        ("wait_before_record", 1),
        ("event_sync_then_launch", 0),
        ("threads_event_handover", 0),
        ("d2d_copy_race", 1),
        ("two_readers", 0),
        ("pageable_copy_then_nonblocking", 1),
        ("pinned_copy_then_nonblocking", 0),
        ("registered_copy_then_nonblocking", 0),
        ("memset_then_nonblocking", 1),
        ("d2h_copy_unsynchronized", 1),
        ("d2h_copy_after_sync", 0),
        ("pitched_copy_race", 1),
        ("batch_copy_race", 1),
        ("pitched_copy_event", 0),
        ("graph_capture_fork_race", 1),
        ("graph_capture_fork_joined", 0),
        ("graph_explicit_edge-no-edge", 1),
        ("graph_explicit_edge", 0),
        ("graph_update_buffer", 1),
        ("graph_replay_wait-no-wait", 1),
        ("graph_replay_wait", 0),
    ];
    for (name, count) in expected {
        let exact = format!("samples/capture/exact/{name}.json");
        let (_, json) = analyze(&exact);
        assert_eq!(races(&json).len(), count, "{exact}");
        let (_, t1) = analyze(&format!("samples/capture/cuda/{name}.json"));
        let kinds = |j: &Value| races(j).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(kinds(&json), kinds(&t1), "{name}: the same kinds of race as at tier T1");
    }
}

#[test]
fn the_report_says_which_kernels_ran_at_which_tier() {
    let report = text("samples/capture/exact/graph_replay_wait-no-wait.json");
    assert!(report.contains("Exact accesses (--exact):"), "{report}");
    assert!(report.contains("graph launches, which keep their arguments' blocks"), "{report}");
    let (_, json) = analyze("samples/capture/exact/exact_cublas_copy_race.json");
    let exact = &json["stats"]["exact_kernels"];
    assert!(exact["whole"].as_u64().is_some_and(|n| n > 0), "{exact:#}");
    // A trace of the default backend says nothing of it.
    let (_, json) = analyze("samples/capture/cuda/two_streams_race.json");
    assert!(json["stats"].get("exact_kernels").is_none());
}

#[test]
fn pytorch_ops_and_exact_bytes_together_keep_interleaved_views_apart() {
    // At 32-byte granules the kernels writing buf[0::2] and buf[1::2] touch the same granules; the ops' views
    // say which bytes are whose (tier T2 and T3 together).
    let (code, json) = analyze("samples/capture/torch-t3/views_interleaved.json");
    assert_eq!((code, races(&json)), (0, vec![]));
    let (code, json) = analyze("samples/capture/torch-t3/two_streams_no_wait.json");
    assert_eq!((code, races(&json).len()), (1, 2));
    let source = &json["races"][0]["later"]["site"]["source"];
    assert!(
        source["file"].as_str().is_some_and(|f| f.ends_with("two_streams_no_wait.py")),
        "the op's Python line: {source}"
    );
}

/// Issue 21 item 5: a default (CUPTI, tier T1) capture's race that rests on kernels' pointer arguments taken as
/// whole blocks says so, and names `--exact` to confirm it; the same program captured with `--exact`, a race of
/// copies and hand-written ranges carry no such note.
#[test]
fn a_race_on_whole_blocks_names_exact_capture_to_confirm_it() {
    let extents = |trace: &str| -> Vec<String> {
        let (_, json) = crate::util::analyze_json(trace);
        json["races"]
            .as_array()
            .expect("races")
            .iter()
            .map(|r| r["extent"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let t1 = extents("samples/capture/cuda/exact_slices_per_stream.json");
    assert!(!t1.is_empty() && t1.iter().all(|e| e == "whole_block_arguments"), "{t1:?}");
    let text = crate::util::words(&crate::util::analyze_text("samples/capture/cuda/exact_slices_per_stream.json"));
    assert!(text.contains("rests on a kernel's pointer argument taken for its whole allocation block"), "{text}");
    assert!(text.contains("`streamtrace capture --exact` records the bytes each kernel touched"), "{text}");
    for known in [
        "samples/capture/exact/two_streams_race.json",
        "samples/capture/cuda/pinned_staging_refill.json",
        "samples/json/pipeline_loop_race.json",
    ] {
        let found = extents(known);
        assert!(!found.is_empty() && found.iter().all(|e| e == "known"), "{known}: {found:?}");
        assert!(!crate::util::analyze_text(known).contains("--exact` records"), "{known}");
    }
}
