//! Native call sites, symbolized by the real binary: a small C program is compiled here (with debug info,
//! without, and stripped), a trace points its call sites into that program's functions as the capture would
//! (`module` and `callsite` records, `site` fields), and the report must name the functions' lines, then
//! `function+offset`, then `module+offset`. Skipped, with a notice, where no C compiler is installed (failed
//! instead where `STREAMTRACE_REQUIRE_CC=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{machine, repo, scratch_dir};

/// Where the program is loaded in the trace (any bias works: the symbolizer takes it off).
const BIAS: u64 = 0x5555_0000_0000;

/// Compiles tests/callsites/app.c with `flags` for `test`; None after the skip notice when there is no C compiler.
fn compile(test: &str, dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let source = repo().join("tests/callsites/app.c");
    let out = dir.join(name);
    let status = Command::new("cc").args(flags).arg("-o").arg(&out).arg(&source).status();
    match status {
        Ok(status) if status.success() => Some(out),
        Ok(status) => panic!("cc {flags:?} failed: {status}"),
        Err(e) => {
            machine::lacking(test, "a C compiler", &format!("cc: {e}"), machine::REQUIRE_CC);
            None
        }
    }
}

/// The address the file states for function `name` (from the symbol table of `symbols_from`).
fn function_address(symbols_from: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(symbols_from).output().expect("nm runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.ends_with(&format!(" T {name}")))
        .unwrap_or_else(|| panic!("{name} in nm output:\n{text}"));
    u64::from_str_radix(line.split_whitespace().next().expect("address"), 16).expect("hex")
}

/// A trace of two kernels racing on one buffer from two streams, each stream and kernel issued from a
/// function of `binary`, as return addresses a few bytes into each function.
fn trace(binary: &Path, symbols_from: &Path) -> String {
    let at = |function: &str| format!("\"{:#x}\"", BIAS + function_address(symbols_from, function) + 4);
    let size = std::fs::metadata(binary).expect("binary").len().max(0x10000);
    let path = binary.display().to_string();
    [
        r#"{"type":"streamtrace","version":1}"#.to_string(),
        format!(r#"{{"type":"module","path":"{path}","base":"{BIAS:#x}","addr":"{BIAS:#x}","size":{size}}}"#),
        format!(r#"{{"type":"callsite","id":1,"frames":[{}]}}"#, at("make_stream")),
        format!(r#"{{"type":"callsite","id":2,"frames":[{},{}]}}"#, at("launch_fill"), at("main")),
        format!(r#"{{"type":"callsite","id":3,"frames":[{},{}]}}"#, at("launch_scale"), at("main")),
        format!(
            r#"{{"type":"callsite","id":4,"frames":[{},{},{}]}}"#,
            at("__device_stub__Z4stepi"),
            at("step"),
            at("main")
        ),
        r#"{"type":"stream","id":1,"stream_kind":"non_blocking","site":1}"#.to_string(),
        r#"{"type":"stream","id":2,"stream_kind":"non_blocking","site":1}"#.to_string(),
        r#"{"type":"alloc","id":1,"addr":"0x1000","size":4096}"#.to_string(),
        r#"{"type":"kernel","stream":1,"name":"fill","writes":[["0x1000",4096]],"site":2}"#.to_string(),
        r#"{"type":"kernel","stream":2,"name":"scale","writes":[["0x1000",4096]],"site":3}"#.to_string(),
        r#"{"type":"kernel","stream":1,"name":"step","reads":[["0x1000",4096]],"site":4}"#.to_string(),
    ]
    .join("\n")
}

fn analyze(trace_text: &str, dir: &Path) -> (String, Value) {
    let path = dir.join("trace.json");
    std::fs::write(&path, trace_text).expect("write trace");
    let run = |format: &str| {
        let out = crate::util::binary()
            .args(["analyze", path.to_str().expect("utf-8"), "--format", format])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "a race: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    (run("text"), serde_json::from_str(&run("json")).expect("JSON report"))
}

/// The line of `text` in tests/callsites/app.c (1-based).
fn line_of(text: &str) -> usize {
    let source = include_str!("callsites/app.c");
    source.lines().position(|l| l.contains(text)).expect("in app.c") + 1
}

#[test]
fn call_sites_name_lines_with_debug_info() {
    let test = "call_sites_name_lines_with_debug_info";
    let dir = scratch_dir("callsites/debug");
    let Some(binary) = compile(test, &dir, "app", &["-g", "-O0"]) else { return };
    let (text, json) = analyze(&trace(&binary, &binary), &dir);
    let race = &json["races"][0];
    let fill = format!("app.c:{} in launch_fill", line_of("int launch_fill"));
    let scale = format!("app.c:{} in launch_scale", line_of("int launch_scale"));
    let shown = |site: &Value| {
        format!(
            "{}:{} in {}",
            site["file"].as_str().unwrap_or(""),
            site["line"],
            site["function"].as_str().unwrap_or("")
        )
    };
    assert!(shown(&race["earlier"]["site"]["source"]).ends_with(&fill), "{race:#}");
    assert!(shown(&race["later"]["site"]["source"]).ends_with(&scale), "{race:#}");
    let created = shown(&race["earlier"]["site"]["stream"]["created_at"]);
    assert!(created.ends_with(&format!("app.c:{} in make_stream", line_of("int make_stream"))), "{race:#}");
    assert!(text.contains(&fill) && text.contains(&scale), "the text report names both lines:\n{text}");
    // A kernel launched through nvcc's stub and wrapper is named at its caller's line.
    let step = json["races"]
        .as_array()
        .expect("races")
        .iter()
        .find(|r| r["later"]["site"]["name"] == "step")
        .expect("step races");
    let main = format!("app.c:{} in main", line_of("int main"));
    assert!(shown(&step["later"]["site"]["source"]).ends_with(&main), "{step:#}");
}

#[test]
fn call_sites_fall_back_to_functions_then_modules() {
    let test = "call_sites_fall_back_to_functions_then_modules";
    let dir = scratch_dir("callsites/fallback");
    let Some(binary) = compile(test, &dir, "app_nodebug", &["-O0"]) else { return };
    let (text, _) = analyze(&trace(&binary, &binary), &dir);
    let fill = function_address(&binary, "launch_fill");
    assert!(text.contains("app_nodebug in launch_fill+0x4"), "function+offset without debug info:\n{text}");
    let stripped = dir.join("app_stripped");
    match Command::new("strip").arg("-o").arg(&stripped).arg(&binary).status() {
        Ok(status) => assert!(status.success(), "strip failed: {status}"),
        Err(e) => {
            machine::lacking(&format!("{test} (module+offset)"), "strip", &e.to_string(), machine::REQUIRE_CC);
            return;
        }
    }
    let (text, json) = analyze(&trace(&stripped, &binary), &dir);
    assert!(text.contains(&format!("app_stripped+{:#x}", fill + 4)), "module+offset without symbols:\n{text}");
    let counters = json["import"].to_string();
    assert!(!counters.contains("symbols.unreadable_modules"), "a stripped binary is readable: {counters}");
}

#[test]
fn a_binary_rebuilt_since_the_capture_is_not_trusted() {
    let test = "a_binary_rebuilt_since_the_capture_is_not_trusted";
    let dir = scratch_dir("callsites/rebuilt");
    let Some(binary) = compile(test, &dir, "app", &["-g", "-O0", "-Wl,--build-id"]) else { return };
    let text = trace(&binary, &binary).replacen(r#""size":"#, r#""build_id":"00ff","size":"#, 1);
    let (report, json) = analyze(&text, &dir);
    assert!(!report.contains("in launch_fill"), "another build's lines must not be shown:\n{report}");
    assert!(report.contains("app+0x"), "{report}");
    assert!(json["import"].to_string().contains("another build"), "{}", json["import"]);
}

/// The committed capture of samples/cuda/two_streams_race.cu with its `frame_line` records (written by the capture
/// at exit where the binary was: benches/gpu_sourcelines.sh), analyzed here, where that binary is not.
const CAPTURE_WITH_LINES: &str = "samples/capture/cuda-lines/two_streams_race.json";

#[test]
fn lines_the_capture_wrote_need_no_binary() {
    let run = |format: &str| {
        let out = crate::util::binary()
            .current_dir(repo())
            .args(["analyze", CAPTURE_WITH_LINES, "--format", format])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "a race: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let json: Value = serde_json::from_str(&run("json")).expect("JSON report");
    let race = &json["races"][0];
    let line = |place: &Value| {
        let file = place["file"].as_str().unwrap_or("");
        assert!(file.ends_with("two_streams_race.cu"), "{place:#}");
        assert_eq!(place["function"], "main", "{place:#}");
        place["line"].as_u64().unwrap_or(0)
    };
    assert_eq!(line(&race["earlier"]["site"]["source"]), 9, "the first launch");
    assert_eq!(line(&race["later"]["site"]["source"]), 10, "the second launch");
    assert_eq!(line(&race["earlier"]["site"]["stream"]["created_at"]), 7, "stream a");
    assert_eq!(line(&race["later"]["site"]["stream"]["created_at"]), 8, "stream b");
    assert_eq!(line(&race["allocation"]["source"]), 5, "the cudaMalloc");
    // The program's own binary was not needed (frames in the C library without lines of their own may still be
    // looked up here, and this machine's libc is another build).
    let unreadable =
        json["import"].as_array().expect("counters").iter().find(|c| c["name"] == "symbols.unreadable_modules");
    assert!(
        unreadable.is_none_or(|c| !c["first"].as_str().unwrap_or("").contains("two_streams_race")),
        "{unreadable:?}"
    );
    let text = run("text");
    for line in [5, 7, 8, 9, 10] {
        assert!(text.contains(&format!("two_streams_race.cu:{line} in main")), "line {line}:\n{text}");
    }
    assert!(!text.contains("not on this machine"), "{text}");
}

#[test]
fn a_moved_binary_is_found_in_a_binary_dir_and_a_missing_one_is_said() {
    let test = "a_moved_binary_is_found_in_a_binary_dir_and_a_missing_one_is_said";
    let dir = scratch_dir("callsites/moved");
    let Some(binary) = compile(test, &dir, "app", &["-g", "-O0"]) else { return };
    // The trace names the binary where it was built on another machine.
    let elsewhere = "/nonexistent/build-machine/app";
    let path = dir.join("trace.json");
    std::fs::write(&path, trace(&binary, &binary).replace(&*binary.display().to_string(), elsewhere)).expect("trace");
    let run = |extra: &[&str]| {
        let out =
            crate::util::binary().args(["analyze", path.to_str().expect("utf-8")]).args(extra).output().expect("runs");
        assert_eq!(out.status.code(), Some(1), "a race: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let missing = run(&[]);
    assert_eq!(missing.matches("not on this machine").count(), 1, "said once:\n{missing}");
    assert!(missing.contains(elsewhere) && missing.contains("--binary-dir"), "{missing}");
    assert!(missing.contains("app+0x"), "module+offset:\n{missing}");
    let found = run(&["--binary-dir", "/nonexistent/other", "--binary-dir", dir.to_str().expect("utf-8")]);
    let fill = format!("app.c:{} in launch_fill", line_of("int launch_fill"));
    assert!(found.contains(&fill), "found in the second folder:\n{found}");
    assert!(!found.contains("not on this machine"), "{found}");
}
