//! Traces recorded in capture ranges (`streamtrace capture --capture-range`, docs/capture.md): a range's start
//! orders what ran before it, and a trace of several ranges is reported a section per range.

use serde_json::Value;

use crate::util::{analyze_json, scratch_file, streamtrace};

const REPEAT: &str = "tests/ranges/capture_range_repeat.json";

/// The (kind, earlier, later) races of one section of a report.
fn races(report: &Value) -> Vec<(String, String, String)> {
    let name = |op: &Value| op["site"]["name"].as_str().unwrap_or_default().to_string();
    report["races"]
        .as_array()
        .map(|races| {
            races
                .iter()
                .map(|r| (r["kind"].as_str().unwrap_or_default().into(), name(&r["earlier"]), name(&r["later"])))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn each_range_of_a_repeating_capture_is_its_own_section() {
    let (status, json) = analyze_json(REPEAT);
    assert_eq!(status, 1, "{json:#}");
    let sections = json["traces"].as_array().expect("a section per range");
    assert_eq!(sections.len(), 2, "{json:#}");
    assert_eq!(sections[0]["capture_range"]["index"], 1);
    assert_eq!(sections[0]["capture_range"]["name"], "step");
    assert_eq!(sections[0]["verdict"], "clean", "{json:#}");
    assert_eq!(sections[1]["capture_range"]["index"], 2);
    // `scale` in range 2 reads what `fill` wrote in range 1 and is not reported: what ordered them ran between
    // the ranges, where the trace holds no work.
    assert_eq!(races(&sections[1]), [("read-after-write".into(), "grad_write".into(), "grad_read".into())]);
    assert_eq!(json["summary"]["races"], 1);
    let text = String::from_utf8_lossy(&streamtrace(&["analyze", REPEAT]).stdout).into_owned();
    assert!(
        text.contains("== capture range 1 (NVTX `step`)") && text.contains("== capture range 2 (NVTX `step`)"),
        "{text}"
    );
}

#[test]
fn without_its_range_edges_the_same_work_races_across_them() {
    // The twin that shows what the edges do: the same records with the ranges taken out.
    let text = std::fs::read_to_string(crate::util::repo().join(REPEAT)).expect("reads");
    let whole: String = text
        .lines()
        .filter(|line| !line.contains("\"range_"))
        .map(|line| line.replace(", \"ranges\": \"nvtx\"", "") + "\n")
        .collect();
    let path = scratch_file("capture_range_repeat_whole.json");
    std::fs::write(&path, whole).expect("writes");
    let (status, json) = analyze_json(path.to_str().expect("utf-8"));
    assert_eq!(status, 1);
    let mut found = races(&json);
    found.sort();
    assert_eq!(
        found,
        [
            ("read-after-write".to_string(), "fill".to_string(), "scale".to_string()),
            ("read-after-write".to_string(), "grad_write".to_string(), "grad_read".to_string()),
        ]
    );
}

#[test]
fn a_range_record_without_its_number_is_refused() {
    let path = scratch_file("capture_range_unnumbered.json");
    std::fs::write(&path, "{\"type\": \"streamtrace\", \"version\": 1}\n{\"type\": \"range_begin\"}\n")
        .expect("writes");
    let out = streamtrace(&["analyze", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("range_begin") && stderr.contains("`id`"), "{stderr}");
}
