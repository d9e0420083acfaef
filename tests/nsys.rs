//! The nsys reader on real exports: the shared public corpus (when ../shared exists, as in CI), the capture
//! made on our GPU machine (committed under samples/nsys), and broken or foreign SQLite files.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use crate::util::{binary, counter, repo, scratch_file, streamtrace};

fn analyze_json(path: &Path) -> (i32, Value, String) {
    let out = streamtrace(&["analyze", path.to_str().expect("utf-8 path"), "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().expect("exited normally"), json, stderr)
}

fn sql_count(db: &Path, table: &str, filter: &str) -> u64 {
    let conn = Connection::open(db).expect("opens");
    let exists: bool = conn
        .query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)", [table], |r| {
            r.get(0)
        })
        .expect("query");
    if !exists {
        return 0;
    }
    conn.query_row(&format!("SELECT COUNT(*) FROM {table} {filter}"), [], |r| r.get::<_, i64>(0)).expect("count") as u64
}

fn shared_exports() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["../shared/nsys-public", "../shared/nsys-device"] {
        let Ok(entries) = std::fs::read_dir(repo().join(dir)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) == Some("sqlite") {
                files.push(path);
            }
        }
    }
    files.push(repo().join("samples/nsys/torch_loop_race.sqlite"));
    files
}

#[test]
fn every_export_loads_and_its_counts_equal_plain_sql() {
    let files = shared_exports();
    if !repo().join("../shared/nsys-public").exists() {
        eprintln!("../shared/nsys-public is absent: checking the committed sample only");
    }
    for file in files {
        let (code, json, stderr) = analyze_json(&file);
        assert!(code == 0 || code == 1, "{}: exit {code}: {stderr}", file.display());
        let name = file.display();
        for (table, counter_name) in [
            ("CUPTI_ACTIVITY_KIND_KERNEL", "nsys.kernels"),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", "nsys.memcpys"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", "nsys.memsets"),
            ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "nsys.syncs"),
            ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", "nsys.event_records"),
        ] {
            let expected = sql_count(&file, table, "WHERE correlationId IS NOT NULL");
            assert_eq!(counter(&json, counter_name), expected, "{name}: {table}");
        }
        assert_eq!(json["input_format"], "Nsight Systems SQLite export", "{name}");
        assert_eq!(json["summary"]["has_addresses"], false, "{name}: nsys has no addresses");
    }
}

#[test]
fn torch_capture_matches_its_ground_truth() {
    let (code, json, stderr) = analyze_json(&repo().join("samples/nsys/torch_loop_race.sqlite"));
    assert_eq!(code, 0, "{stderr}");
    // Three record -> wait edges from s1 (13) to s2 (17).
    let edges = json["edges"].as_array().expect("edges");
    let event_edge = edges.iter().find(|e| e["via"] == "event_wait").expect("an event edge");
    assert_eq!((event_edge["from"]["handle"].as_u64(), event_edge["to"]["handle"].as_u64()), (Some(13), Some(17)));
    assert_eq!(event_edge["count"], 3);
    // 9 unordered pairs between 13 and 17, none with the legacy default stream.
    let pairs = json["stream_pairs"].as_array().expect("stream pairs");
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    assert_eq!((pairs[0]["a"]["handle"].as_u64(), pairs[0]["b"]["handle"].as_u64()), (Some(13), Some(17)));
    assert_eq!(pairs[0]["pairs"], 9);
    // By site: mul_ (s2) || add_ (s1) six times, mul_ (s2) || the next fill_ (s1) three times.
    let groups = groups(&json);
    assert!(
        groups[0].0.contains("MulFunctor") && groups[0].1.contains("CUDAFunctorOnSelf_add") && groups[0].2 == 6,
        "{groups:?}"
    );
    assert!(
        groups[1].0.contains("MulFunctor") && groups[1].1.contains("FillFunctor") && groups[1].2 == 3,
        "{groups:?}"
    );
    assert!(json["unrecorded_waits"].as_array().is_some_and(Vec::is_empty));
    assert!(json["waits_with_unknown_record"].as_array().is_some_and(Vec::is_empty));
}

