//! Runs the built `streamtrace` binary on the traces shipped in samples/ and on bad input, and checks the
//! verdict, the exit status and the JSON report.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{analyze_json, repo, scratch_dir, scratch_file, streamtrace};

/// Ground truth of every sample in samples/json (also listed in samples/json/README.md): the races as
/// (kind, earlier site, later site, count), and the number of waits before their event's record.
fn expected(sample: &str) -> (Vec<(&'static str, &'static str, &'static str, u64)>, usize) {
    match sample {
        "two_streams_race.json" => (vec![("write-after-write", "fill", "scale", 1)], 0),
        "two_streams_event.json" => (vec![], 0),
        "legacy_default_blocking.json" => (vec![], 0),
        "legacy_default_nonblocking.json" => (vec![("read-after-write", "produce", "consume", 1)], 0),
        "free_async_while_reading.json" => (vec![("use-after-free", "reduce", "cudaFreeAsync", 1)], 0),
        "wait_before_record.json" => (vec![("read-after-write", "produce", "consume", 1)], 1),
        "event_sync_then_launch.json" => (vec![], 0),
        "allocator_query_reuse.json" => (vec![], 0),
        "graph_missing_edge.json" => (vec![("read-after-write", "gemm", "bias", 2)], 0),
        "graph_capture_fork.json" => (vec![("read-after-write", "add_", "mul", 2)], 0),
        "graph_exec_update.json" => (vec![("read-after-write", "fill", "read_b", 1)], 0),
        "pipeline_loop_race.json" => (
            vec![
                ("read-after-write", "transform", "emit", 3),
                ("write-after-read", "transform", "memcpy HtoD", 2),
                ("write-after-read", "emit", "transform", 2),
            ],
            0,
        ),
        "host_read_before_copy_done.json" => (vec![("read-after-write", "memcpy DtoH", "numpy", 1)], 0),
        "pageable_copy_then_side_stream.json" => (vec![("read-after-write", "memcpy HtoD", "use_weights", 1)], 0),
        "views_interleaved.json" => (vec![], 0),
        "views_shifted.json" => (vec![("write-after-write", "fill_even", "mul_shifted", 1)], 0),
        "views_column_slices.json" => (vec![], 0),
        "named_streams_race.json" => (
            vec![(
                "read-after-write",
                "void app::produce<float>(float*, int)",
                "void app::consume<float>(float const*, int)",
                1,
            )],
            1,
        ),
        "host_order_watchdog_poll.json" => (vec![("write-after-write", "all_reduce", "mul_", 1)], 0),
        "host_order_watchdog_poll_waited.json" => (vec![], 0),
        "host_order_sync_handover.json" => (vec![], 0),
        "host_order_event_handover.json" => (vec![], 0),
        "process_group_streams.json" => (
            vec![(
                "write-after-write",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                "mul_kernel",
                1,
            )],
            0,
        ),
        "host_sync_no_handover.json" => (vec![("write-after-write", "fill", "fill", 1)], 0),
        "host_sync_no_handover_apart.json"
        | "host_sync_atomic_handover.json"
        | "host_sync_mutex_handover.json"
        | "host_sync_create_join.json"
        | "host_sync_semaphore.json" => (vec![], 0),
        "host_func_reads_other_stream.json" => {
            (vec![("read-after-write", "memcpy DtoH", "host read in report(void*)", 1)], 0)
        }
        "host_func_after_event_wait.json" => (vec![], 0),
        "host_func_stream_order.json" => (vec![], 0),
        "guard_fault_copy_in_flight.json" => (vec![("write-after-read", "memcpy HtoD", "host write", 1)], 0),
        "managed_fault_after_kernel.json" => (vec![("read-after-write", "fill", "host read", 1)], 0),
        "managed_fault_after_sync.json" => (vec![], 0),
        "saved_hook_clone_after_wait.json" => (vec![], 0),
        "saved_hook_clone_no_wait.json" => (
            vec![
                ("read-after-write", "normal_kernel", "clone_kernel", 1),
                ("read-after-write", "normal_kernel", "clone_kernel", 1),
            ],
            0,
        ),
        "capture_range_profiler.json" => (vec![("write-after-write", "fill", "scale", 1)], 0),
        other => panic!("sample {other} has no ground truth in tests/cli.rs"),
    }
}

/// The races of a sample that are ordered only by timing, or by host synchronization the capture cannot see
/// (the per-thread host order finds them, the timestamp order does not), as in `expected`.
fn expected_timing_only(sample: &str) -> Vec<(&'static str, &'static str, &'static str, u64)> {
    match sample {
        "host_sync_no_handover_apart.json" | "host_sync_atomic_handover.json" => {
            vec![("write-after-write", "fill", "fill", 1)]
        }
        _ => vec![],
    }
}

/// A report's races of one list as (kind, earlier site, later site, count), sorted.
fn race_list(json: &Value, list: &str) -> Vec<(String, String, String, u64)> {
    let mut found: Vec<(String, String, String, u64)> = json[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} array"))
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["earlier"]["site"]["name"].as_str().unwrap_or_default().to_string(),
                r["later"]["site"]["name"].as_str().unwrap_or_default().to_string(),
                r["count"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    found.sort();
    found
}

fn owned(races: &[(&str, &str, &str, u64)]) -> Vec<(String, String, String, u64)> {
    let mut races: Vec<_> =
        races.iter().map(|(k, a, b, n)| (k.to_string(), a.to_string(), b.to_string(), *n)).collect();
    races.sort();
    races
}

#[test]
fn every_json_sample_gets_its_verdict() {
    let dir = repo().join("samples/json");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("samples/json exists") {
        let path = entry.expect("readable").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).expect("utf-8 name").to_string();
        let (races, waits) = expected(&name);
        let timing_only = expected_timing_only(&name);
        let (code, json) = analyze_json(&format!("samples/json/{name}"));
        let (status, verdict) = match (races.is_empty() && waits == 0, timing_only.is_empty()) {
            (false, _) => (1, "findings"),
            (true, false) => (3, "timing_only"),
            (true, true) => (0, "clean"),
        };
        assert_eq!(code, status, "{name}: exit status");
        assert_eq!(json["verdict"], verdict, "{name}: verdict");
        assert_eq!(race_list(&json, "races"), owned(&races), "{name}: races");
        assert_eq!(race_list(&json, "timing_only_races"), owned(&timing_only), "{name}: races ordered only by timing");
        let recorded = name.starts_with("host_sync_");
        assert_eq!(json["host_sync_recorded"], recorded, "{name}: host synchronization recorded");
        assert_eq!(json["host_order"], if recorded { "per-thread" } else { "global" }, "{name}: host order");
        assert_eq!(json["unrecorded_waits"].as_array().map(Vec::len), Some(waits), "{name}: unrecorded waits");
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} samples found");
}

#[test]
fn a_saved_tensor_hooks_clone_is_an_op_of_its_own_inside_mul() {
    // Issue 24: a clone run by a saved-tensor hook inside `mul` was given mul's extents (a write of `y` on the
    // side stream). Each race names the clone at the hook's line, reading `x` or `w`; none touches `y`.
    let (_, json) = analyze_json("samples/json/saved_hook_clone_no_wait.json");
    let mut read: Vec<&str> = Vec::new();
    for race in json["races"].as_array().expect("races") {
        let later = &race["later"]["site"];
        assert_eq!((later["region"].as_str(), later["source"]["line"].as_u64()), (Some("clone.default"), Some(17)));
        assert_eq!(race["earlier"]["site"]["region"], "normal_.default");
        read.push(race["allocation"]["label"].as_str().expect("a labelled allocation"));
    }
    read.sort_unstable();
    assert_eq!(read, ["w", "x"]);
}

#[test]
fn json_report_follows_its_schema() {
    let (_, json) = analyze_json("samples/json/two_streams_race.json");
    assert_eq!(json["schema"], "streamtrace.analysis");
    assert_eq!(json["version"], 1);
    let race = &json["races"][0];
    for field in ["kind", "earlier", "later", "range", "allocation", "why", "fix", "count", "why_text", "fix_text"] {
        assert!(!race[field].is_null(), "race lacks `{field}`: {race}");
    }
    assert_eq!(race["allocation"]["label"], "buf");
    assert_eq!(race["later"]["site"]["source"]["line"], 35);
    assert_eq!(race["range"]["len"], 4096);
    assert_eq!(race["fix"]["kind"], "record_and_wait");
    assert_eq!(race["fix"]["record_on"]["handle"], 7);
    assert_eq!(race["fix"]["wait_on"]["handle"], 13);
    assert_eq!(json["summary"]["races"], 1);
    assert_eq!(json["summary"]["has_addresses"], true);
}

#[test]
fn text_report_names_both_operations_the_allocation_and_the_fix() {
    let out = streamtrace(&["analyze", "samples/json/two_streams_race.json"]);
    assert_eq!(out.status.code(), Some(1));
    let text = crate::util::words(&String::from_utf8(out.stdout).expect("utf-8"));
    assert!(text.contains("WARNING: streamtrace: data race (write-after-write) between fill and scale"), "{text}");
    assert!(text.contains("by kernel scale on stream 13, host thread"), "{text}");
    assert!(text.contains("Previous write of 4096 bytes at 0x7f0000000000 by kernel fill on stream 7"), "{text}");
    assert!(
        text.contains("Streams: stream 13 (non-blocking) stream 7 (non-blocking)"),
        "each stream described once: {text}"
    );
    assert!(text.contains("allocation 1 `buf`"), "{text}");
    assert!(text.contains("allocated at app.cu:20"), "{text}");
    assert!(text.contains("Fix: record an event on stream 7 right after `fill`"), "{text}");
    assert!(text.contains("SUMMARY: streamtrace: 1 race"), "{text}");
}

#[test]
fn output_file_and_host_order_flags() {
    let dir = scratch_dir("cli/flags");
    let report = dir.join("report.json");
    let out = streamtrace(&[
        "analyze",
        "samples/json/two_streams_event.json",
        "--format",
        "json",
        "--host-order",
        "per-thread",
        "-o",
        report.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("report written")).expect("parses");
    assert_eq!(json["host_order"], "per-thread");
    assert_eq!(json["verdict"], "clean");
}

#[test]
fn races_ordered_only_by_timing_have_their_own_status_line_and_order() {
    // Recorded host synchronization: the per-thread order, and the race the timestamps hide is set apart.
    let out = streamtrace(&["analyze", "samples/json/host_sync_no_handover_apart.json"]);
    let text = crate::util::words(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("WARNING: streamtrace: data race ordered only by timing, or by host synchronization the capture cannot see (write-after-write)"),
        "{text}"
    );
    assert!(text.contains("Host order: per thread, joined by the host synchronization the capture recorded"), "{text}");
    assert!(text.contains("SUMMARY: streamtrace: 0 races (0 occurrences)"), "{text}");
    assert!(
        text.contains("SUMMARY: streamtrace: 1 race (1 occurrence) ordered only by timing, or by host synchronization the capture cannot see"),
        "{text}"
    );
    // Asked for the timestamp order, the same trace is clean, and says so.
    let out = streamtrace(&["analyze", "samples/json/host_sync_no_handover_apart.json", "--host-order", "global"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Host order: timestamps, as asked"), "{text}");
    assert!(!text.contains("ordered only by timing"), "{text}");
    // A race no timing hides keeps status 1 beside one that timing hides.
    let (code, json) = analyze_json("samples/json/host_sync_no_handover.json");
    assert_eq!((code, json["verdict"].as_str()), (1, Some("findings")));
    assert_eq!(json["summary"]["timing_only_races"], 0);
    // A trace without recorded host synchronization says it took the timestamps.
    let text = crate::util::words(&String::from_utf8_lossy(
        &streamtrace(&["analyze", "samples/json/host_order_sync_handover.json"]).stdout,
    ));
    assert!(text.contains("Host order: timestamps: the trace records no host synchronization between its threads"));
    let help = String::from_utf8_lossy(&streamtrace(&["analyze", "--help"]).stdout).to_string();
    assert!(help.contains("3 when the only findings are races ordered only by timing"), "{help}");
}

fn bad_input(name: &str, content: &[u8]) -> (i32, String) {
    let path = scratch_file(&format!("cli/bad/{name}"));
    std::fs::write(&path, content).expect("write");
    let out = streamtrace(&["analyze", path.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{name}: panicked: {stderr}");
    assert!(out.stdout.is_empty(), "{name}: wrote a report on bad input");
    (out.status.code().expect("exited normally"), stderr)
}

const HEADER: &str = "{\"type\":\"streamtrace\",\"version\":1}\n";

#[test]
fn bad_input_gets_one_clear_message_and_status_2() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("binary.json", vec![0x53, 0x51, 0x4c, 0x00, 0xff, 0xfe, 0x01], "not a streamtrace JSON trace"),
        ("foreign.json", b"{\"traceEvents\": []}\n".to_vec(), "not a streamtrace JSON trace"),
        ("empty.json", Vec::new(), "empty"),
        ("malformed.json", format!("{HEADER}{{\"type\":\"stream\",\"id\":1,,}}\n").into_bytes(), "bad.json:2"),
        ("truncated.json", format!("{HEADER}{{\"type\":\"stream\",\"id\":1").into_bytes(), ":2: malformed record"),
        (
            "unknown_stream.json",
            format!("{HEADER}{{\"type\":\"kernel\",\"stream\":9,\"name\":\"k\"}}\n").into_bytes(),
            ":2: unknown stream 9",
        ),
        (
            "event_before.json",
            format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"wait\",\"stream\":1,\"event\":4}}\n").into_bytes(),
            ":3: event 4 used before it exists",
        ),
        (
            "negative.json",
            format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"memset\",\"stream\":1,\"to\":[4096,-8]}}\n").into_bytes(),
            ":3: malformed record: negative address -8",
        ),
        (
            "overflow.json",
            format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"memset\",\"stream\":1,\"to\":[\"0xfffffffffffffff0\",4096]}}\n")
                .into_bytes(),
            ":3: range starting at 0xfffffffffffffff0 with 4096 bytes runs past the end",
        ),
        ("version.json", b"{\"type\":\"streamtrace\",\"version\":99}\n".to_vec(), "unsupported format version 99"),
    ];
    for (name, content, message) in cases {
        let (code, stderr) = bad_input(name, &content);
        assert_eq!(code, 2, "{name}: exit status; stderr: {stderr}");
        let message = message.replace("bad.json", name);
        assert!(stderr.contains(&message), "{name}: expected `{message}` in: {stderr}");
        assert!(stderr.contains(name), "{name}: message does not name the file: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: one message expected: {stderr}");
    }
}

#[test]
fn missing_file_and_bad_usage_exit_2() {
    let out = streamtrace(&["analyze", "no/such/trace.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/trace.json: cannot open"));
    let out = streamtrace(&["analyze", "samples/json/two_streams_race.json", "--format", "yaml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn synthetic_trace_round_trips_through_analyze() {
    let dir = scratch_dir("cli/synth");
    let trace = dir.join("synth.json");
    let out = streamtrace(&[
        "synth",
        "-o",
        trace.to_str().expect("utf-8"),
        "--ops",
        "20000",
        "--ranges",
        "500",
        "--streams",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let (code, json) = analyze_json(trace.to_str().expect("utf-8"));
    assert!(code == 0 || code == 1);
    assert!(json["stats"]["operations"].as_u64().expect("count") >= 20000);
    assert_eq!(json["stats"]["peak_live_allocations"], 500);
    let _ = Path::new(&trace);
}

#[test]
fn capture_stats_become_import_counters_and_the_cost_per_call() {
    let path = scratch_file("cli/stats.json");
    std::fs::write(
        &path,
        format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"kernel\",\"stream\":1,\"name\":\"k\"}}\n{{\"type\":\"capture_stats\",\"calls\":4,\"callback_ns\":6000}}\n"),
    )
    .expect("trace written");
    let plain = streamtrace(&["analyze", path.to_str().expect("utf-8 path")]);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("Capture cost"), "only with --verbose");
    let out = streamtrace(&["analyze", path.to_str().expect("utf-8 path"), "--verbose"]);
    let text = crate::util::words(&String::from_utf8_lossy(&out.stdout));
    assert!(
        text.contains("Capture cost: 4 driver calls recorded, 0.01 ms in the capture library (1.50 us a call"),
        "{text}"
    );
    assert!(
        text.contains("counted its one-time set-up into the calls"),
        "a capture without setup_ns says its calls hold it: {text}"
    );
    let (_, json) = analyze_json(path.to_str().expect("utf-8 path"));
    let counters = json["import"].as_array().expect("counters");
    assert!(counters.iter().any(|c| c["name"] == "capture.callback_ns" && c["count"] == 6000));
}

#[test]
fn the_capture_cost_line_puts_the_one_time_set_up_apart_from_the_calls() {
    let path = scratch_file("cli/stats_setup.json");
    std::fs::write(
        &path,
        format!("{HEADER}{{\"type\":\"stream\",\"id\":1}}\n{{\"type\":\"capture_stats\",\"calls\":6,\"callback_ns\":12600,\"setup_ns\":377000}}\n"),
    )
    .expect("trace written");
    let out = streamtrace(&["analyze", path.to_str().expect("utf-8 path"), "--verbose"]);
    let text = crate::util::words(&String::from_utf8_lossy(&out.stdout));
    assert!(
        text.contains("Capture cost: 6 driver calls recorded, 0.01 ms in the capture library (2.10 us a call, on the program's threads); one-time set-up apart: 0.38 ms"),
        "{text}"
    );
    let (_, json) = analyze_json(path.to_str().expect("utf-8 path"));
    assert!(json["import"]
        .as_array()
        .expect("counters")
        .iter()
        .any(|c| c["name"] == "capture.setup_ns" && c["count"] == 377000));
}

// Two GPUs (issue 14): the samples of samples/multi_gpu captured on the H200 pair (samples/capture/multi_gpu,
// one trace per process, torchrun's rank in each header), analyzed as jobs: `streamtrace analyze DIR`.
mod multi_gpu {
    use super::*;

    /// Each sample's races per rank (rank, kind, earlier op, later op); a sample of one process has rank None.
    fn expected(sample: &str) -> Vec<(Option<u64>, &'static str, &'static str, &'static str)> {
        match sample {
            "dist_async_use_before_wait" => vec![
                (Some(0), "write-after-write", "allreduce_.default", "mul_.Tensor"),
                (Some(1), "write-after-write", "allreduce_.default", "mul_.Tensor"),
            ],
            "dist_side_stream_no_wait" => vec![
                (Some(0), "write-after-write", "fill_.Scalar", "allreduce_.default"),
                (Some(1), "write-after-write", "fill_.Scalar", "allreduce_.default"),
            ],
            "dist_send_recv_before_wait" => vec![
                (Some(0), "write-after-read", "send.default", "fill_.Scalar"),
                (Some(1), "read-after-write", "recv_.default", "sum.default"),
            ],
            "peer_copy_race" => vec![(None, "read-after-write", "write_kernel", "memcpy PtoP")],
            "device_sync_other_gpu" => vec![(None, "read-after-write", "write_kernel", "read_kernel")],
            "dist_async_use_after_wait"
            | "dist_side_stream_wait_stream"
            | "dist_send_recv_after_wait"
            | "dist_ddp_train"
            | "peer_copy_event"
            | "device_sync_own_gpu" => vec![],
            other => panic!("two-GPU sample {other} has no ground truth in tests/cli.rs"),
        }
    }

    fn job(sample: &str) -> (i32, Value) {
        analyze_json(&format!("samples/capture/multi_gpu/{sample}"))
    }

    /// An op's name in a finding: the framework op it belongs to, else the kernel or copy.
    fn op_name(op: &Value) -> String {
        op["site"]["region"].as_str().or(op["site"]["name"].as_str()).unwrap_or_default().to_string()
    }

    #[test]
    fn every_two_gpu_sample_gets_its_verdict_on_every_rank() {
        let mut seen = 0;
        for entry in std::fs::read_dir(repo().join("samples/capture/multi_gpu")).expect("samples") {
            let path = entry.expect("readable").path();
            if !path.is_dir() {
                continue;
            }
            let sample = path.file_name().and_then(|n| n.to_str()).expect("utf-8 name").to_string();
            let want = expected(&sample);
            let (code, json) = job(&sample);
            assert_eq!(json["schema"], "streamtrace.job", "{sample}");
            assert_eq!(code, if want.is_empty() { 0 } else { 1 }, "{sample}: exit status");
            let traces = json["traces"].as_array().expect("traces");
            let ranks: Vec<Option<u64>> = traces.iter().map(|t| t["job"]["rank"].as_u64()).collect();
            if sample.starts_with("dist_") {
                assert_eq!(ranks, [Some(0), Some(1)], "{sample}: one trace per rank, in rank order");
            }
            let mut found = Vec::new();
            for trace in traces {
                assert!(
                    trace["unrecorded_waits"].as_array().is_some_and(Vec::is_empty),
                    "{sample}: no finding from NCCL's own waits"
                );
                for race in trace["races"].as_array().expect("races") {
                    found.push((
                        trace["job"]["rank"].as_u64(),
                        race["kind"].as_str().unwrap_or_default().to_string(),
                        op_name(&race["earlier"]),
                        op_name(&race["later"]),
                    ));
                }
            }
            assert_eq!(found.len(), want.len(), "{sample}: {found:#?}");
            for (rank, kind, earlier, later) in &want {
                assert!(
                    found
                        .iter()
                        .any(|(r, k, e, l)| r == rank && k == kind && e.starts_with(earlier) && l.starts_with(later)),
                    "{sample}: no {kind} {earlier} -> {later} on rank {rank:?} in {found:#?}"
                );
            }
            seen += 1;
        }
        assert_eq!(seen, 11, "every two-GPU sample has its trace");
    }

    #[test]
    fn a_collective_finding_names_its_call_and_line_and_the_fix_speaks_torch_distributed() {
        let (_, json) = job("dist_async_use_before_wait");
        let race = &json["traces"][0]["races"][0];
        assert!(
            race["earlier"]["site"]["name"].as_str().is_some_and(|n| n.starts_with("ncclDevKernel_AllReduce")),
            "{race}"
        );
        assert!(
            race["earlier"]["site"]["source"]["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("dist_async_use_before_wait.py")),
            "{race}"
        );
        assert_eq!(race["earlier"]["site"]["source"]["line"], 13, "the all_reduce's line");
        assert_eq!(race["later"]["site"]["source"]["line"], 14, "the mul_'s line");
        assert_eq!(race["fix"]["kind"], "wait_for_collective");
        let fix = race["fix_text"].as_str().expect("fix text");
        assert!(fix.contains("`work.wait()`") && fix.contains("dist.all_reduce(..., async_op=True)"), "{fix}");

        let (_, json) = job("dist_side_stream_no_wait");
        let fix = json["traces"][1]["races"][0]["fix_text"].as_str().expect("fix text");
        assert!(fix.contains("wait_stream") && fix.contains("before `dist.all_reduce`"), "{fix}");

        let (_, json) = job("dist_send_recv_before_wait");
        let fix = json["traces"][1]["races"][0]["fix_text"].as_str().expect("fix text");
        assert!(fix.contains("`dist.irecv(...)`") && fix.contains("blocking `dist.recv`"), "{fix}");
    }

    #[test]
    fn nccl_waits_on_events_it_never_records_are_info() {
        let (code, json) = job("dist_async_use_after_wait");
        assert_eq!((code, json["verdict"].as_str()), (0, Some("clean")));
        for trace in json["traces"].as_array().expect("traces") {
            let info: u64 = trace["waits_on_never_recorded_events"]
                .as_array()
                .expect("info")
                .iter()
                .map(|w| w["count"].as_u64().unwrap_or(0))
                .sum();
            assert!(info >= 30, "NCCL waits on its serial event at every collective: {info}");
        }
    }

    #[test]
    fn a_job_report_heads_each_rank_and_ends_with_one_summary() {
        let out = streamtrace(&["analyze", "samples/capture/multi_gpu/dist_send_recv_before_wait"]);
        assert_eq!(out.status.code(), Some(1), "the worst status of the job");
        let text = String::from_utf8_lossy(&out.stdout);
        let rank0 = text.find("== rank 0 (local rank 0) of 2, GPU 0:").expect("rank 0's heading");
        let rank1 = text.find("== rank 1 (local rank 1) of 2, GPU 1:").expect("rank 1's heading");
        assert!(rank0 < rank1, "{text}");
        assert_eq!(text.matches("JOB SUMMARY").count(), 1, "{text}");
        let summary = &text[text.find("JOB SUMMARY").expect("a summary")..];
        assert!(summary.starts_with("JOB SUMMARY: streamtrace: 2 traces: 2 races"), "{text}");
        assert!(
            summary.lines().skip(1).all(|l| l.starts_with("    ")),
            "the summary ends the report (wrapped at 120 columns): {text}"
        );
    }

    #[test]
    fn a_peer_copy_race_names_both_gpus() {
        let (_, json) = job("peer_copy_race");
        let race = &json["traces"][0]["races"][0];
        assert_eq!(
            (race["earlier"]["site"]["stream"]["device"].as_u64(), race["later"]["site"]["stream"]["device"].as_u64()),
            (Some(0), Some(1))
        );
    }

    #[test]
    fn a_job_html_report_has_a_lane_group_per_rank() {
        let html = scratch_file("cli/job.html");
        let out = streamtrace(&[
            "analyze",
            "samples/capture/multi_gpu/dist_async_use_before_wait",
            "--html",
            html.to_str().expect("utf-8"),
        ]);
        assert_eq!(out.status.code(), Some(1));
        let page = std::fs::read_to_string(&html).expect("html written");
        assert!(
            page.contains("rank 0: default stream") && page.contains("rank 1: default stream"),
            "lanes labeled by rank"
        );
    }
}

/// Every committed trace, as tests/report_snapshots.sh lists them: the JSON traces under samples/, the nsys
/// exports, and each multi-GPU job's folder.
fn committed_traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).expect("samples folder").map(|e| e.expect("entry").path()).collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if path.parent().is_some_and(|p| p.ends_with("samples/capture/multi_gpu")) {
                    out.push(path.clone());
                }
                walk(&path, out);
            } else if (name.ends_with(".json") && !name.starts_with("README")) || name.ends_with(".sqlite") {
                out.push(path);
            }
        }
    }
    let mut traces = Vec::new();
    walk(&crate::util::repo().join("samples"), &mut traces);
    traces
}

