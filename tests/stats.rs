//! `streamtrace stats` on a real export: the tables agree with plain SQL on the same file, in every format.

use rusqlite::Connection;
use serde_json::Value;

use crate::util::{binary, machine, repo, scratch_file};

const SAMPLE: &str = "samples/nsys/torch_loop_race.sqlite";

fn stats(args: &[&str]) -> std::process::Output {
    binary().arg("stats").args(args).output().expect("runs")
}

#[test]
fn kernel_summary_matches_sql() {
    let dir = scratch_file("stats/json");
    let out = stats(&[SAMPLE, "--format", "json", "-o", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let kernels: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kernels.json")).expect("kernels.json")).expect("json");
    let rows = kernels.as_array().expect("rows");
    let conn = Connection::open(repo().join(SAMPLE)).expect("open");
    let mut stmt = conn
        .prepare(
            "SELECT s.value, COUNT(*), SUM(k.end - k.start), MIN(k.end - k.start), MAX(k.end - k.start) \
             FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY 1",
        )
        .expect("sql");
    let expected: Vec<(String, i64, i64, i64, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows.len(), expected.len());
    for (name, count, total, min, max) in expected {
        let row = rows.iter().find(|r| r["Name"] == name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(row["Instances"], count);
        assert_eq!(row["Total Time (ns)"], total);
        assert_eq!(row["Min (ns)"], min);
        assert_eq!(row["Max (ns)"], max);
    }
    let share: f64 = rows.iter().map(|r| r["Time (%)"].as_f64().expect("pct")).sum();
    assert!((share - 100.0).abs() < 1e-6, "{share}");
    // Most total time first.
    let totals: Vec<i64> = rows.iter().map(|r| r["Total Time (ns)"].as_i64().expect("total")).collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
}

#[test]
fn stream_busy_time_and_overlap() {
    let dir = scratch_file("stats/csv");
    let out = stats(&[SAMPLE, "--format", "csv", "-o", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let streams = std::fs::read_to_string(dir.join("streams.csv")).expect("streams.csv");
    // Stream 13 runs fill_ and add_ (6 kernels), stream 17 mul_ (3), stream 7 one copy.
    assert!(streams.starts_with("Process,Stream,Operations,Busy Time (ns),Busy (% of span)\n"), "{streams}");
    assert!(streams.lines().any(|l| l.starts_with("0,13,6,")), "{streams}");
    assert!(streams.lines().any(|l| l.starts_with("0,17,3,")), "{streams}");
    let overlap = std::fs::read_to_string(dir.join("stream_overlap.csv")).expect("stream_overlap.csv");
    assert_eq!(overlap.lines().count(), 1 + 3, "{overlap}");
    let syncs = std::fs::read_to_string(dir.join("syncs.csv")).expect("syncs.csv");
    assert!(syncs.lines().any(|l| l.starts_with("cudaStreamWaitEvent,3,3,")), "{syncs}");
    let memcpy = std::fs::read_to_string(dir.join("memcpy.csv")).expect("memcpy.csv");
    assert!(memcpy.lines().any(|l| l.starts_with("DtoH,1,")), "{memcpy}");
}

#[test]
fn parquet_and_table_outputs() {
    let dir = scratch_file("stats/parquet");
    let out = stats(&[SAMPLE, "--format", "parquet", "-o", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0));
    for table in ["kernels", "streams", "stream_overlap", "syncs", "memcpy"] {
        let bytes = std::fs::read(dir.join(format!("{table}.parquet"))).expect("parquet written");
        assert_eq!(&bytes[..4], b"PAR1", "{table}");
    }
    let out = stats(&[SAMPLE]);
    let text = String::from_utf8_lossy(&out.stdout);
    for heading in ["kernels:", "streams:", "stream_overlap:", "syncs:", "memcpy:"] {
        assert!(text.contains(heading), "{text}");
    }
    assert!(text.contains("FillFunctor"), "{text}");
}

#[test]
fn stats_reads_json_traces_and_refuses_bad_input() {
    let out = stats(&["samples/json/pipeline_loop_race.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = stats(&["no/such/file.sqlite"]);
    assert_eq!(out.status.code(), Some(2));
    let out = stats(&[SAMPLE, "--format", "parquet"]);
    assert_eq!(out.status.code(), Some(2), "parquet needs a directory");
}

#[test]
fn csv_and_json_go_to_stdout_without_a_directory() {
    let out = stats(&[SAMPLE, "--format", "csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8_lossy(&out.stdout);
    let kernels = csv.split("# kernels\n").nth(1).expect("the kernels block").split("\n\n").next().expect("block");
    assert!(
        kernels
            .starts_with("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"),
        "{kernels}"
    );
    assert_eq!(kernels.lines().count(), 1 + 3, "three kernels: {kernels}");
    for table in ["streams", "stream_overlap", "syncs", "memcpy"] {
        assert!(csv.contains(&format!("\n# {table}\n")), "{table}: {csv}");
    }
    let out = stats(&[SAMPLE, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["kernels"].as_array().map(Vec::len), Some(3));
    let syncs = json["syncs"].as_array().expect("syncs");
    assert!(syncs.iter().any(|r| r["API"] == "cudaStreamWaitEvent" && r["Calls"] == 3), "{syncs:?}");
    // Three launches each: a deviation is computed, not made up.
    assert!(json["kernels"].as_array().expect("rows").iter().all(|r| r["StdDev (ns)"].as_f64().is_some()));
}

#[test]
fn the_table_names_its_columns_with_units_and_groups_digits() {
    let out = stats(&[SAMPLE]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("shape:"), "no polars frame: {text}");
    let kernels = text.split("kernels:\n").nth(1).expect("kernels");
    let header = kernels.lines().next().expect("header");
    let names: Vec<&str> = header.split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
    assert_eq!(
        names,
        [
            "Time (%)",
            "Total Time (ns)",
            "Instances",
            "Avg (ns)",
            "Med (ns)",
            "Min (ns)",
            "Max (ns)",
            "StdDev (ns)",
            "Name"
        ]
    );
    let row = kernels.lines().nth(2).expect("a row");
    // Nanoseconds of a real capture run to thousands: grouped, one decimal at most, no exponent.
    let numbers: Vec<&str> = row.split_whitespace().take(8).collect();
    assert!(numbers[1].contains(','), "{row}");
    for number in numbers {
        assert!(number.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '.'), "{row}");
        assert!(number.split_once('.').is_none_or(|(_, decimals)| decimals.len() == 1), "{row}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 240), "{text}");
}

#[test]
fn stats_png_draws_both_charts() {
    if !machine::font_or_skip("stats_png_draws_both_charts") {
        return;
    }
    let png = scratch_file("stats/png.png");
    let out = stats(&[SAMPLE, "--png", png.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&png).expect("picture written");
    assert_eq!(&bytes[1..4], b"PNG");
    let width = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    let height = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    // Three streams and three kernels: the taller chart has three rows.
    assert_eq!((width, height), (1600, streamtrace::report::png::stats_height(3)));
}

#[test]
fn kernels_without_gpu_times_are_counted_and_said_so() {
    // A capture made without --gpu-times: the two racing kernels of the CUDA sample have no GPU interval.
    let trace = "samples/capture/cuda/two_streams_race.json";
    let out = stats(&[trace]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 kernels have no GPU times"), "{text}");
    let dir = scratch_file("stats/no-gpu-times");
    let out = stats(&[trace, "--format", "json", "-o", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0));
    let kernels: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kernels.json")).expect("kernels.json")).expect("json");
    let rows = kernels.as_array().expect("rows");
    assert_eq!(rows.iter().map(|r| r["Instances"].as_u64().unwrap_or(0)).sum::<u64>(), 2);
    assert!(rows.iter().all(|r| r["Avg (ns)"].is_null() && r["StdDev (ns)"].is_null()), "no time is made up: {rows:?}");
}