#[test]
fn text_report_for_nsys_says_what_it_cannot_know() {
    let out = streamtrace(&["analyze", "samples/nsys/torch_loop_race.sqlite"]);
    let report = String::from_utf8_lossy(&out.stdout);
    let text = crate::util::words(&report);
    assert!(
        report.starts_with("No addresses in this trace") && text.contains("races cannot be decided"),
        "said first: {text}"
    );
    assert!(text.contains("Race candidates: 9 unordered cross-stream operation pairs"), "{text}");
    assert!(text.contains("MulFunctor") && text.contains("6 x"), "{text}");
    assert!(text.contains("SUMMARY: streamtrace: races cannot be decided without addresses"), "{text}");
    assert!(!text.contains("event record -> wait"), "the edges only with --verbose: {text}");
    let out = streamtrace(&["analyze", "samples/nsys/torch_loop_race.sqlite", "--verbose"]);
    let text = crate::util::words(&String::from_utf8_lossy(&out.stdout));
    assert!(text.contains("stream 13 -> stream 17: 3 (event record -> wait)"), "{text}");
}

/// A minimal export: the tables the reader needs, with the columns real exports have.
fn minimal_export(path: &Path, schema_version: &str, kernel_not_null: bool) {
    let conn = Connection::open(path).expect("create");
    let not_null = if kernel_not_null { "NOT NULL" } else { "" };
    conn.execute_batch(&format!(
        "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
         INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '{schema_version}');
         CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'k');
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
           globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER {not_null}, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
           contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
           demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);
         INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, 0, (5 << 24) | 7, 1, 1, 0), (30, 40, 0, (5 << 24) | 7, 2, 1, 0);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 0, 1, 13, 1, 5 << 24, 2, 2);"
    ))
    .expect("schema");
    if !kernel_not_null {
        conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (NULL, 300, 0, 1, 14, 2, 5 << 24, 2, 2)", [])
            .expect("row");
    }
}

#[test]
fn broken_and_foreign_sqlite_get_clear_messages() {
    // SQLite from something else.
    let foreign = scratch_file("nsys/foreign.sqlite");
    Connection::open(&foreign)
        .expect("create")
        .execute_batch("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x');")
        .expect("db");
    let (code, _, stderr) = analyze_json(&foreign);
    assert_eq!(code, 2);
    assert!(stderr.contains("foreign.sqlite") && stderr.contains("not an Nsight Systems export"), "{stderr}");
    // Truncated: the first pages of a real export.
    let real = std::fs::read(repo().join("samples/nsys/torch_loop_race.sqlite")).expect("sample");
    let truncated = scratch_file("nsys/truncated.sqlite");
    std::fs::write(&truncated, &real[..8192]).expect("write");
    let (code, _, stderr) = analyze_json(&truncated);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("truncated.sqlite") && !stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn null_in_not_null_column_and_unknown_schema_are_named_warnings() {
    let db = scratch_file("nsys/nulls.sqlite");
    minimal_export(&db, "9.1.0", false);
    let (code, json, stderr) = analyze_json(&db);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(counter(&json, "nsys.null_in_not_null"), 1);
    assert_eq!(counter(&json, "nsys.schema_unknown"), 1);
    assert_eq!(counter(&json, "nsys.kernels"), 1);
    assert_eq!(json["summary"]["data_loss"], true);
    let out = streamtrace(&["analyze", db.to_str().expect("utf-8")]);
    let text = crate::util::words(&String::from_utf8_lossy(&out.stdout));
    assert!(text.contains("(nsys.null_in_not_null): findings may be incomplete"), "{text}");
}

#[test]
fn missing_tables_still_load() {
    let db = scratch_file("nsys/minimal.sqlite");
    minimal_export(&db, "3.20.3", true);
    let (code, json, stderr) = analyze_json(&db);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(counter(&json, "nsys.kernels"), 1);
    assert_eq!(json["stats"]["threads"], 1);
}

#[test]
fn nsys_rep_is_converted_with_nsys_or_explained_without_it() {
    let report = scratch_file("nsys/capture.nsys-rep");
    let mut bytes = b"NVIDIA Tegra Profiler Report ".to_vec();
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(&report, &bytes).expect("write");
    // Without nsys: one clear message saying how to export by hand.
    let out = binary()
        .args(["analyze", report.to_str().expect("utf-8")])
        .env("NSYS", "/nonexistent/nsys")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nsys export --type sqlite"), "{stderr}");
    // With an `nsys` that exports (a stand-in that copies a real export to --output).
    let fake = scratch_file("nsys/fake-nsys");
    let sample = repo().join("samples/nsys/torch_loop_race.sqlite");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\nwhile [ \"$1\" != --output ]; do shift; done\ncp '{}' \"$2\"\n", sample.display()),
    )
    .expect("write");
    std::process::Command::new("chmod").arg("+x").arg(&fake).status().expect("chmod");
    let out = binary()
        .args(["analyze", report.to_str().expect("utf-8"), "--format", "json"])
        .env("NSYS", &fake)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["stream_pairs"][0]["pairs"], 9);
    assert!(String::from_utf8_lossy(&out.stderr).contains("converting"));
    // The export is cached beside the report and reused.
    assert!(report.with_file_name("capture.nsys-rep.streamtrace.sqlite").exists());
}

