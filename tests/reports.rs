//! The timeline reports: Perfetto JSON holds the tracks, flows and markers; the HTML report escapes every string
//! from the trace and works in a real browser (headless Chromium, which .ci/run installs): lanes and findings
//! appear, picking a finding selects its two operations, no JavaScript error is logged, and a screenshot is taken.
//! Without Chromium or a font the tests that need them skip with a notice (tests/util/machine.rs).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{binary, machine, repo, scratch_dir, scratch_file};

fn analyze_with_reports(trace: &Path, html: &Path, perfetto: &Path) {
    let out = binary()
        .arg("analyze")
        .arg(trace)
        .arg("--html")
        .arg(html)
        .arg("--perfetto")
        .arg(perfetto)
        .output()
        .expect("runs");
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn perfetto_trace_has_tracks_flows_and_markers() {
    let (html, perfetto) = (scratch_file("reports/pipe.html"), scratch_file("reports/pipe.json"));
    analyze_with_reports(&repo().join("samples/json/pipeline_loop_race.json"), &html, &perfetto);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("written")).expect("parses");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    // The 3 streams that ran something named as tracks (the legacy default stream ran nothing); 3 iterations x
    // (copy, transform, emit) bars; 3 record->wait flows; 3 races.
    let tracks: Vec<&str> =
        events.iter().filter(|e| e["name"] == "thread_name").filter_map(|e| e["args"]["name"].as_str()).collect();
    assert_eq!(tracks.len(), 3, "{tracks:?}");
    assert!(tracks.iter().any(|t| t.starts_with("stream 2 (non-blocking")));
    assert_eq!(count("X"), 9);
    assert_eq!(count("s"), 3);
    assert_eq!(count("f"), 3);
    assert_eq!(count("i"), 3);
    for e in events.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
        assert!(e["id"].is_u64() && e["ts"].is_number() && e["tid"].is_u64(), "{e}");
    }
    let marker = events.iter().find(|e| e["ph"] == "i").expect("marker");
    assert!(marker["args"]["fix"].as_str().is_some_and(|f| f.contains("record an event")));
}

