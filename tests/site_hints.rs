//! The site numbers the reader's thread gives kernels, copies and sets (src/hb/site_hints.rs) change no finding:
//! the engine over a trace's records with them and without finds the same, through the hinter's new rounds and
//! the site table's collections. (`analyze` gives them only where the reader keeps ahead, which a small trace
//! may not give it time to: here every record is hinted, as in a long binary trace.)

use std::io::Write;
use std::path::Path;

use streamtrace::hb::site_hints::SiteHinter;
use streamtrace::hb::{analyze_records, EngineError, EngineOptions, HostOrder};
use streamtrace::ingest::{self, RecordPreparer};
use streamtrace::model::{OpKind, SiteHint, TraceRecord};

use crate::util::{repo, scratch_file};

/// The records of the trace at `path`, hinted by `hinter` when there is one.
fn records(path: &Path, hinter: Option<&mut SiteHinter>) -> Vec<TraceRecord> {
    let mut read: Vec<_> = ingest::open(path).unwrap_or_else(|e| panic!("{e}")).collect();
    if let Some(hinter) = hinter {
        hinter.prepare(&mut read);
    }
    read.into_iter().map(|record| record.unwrap_or_else(|e| panic!("{e}"))).collect()
}

/// What the engine finds in `records`, in both host orders, as text.
fn findings(records: &[TraceRecord]) -> String {
    [HostOrder::Global, HostOrder::PerThread]
        .into_iter()
        .map(|host_order| {
            let found = analyze_records(
                records.iter().cloned().map(Ok::<_, EngineError>),
                EngineOptions { host_order, ..Default::default() },
            )
            .unwrap_or_else(|e| panic!("{e}"));
            format!("{found:?}")
        })
        .collect()
}

/// A trace of `kernels` kernels on two streams, each at a line of its own (a generated loop): the live sites pass
/// the site table's collection floor, and every line is a new site for the hinter. Every third kernel's stream
/// waits for the other stream; the others race with it.
fn kernels_at_lines_of_their_own(path: &Path, kernels: u32) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("a scratch file"));
    let mut line = |text: String| writeln!(out, "{text}").expect("written");
    line(r#"{"type": "streamtrace", "version": 1}"#.into());
    line(r#"{"type": "stream", "id": 1, "stream_kind": "non_blocking"}"#.into());
    line(r#"{"type": "stream", "id": 2, "stream_kind": "non_blocking"}"#.into());
    line(r#"{"type": "event", "id": 1}"#.into());
    line(r#"{"type": "event", "id": 2}"#.into());
    line(r#"{"type": "alloc", "id": 1, "addr": "0x7f0001000000", "size": 65536, "src": "gen.py:1"}"#.into());
    for i in 0..kernels {
        let (stream, other) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
        if i % 3 == 0 {
            line(format!(r#"{{"type": "record", "event": {other}, "stream": {other}}}"#));
            line(format!(r#"{{"type": "wait", "stream": {stream}, "event": {other}}}"#));
        }
        let name = ["gemm", "softmax", "add"][(i % 3) as usize];
        let writes = r#"[["0x7f0001000000", 4096]]"#;
        let src = i + 10;
        line(format!(
            r#"{{"type": "kernel", "stream": {stream}, "name": "{name}", "writes": {writes}, "src": "gen.py:{src}"}}"#
        ));
        if i % 5 == 0 {
            line(format!(
                r#"{{"type": "memset", "stream": {stream}, "to": ["0x7f0001001000", 256], "src": "gen.py:2"}}"#
            ));
        }
    }
}

#[test]
fn hinted_records_find_what_unhinted_ones_find() {
    let generated = scratch_file("site_hints/lines_of_their_own.json");
    kernels_at_lines_of_their_own(&generated, 70_000);
    let traces = [
        generated.clone(),
        repo().join("samples/json/pipeline_loop_race.json"),
        repo().join("samples/capture/torch-t2/train_loop.json"),
        repo().join("samples/capture/cuda/graph_replay_loop.json"),
    ];
    for trace in &traces {
        let plain = records(trace, None);
        assert!(plain.iter().all(|r| !matches!(r, TraceRecord::Op(op) if op.site_hint != SiteHint::NONE)));
        let expected = findings(&plain);
        // Hints of one round, and of rounds of three numbers, which start over all the time.
        for limit in [streamtrace::hb::site_hints::HINTED_SITES, 3] {
            let hinted = records(trace, Some(&mut SiteHinter::with_limit(limit)));
            let hot = |r: &TraceRecord| {
                let hot_kind = |kind: &OpKind| {
                    matches!(kind, OpKind::Kernel { .. } | OpKind::Memcpy { .. } | OpKind::Memset { .. })
                };
                matches!(r, TraceRecord::Op(op) if hot_kind(&op.kind))
            };
            assert!(
                hinted
                    .iter()
                    .filter(|r| hot(r))
                    .all(|r| matches!(r, TraceRecord::Op(op) if op.site_hint != SiteHint::NONE)),
                "{}: every kernel, copy and set hinted",
                trace.display()
            );
            assert_eq!(findings(&hinted), expected, "{} with hint rounds of {limit}", trace.display());
        }
    }
}
