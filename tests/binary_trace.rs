//! The binary trace encoding (issue 23 item 1), through the real binary: every committed trace converted to
//! binary and back reads to the same report; synth writes it; a cut-off recording, an unknown record tag and
//! hostile lengths are read as docs/trace-format.md says (strict and tolerant), each error naming the file, the
//! record and the byte.

use std::path::{Path, PathBuf};

use serde_json::Value;
use streamtrace_format::binary::write::frame;
use streamtrace_format::binary::{read, slot, Tag, FRAME_HEAD_BYTES, PREAMBLE_BYTES};
use streamtrace_format::{Field, RecordKind};

use crate::util::{analyze_json, binary, counter, repo, scratch_dir, stderr, streamtrace};

/// `streamtrace convert IN OUT`, which must succeed.
fn convert(input: &Path, output: &Path) {
    let out = binary().arg("convert").args([input, output]).output().expect("runs");
    assert!(out.status.success(), "convert {} -> {}: {}", input.display(), output.display(), stderr(&out));
}

/// A JSON report with what names the input file taken out: the trace's path, its format, and the file and
/// place that import notes start with (`FILE:LINE: ` or `FILE:record N (byte B): `).
fn without_file_names(mut report: Value, trace: &Path) -> Value {
    fn walk(value: &mut Value, path: &str) {
        match value {
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    match (key.as_str(), &mut *item) {
                        ("trace" | "input_format" | "directory", _) => *item = Value::Null,
                        ("first", Value::String(text)) => {
                            if let Some(rest) = text.strip_prefix(path).and_then(|r| r.strip_prefix(':')) {
                                let rest = rest.strip_prefix("record ").unwrap_or(rest);
                                let (place, message) = rest.split_once(": ").unwrap_or((rest, ""));
                                let line = place.split(' ').next().unwrap_or(place);
                                *text = format!("TRACE:{line}: {message}");
                            }
                        }
                        _ => walk(item, path),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| walk(item, path)),
            _ => {}
        }
    }
    walk(&mut report, &trace.display().to_string());
    report
}

fn report_of(trace: &Path) -> (i32, Value) {
    let (status, report) = analyze_json(&trace.display().to_string());
    (status, without_file_names(report, trace))
}

/// Every committed trace under samples/, relative to the repository.
fn committed_traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("samples").flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path.strip_prefix(repo()).expect("under the repository").to_path_buf());
            }
        }
    }
    let mut traces = Vec::new();
    walk(&repo().join("samples"), &mut traces);
    traces
}

