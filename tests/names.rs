//! Streams and events named as people know them (src/names.rs), in every report: the text, the JSON (which keeps
//! the handles and adds the names), the HTML timeline's lanes, the Perfetto tracks and the picture. The sample
//! (samples/json/named_streams_race.json) has two streams created at one line, a framework's pool stream named
//! by its creation record, NCCL's stream, the default stream and an event with its creation line;
//! samples/json/process_group_streams.json has two NCCL streams named by their process groups.

use serde_json::Value;

use crate::util::{binary, machine, scratch_file};

const SAMPLE: &str = "samples/json/named_streams_race.json";

/// The report of `streamtrace analyze SAMPLE ARGS`, which finds races.
fn analyze(args: &[&str]) -> String {
    analyze_sample(SAMPLE, args)
}

fn analyze_sample(sample: &str, args: &[&str]) -> String {
    let out = binary().arg("analyze").arg(sample).args(args).output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_text_report_names_streams_and_events_with_their_handles() {
    let text = crate::util::words(&analyze(&[]));
    assert!(text.contains("stream 0x8583b02 (non-blocking): stream #2 created at app.cu:40"), "{text}");
    assert!(text.contains("stream 0x8583b01 (non-blocking): stream #1 created at app.cu:40"), "{text}");
    assert!(text.contains("Fix: record an event on stream 0x8583b01 right after"), "{text}");
    assert!(text.contains("waits on event 0x895441, which is recorded only later"), "{text}");
    assert!(text.contains("event 0x895441: the event created at app.cu:44"), "{text}");
}

#[test]
fn the_json_report_keeps_handles_and_adds_names() {
    let json: Value = serde_json::from_str(&analyze(&["--format", "json"])).expect("parses");
    let stream = &json["races"][0]["earlier"]["site"]["stream"];
    assert_eq!(stream["handle"], 140000001);
    assert_eq!(stream["kind"], "non_blocking");
    assert_eq!(stream["name"], "stream #1 created at app.cu:40");
    assert_eq!(stream["created_at"]["file"], "app.cu");
    assert_eq!(stream["created_at"]["line"], 40);
    assert_eq!(json["races"][0]["fix"]["wait_on"]["name"], "stream #2 created at app.cu:40");
    let wait = &json["unrecorded_waits"][0];
    assert_eq!(wait["event"], 9000001);
    assert_eq!(wait["event_name"], "the event created at app.cu:44");
    let pairs = json["stream_pairs"].as_array().expect("pairs").iter().flat_map(|p| [&p["a"]["name"], &p["b"]["name"]]);
    let edges = json["edges"].as_array().expect("edges").iter().map(|e| &e["from"]["name"]);
    let names: Vec<&str> = pairs.chain(edges).filter_map(Value::as_str).collect();
    for expected in ["the default stream", "stream `side = torch.cuda.Stream()` at train.py:11", "NCCL's stream"] {
        assert!(names.contains(&expected), "{expected} not among {names:?}");
    }
}

#[test]
fn timelines_name_their_lanes_and_draw_graph_nodes() {
    let (html, perfetto) = (scratch_file("names/names.html"), scratch_file("names/names.perfetto.json"));
    analyze(&["--html", html.to_str().expect("utf-8"), "--perfetto", perfetto.to_str().expect("utf-8")]);
    let page = std::fs::read_to_string(&html).expect("html");
    for title in [
        "\"title\":\"default stream\"",
        "\"title\":\"stream #1 created at app.cu:40\"",
        "\"title\":\"side = torch.cuda.Stream()\"",
        "\"title\":\"NCCL stream\"",
    ] {
        assert!(page.contains(title), "{title} missing from the page");
    }
    assert!(page.contains("\"groups\":[\"process 0, GPU 0\"]"), "lanes grouped by device");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("perfetto")).expect("parses");
    let events = trace["traceEvents"].as_array().expect("events");
    let tracks: Vec<&str> =
        events.iter().filter(|e| e["name"] == "thread_name").filter_map(|e| e["args"]["name"].as_str()).collect();
    assert!(tracks.contains(&"side = torch.cuda.Stream() (0x8583b03, non-blocking, GPU 0)"), "{tracks:?}");
    // The graph launch's bar is named by its graph and lists its nodes' short names.
    let graph = events.iter().find(|e| e["ph"] == "X" && e["cat"] == "graph launch").expect("a graph bar");
    assert_eq!(graph["args"]["graph_nodes"], serde_json::json!(["gemm_kernel", "bias"]));
    // Kernel bars show their short names and keep the whole one.
    let produce = events.iter().find(|e| e["ph"] == "X" && e["name"] == "produce").expect("a short-named bar");
    assert_eq!(produce["args"]["name"], "void app::produce<float>(float*, int)");
    let marker = events.iter().find(|e| e["ph"] == "i").expect("a race marker");
    assert_eq!(marker["name"], "read-after-write race: produce at app.cu:50 / consume at app.cu:53");
}

