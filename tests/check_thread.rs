//! The shadow check on a thread of its own (src/hb/checker.rs) finds what the check on the engine's thread finds:
//! every committed sample trace (JSON, binary and nsys exports) and generated traces long enough for the site
//! table to collect, in both host orders, compared report for report and finding for finding as the engine
//! numbered them. (The rule tests run both engines through util/scenario.rs.)

use std::fmt::Write;
use std::path::{Path, PathBuf};

use streamtrace::analysis::{analyze_path, Analysis};
use streamtrace::findings::AccessExtent;
use streamtrace::hb::{CheckThread, EngineOptions, HostOrder};
use streamtrace::synth::{write_trace, SynthSpec};

use crate::util::scenario::{analyze_text, json_report};
use crate::util::{repo, scratch_file};

/// What a trace gave, analyzed with the check on either thread in both host orders.
pub(crate) struct BothWays {
    /// Whether the analyzer took it (in both host orders).
    pub(crate) analyzed: bool,
    /// Whether it raced (in either).
    pub(crate) raced: bool,
}

/// Analyzes a trace (`analyze` runs one analysis) with the check on the engine's thread and on its own, in both
/// host orders, and asserts the same JSON report and the same findings as the engine numbered them (sites,
/// native call sites), or the same refusal. `name` names the trace in a failure, `context` follows it there.
pub(crate) fn compare_both_ways<E: std::fmt::Display>(
    name: &str,
    context: &str,
    analyze: impl Fn(EngineOptions) -> Result<Analysis, E>,
) -> BothWays {
    let report = |host_order, check_thread| match analyze(EngineOptions { host_order, check_thread }) {
        Ok(analysis) => Ok((json_report(&analysis), format!("{:?}", analysis.findings))),
        Err(error) => Err(format!("error: {error}")),
    };
    let mut outcome = BothWays { analyzed: true, raced: false };
    for host_order in [HostOrder::Global, HostOrder::PerThread] {
        match (report(host_order, CheckThread::Off), report(host_order, CheckThread::On)) {
            (Ok((here, numbered_here)), Ok((apart, numbered_apart))) => {
                assert!(
                    here == apart,
                    "{name} ({host_order:?}): the checker's thread reports otherwise\n{}{context}",
                    first_difference(&here, &apart)
                );
                assert!(
                    numbered_here == numbered_apart,
                    "{name} ({host_order:?}): the checker's thread numbers the findings otherwise\n{}{context}",
                    first_difference(&numbered_here, &numbered_apart)
                );
                let races = serde_json::from_str::<serde_json::Value>(&here)
                    .ok()
                    .and_then(|r| r["stats"]["race_occurrences"].as_u64());
                outcome.raced |= races.is_some_and(|n| n > 0);
            }
            (Err(here), Err(apart)) => {
                assert_eq!(here, apart, "{name} ({host_order:?}): refused otherwise");
                outcome.analyzed = false;
            }
            (here, apart) => {
                panic!("{name} ({host_order:?}): one check analyzed and the other did not: {here:?} / {apart:?}")
            }
        }
    }
    outcome
}

/// Where `a` and `b` first differ: the line (a JSON report's) or, in one long line (the findings' `Debug`), the
/// characters around the first byte that differs.
fn first_difference(a: &str, b: &str) -> String {
    let (a_lines, b_lines): (Vec<_>, Vec<_>) = (a.lines().collect(), b.lines().collect());
    let at = a_lines.iter().zip(&b_lines).position(|(x, y)| x != y).unwrap_or(a_lines.len().min(b_lines.len()));
    let mut out = format!("first difference at line {} ({} lines against {}):\n", at + 1, a_lines.len(), b_lines.len());
    let (x, y) = (a_lines.get(at).copied().unwrap_or(""), b_lines.get(at).copied().unwrap_or(""));
    let byte = x.bytes().zip(y.bytes()).position(|(c, d)| c != d).unwrap_or(x.len().min(y.len()));
    let window = |line: &str| {
        let from = (byte.saturating_sub(300)..=byte).find(|&i| line.is_char_boundary(i)).unwrap_or(0);
        let to = (byte + 300..line.len()).find(|&i| line.is_char_boundary(i)).unwrap_or(line.len());
        line.get(from..to.max(from)).unwrap_or("").to_string()
    };
    for line in &a_lines[at.saturating_sub(3)..at] {
        let _ = writeln!(out, "     {line}");
    }
    let _ = writeln!(out, "  off> {}\n  on > {}", window(x), window(y));
    out
}