#[test]
fn every_committed_trace_reads_the_same_in_binary_and_back_in_json() {
    let dir = scratch_dir("binary_trace/samples");
    let traces = committed_traces();
    assert!(traces.len() > 150, "the samples are there: {}", traces.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(trace) = traces.get(i) else { break };
                let name = trace.display().to_string().replace('/', "_");
                let (bin, back) = (dir.join(format!("{name}.stbin")), dir.join(format!("{name}.json")));
                convert(trace, &bin);
                convert(&bin, &back);
                let bytes = std::fs::read(&bin).expect("written");
                assert!(read::is_binary(&bytes), "{name}: converted to binary");
                let original = report_of(trace);
                for converted in [&bin, &back] {
                    if report_of(converted) != original {
                        failures.lock().unwrap().push(format!("{} != {}", converted.display(), trace.display()));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "reports differ:\n{}", failures.join("\n"));
}

#[test]
fn synth_writes_binary_by_its_extension_and_both_read_alike() {
    let dir = scratch_dir("binary_trace/synth");
    let (json, bin) = (dir.join("t.json"), dir.join("t.stbin"));
    for path in [&json, &bin] {
        let out = binary().args(["synth", "--ops", "20000", "--ranges", "500", "-o"]).arg(path).output().expect("runs");
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert!(read::is_binary(&std::fs::read(&bin).expect("written")));
    let (json_size, bin_size) = (std::fs::metadata(&json).unwrap().len(), std::fs::metadata(&bin).unwrap().len());
    assert!(bin_size * 3 < json_size * 2, "binary {bin_size} bytes, JSON {json_size}");
    assert_eq!(report_of(&bin), report_of(&json));
    let forced = dir.join("forced.json");
    let out = binary().args(["synth", "--ops", "100", "--format", "binary", "-o"]).arg(&forced).output().unwrap();
    assert!(out.status.success() && read::is_binary(&std::fs::read(&forced).unwrap()), "--format wins");
}

#[test]
fn a_binary_trace_through_a_pipe_is_read() {
    let dir = scratch_dir("binary_trace/pipe");
    let bin = dir.join("t.stbin");
    convert(Path::new("samples/capture/cuda/two_streams_race.json"), &bin);
    let input = std::fs::File::open(&bin).unwrap();
    let out = binary().args(["analyze", "-", "--format", "json"]).stdin(input).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["input_format"], "streamtrace binary");
    assert_eq!(report["races"].as_array().map(Vec::len), Some(1));
}

/// A capture (tolerant) and a hand-written trace (strict), in binary.
fn binary_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let (capture, written) = (dir.join("capture.stbin"), dir.join("written.stbin"));
    convert(Path::new("samples/capture/cuda/two_streams_race.json"), &capture);
    convert(Path::new("samples/json/two_streams_race.json"), &written);
    (capture, written)
}

/// Where the frame after the header starts.
fn after_header(bytes: &[u8]) -> usize {
    let mut at = PREAMBLE_BYTES;
    loop {
        let head = read::frame_head(bytes[at..at + FRAME_HEAD_BYTES].try_into().unwrap()).unwrap();
        at += FRAME_HEAD_BYTES + head.len as usize;
        if head.tag == Tag::Record(RecordKind::Header) {
            return at;
        }
    }
}

/// `bytes` with `extra` put in after the header.
fn with_after_header(bytes: &[u8], extra: &[u8]) -> Vec<u8> {
    let at = after_header(bytes);
    [&bytes[..at], extra, &bytes[at..]].concat()
}

#[test]
fn a_recording_cut_inside_a_record_counts_it_as_a_cut_line_and_a_written_trace_is_refused() {
    let dir = scratch_dir("binary_trace/truncated");
    let (capture, written) = binary_pair(&dir);
    let (_, whole) = analyze_json(&capture.display().to_string());
    let cut = dir.join("cut.stbin");
    let bytes = std::fs::read(&capture).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let (status, report) = analyze_json(&cut.display().to_string());
    assert_eq!(status, 1, "the race is still found");
    assert_eq!(counter(&report, "json.skipped_malformed"), 1, "the cut record, as the JSON reader counts a cut line");
    assert_eq!(counter(&report, "json.records") + 1, counter(&whole, "json.records"));
    let bytes = std::fs::read(&written).unwrap();
    let cut = dir.join("cut_written.stbin");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let out = binary().arg("analyze").arg(&cut).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(message.contains(&format!("{}:record ", cut.display())), "{message}");
    assert!(message.contains("(byte ") && message.contains("the trace ends inside this record"), "{message}");
}

#[test]
fn an_unknown_record_tag_is_skipped_and_counted_in_a_recording_and_refused_in_a_written_trace() {
    let dir = scratch_dir("binary_trace/unknown_tag");
    let (capture, written) = binary_pair(&dir);
    let mut newer = Vec::new();
    frame(&mut newer, Tag::Unknown(999), b"a newer writer's record");
    let (_, before) = report_of(&capture);
    let tagged = dir.join("tagged.stbin");
    std::fs::write(&tagged, with_after_header(&std::fs::read(&capture).unwrap(), &newer)).unwrap();
    let (status, report) = report_of(&tagged);
    assert_eq!(status, 1);
    assert_eq!(counter(&report, "json.skipped_unknown_kind"), 1);
    // Skipped by its length: what follows is read as before (one record later), and the report says data was lost.
    assert_eq!((&report["verdict"], &report["summary"]["races"]), (&before["verdict"], &before["summary"]["races"]));
    assert_eq!(
        (&report["summary"]["data_loss"], &before["summary"]["data_loss"]),
        (&Value::Bool(true), &Value::Bool(false))
    );
    let tagged = dir.join("tagged_written.stbin");
    std::fs::write(&tagged, with_after_header(&std::fs::read(&written).unwrap(), &newer)).unwrap();
    let out = binary().arg("analyze").arg(&tagged).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(message.contains("record 2 (byte ") && message.contains("unknown record tag 999"), "{message}");
}

#[test]
fn hostile_lengths_are_refused_with_the_byte_and_the_field() {
    let dir = scratch_dir("binary_trace/hostile");
    let (capture, written) = binary_pair(&dir);
    // A frame that claims 4 GiB: refused before anything is allocated for it, in either reading.
    let mut huge = Tag::Record(RecordKind::Kernel).code().to_le_bytes().to_vec();
    huge.extend_from_slice(&[0, 0]);
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    for trace in [&capture, &written] {
        let bad = dir.join("huge.stbin");
        std::fs::write(&bad, with_after_header(&std::fs::read(trace).unwrap(), &huge)).unwrap();
        let out = binary().arg("analyze").arg(&bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains(":byte ") && stderr(&out).contains("more than the 64 MiB"), "{}", stderr(&out));
    }
    // A kernel whose pointer list claims four billion items in a few bytes: malformed, with its field.
    let pointers = slot(RecordKind::Kernel, Field::Pointers).unwrap();
    let mut body = (1u32 << pointers).to_le_bytes().to_vec();
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    body.extend_from_slice(&[0; 9]);
    let mut lying = Vec::new();
    frame(&mut lying, Tag::Record(RecordKind::Kernel), &body);
    let bad = dir.join("lying_written.stbin");
    std::fs::write(&bad, with_after_header(&std::fs::read(&written).unwrap(), &lying)).unwrap();
    let out = binary().arg("analyze").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("field `pointers`: a list of 4294967295 items"), "{}", stderr(&out));
    let bad = dir.join("lying_capture.stbin");
    std::fs::write(&bad, with_after_header(&std::fs::read(&capture).unwrap(), &lying)).unwrap();
    let (status, report) = report_of(&bad);
    assert_eq!((status, counter(&report, "json.skipped_malformed")), (1, 1), "a recording skips and counts it");
    // A string index never declared, and a newer encoding version.
    let mut body = (1u32 << slot(RecordKind::Event, Field::Api).unwrap()).to_le_bytes().to_vec();
    body.extend_from_slice(&4_000_000u32.to_le_bytes());
    let mut undeclared = Vec::new();
    frame(&mut undeclared, Tag::Record(RecordKind::Event), &body);
    let bad = dir.join("undeclared.stbin");
    std::fs::write(&bad, with_after_header(&std::fs::read(&written).unwrap(), &undeclared)).unwrap();
    let out = binary().arg("analyze").arg(&bad).output().unwrap();
    assert!(stderr(&out).contains("string 4000000 was never declared"), "{}", stderr(&out));
    // A line frame naming no text's line: record numbers counted on from it would overflow.
    for line in [0, u64::MAX, (1 << 63) + 1] {
        let mut frames = Vec::new();
        frame(&mut frames, Tag::Line, &line.to_le_bytes());
        let bad = dir.join("line.stbin");
        std::fs::write(&bad, with_after_header(&std::fs::read(&capture).unwrap(), &frames)).unwrap();
        let out = binary().arg("analyze").arg(&bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{line}");
        assert!(stderr(&out).contains(&format!("a line frame naming line {line}, outside 1..=")), "{}", stderr(&out));
    }
    // Converted back to JSON, a line frame pads with blank lines to keep places: one asking for terabytes of them
    // is refused (before the fix, `convert` wrote newlines until the disk or the memory ran out); one a record
    // of 64 MiB could need is written.
    let too_many = "blank lines a conversion writes";
    for (line, refused) in [(1u64 << 40, Some(too_many)), (u64::MAX, Some("outside 1..=")), (1000, None)] {
        let mut frames = Vec::new();
        frame(&mut frames, Tag::Line, &line.to_le_bytes());
        let bad = dir.join("line_convert.stbin");
        std::fs::write(&bad, with_after_header(&std::fs::read(&capture).unwrap(), &frames)).unwrap();
        let back = dir.join("line_convert.json");
        let out = binary().arg("convert").arg(&bad).arg(&back).output().unwrap();
        match refused {
            Some(why) => {
                assert_eq!(out.status.code(), Some(2), "{line}");
                assert!(stderr(&out).contains(&format!("a line frame naming line {line}")), "{}", stderr(&out));
                assert!(stderr(&out).contains(why), "{}", stderr(&out));
            }
            None => {
                assert!(out.status.success(), "{}", stderr(&out));
                let text = std::fs::read_to_string(&back).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                let at = line as usize - 1;
                assert!(lines[at - 1].is_empty() && lines[at].starts_with('{'), "the record after it on line {line}");
            }
        }
    }
    let mut newer = std::fs::read(&written).unwrap();
    newer[8] = 2;
    let bad = dir.join("newer.stbin");
    std::fs::write(&bad, newer).unwrap();
    let out = binary().arg("analyze").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unsupported binary encoding version 2"), "{}", stderr(&out));
}

#[test]
fn convert_says_what_it_cannot_tell() {
    let out = streamtrace(&["convert", "samples/json/two_streams_race.json", "/tmp/out.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("name it .stbin (binary) or .json, or say --to"), "{}", stderr(&out));
}