#[test]
fn perfetto_draws_a_graph_launch_as_a_block_with_its_nodes() {
    let (html, perfetto) = (scratch_file("reports/graph.html"), scratch_file("reports/graph.json"));
    analyze_with_reports(&repo().join("samples/json/graph_capture_fork.json"), &html, &perfetto);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("written")).expect("parses");
    let events = json["traceEvents"].as_array().expect("events");
    let slices = |cat: &str| -> Vec<(f64, f64, String)> {
        events
            .iter()
            .filter(|e| e["cat"] == cat)
            .map(|e| {
                (
                    e["ts"].as_f64().unwrap_or(-1.0),
                    e["dur"].as_f64().unwrap_or(-1.0),
                    e["name"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let launches = slices("graph launch");
    let nodes = slices("graph node");
    assert_eq!(launches.len(), 2, "two replays");
    assert_eq!(nodes.len(), 2 * 3, "three nodes in each");
    for (ts, dur, _) in &nodes {
        assert!(
            launches.iter().any(|(l, d, _)| ts >= l && ts + dur <= l + d + 1e-9),
            "a node outside its launch: {ts} {dur}"
        );
    }
    let names: Vec<&str> = nodes[..3].iter().map(|(_, _, n)| n.as_str()).collect();
    assert_eq!(names, ["fill", "add_", "mul"]);
}

#[test]
fn a_race_between_two_nodes_of_one_launch_is_marked_on_those_nodes() {
    let (html, perfetto) = (scratch_file("reports/nodes.html"), scratch_file("reports/nodes.json"));
    analyze_with_reports(&repo().join("samples/json/graph_capture_fork.json"), &html, &perfetto);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("written")).expect("parses");
    let events = json["traceEvents"].as_array().expect("events");
    let marker = events.iter().find(|e| e["ph"] == "i").expect("the race's marker");
    assert_eq!(marker["args"]["outlined"], "nodes `add_` and `mul` inside one graph launch");
    // The marker's node indexes are the node slices' own, and it sits on the later node's slice.
    let launch = marker["args"]["later_seq"].as_u64().expect("the launch");
    let node = |index: &Value| {
        events
            .iter()
            .find(|e| {
                e["cat"] == "graph node"
                    && e["args"]["launch_seq"].as_u64() == Some(launch)
                    && &e["args"]["node"] == index
            })
            .unwrap_or_else(|| panic!("no node {index} in launch {launch}"))
    };
    let (earlier, later) = (node(&marker["args"]["earlier_node"]), node(&marker["args"]["later_node"]));
    assert_eq!((earlier["name"].as_str(), later["name"].as_str()), (Some("add_"), Some("mul")));
    assert_eq!(marker["ts"], later["ts"]);
    // The page outlines the same two nodes inside the launch's block and says so in its legend.
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(
        page.contains(
            "\"earlier_node\":1,\"later_node\":2,\"outlined\":\"nodes `add_` and `mul` inside one graph launch\""
        ),
        "{page}"
    );
}

#[test]
fn nsys_input_is_placed_by_gpu_time() {
    let (html, perfetto) = (scratch_file("reports/nsys.html"), scratch_file("reports/nsys.json"));
    analyze_with_reports(&repo().join("samples/nsys/torch_loop_race.sqlite"), &html, &perfetto);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("written")).expect("parses");
    let bars: Vec<&Value> = json["traceEvents"].as_array().expect("events").iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(bars.len(), 10, "9 kernels and one copy");
    // GPU times of a capture are in the billions of nanoseconds, not issue positions.
    assert!(bars.iter().all(|b| b["ts"].as_f64().unwrap_or(0.0) > 1e6));
    let html = std::fs::read_to_string(&html).expect("html");
    assert!(html.contains("\"gpu_time\":true"));
}

const HOSTILE: &str = r#"{"type": "streamtrace", "version": 1}
{"type": "stream", "id": 1, "stream_kind": "non_blocking"}
{"type": "stream", "id": 2, "stream_kind": "non_blocking"}
{"type": "kernel", "stream": 1, "name": "<script>alert(1)</script>", "writes": [["0x1000", 64]]}
{"type": "kernel", "stream": 2, "name": "</script><img src=x onerror=alert(2)>", "writes": [["0x1000", 64]]}
"#;

#[test]
fn every_string_from_the_trace_is_escaped() {
    let trace = scratch_file("reports/hostile.json");
    std::fs::write(&trace, HOSTILE).expect("write");
    let (html, perfetto) = (scratch_file("reports/hostile.html"), scratch_file("reports/hostile.perfetto.json"));
    analyze_with_reports(&trace, &html, &perfetto);
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(!page.contains("<script>alert"), "kernel name reached the page as markup");
    assert!(!page.contains("<img"), "kernel name reached the page as markup");
    assert_eq!(page.matches("</script>").count(), 2, "only the report's own two scripts end");
    assert!(page.contains("\\u003cscript\\u003ealert(1)"));
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("perfetto")).expect("parses");
    assert!(trace["traceEvents"].as_array().expect("events").iter().any(|e| e["name"] == "<script>alert(1)</script>"));
}

fn headless(chromium: &Path, args: &[&str]) -> (String, String) {
    // A profile of its own: Chromium refuses a profile another running Chromium holds (tests run in parallel).
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let profile =
        scratch_file(&format!("reports/chromium-profile-{}", RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("chromium runs");
    (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

/// The HTML report of `sample` (written as `name`) open in headless Chromium at `fragment` (`#finding=0`, or
/// nothing): its address and the page as the script left it, after checking that the script ran to its end
/// without an error.
fn page_at(chromium: &Path, sample: &Path, name: &str, fragment: &str) -> (String, String) {
    let html = scratch_file(&format!("reports/{name}.html"));
    let out = binary().arg("analyze").arg(sample).arg("--html").arg(&html).output().expect("runs");
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let url = format!("file://{}{fragment}", html.display());
    let (dom, log) = headless(chromium, &["--dump-dom", &url]);
    let console_errors: Vec<&str> =
        log.lines().filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error"))).collect();
    assert!(console_errors.is_empty(), "JavaScript errors: {console_errors:#?}");
    assert!(dom.contains("data-ready=\"1\""), "the script did not finish: {dom}");
    (url, dom)
}

/// The HTML report of `sample` open in headless Chromium with its first finding picked by the address.
fn page_in_browser(chromium: &Path, sample: &str, name: &str) -> (String, String) {
    page_at(chromium, &repo().join(sample), name, "#finding=0")
}

#[test]
fn html_report_picks_the_first_finding_on_load_and_shows_it_in_sections() {
    let Some(chromium) = machine::chromium_or_skip("html_report_picks_the_first_finding_on_load") else { return };
    let (_, dom) = page_at(&chromium, &repo().join("samples/json/pipeline_loop_race.json"), "first", "");
    // No #finding in the address: the first finding is picked all the same, its two operations selected.
    let selected = dom.split("data-selected=\"").nth(1).and_then(|s| s.split('"').next()).expect("a selection");
    assert_eq!(selected.split(',').count(), 2, "{selected}");
    let details = dom.split("id=\"details\"").nth(1).expect("details");
    for heading in ["Access", "Previous access", "Memory", "Why nothing orders them", "Fix"] {
        assert!(details.contains(&format!("<dt>{heading}</dt>")), "{heading}: {details}");
    }
    // #finding=2 picks the third.
    let (_, dom) = page_at(&chromium, &repo().join("samples/json/pipeline_loop_race.json"), "third", "#finding=2");
    assert_eq!(dom.matches("class=\"selected\"").count(), 1);
    let third = dom.split("<ul id=\"findings\">").nth(1).and_then(|s| s.split("</li>").nth(2)).expect("third");
    assert!(third.contains("class=\"selected\""), "{third}");
}

#[test]
fn html_report_of_a_job_heads_each_rank_with_its_gpu() {
    let Some(chromium) = machine::chromium_or_skip("html_report_of_a_job_heads_each_rank_with_its_gpu") else { return };
    let job = repo().join("samples/capture/multi_gpu/dist_send_recv_before_wait");
    let (url, dom) = page_at(&chromium, &job, "job", "");
    let page = std::fs::read_to_string(url.trim_start_matches("file://")).expect("html");
    // Rank 1 ran on GPU 1 (the text report says so too); the header counts every rank's streams.
    assert!(page.contains("\"groups\":[\"rank 0, GPU 0\",\"rank 1, GPU 1\"]"), "{page}");
    let summary = dom.split("id=\"summary\">").nth(1).and_then(|s| s.split('<').next()).expect("summary");
    assert!(summary.starts_with("2 races; ") && summary.ends_with(" on 8 streams"), "{summary}");
    assert!(dom.contains("rank 0: write-after-read race"), "{dom}");
}

#[test]
fn html_report_of_an_nsys_export_draws_api_calls_and_lists_candidates() {
    let Some(chromium) = machine::chromium_or_skip("html_report_of_an_nsys_export_draws_api_calls") else { return };
    let (url, dom) = page_at(&chromium, &repo().join("samples/nsys/torch_loop_race.sqlite"), "nsys-page", "");
    let page = std::fs::read_to_string(url.trim_start_matches("file://")).expect("html");
    // The host thread's CUDA API calls are a row of their own, on the GPU's clock.
    assert!(page.contains("\"kind\":\"api\""), "an API row");
    assert!(!page.contains("\"spans\":[]"), "API calls drawn");
    // No addresses: the page says races cannot be decided, and lists the unordered pairs as candidates.
    assert!(dom.contains("races cannot be decided"), "{dom}");
    assert!(dom.contains("badge candidate"), "{dom}");
    assert!(dom.contains("data-selected=\""), "the first candidate is picked: {dom}");
}

#[test]
fn html_report_works_in_a_browser() {
    let Some(chromium) = machine::chromium_or_skip("html_report_works_in_a_browser") else { return };
    let (url, dom) = page_in_browser(&chromium, "samples/json/pipeline_loop_race.json", "browser");
    // Lanes and findings are in the DOM.
    let list = |id: &str| {
        dom.split(&format!("<ul id=\"{id}\">")).nth(1).and_then(|s| s.split("</ul>").next()).unwrap_or("").to_string()
    };
    // The streams that ran something: the legacy default stream ran nothing and has no lane.
    assert_eq!(list("lanes").matches("<li").count(), 3, "{dom}");
    let findings = list("findings");
    assert_eq!(findings.matches("<li").count(), 3, "{dom}");
    assert!(
        findings.contains("write-after-read race: transform at pipe.cu:23 / memcpy HtoD at pipe.cu:20"),
        "{findings}"
    );
    // Picking finding 0 selected its two operations: transform (seq 6) and emit (seq 7) of the first iteration.
    let selected = dom.split("data-selected=\"").nth(1).and_then(|s| s.split('"').next()).expect("a selection");
    let seqs: Vec<u64> = selected.split(',').map(|s| s.parse().expect("seq")).collect();
    assert_eq!(seqs.len(), 2, "{selected}");
    assert!(dom.contains("class=\"selected\""), "{dom}");
    // A screenshot of the page, as a person would see it.
    let shot = scratch_file("reports/browser.png");
    let _ = std::fs::remove_file(&shot);
    headless(&chromium, &["--window-size=1400,700", &format!("--screenshot={}", shot.display()), &url]);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[1..4], b"PNG");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    assert_eq!(width, 1400);
}

#[test]
fn html_report_outlines_two_nodes_of_one_launch_in_a_browser() {
    let Some(chromium) = machine::chromium_or_skip("html_report_outlines_two_nodes_of_one_launch_in_a_browser") else {
        return;
    };
    let (_, dom) = page_in_browser(&chromium, "samples/json/graph_capture_fork.json", "nodes-browser");
    // Both parties are the first launch (operation 11); what is outlined are two of its nodes.
    assert!(dom.contains("data-selected=\"11,11\""), "{dom}");
    assert!(dom.contains("data-outlined=\"nodes `add_` and `mul` inside one graph launch\""), "{dom}");
}

#[test]
fn gpu_times_recorded_after_the_fact_place_the_bars() {
    let trace = scratch_file("reports/gpu_times.json");
    std::fs::write(
        &trace,
        r#"{"type": "streamtrace", "version": 1}
{"type": "stream", "id": 1, "stream_kind": "non_blocking"}
{"type": "kernel", "stream": 1, "name": "a", "corr": 7}
{"type": "kernel", "stream": 1, "name": "b", "corr": 8}
{"type": "gpu_time", "corr": 8, "gpu_start": 5000000, "gpu_end": 6000000}
{"type": "gpu_time", "corr": 7, "gpu_start": 2000000, "gpu_end": 3000000}
"#,
    )
    .expect("write");
    let (html, perfetto) = (scratch_file("reports/gpu_times.html"), scratch_file("reports/gpu_times.perfetto.json"));
    analyze_with_reports(&trace, &html, &perfetto);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("perfetto")).expect("parses");
    let bars: Vec<(String, f64, f64)> = json["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_string(),
                e["ts"].as_f64().unwrap_or(0.0),
                e["dur"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    assert_eq!(bars, vec![("a".to_string(), 2000.0, 1000.0), ("b".to_string(), 5000.0, 1000.0)]);
}

/// Width and height from a PNG's IHDR chunk, after checking the signature.
fn png_size(path: &Path) -> (u32, u32) {
    let png = std::fs::read(path).expect("picture written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let word = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    (word(16), word(20))
}

#[test]
fn png_timeline_has_one_lane_per_stream() {
    if !machine::font_or_skip("png_timeline_has_one_lane_per_stream") {
        return;
    }
    let png = scratch_file("reports/timeline.png");
    let out =
        binary().args(["analyze", "samples/json/pipeline_loop_race.json", "--png"]).arg(&png).output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    // 1600 wide; 3 lanes (the legacy default stream ran nothing) in one group, and 3 races listed.
    assert_eq!(png_size(&png), (1600, streamtrace::report::png::timeline_height(3, 1, 3)));
}

#[test]
fn a_missing_tool_skips_with_a_notice_unless_required() {
    // A PATH of one empty directory holds no Chromium.
    let empty = scratch_dir("reports/empty-path");
    assert_eq!(machine::chromium_on(empty.as_os_str()), None);
    let decide =
        |required| machine::missing("t", "headless Chromium", "not on PATH", machine::REQUIRE_BROWSER, required);
    assert!(
        matches!(decide(None), machine::Missing::Skip(n) if n.contains("t skipped") && n.contains("STREAMTRACE_REQUIRE_BROWSER=1"))
    );
    assert!(matches!(decide(Some("0")), machine::Missing::Skip(_)));
    assert!(matches!(decide(Some("1")), machine::Missing::Fail(m) if m.contains("required")));
}

#[test]
fn a_picture_without_a_font_is_a_clear_error() {
    let png = scratch_file("reports/no-font.png");
    let out = binary()
        .args(["analyze", "samples/json/pipeline_loop_race.json", "--png"])
        .arg(&png)
        .env("STREAMTRACE_FONT", scratch_file("reports/no-such-font.ttf"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("STREAMTRACE_FONT names"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!png.exists(), "no partial picture");
}
