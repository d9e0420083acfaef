//! Hostile input and hostile output paths (issues 16 and 27): each test is named after what it would break, and its
//! input is a small file under tests/hostile/ or something made in a scratch directory (a FIFO, a link to
//! /dev/null, a broken export). Every case ends in a clear error naming the file or a correct report; nothing is
//! replaced that is not a regular file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rusqlite::Connection;
use serde_json::Value;

use crate::util::{binary, counter, machine, repo, scratch_dir, stderr, streamtrace};

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

const RACE: &str = "samples/json/two_streams_race.json";

#[test]
fn outputs_refuse_a_fifo_or_a_directory_and_replace_nothing() {
    let dir = scratch_dir("hostile/outputs");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let subdir = dir.join("dir");
    std::fs::create_dir(&subdir).expect("dir");
    for target in [&fifo, &subdir] {
        for flag in ["-o", "--html", "--perfetto", "--png"] {
            let out = streamtrace(&["analyze", RACE, flag, text(target)]);
            assert_eq!(out.status.code(), Some(2), "{flag} {}: {}", target.display(), stderr(&out));
            assert!(stderr(&out).contains("exists and is not a regular file"), "{flag}: {}", stderr(&out));
        }
        for args in [vec!["stats", RACE, "-o", text(target)], vec!["stats", RACE, "--png", text(target)]] {
            let out = streamtrace(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        }
    }
    assert!(is_fifo(&fifo), "the FIFO is still a FIFO");
    assert!(std::fs::read_dir(&subdir).expect("dir").next().is_none(), "nothing was written into the directory");
    // A directory of tables named where a file is.
    let file = dir.join("plain.txt");
    std::fs::write(&file, "mine").expect("write");
    let out = streamtrace(&["stats", RACE, "--format", "csv", "-o", text(&file)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not a directory"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "mine");
}

#[test]
fn outputs_write_through_a_link_to_dev_null_and_keep_the_link() {
    let dir = scratch_dir("hostile/null");
    let null = dir.join("null");
    std::os::unix::fs::symlink("/dev/null", &null).expect("symlink");
    let pictures = machine::font_or_skip("outputs_write_through_a_link_to_dev_null_and_keep_the_link (--png)");
    for flag in ["-o", "--html", "--perfetto", "--png"].into_iter().filter(|f| pictures || *f != "--png") {
        let out = streamtrace(&["analyze", RACE, flag, text(&null)]);
        assert_eq!(out.status.code(), Some(1), "{flag}: {}", stderr(&out));
    }
    let link = std::fs::symlink_metadata(&null).expect("link");
    assert!(link.file_type().is_symlink(), "the link to /dev/null is still a link");
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 1, "no temporary file left");
}

#[test]
fn fields_of_another_record_kind_are_refused_with_file_and_line() {
    for (file, field, kind) in [
        ("memcpy_given_reads_writes.json", "reads", "memcpy"),
        ("memset_given_writes.json", "writes", "memset"),
        ("kernel_given_from_to.json", "from", "kernel"),
    ] {
        let path = format!("tests/hostile/{file}");
        let out = streamtrace(&["analyze", &path]);
        assert_eq!(out.status.code(), Some(2), "{file} read clean: {}", String::from_utf8_lossy(&out.stdout));
        let expected = format!("{path}:5: field `{field}` does not belong to a {kind} record");
        assert!(stderr(&out).contains(&expected), "{file}: {}", stderr(&out));
    }
}

/// A `frame_line` depth is an index the analyzer keeps an entry for, per return address: one of 2.5 billion (a
/// damaged recording, found by a mutation run) made `analyze` of a 4 kB trace grow to 24 GB before the kernel
/// killed it.
#[test]
fn a_frame_line_deeper_than_any_inlining_chain_is_refused_not_allocated_for() {
    let dir = scratch_dir("hostile/frame_line_depth");
    let sample = std::fs::read_to_string(repo().join("samples/capture/cuda/threads_fill_no_sync.json")).unwrap();
    let deepest = streamtrace_format::MAX_FRAME_LINE_DEPTH;
    let mut changed = 0;
    let mut text = String::new();
    for line in sample.lines() {
        if line.contains("\"type\":\"frame_line\"") && line.contains("\"depth\":0") {
            changed += 1;
            let depth = if changed == 1 { 4_000_000_000 } else { deepest };
            text.push_str(&line.replace("\"depth\":0", &format!("\"depth\":{depth}")));
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    assert!(changed >= 2, "the sample has frame_line records of depth 0");
    let recording = dir.join("recording.json");
    std::fs::write(&recording, &text).unwrap();
    // A recording skips the record and counts it; the one at the deepest depth allowed is taken.
    let out = binary().args(["analyze", "--format", "json"]).arg(&recording).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "its race is still found: {}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counter(&report, "json.skipped_malformed"), 1, "{}", stderr(&out));
    // A trace written by hand is refused at that line.
    let written = dir.join("written.json");
    let header = text.lines().next().unwrap();
    std::fs::write(&written, text.replacen(header, r#"{"type":"streamtrace","version":1}"#, 1)).unwrap();
    let out = binary().arg("analyze").arg(&written).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("frame_line `depth` 4000000000, past 255"), "{}", stderr(&out));
}

#[test]
fn dev_zero_is_a_line_too_long_not_an_allocation_abort() {
    let out = streamtrace(&["analyze", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("/dev/zero:1: this line is longer than 64 MiB"), "{}", stderr(&out));
}

fn analyze_from_stdin(path_arg: &str, input: &[u8]) -> Output {
    let mut child = binary()
        .args(["analyze", path_arg])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // The reader may stop early (a refused SQLite input): a broken pipe is no failure here.
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("waits");
    writer.join().expect("writer");
    out
}

#[test]
fn a_trace_through_a_pipe_a_fifo_or_stdin_is_read() {
    let trace = std::fs::read(repo().join(RACE)).expect("sample");
    for path_arg in ["-", "/dev/stdin"] {
        let out = analyze_from_stdin(path_arg, &trace);
        assert_eq!(out.status.code(), Some(1), "{path_arg}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: streamtrace: 1 race"), "{path_arg}");
    }
    let fifo = scratch_dir("hostile/fifo").join("trace.fifo");
    mkfifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(&fifo, trace).expect("write the FIFO"))
    };
    let out = streamtrace(&["analyze", text(&fifo)]);
    writer.join().expect("writer");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // SQLite needs its file: through a pipe it is refused with a message, not misread.
    let export = std::fs::read(repo().join("samples/nsys/torch_loop_race.sqlite")).expect("sample");
    let out = analyze_from_stdin("-", &export);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("<stdin>: an nsys SQLite export that is not a regular file"), "{}", stderr(&out));
}

#[test]
fn address_strings_are_parsed_strictly() {
    for (file, address) in [
        ("address_with_plus_sign.json", "+4096"),
        ("address_hex_with_plus_sign.json", "0x+10"),
        ("address_hex_without_digits.json", "0x"),
        ("address_empty.json", ""),
        ("address_with_space.json", " 4096"),
    ] {
        let path = format!("tests/hostile/{file}");
        let out = streamtrace(&["analyze", &path]);
        assert_eq!(out.status.code(), Some(2), "{file} was taken");
        let expected = format!("{path}:4: malformed record: `{address}` is not an address");
        assert!(stderr(&out).contains(&expected), "{file}: {}", stderr(&out));
    }
}

#[test]
fn a_range_ending_exactly_at_two_to_the_64_is_accepted() {
    let out = streamtrace(&["analyze", "tests/hostile/range_ending_at_2_pow_64.json", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json report");
    assert_eq!(json["races"].as_array().map(Vec::len), Some(1), "the two writes at the top of the address space race");
}

#[test]
fn control_characters_in_names_reach_the_terminal_escaped() {
    let trace = "tests/hostile/control_characters_in_names.json";
    let forbidden = |c: char| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c);
    let out = streamtrace(&["analyze", trace]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!report.chars().any(forbidden), "raw control characters in the report: {report:?}");
    assert_eq!(report.lines().filter(|l| l.starts_with("SUMMARY")).count(), 1, "a name faked a report line: {report}");
    assert!(report.contains("fill\\u{1b}[2J\\u{d}\\u{0}SUMMARY"), "{report}");
    let out = streamtrace(&["stats", trace]);
    let tables = String::from_utf8_lossy(&out.stdout);
    assert!(!tables.chars().any(forbidden), "raw control characters in the tables: {tables:?}");
    assert!(tables.contains("scale\\u{a}SUMMARY"), "{tables}");
}

/// A copy of the nsys sample, changed by `sql`.
fn broken_export(test: &str, sql: &str) -> PathBuf {
    let path = scratch_dir(&format!("hostile/{test}")).join("export.sqlite");
    std::fs::copy(repo().join("samples/nsys/torch_loop_race.sqlite"), &path).expect("copy");
    Connection::open(&path).expect("opens").execute_batch(sql).expect("sql");
    path
}

#[test]
fn an_export_without_string_ids_says_it_lost_names() {
    let export = broken_export("no-strings", "DROP TABLE StringIds;");
    let out = streamtrace(&["analyze", text(&export), "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json report");
    assert_eq!(counter(&json, "nsys.no_string_ids"), 1);
    let out = streamtrace(&["analyze", text(&export)]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("warning: 1 export without a StringIds table"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn export_rows_ending_before_they_start_are_counted() {
    let export = broken_export(
        "end-before-start",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE rowid IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 2);",
    );
    let out = streamtrace(&["analyze", text(&export), "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(counter(&json, "nsys.end_before_start"), 2);
    assert_eq!(json["stream_pairs"][0]["pairs"], 9, "the operations are kept");
}

#[test]
fn a_failed_nsys_export_leaves_no_partial_database() {
    let dir = scratch_dir("hostile/rep");
    let report = dir.join("run.nsys-rep");
    let mut bytes = b"NVIDIA Tegra Profiler Report ".to_vec();
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(&report, &bytes).expect("write");
    // An `nsys` that writes half a database, then fails (disk full, killed).
    let fake = dir.join("nsys");
    std::fs::write(
        &fake,
        "#!/bin/sh\nwhile [ \"$1\" != --output ]; do shift; done\nhead -c 4096 /dev/urandom > \"$2\"\nexit 1\n",
    )
    .expect("write");
    Command::new("chmod").arg("+x").arg(&fake).status().expect("chmod");
    for _ in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_streamtrace"))
            .args(["analyze", text(&report)])
            .env("NSYS", &fake)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("`nsys export` failed"), "{}", stderr(&out));
    }
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 2, "only the report and the fake nsys remain: {left:?}");
}

#[test]
fn stats_sums_past_two_to_the_64_are_an_error_not_a_wrap() {
    let out = streamtrace(&["stats", "tests/hostile/stats_kernel_times_past_2_pow_64.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("stats_kernel_times_past_2_pow_64.json: the kernel nanoseconds add up to more than 2^64"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_record_spread_over_lines_is_read_whole() {
    let out = streamtrace(&["analyze", "tests/hostile/graph_one_node_per_line.json", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["stats"]["accesses"], 64);
}

#[test]
fn a_recording_with_an_unclosed_record_keeps_the_records_after_it() {
    let out =
        streamtrace(&["analyze", "tests/hostile/recording_with_an_unclosed_record_mid_file.json", "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(counter(&json, "json.skipped_malformed"), 1);
    assert_eq!(json["stats"]["operations"], 2, "both kernels after the broken graph record are read");
}

fn capture(dir: &Path, program: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_streamtrace"))
        .args(["capture", "--no-analyze", "-o", text(dir), "--", program])
        .env("STREAMTRACE_CAPTURE_LIB", "/nonexistent/libstreamtrace_capture.so")
        .env_remove("CUDA_INJECTION64_PATH")
        .output()
        .expect("runs")
}

#[test]
fn capture_exits_127_for_a_missing_program_and_126_for_one_that_cannot_run() {
    let dir = scratch_dir("hostile/capture-exit");
    let not_executable = dir.join("script.sh");
    std::fs::write(&not_executable, "echo hi\n").expect("write");
    for (program, status) in [("/nonexistent/program", 127), (text(&not_executable), 126), (text(&dir), 126)] {
        let out = capture(&dir.join("out"), program);
        assert_eq!(out.status.code(), Some(status), "{program}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("cannot run {program}")), "{}", stderr(&out));
    }
}

#[test]
fn capture_removes_only_the_traces_it_wrote() {
    let dir = scratch_dir("hostile/capture-dir");
    let hand_written = dir.join("trace.1.json");
    std::fs::copy(repo().join(RACE), &hand_written).expect("copy");
    let recorded = dir.join("trace.2.json");
    std::fs::write(&recorded, "{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\"}\n").expect("write");
    let out = capture(&dir, "true");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("trace.1.json that streamtrace capture did not write"), "{}", stderr(&out));
    assert!(hand_written.exists() && recorded.exists(), "a refusal deletes nothing");
    std::fs::rename(&hand_written, dir.join("mine.json")).expect("move");
    let out = capture(&dir, "true");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!recorded.exists(), "the earlier capture's trace is removed");
    assert!(dir.join("mine.json").exists());
}

// Issue 27, item 6: output safety.

/// A copy of the race sample in `dir`, with a link to it: the input of the output tests.
fn input_and_link(dir: &Path) -> (PathBuf, PathBuf) {
    let input = dir.join("t.json");
    std::fs::copy(repo().join(RACE), &input).expect("copy");
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&input, &link).expect("symlink");
    (input, link)
}

#[test]
fn an_output_naming_the_input_is_refused_and_the_input_kept() {
    let dir = scratch_dir(concat!("hostile/", "onto-input"));
    let (input, link) = input_and_link(&dir);
    let original = std::fs::read(&input).expect("read");
    let pictures = machine::font_or_skip("an_output_naming_the_input_is_refused_and_the_input_kept (--png)");
    for target in [&input, &link] {
        for flag in ["-o", "--html", "--perfetto", "--png"].into_iter().filter(|f| pictures || *f != "--png") {
            let out = streamtrace(&["analyze", text(&input), flag, text(target)]);
            assert_eq!(out.status.code(), Some(2), "{flag} {}: {}", target.display(), stderr(&out));
            assert!(stderr(&out).contains("is the input"), "{flag}: {}", stderr(&out));
        }
        // The trace read through its link, the report aimed at the file itself.
        let out = streamtrace(&["analyze", text(&link), "-o", text(&input)]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let mut runs = vec![vec!["stats", text(&input), "-o", text(target)]];
        if pictures {
            runs.push(vec!["stats", text(&input), "--png", text(target)]);
        }
        for args in runs {
            let out = streamtrace(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("is the input"), "{args:?}: {}", stderr(&out));
        }
    }
    assert_eq!(std::fs::read(&input).expect("read"), original, "the trace is as it was");
    assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 2, "no temporary file left");
    // Standard input that is a regular file is an input too.
    let out = Command::new(env!("CARGO_BIN_EXE_streamtrace"))
        .args(["analyze", "-", "-o", text(&input)])
        .stdin(std::fs::File::open(&input).expect("open"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read(&input).expect("read"), original);
}

#[test]
fn a_replaced_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir(concat!("hostile/", "mode"));
    for (flag, name, mode) in
        [("-o", "report.txt", 0o600), ("--html", "r.html", 0o640), ("--perfetto", "p.json", 0o604)]
    {
        let target = dir.join(name);
        std::fs::write(&target, "old").expect("write");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let out = streamtrace(&["analyze", RACE, flag, text(&target)]);
        assert_eq!(out.status.code(), Some(1), "{flag}: {}", stderr(&out));
        let metadata = std::fs::metadata(&target).expect("written");
        assert_eq!(metadata.permissions().mode() & 0o777, mode, "{flag}: the mode of {name}");
        assert_ne!(std::fs::read(&target).expect("read"), b"old", "{flag}: replaced");
    }
}

#[test]
fn an_output_name_of_250_characters_is_written() {
    let dir = scratch_dir(concat!("hostile/", "long-name"));
    let target = dir.join(format!("{}.txt", "r".repeat(246)));
    let out = streamtrace(&["analyze", RACE, "-o", text(&target)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&target).expect("written").contains("SUMMARY"));
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 1, "no temporary file left");
}

#[test]
fn a_missing_output_directory_is_named_not_the_temporary_file() {
    let dir = scratch_dir(concat!("hostile/", "no-dir"));
    let target = dir.join("absent").join("report.html");
    let out = streamtrace(&["analyze", RACE, "--html", text(&target)]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(message.contains(&format!("{}: the directory", target.display())), "{message}");
    assert!(message.contains("does not exist") && !message.contains(".tmp"), "{message}");
}

#[test]
fn a_picture_for_dev_null_follows_no_link_at_a_temporary_name() {
    if !machine::font_or_skip("a_picture_for_dev_null_follows_no_link_at_a_temporary_name") {
        return;
    }
    let dir = scratch_dir(concat!("hostile/", "png-null"));
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "mine").expect("write");
    // Temporary names that a process id makes predictable, planted for the next few hundred processes.
    let next = Command::new("true").spawn().expect("spawns").id();
    for pid in next..next + 400 {
        std::os::unix::fs::symlink(&victim, dir.join(format!(".null.{pid}.tmp.png"))).expect("plant");
    }
    for args in [vec!["analyze", RACE, "--png", "/dev/null"], vec!["stats", RACE, "--png", "/dev/null"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_streamtrace"))
            .args(&args)
            .current_dir(repo())
            .env("TMPDIR", &dir)
            .output()
            .expect("runs");
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}: {}", stderr(&out));
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "mine", "{args:?} wrote through a planted link");
    }
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 401, "only the victim and the planted links remain");
}

// Issue 27, item 1: files a trace names.

/// A trace whose race's call site points into a module at `module`.
fn trace_with_module(module: &str) -> String {
    let module = serde_json::to_string(module).expect("a JSON string");
    [
        r#"{"type": "streamtrace", "version": 1}"#.to_string(),
        format!(r#"{{"type": "module", "path": {module}, "base": "0x400000", "addr": "0x400000", "size": 65536}}"#),
        r#"{"type": "callsite", "id": 1, "frames": ["0x401234"]}"#.to_string(),
        r#"{"type": "stream", "id": 1, "stream_kind": "non_blocking"}"#.to_string(),
        r#"{"type": "stream", "id": 2, "stream_kind": "non_blocking"}"#.to_string(),
        r#"{"type": "kernel", "stream": 1, "name": "a", "writes": [[4096, 64]], "site": 1}"#.to_string(),
        r#"{"type": "kernel", "stream": 2, "name": "b", "writes": [[4096, 64]], "site": 1}"#.to_string(),
    ]
    .join("\n")
}

/// Runs the binary, killing it after `limit` (a hang is the failure these tests look for, not a speed).
fn run_with_limit(args: &[&str], limit: std::time::Duration) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_streamtrace"))
        .args(args)
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().expect("waits").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn module_paths_to_devices_fifos_and_non_elf_files_are_not_read() {
    let dir = scratch_dir(concat!("hostile/", "modules"));
    let fifo = dir.join("module.fifo");
    mkfifo(&fifo);
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "a text file, not a binary\n").expect("write");
    for module in ["/dev/zero", "/dev/urandom", text(&fifo), text(&notes), text(&dir)] {
        let trace = dir.join("trace.json");
        std::fs::write(&trace, trace_with_module(module)).expect("write");
        let out = run_with_limit(&["analyze", text(&trace), "--format", "json"], std::time::Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{module}: the analysis did not finish"));
        assert_eq!(out.status.code(), Some(1), "{module}: {}", stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).expect("json report");
        assert_eq!(counter(&json, "symbols.unreadable_modules"), 1, "{module}");
        assert!(is_fifo(&fifo), "the FIFO is untouched");
    }
}

// Issue 27, items 2 and 3: graphs nested deep, graphs of many nodes.

/// A trace that nests child graphs `depth` levels deep, `fan` child nodes per level, and launches the top one.
fn nested_graphs(depth: u64, fan: u64) -> String {
    let mut lines = vec![
        r#"{"type": "streamtrace", "version": 1}"#.to_string(),
        r#"{"type": "stream", "id": 1, "stream_kind": "non_blocking"}"#.to_string(),
        r#"{"type": "graph_create", "graph": 0}"#.to_string(),
        r#"{"type": "graph_node", "graph": 0, "node": 1, "name": "leaf"}"#.to_string(),
    ];
    for level in 1..=depth {
        lines.push(format!(r#"{{"type": "graph_create", "graph": {level}}}"#));
        for node in 0..fan {
            let deps = if node == 0 { String::new() } else { format!(r#", "deps": [{}]"#, node - 1) };
            lines.push(format!(
                r#"{{"type": "graph_node", "graph": {level}, "node": {node}, "node_kind": "child", "child": {}{deps}}}"#,
                level - 1
            ));
        }
    }
    lines.push(format!(r#"{{"type": "graph_instantiate", "graph": {depth}, "exec": 1}}"#));
    lines.push(r#"{"type": "graph_launch", "exec": 1, "stream": 1}"#.to_string());
    lines.join("\n")
}

fn analyze_text(test: &str, trace: &str, limit: u64) -> Output {
    let path = scratch_dir(&format!("hostile/{test}")).join("trace.json");
    std::fs::write(&path, trace).expect("write");
    run_with_limit(&["analyze", text(&path), "--format", "json"], std::time::Duration::from_secs(limit))
        .unwrap_or_else(|| panic!("{test}: the analysis did not finish"))
}

#[test]
fn child_graphs_nested_thousands_deep_are_an_error_not_a_crash() {
    let out = analyze_text("nested-deep", &nested_graphs(3000, 1), 120);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("trace.json:"), "the error names the line: {}", stderr(&out));
    assert!(stderr(&out).contains("more than 256 levels deep"), "{}", stderr(&out));
    // As deep as allowed is read, and the launch runs every level's leaf once.
    let out = analyze_text("nested-256", &nested_graphs(256, 1), 120);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn two_child_nodes_per_level_are_flattened_in_time_linear_in_their_nodes() {
    // 2^18 leaves: flattened once each, in order (each child node after the one before it).
    let out = analyze_text("nested-fan", &nested_graphs(18, 2), 120);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 2^24 would be 16 million nodes: refused, naming the bound.
    let out = analyze_text("nested-fan-too-many", &nested_graphs(24, 2), 120);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("more than 2097152 nodes"), "{}", stderr(&out));
}

/// Runs the binary with its address space limited to `bytes` (`ulimit -v`): memory a case must stay under.
fn analyze_within(trace: &Path, bytes: u64) -> Output {
    let command = format!("ulimit -v {}; exec \"$0\" analyze \"$1\" --format json", bytes >> 10);
    Command::new("sh")
        .args(["-c", &command, env!("CARGO_BIN_EXE_streamtrace"), text(trace)])
        .current_dir(repo())
        .output()
        .expect("runs")
}

#[test]
fn a_graph_of_128k_chained_nodes_needs_memory_linear_in_its_nodes() {
    let nodes: Vec<String> = (0..131_072u64)
        .map(|i| {
            let deps = if i == 0 { String::new() } else { format!(r#", "deps": [{}]"#, i - 1) };
            format!(r#"{{"writes": [[{}, 64]]{deps}}}"#, 4096 + i * 64)
        })
        .collect();
    let trace = [
        r#"{"type": "streamtrace", "version": 1}"#.to_string(),
        r#"{"type": "stream", "id": 1, "stream_kind": "non_blocking"}"#.to_string(),
        r#"{"type": "stream", "id": 2, "stream_kind": "non_blocking"}"#.to_string(),
        format!(r#"{{"type": "graph", "stream": 1, "name": "chain", "nodes": [{}]}}"#, nodes.join(",")),
        r#"{"type": "kernel", "stream": 2, "name": "late", "writes": [[4096, 64]]}"#.to_string(),
    ]
    .join("\n");
    let path = scratch_dir(concat!("hostile/", "chain")).join("trace.json");
    std::fs::write(&path, trace).expect("write");
    // A table of every node's ancestors alone would be 2 GiB.
    let out = analyze_within(&path, 1 << 30);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["races"].as_array().map(Vec::len), Some(1), "the late kernel races with the first node");
}

// Issue 27, last paragraph: a source line per operation.

#[test]
fn a_source_line_per_operation_needs_memory_for_the_live_sites_only() {
    // 600,000 kernels, each at a line of its own, each writing what the one before it wrote; a race found at the
    // start and one at the end, so that the sites the findings hold survive every collection between them.
    let mut lines = vec![
        r#"{"type": "streamtrace", "version": 1}"#.to_string(),
        r#"{"type": "stream", "id": 1}"#.to_string(),
        r#"{"type": "stream", "id": 2, "stream_kind": "non_blocking"}"#.to_string(),
        r#"{"type": "kernel", "stream": 2, "name": "early", "src": "early.py:1", "writes": [[8192, 64]]}"#.to_string(),
        r#"{"type": "kernel", "stream": 1, "name": "first", "src": "gen.py:0", "writes": [[8192, 64]]}"#.to_string(),
    ];
    lines.extend((1..=600_000).map(|i| {
        format!(r#"{{"type": "kernel", "stream": 1, "name": "k", "src": "gen.py:{i}", "writes": [[4096, 64]]}}"#)
    }));
    lines.push(r#"{"type": "kernel", "stream": 2, "name": "late", "src": "late.py:1", "writes": [[4096, 64]]}"#.into());
    let path = scratch_dir("hostile/source-lines").join("trace.json");
    std::fs::write(&path, lines.join("\n")).expect("write");
    // Every site kept was 0.3 to 0.45 KB an operation: 600,000 of them did not fit in 320 MiB.
    let out = analyze_within(&path, 320 << 20);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    let races = json["races"].as_array().expect("races");
    let sources: Vec<(String, String)> = races
        .iter()
        .map(|race| {
            let at = |side: &str| {
                let source = &race[side]["site"]["source"];
                format!("{}:{}", source["file"].as_str().unwrap_or("?"), source["line"])
            };
            (at("earlier"), at("later"))
        })
        .collect();
    let expected = [("early.py:1", "gen.py:0"), ("gen.py:600000", "late.py:1")];
    let expected: Vec<(String, String)> = expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert_eq!(sources, expected);
}

// Issue 27, item 4: `stats` says what `analyze` says about lost data.

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first `bytes` bytes of `sample`, in the scratch directory of `test`.
fn cut(test: &str, sample: &str, bytes: usize) -> PathBuf {
    let path = scratch_dir(&format!("hostile/{test}")).join("cut.json");
    let whole = std::fs::read(repo().join(sample)).expect("sample");
    std::fs::write(&path, &whole[..bytes]).expect("write");
    path
}

#[test]
fn stats_warns_of_lost_data_as_analyze_does() {
    // A recording cut inside a record: both readings skip it and count it.
    let trace = cut("stats-cut", "samples/capture/cuda/batch_copy_race.json", 1900);
    let out = streamtrace(&["analyze", text(&trace)]);
    assert!(stdout(&out).contains("(json.skipped_malformed; first at"), "{}", stdout(&out));
    let out = streamtrace(&["stats", text(&trace)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("(json.skipped_malformed; first at"), "{}", stdout(&out));
    assert!(stdout(&out).contains("the tables may be incomplete"), "{}", stdout(&out));
    // An export with NULL rows, and one without its names.
    for (test, sql, counter) in [
        (
            "stats-null",
            "CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; \
             ALTER TABLE k RENAME TO CUPTI_ACTIVITY_KIND_KERNEL; \
             UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 2);",
            "nsys.null_in_not_null",
        ),
        ("stats-no-strings", "DROP TABLE StringIds;", "nsys.no_string_ids"),
    ] {
        let export = broken_export(test, sql);
        let out = streamtrace(&["stats", text(&export)]);
        assert_eq!(out.status.code(), Some(0), "{test}: {}", stderr(&out));
        assert!(stdout(&out).contains(&format!("({counter})")), "{test}: {}", stdout(&out));
        // Tables written to files: the warning goes to standard error.
        let dir = export.with_file_name("tables");
        let out = streamtrace(&["stats", text(&export), "--format", "csv", "-o", text(&dir)]);
        assert_eq!(out.status.code(), Some(0), "{test}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("({counter})")), "{test}: {}", stderr(&out));
    }
}

#[test]
fn stats_of_4000_timed_streams_shows_the_pairs_that_overlap_most() {
    let mut lines = vec![r#"{"type": "streamtrace", "version": 1}"#.to_string()];
    lines.extend((1..=4000).map(|s| format!(r#"{{"type": "stream", "id": {s}}}"#)));
    lines.extend((1..=4000u64).map(|s| {
        format!(r#"{{"type": "kernel", "stream": {s}, "name": "k", "gpu_start": {}, "gpu_end": {}}}"#, s, s + 100_000)
    }));
    let path = scratch_dir(concat!("hostile/", "stats-4000")).join("trace.json");
    std::fs::write(&path, lines.join("\n")).expect("write");
    // 8 million stream pairs: a terminal table of them all took 7.6 GB.
    let command = format!("ulimit -v {}; exec \"$0\" stats \"$1\"", 3u64 << 20);
    let out = Command::new("sh")
        .args(["-c", &command, env!("CARGO_BIN_EXE_streamtrace"), text(&path)])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("... 7997900 more stream pairs, with less overlap"), "{}", stdout(&out));
}

// Issue 27, items 8 and 9: what the strict reader refuses, and how it says so.

#[test]
fn two_legacy_default_streams_in_one_context_are_refused_once_with_their_line() {
    let trace = [
        r#"{"type": "streamtrace", "version": 1}"#,
        r#"{"type": "stream", "id": 0, "stream_kind": "legacy_default"}"#,
        r#"{"type": "stream", "id": 1, "stream_kind": "legacy_default"}"#,
        r#"{"type": "kernel", "stream": 1, "name": "k"}"#,
    ]
    .join("\n");
    let path = scratch_dir(concat!("hostile/", "two-legacy")).join("trace.json");
    std::fs::write(&path, trace).expect("write");
    for command in ["analyze", "stats"] {
        let out = streamtrace(&[command, text(&path)]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stdout(&out));
        let message = stderr(&out);
        assert!(message.contains(&format!("{}:3: a second legacy default stream", path.display())), "{message}");
        assert_eq!(message.matches("legacy default stream").count(), 2, "said once: {message}");
    }
}

// Issue 27, item 5: a recording's end.

#[test]
fn a_recording_cut_on_a_record_boundary_says_its_end_was_lost() {
    let sample = "samples/capture/cuda/batch_copy_race.json";
    let whole = std::fs::read_to_string(repo().join(sample)).expect("sample");
    assert_eq!(whole.as_bytes()[1941], b'\n', "1942 bytes end on a line");
    let trace = cut("cut-on-boundary", sample, 1942);
    let out = streamtrace(&["analyze", text(&trace), "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(counter(&json, "json.recording_without_closing_record"), 1);
    let out = streamtrace(&["analyze", text(&trace)]);
    let report = stdout(&out);
    assert!(report.contains("(json.recording_without_closing_record; first at"), "{report}");
    assert!(!report.contains("tier T0"), "a cut recording is no trace without addresses: {report}");
    let out = streamtrace(&["analyze", sample, "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(counter(&json, "json.recording_without_closing_record"), 0, "the whole recording is closed");
}

// Issue 27, item 7: nsys exports changed in ways that alter the result.

/// `table` rebuilt without its NOT NULL constraints (as a damaged or hand-edited export may be), then `sql`.
fn loosened(table: &str, sql: &str) -> String {
    format!(
        "CREATE TABLE loose AS SELECT * FROM {table}; DROP TABLE {table}; ALTER TABLE loose RENAME TO {table}; {sql}"
    )
}

#[test]
fn nsys_anomalies_that_change_the_result_are_each_counted_as_data_loss() {
    let first_kernel = "(SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)";
    let cases = [
        (
            "corr-out-of-range",
            format!("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = 5000000000 WHERE rowid = {first_kernel};"),
            "nsys.correlation_out_of_range",
        ),
        (
            "corr-negative",
            "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET correlationId = -5;".to_string(),
            "nsys.correlation_out_of_range",
        ),
        (
            "corr-colliding",
            format!(
                "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = (SELECT correlationId FROM \
                 CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = {first_kernel}) WHERE rowid = {first_kernel} + 1;"
            ),
            "nsys.colliding_correlation_ids",
        ),
        (
            "corr-of-a-sync",
            "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET correlationId = (SELECT r.correlationId FROM \
             CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaStreamSynchronize%');"
                .to_string(),
            "nsys.colliding_correlation_ids",
        ),
        (
            "name-null",
            loosened("CUPTI_ACTIVITY_KIND_RUNTIME", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = NULL;"),
            "nsys.unnamed_api_calls",
        ),
        ("name-dangling", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = nameId + 1000000;".to_string(), "nsys.unnamed_api_calls"),
        (
            "rows-doubled",
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;".to_string(),
            "nsys.duplicate_rows",
        ),
        ("sync-id-null", "UPDATE CUPTI_ACTIVITY_KIND_CUDA_EVENT SET eventSyncId = NULL;".to_string(), "nsys.event_sync_id_missing"),
        (
            "sync-id-dropped",
            "ALTER TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT DROP COLUMN eventSyncId;".to_string(),
            "nsys.event_sync_id_missing",
        ),
        (
            "wait-sync-id-null",
            "UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET eventSyncId = NULL;".to_string(),
            "nsys.event_sync_id_missing",
        ),
    ];
    for (test, sql, name) in cases {
        let export = broken_export(test, &sql);
        let out = streamtrace(&["analyze", text(&export), "--format", "json"]);
        let json: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{test}: {e}: {}", stderr(&out)));
        assert!(counter(&json, name) > 0, "{test}: {name} not counted: {}", json["import"]);
        let row = json["import"].as_array().and_then(|cs| cs.iter().find(|c| c["name"] == name)).expect("listed");
        assert_eq!(row["severity"], "data_loss", "{test}");
        // The repaired cases keep the sample's verdict: no operation doubled, no wait lost.
        if matches!(test, "rows-doubled" | "sync-id-null" | "sync-id-dropped" | "wait-sync-id-null") {
            assert_eq!(json["stream_pairs"][0]["pairs"], 9, "{test}: {}", json["stream_pairs"]);
        }
    }
    // The sample itself counts none of them.
    let out = streamtrace(&["analyze", "samples/nsys/torch_loop_race.sqlite", "--format", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    let lost: Vec<&Value> =
        json["import"].as_array().expect("counters").iter().filter(|c| c["severity"] == "data_loss").collect();
    assert!(lost.is_empty(), "{lost:?}");
}

fn analyze_lines(test: &str, lines: &[&str]) -> (PathBuf, Output) {
    let path = scratch_dir(&format!("hostile/{test}")).join("trace.json");
    std::fs::write(&path, lines.join("\n")).expect("write");
    let out = streamtrace(&["analyze", text(&path)]);
    (path, out)
}

#[test]
fn the_strict_reader_refuses_what_no_program_records() {
    let header = r#"{"type": "streamtrace", "version": 1}"#;
    let stream = r#"{"type": "stream", "id": 1, "stream_kind": "non_blocking"}"#;
    for (test, lines, expected) in [
        (
            "gpu-time-backwards",
            vec![
                header,
                stream,
                r#"{"type": "kernel", "stream": 1, "name": "k", "corr": 5}"#,
                r#"{"type": "gpu_time", "corr": 5, "gpu_start": 100, "gpu_end": 50}"#,
            ],
            ":4: gpu_end 50 is before gpu_start 100",
        ),
        (
            "node-added-twice",
            vec![
                header,
                stream,
                r#"{"type": "graph_create", "graph": 1}"#,
                r#"{"type": "graph_node", "graph": 1, "node": 5, "writes": [[4096, 64]]}"#,
                r#"{"type": "graph_node", "graph": 1, "node": 5, "writes": [[4096, 64]]}"#,
                r#"{"type": "graph_instantiate", "graph": 1, "exec": 2}"#,
                r#"{"type": "graph_launch", "exec": 2, "stream": 1}"#,
            ],
            ":5: graph node 0x5 is added to graph 0x1 twice",
        ),
        (
            "rank-past-world",
            vec![r#"{"type": "streamtrace", "version": 1, "rank": 7, "world_size": 2}"#, stream],
            ":1: header: `rank` 7 is not a place in a job of `world_size` 2",
        ),
        (
            "rank-past-2-pow-32",
            vec![r#"{"type": "streamtrace", "version": 1, "rank": 4294967296, "world_size": 2}"#, stream],
            ":1: malformed header: invalid value: integer `4294967296`",
        ),
    ] {
        let (path, out) = analyze_lines(test, &lines);
        assert_eq!(out.status.code(), Some(2), "{test}: {}", stdout(&out));
        let expected = format!("{}{expected}", path.display());
        assert!(stderr(&out).contains(&expected), "{test}: {}", stderr(&out));
    }
}

#[test]
fn error_messages_quote_the_trace_escaped() {
    let forbidden = |c: char| c.is_control() && c != '\n' || ('\u{202a}'..='\u{202e}').contains(&c);
    let header = r#"{"type": "streamtrace", "version": 1}"#;
    let stream = r#"{"type": "stream", "id": 1}"#;
    for (test, lines) in [
        ("type", vec![header, r#"{"type": "\u001b[2Jkernel"}"#]),
        ("stream-kind", vec![header, r#"{"type": "stream", "id": 1, "stream_kind": "\u0007bell"}"#]),
        ("field", vec![header, stream, r#"{"type": "kernel", "stream": 1, "name": "k", "\u202eevil": 1}"#]),
        ("address", vec![header, r#"{"type": "alloc", "id": 1, "addr": "\u001b]0;title\u0007", "size": 4}"#]),
    ] {
        let (_, out) = analyze_lines(&format!("escaped-{test}"), &lines);
        assert_eq!(out.status.code(), Some(2), "{test}");
        let message = stderr(&out);
        assert!(!message.chars().any(forbidden), "{test}: raw control characters: {message:?}");
        assert!(message.contains("\\u{"), "{test}: {message}");
    }
    let out = streamtrace(&["analyze", "/nonexistent/\u{1b}[31mred.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).chars().any(forbidden), "{:?}", stderr(&out));
    assert!(stderr(&out).contains("/nonexistent/\\u{1b}[31mred.json"), "{}", stderr(&out));
}

#[test]
fn a_junk_export_of_an_nsys_that_exited_0_is_neither_read_nor_cached() {
    let dir = scratch_dir(concat!("hostile/", "rep-junk"));
    let report = dir.join("run.nsys-rep");
    let mut bytes = b"NVIDIA Tegra Profiler Report ".to_vec();
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(&report, &bytes).expect("write");
    let runs = dir.join("runs");
    let fake = dir.join("nsys");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho run >> '{}'\nwhile [ \"$1\" != --output ]; do shift; done\necho junk > \"$2\"\nexit 0\n",
            runs.display()
        ),
    )
    .expect("write");
    Command::new("chmod").arg("+x").arg(&fake).status().expect("chmod");
    for _ in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_streamtrace"))
            .args(["analyze", text(&report)])
            .env("NSYS", &fake)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("exited 0, but what it wrote is not an SQLite database"), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read_to_string(&runs).expect("runs").lines().count(), 2, "converted again, not reused");
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 3, "only the report, the fake nsys and its log remain: {left:?}");
}