/// Words a report prints for people must not be the analyzer's own terms.
const INTERNAL_TERMS: &[&str] =
    &["input line/row", "in region", "(operation ", "tier T", "Capture cost", "`void ", "Some(", "None"];

/// The layout rules of the text report (issue 28), on every committed trace's report: lines fit 120 columns, each
/// finding describes each of its streams once (in its Streams block; elsewhere it names them by handle), no
/// internal terms, and the exit status is the verdict's (0 clean, 1 findings, 3 only races ordered by timing),
/// the same for the text and the JSON report.
#[test]
fn every_committed_report_keeps_the_layout_rules_and_the_exit_status_rules() {
    let traces = committed_traces();
    assert!(traces.len() > 100, "{} traces", traces.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let problems = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(trace) = traces.get(i) else { break };
                let found = layout_problems(trace);
                problems.lock().expect("lock").extend(found);
            });
        }
    });
    let problems = problems.into_inner().expect("lock");
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

fn layout_problems(trace: &Path) -> Vec<String> {
    let name = trace.strip_prefix(crate::util::repo()).unwrap_or(trace).display().to_string();
    let text_run = streamtrace(&["analyze", &name]);
    let json_run = streamtrace(&["analyze", &name, "--format", "json"]);
    let text = String::from_utf8_lossy(&text_run.stdout).into_owned();
    let mut problems = Vec::new();
    let json: Value = match serde_json::from_slice(&json_run.stdout) {
        Ok(json) => json,
        Err(e) => return vec![format!("{name}: JSON report: {e}")],
    };
    let verdict_status = match json["verdict"].as_str() {
        Some("clean") => 0,
        Some("findings") => 1,
        Some("timing_only") => 3,
        Some("error") => 2,
        other => return vec![format!("{name}: verdict {other:?}")],
    };
    if text_run.status.code() != Some(verdict_status) || json_run.status.code() != Some(verdict_status) {
        problems.push(format!(
            "{name}: exit {:?} (text), {:?} (JSON), verdict says {verdict_status}",
            text_run.status.code(),
            json_run.status.code()
        ));
    }
    if !text.contains("SUMMARY: streamtrace:") {
        problems.push(format!("{name}: no SUMMARY line"));
    }
    for (number, line) in text.lines().enumerate() {
        let width = line.chars().count();
        if width > 120 {
            problems.push(format!("{name}:{}: {width} columns: {line}", number + 1));
        }
    }
    let words = crate::util::words(&text);
    for term in INTERNAL_TERMS {
        if words.contains(term) {
            problems.push(format!("{name}: says `{term}`"));
        }
    }
    // Each stream's name at most once in each finding (the finding's Streams block).
    let mut names: Vec<String> = Vec::new();
    let mut collect = |report: &Value| {
        for race in report["races"].as_array().into_iter().flatten() {
            for side in ["earlier", "later"] {
                let stream = &race[side]["site"]["stream"];
                if let Some(name) = stream["name"].as_str().filter(|_| stream["kind"] != "host_thread") {
                    names.push(crate::util::words(name));
                }
            }
        }
    };
    collect(&json);
    for report in json["traces"].as_array().into_iter().flatten() {
        collect(report);
    }
    for block in text.split("==================") {
        let block_words = crate::util::words(block);
        for stream in &names {
            if block_words.matches(stream.as_str()).count() > 1 {
                problems.push(format!("{name}: a finding describes `{stream}` more than once"));
            }
        }
        // The Streams block: one line per stream, `    stream HANDLE (kind)...`.
        let labels: Vec<&str> = block
            .lines()
            .skip_while(|line| *line != "  Streams:")
            .skip(1)
            .take_while(|line| line.starts_with("    "))
            .filter_map(|line| line.strip_prefix("    stream ")?.split_whitespace().next())
            .collect();
        let mut unique = labels.clone();
        unique.sort();
        unique.dedup();
        if unique.len() != labels.len() {
            problems.push(format!("{name}: a Streams block lists a stream twice: {labels:?}"));
        }
    }
    problems.sort();
    problems.dedup();
    problems
}