/// (earlier site contains, later site contains, pairs) for every unordered-pair group, most pairs first.
fn groups(json: &Value) -> Vec<(String, String, u64)> {
    json["unordered_pairs"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["earlier"]["name"].as_str().unwrap_or_default().to_string(),
                g["later"]["name"].as_str().unwrap_or_default().to_string(),
                g["pairs"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

fn event_edges(json: &Value) -> Vec<(u64, u64, u64)> {
    json["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter(|e| e["via"] == "event_wait")
        .map(|e| {
            (
                e["from"]["handle"].as_u64().unwrap_or(0),
                e["to"]["handle"].as_u64().unwrap_or(0),
                e["count"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn total_pairs(json: &Value) -> u64 {
    json["summary"]["unordered_pairs"].as_u64().expect("count")
}

// Our own captures of samples/torch/*.py (samples/nsys/torch/README.md has the ground truth).
#[test]
fn torch_two_streams_without_wait_are_unordered() {
    let (code, json, stderr) = analyze_json(&repo().join("samples/nsys/torch/two_streams_no_wait.sqlite"));
    assert_eq!(code, 0, "{stderr}");
    assert!(event_edges(&json).is_empty());
    assert_eq!(total_pairs(&json), 4);
    let g = groups(&json);
    assert!(g[0].0.contains("FillFunctor") && g[0].1.contains("MulFunctor") && g[0].2 == 3, "{g:?}");
    assert!(g[1].0.contains("MulFunctor") && g[1].1.contains("FillFunctor") && g[1].2 == 1, "{g:?}");
}

#[test]
fn torch_two_streams_with_events_are_ordered() {
    let (code, json, stderr) = analyze_json(&repo().join("samples/nsys/torch/two_streams_event.sqlite"));
    assert_eq!(code, 0, "{stderr}");
    let mut edges = event_edges(&json);
    edges.sort();
    assert_eq!(edges, vec![(13, 17, 2), (17, 13, 1)]);
    assert_eq!(total_pairs(&json), 0, "{:?}", groups(&json));
}

#[test]
fn torch_prefetch_without_wait_is_unordered_with_the_default_stream() {
    let (code, json, stderr) = analyze_json(&repo().join("samples/nsys/torch/prefetch_no_wait.sqlite"));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(total_pairs(&json), 2);
    let g = groups(&json);
    assert_eq!(g.len(), 1, "{g:?}");
    assert!(g[0].0 == "memcpy HtoD" && g[0].1.contains("MulFunctor") && g[0].2 == 2, "{g:?}");
    let pair = &json["stream_pairs"][0];
    let mut kinds = [pair["a"]["kind"].as_str(), pair["b"]["kind"].as_str()];
    kinds.sort();
    assert_eq!(kinds, [Some("legacy_default"), Some("non_blocking")]);
}

#[test]
fn torch_wait_before_record_leaves_no_wait_in_the_trace() {
    let (code, json, stderr) = analyze_json(&repo().join("samples/nsys/torch/wait_before_record.sqlite"));
    assert_eq!(code, 0, "{stderr}");
    assert!(event_edges(&json).is_empty(), "the early wait made no CUDA call");
    assert_eq!(counter(&json, "nsys.event_records"), 1);
    assert_eq!(total_pairs(&json), 1);
    let g = groups(&json);
    assert!(g[0].0.contains("FillFunctor") && g[0].1.contains("MulFunctor"), "{g:?}");
}
