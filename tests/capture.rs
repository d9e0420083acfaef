//! Traces recorded by `streamtrace capture` on the GPU machine (samples/capture, see its README): every verdict,
//! the racing operations, their streams and the range are checked here, on every CI run, without a GPU.
//! The capture itself runs on the GPU machine through `benches/gpu_capture_run.sh`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn analyze(trace: &str) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_streamtrace"))
        .args(["analyze", trace, "--format", "json"])
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("runs");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{trace}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().expect("exit code"), json)
}

/// (kind, earlier name prefix, later name prefix) of each race, sorted.
fn races(json: &Value) -> Vec<(String, String, String)> {
    let mut found: Vec<_> = json["races"]
        .as_array()
        .expect("races")
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["earlier"]["site"]["name"].as_str().unwrap_or_default().to_string(),
                r["later"]["site"]["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    found.sort();
    found
}

fn expect_races(trace: &str, expected: &[(&str, &str, &str)]) -> Value {
    let (code, json) = analyze(trace);
    let found = races(&json);
    assert_eq!(found.len(), expected.len(), "{trace}: {found:#?}");
    for (kind, earlier, later) in expected {
        assert!(
            found.iter().any(|(k, e, l)| k == kind && e.starts_with(earlier) && l.starts_with(later)),
            "{trace}: no {kind} {earlier} -> {later} in {found:#?}"
        );
    }
    assert_eq!(code, if expected.is_empty() && json["unrecorded_waits"].as_array().is_some_and(Vec::is_empty) { 0 } else { 1 }, "{trace}");
    json
}

#[test]
fn cuda_race_samples_are_found_with_their_range_and_streams() {
    let json = expect_races("samples/capture/cuda/two_streams_race.json", &[("write-after-write", "write_kernel", "write_kernel")]);
    let race = &json["races"][0];
    assert_ne!(race["earlier"]["site"]["stream"]["handle"], race["later"]["site"]["stream"]["handle"]);
    assert_eq!(race["range"]["len"], 4 << 20, "the whole 4 MiB buffer (tier T1: the allocation block)");
    assert_eq!(race["allocation"]["kind"], "device");

    let json = expect_races("samples/capture/cuda/legacy_nonblocking.json", &[("read-after-write", "write_kernel", "read_kernel")]);
    assert_eq!(json["races"][0]["later"]["site"]["stream"]["kind"], "legacy_default");
    assert_eq!(json["races"][0]["earlier"]["site"]["stream"]["kind"], "non_blocking");

    let json = expect_races("samples/capture/cuda/free_async_while_reading.json", &[("use-after-free", "read_kernel", "cudaFreeAsync")]);
    assert_eq!(json["races"][0]["allocation"]["kind"], "stream_ordered");

    let json = expect_races("samples/capture/cuda/wait_before_record.json", &[("read-after-write", "write_kernel", "read_kernel")]);
    assert_eq!(json["unrecorded_waits"].as_array().map(Vec::len), Some(1));

    let json = expect_races("samples/capture/cuda/d2d_copy_race.json", &[("write-after-read", "read_kernel", "memcpy DtoD")]);
    assert_eq!(json["races"][0]["range"]["len"], 4 << 20);
}

#[test]
fn cuda_clean_samples_have_no_finding() {
    for sample in ["two_streams_event", "legacy_blocking", "event_sync_then_launch", "threads_event_handover", "two_readers"] {
        expect_races(&format!("samples/capture/cuda/{sample}.json"), &[]);
    }
}

#[test]
fn const_pointer_parameters_are_reads() {
    // read_kernel(float const*, float*, int): its input is read, so two readers of one buffer do not race.
    let (_, json) = analyze("samples/capture/cuda/two_readers.json");
    assert!(json["races"].as_array().is_some_and(Vec::is_empty));
    assert_eq!(json["stats"]["unresolved_pointers"], 0);
}

#[test]
fn torch_samples_captured_at_tier_t1() {
    const VEC: &str = "void at::native::vectorized_elementwise_kernel";
    expect_races(
        "samples/capture/torch/two_streams_no_wait.json",
        &[("write-after-write", VEC, VEC), ("write-after-write", VEC, VEC)],
    );
    expect_races("samples/capture/torch/two_streams_event.json", &[]);
    expect_races("samples/capture/torch/prefetch_no_wait.json", &[("write-after-write", "memcpy HtoD", VEC)]);
    expect_races("samples/capture/torch/wait_before_record.json", &[("write-after-write", VEC, VEC)]);
}