#[test]
fn the_picture_draws_the_named_lanes() {
    if !machine::font_or_skip("the_picture_draws_the_named_lanes") {
        return;
    }
    let png = scratch_file("names/names.png");
    analyze(&["--png", png.to_str().expect("utf-8")]);
    let bytes = std::fs::read(&png).expect("picture");
    let height = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    // All five streams ran something: five lanes in one group, one race listed.
    assert_eq!(height, streamtrace::report::png::timeline_height(5, 1, 1));
}

/// The two NCCL streams of samples/json/process_group_streams.json, each named by the process group whose
/// c10d ops (`op_end` with `process_group`) launched its kernels.
const GROUPS_SAMPLE: &str = "samples/json/process_group_streams.json";

#[test]
fn nccls_streams_are_named_by_their_process_groups_in_every_report() {
    let text = crate::util::words(&analyze_sample(GROUPS_SAMPLE, &[]));
    assert!(text.contains("stream 0x366eecf0 (non-blocking): NCCL's stream of process group `default_pg`"), "{text}");

    let json: Value = serde_json::from_str(&analyze_sample(GROUPS_SAMPLE, &["--format", "json"])).expect("parses");
    assert_eq!(json["races"][0]["earlier"]["site"]["stream"]["name"], "NCCL's stream of process group `default_pg`");
    assert_eq!(json["races"][0]["earlier"]["site"]["stream"]["handle"], 913239280);

    let (html, perfetto) = (scratch_file("names/groups.html"), scratch_file("names/groups.perfetto.json"));
    analyze_sample(
        GROUPS_SAMPLE,
        &["--html", html.to_str().expect("utf-8"), "--perfetto", perfetto.to_str().expect("utf-8")],
    );
    let page = std::fs::read_to_string(&html).expect("html");
    for title in ["\"title\":\"NCCL stream, default_pg\"", "\"title\":\"NCCL stream, group 1\""] {
        assert!(page.contains(title), "{title} missing from the page");
    }
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&perfetto).expect("perfetto")).expect("parses");
    let tracks: Vec<&str> = trace["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(tracks.contains(&"NCCL stream, group 1 (0x366f5200, non-blocking, GPU 0)"), "{tracks:?}");
}

#[test]
fn a_two_gpu_capture_names_nccls_stream_by_its_process_group() {
    // Recorded on two GPUs by the native observer, whose c10d op_end records name their group.
    let json: Value = serde_json::from_str(&analyze_sample(
        "samples/capture/multi_gpu/dist_async_use_before_wait",
        &["--format", "json"],
    ))
    .expect("parses");
    for trace in json["traces"].as_array().expect("one trace per rank") {
        let stream = &trace["races"][0]["earlier"]["site"]["stream"]["name"];
        assert_eq!(stream, "NCCL's stream of process group `default_pg`", "{}", trace["races"][0]);
    }
}