/// Asserts that both engines report the same on `path` in both host orders; true when it had races.
fn same_both_ways(path: &Path) -> bool {
    compare_both_ways(&path.display().to_string(), "", |options| analyze_path(path, options)).raced
}

fn traces_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a samples folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            traces_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "json" || e == "stbin" || e == "sqlite") {
            out.push(path);
        }
    }
}

#[test]
fn every_sample_trace_is_reported_the_same_with_the_check_on_its_own_thread() {
    let mut traces = Vec::new();
    traces_under(&repo().join("samples"), &mut traces);
    let with_races = traces.iter().filter(|path| same_both_ways(path)).count();
    assert!(traces.len() > 300 && with_races > 100, "{} traces, {with_races} with races", traces.len());
}

#[test]
fn generated_traces_are_reported_the_same_with_the_check_on_its_own_thread() {
    for seed in 1..=3 {
        let path = scratch_file(&format!("check-thread-synth-{seed}.json"));
        let spec = SynthSpec { operations: 20_000, streams: 6, live_ranges: 300, events: 8, seed };
        write_trace(&spec, &mut std::fs::File::create(&path).expect("a scratch file")).expect("generated");
        assert!(same_both_ways(&path), "seed {seed} races");
        let _ = std::fs::remove_file(&path);
    }
}

/// Kernels at lines of their own, so that the site table collects several times: two streams in a chain of
/// waits write a block, each kernel at a new line, while a third stream that waits for nothing reads it now and
/// then (a race with the latest writer, found while the checker's conflicts are in flight), and blocks are freed
/// on the host (releases against the host's clock) and allocated again. At the end it reads a block written once
/// after the last free, whose writer's site only the shadow's stamp names through the collections after it: a
/// collection that did not mark the checker's shadow would give its id to another site, and the race would name
/// that one.
#[test]
fn a_trace_whose_site_table_collects_is_reported_the_same_with_the_check_on_its_own_thread() {
    let mut trace = String::new();
    let mut line = |text: String| writeln!(trace, "{text}").expect("written");
    line(r#"{"type": "streamtrace", "version": 1}"#.into());
    for stream in 1..=3 {
        line(format!(r#"{{"type": "stream", "id": {stream}, "stream_kind": "non_blocking"}}"#));
        line(format!(r#"{{"type": "event", "id": {stream}}}"#));
    }
    let block = |id: u32| format!("0x{:x}", 0x7f00_0100_0000u64 + u64::from(id) * 0x10000);
    for id in 0..3 {
        line(format!(r#"{{"type": "alloc", "id": {id}, "addr": "{}", "size": 65536, "src": "gen.py:1"}}"#, block(id)));
    }
    let kernel = |stream: u32, name: &str, access: &str, id: u32, offset: u32, src: u32| {
        let address = 0x7f00_0100_0000u64 + u64::from(id) * 0x10000 + u64::from(offset);
        let range = format!(r#"[["0x{address:x}", 512]]"#);
        format!(
            r#"{{"type": "kernel", "stream": {stream}, "name": "{name}", "{access}": {range}, "src": "gen.py:{src}"}}"#
        )
    };
    // The block the chain writes (1) and the one freed and allocated again (2, then 3, 4, ... at its address).
    let mut freed_block = 2;
    for i in 0..150_000u32 {
        let (stream, other) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
        line(format!(r#"{{"type": "record", "event": {other}, "stream": {other}}}"#));
        line(format!(r#"{{"type": "wait", "stream": {stream}, "event": {other}}}"#));
        line(kernel(stream, "chain", "writes", 1, 512 * (i % 7), i + 10));
        line(kernel(stream, "chain", "writes", 2, 512 * (i % 5), i + 10));
        if i % 1000 == 999 {
            line(kernel(3, "peek", "reads", 1, 512 * (i % 7), 7));
        }
        if i == 100_000 {
            // Written once, after the last device synchronization, at a site only this stamp will name through
            // the collections to come.
            line(kernel(1, "init", "writes", 0, 0, 5));
        }
        if i % 4999 == 4998 && i < 100_000 {
            line(format!(r#"{{"type": "free", "id": {freed_block}, "src": "gen.py:8"}}"#));
            freed_block = 3 + i / 4999;
            let address = block(2);
            line(format!(
                r#"{{"type": "alloc", "id": {freed_block}, "addr": "{address}", "size": 65536, "src": "gen.py:9"}}"#
            ));
            line(kernel(3, "late", "reads", 2, 0, 6));
        }
    }
    line(kernel(3, "peek", "reads", 0, 0, 7));
    let path = scratch_file("check-thread-lines.json");
    std::fs::write(&path, trace).expect("a scratch file");
    assert!(same_both_ways(&path), "the generated trace races");
    let _ = std::fs::remove_file(&path);
}

/// A finding's extent is decided at its first occurrence (`AccessExtent`): a race of a kernel's site found
/// before that site's pointer arguments first resolved to a whole block names the bytes it knew, even when the
/// checker's thread hands the conflict back after the engine has since marked the site.
#[test]
fn a_race_found_before_its_site_took_whole_blocks_keeps_its_extent() {
    let trace = concat!(
        "{\"type\":\"streamtrace\",\"version\":1}\n",
        "{\"type\":\"stream\",\"id\":1,\"stream_kind\":\"non_blocking\"}\n",
        "{\"type\":\"stream\",\"id\":2,\"stream_kind\":\"non_blocking\"}\n",
        "{\"type\":\"alloc\",\"id\":1,\"addr\":\"0x1000\",\"size\":256}\n",
        // Its pointer argument points nowhere yet: only its exact write counts.
        "{\"type\":\"kernel\",\"stream\":1,\"name\":\"fill\",\"writes\":[[\"0x1000\",64]],\"pointers\":[[\"0x9000\",\"w\"]],\"src\":\"a.cu:1\"}\n",
        "{\"type\":\"kernel\",\"stream\":2,\"name\":\"use\",\"reads\":[[\"0x1000\",64]],\"src\":\"a.cu:2\"}\n",
        // The same site, its argument now in the block: the site accesses whole blocks from here on.
        "{\"type\":\"kernel\",\"stream\":1,\"name\":\"fill\",\"writes\":[[\"0x1000\",64]],\"pointers\":[[\"0x1000\",\"w\"]],\"src\":\"a.cu:1\"}\n",
    );
    for host_order in [HostOrder::Global, HostOrder::PerThread] {
        let analysis = analyze_text("extent.json", trace, host_order).expect("analyzes");
        let extents: Vec<_> = analysis.findings.races.iter().map(|race| race.extent).collect();
        assert_eq!(extents, [AccessExtent::Known, AccessExtent::WholeBlockArguments], "{host_order:?}");
    }
}

/// A kernel with exact ranges and pointer words beside them (a library call's kernel: a cuBLAS gemm takes its
/// operands' ranges, and its workspace pointer still stands for its block) races on its exact bytes as known
/// bytes; only a race on the block its pointer word stood for rests on that word.
#[test]
fn a_race_rests_on_a_whole_block_only_when_its_bytes_lie_in_that_block() {
    let trace = concat!(
        "{\"type\":\"streamtrace\",\"version\":1}\n",
        "{\"type\":\"stream\",\"id\":1,\"stream_kind\":\"non_blocking\"}\n",
        "{\"type\":\"stream\",\"id\":2,\"stream_kind\":\"non_blocking\"}\n",
        "{\"type\":\"alloc\",\"id\":1,\"addr\":\"0x1000\",\"size\":256}\n",
        "{\"type\":\"alloc\",\"id\":2,\"addr\":\"0x8000\",\"size\":256}\n",
        // A gemm writes its output's first 64 bytes, and a workspace word points into block 2.
        "{\"type\":\"kernel\",\"stream\":1,\"name\":\"gemm\",\"writes\":[[\"0x1000\",64]],\"pointers\":[[\"0x8000\",\"w\"]],\"src\":\"a.cu:1\"}\n",
        // Another stream reads the output, then writes the workspace's last bytes.
        "{\"type\":\"kernel\",\"stream\":2,\"name\":\"use\",\"reads\":[[\"0x1000\",64]],\"src\":\"a.cu:2\"}\n",
        "{\"type\":\"kernel\",\"stream\":2,\"name\":\"scribble\",\"writes\":[[\"0x80f0\",16]],\"src\":\"a.cu:3\"}\n",
    );
    for host_order in [HostOrder::Global, HostOrder::PerThread] {
        let analysis = analyze_text("extent-blocks.json", trace, host_order).expect("analyzes");
        let extents: Vec<_> = analysis.findings.races.iter().map(|race| race.extent).collect();
        assert_eq!(extents, [AccessExtent::Known, AccessExtent::WholeBlockArguments], "{host_order:?}");
    }
}
