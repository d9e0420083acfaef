//! A deterministic mutation test of the readers (issue 16, "Must hold"): the samples, changed a few thousand
//! ways (bytes flipped, text cut, lines duplicated, dropped and swapped, numbers made extreme, the header made a
//! recording's), go through reading and analysis (and some through `convert`) in this process; so do their
//! binary encodings and those of real captures (each converted back to JSON too), changed frame by frame
//! (lengths and tags made wrong, frames dropped, repeated and swapped, values made extreme, the string table
//! reset), and the nsys samples, changed by SQL (tables dropped, NULLs, extreme and swapped values) and by
//! flipped bytes. No input may panic (on any thread), and every error must name its file. The inputs are the
//! same on every run (a fixed seed); docs/fuzzing.md gives the figures.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use rusqlite::Connection;
use streamtrace::analysis::analyze_source;
use streamtrace::hb::EngineOptions;
use streamtrace::ingest::binary::BinaryTraceReader;
use streamtrace::ingest::convert::convert;
use streamtrace::ingest::{self, json::JsonTraceReader, RecordSource};
use streamtrace::synth::Rng;
use streamtrace_format::binary::{FRAME_HEAD_BYTES, MAX_FRAME_BYTES, PREAMBLE_BYTES};
use streamtrace_format::TraceEncoding;

use crate::util::{repo, scratch_dir};

/// Mutated JSON traces run per sample.
const JSON_MUTATIONS_PER_SAMPLE: usize = 300;
/// Mutated binary traces run per JSON sample converted (and per real capture taken, a fifth of that).
const BINARY_MUTATIONS_PER_SAMPLE: usize = 100;
/// Hostile shapes generated (each run as made and mutated once).
const HOSTILE_SHAPES: usize = 200;
/// Byte-flipped copies run per nsys export.
const SQLITE_FLIPS_PER_SAMPLE: usize = 6;

/// How many times the counts above a run makes: `MUTATION_SCALE=N` for a longer local run (docs/fuzzing.md gives
/// the figures of one); 1 in `cargo test`.
fn scale() -> usize {
    std::env::var("MUTATION_SCALE").ok().and_then(|n| n.parse().ok()).unwrap_or(1).max(1)
}

/// Panics on any thread (the readers parse on background threads), counted by a hook set once. The other
/// integration tests run in this process too: a panic raised by a test's own code (a file under tests/: a failed
/// assertion, which fails that test) is not counted; one raised in the readers, the analysis or a crate they use is.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.location().is_some_and(|at| at.file().starts_with("tests/")) {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// Reads and analyzes one input; an error must name `name`. Returns whether it was refused.
fn run(name: &str, source: Result<Box<dyn RecordSource>, ingest::IngestError>) -> bool {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let source = source.map_err(|e| e.to_string())?;
        analyze_source(name, source, EngineOptions::default()).map(|_| ()).map_err(|e| e.to_string())
    }));
    match outcome {
        Ok(Ok(())) => false,
        Ok(Err(message)) => {
            assert!(message.contains(name), "an error that does not name the file {name}: {message}");
            true
        }
        Err(_) => panic!("{name}: panicked"),
    }
}

/// Reads and analyzes one mutant in `encoding` (see [`run`]): whether it was refused.
fn run_mutant(name: &str, mutant: Vec<u8>, encoding: TraceEncoding) -> bool {
    let (path, input) = (PathBuf::from(name), Cursor::new(mutant));
    let source = match encoding {
        TraceEncoding::Json => JsonTraceReader::from_reader(path, input).map(|r| Box::new(r) as Box<dyn RecordSource>),
        TraceEncoding::Binary => {
            BinaryTraceReader::from_reader(path, input).map(|r| Box::new(r) as Box<dyn RecordSource>)
        }
    };
    run(name, source)
}

/// The end of a mutation test: no thread panicked, and of the `runs` inputs more than `least` were refused, not
/// all (mutations that are all refused, or all taken, test little).
fn no_panic_and_some_refused(what: &str, runs: usize, refused: usize, least: usize) {
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a reader thread panicked (see above)");
    eprintln!("{what}: {runs} inputs, {refused} refused with an error naming the file, 0 panics");
    assert!(refused > least && refused < runs, "the mutations should be neither all refused nor all taken");
}

const TOKENS: [&[u8]; 14] = [
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"\n",
    b"-1",
    b"18446744073709551615",
    b"\"0x\"",
    b"null",
    b"\\u0000",
    b"1e999",
];

/// One to four bytes of `out` overwritten, at random places.
fn overwrite_bytes(out: &mut [u8], rng: &mut Rng) {
    for _ in 0..1 + rng.index(4) {
        let at = rng.index(out.len());
        out[at] = rng.next_u64() as u8;
    }
}

/// One mutation of `text`.
fn mutate(text: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = text.to_vec();
    let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
    match rng.index(10) {
        0 => overwrite_bytes(&mut out, rng),
        1 => out.truncate(rng.index(out.len())),
        2 => {
            let at = rng.index(out.len());
            let token = TOKENS[rng.index(TOKENS.len())];
            out.splice(at..at, token.iter().copied());
        }
        3 | 4 => {
            // Whole lines: duplicated, dropped or swapped.
            let mut lines = lines.clone();
            let (a, b) = (rng.index(lines.len()), rng.index(lines.len()));
            match rng.index(3) {
                0 => lines.insert(a, lines[b]),
                1 if lines.len() > 1 => {
                    lines.remove(a);
                }
                _ => lines.swap(a, b),
            }
            out = lines.concat();
        }
        5 => {
            // A number made extreme.
            let digits: Vec<usize> = (0..out.len()).filter(|&i| out[i].is_ascii_digit()).collect();
            if let Some(&at) = digits.get(rng.index(digits.len())) {
                let extreme: &[u8] =
                    [b"18446744073709551615".as_slice(), b"-9", b"99999999999999999999", b"0"][rng.index(4)];
                out.splice(at..at + 1, extreme.iter().copied());
            }
        }
        6 => {
            // A field value of one record given to another key.
            let keys = [
                &b"\"reads\""[..],
                b"\"writes\"",
                b"\"from\"",
                b"\"to\"",
                b"\"stream\"",
                b"\"event\"",
                b"\"id\"",
                b"\"nodes\"",
            ];
            let (from, to) = (keys[rng.index(keys.len())], keys[rng.index(keys.len())]);
            if let Some(at) = out.windows(from.len()).position(|w| w == from) {
                out.splice(at..at + from.len(), to.iter().copied());
            }
        }
        8 => {
            // Cut on a record boundary (issue 27): whole records, the end lost; a recording's closing record too.
            let keep = rng.index(lines.len() + 1);
            out = lines[..keep].concat();
        }
        9 => {
            // A record's value given a terminal control (issue 27: messages that quote the trace escape them).
            let quotes: Vec<usize> = (0..out.len()).filter(|&i| out[i] == b'"').collect();
            if let Some(&at) = quotes.get(rng.index(quotes.len())) {
                let control: &[u8] = [br"\u001b[2J".as_slice(), br"\u0007", br"\u202e", br"\u0000"][rng.index(4)];
                out.splice(at + 1..at + 1, control.iter().copied());
            }
        }
        _ => {
            // A recording: the same mutations read tolerantly.
            let header = b"{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\"}\n";
            let rest = lines.iter().skip(1).flat_map(|l| l.iter().copied());
            out = header.iter().copied().chain(rest).collect();
            let at = rng.index(out.len());
            out[at] = TOKENS[rng.index(TOKENS.len())][0];
        }
    }
    out
}

fn samples(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    found.sort();
    found
}

#[test]
fn mutated_json_traces_never_panic_and_every_error_names_the_file() {
    count_panics();
    let mut rng = Rng(16);
    let mut inputs = samples(&repo().join("samples/json"), "json");
    inputs.extend(samples(&repo().join("tests/hostile"), "json"));
    let (mut runs, mut refused) = (0, 0);
    for sample in &inputs {
        let text = std::fs::read(sample).expect("sample");
        for i in 0..JSON_MUTATIONS_PER_SAMPLE * scale() {
            let name = format!("mutant-{i}-{}", sample.file_name().and_then(|n| n.to_str()).unwrap_or("sample"));
            let mutant = mutate(&text, &mut rng);
            if i % 4 == 0 {
                converts_or_names_the_file(&name, &mutant, TraceEncoding::Binary);
            }
            refused += usize::from(run_mutant(&name, mutant, TraceEncoding::Json));
            runs += 1;
        }
    }
    no_panic_and_some_refused("JSON mutation test", runs, refused, runs / 4);
}

/// The frames of a binary trace after its preamble, as byte ranges (head and body), to mutate frame by frame.
/// A cut-off last frame is left out.
fn frames(trace: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    let mut at = PREAMBLE_BYTES;
    while at + FRAME_HEAD_BYTES <= trace.len() {
        let len = u32::from_le_bytes(trace[at + 4..at + 8].try_into().expect("four bytes")) as usize;
        let end = at + FRAME_HEAD_BYTES + len;
        if end > trace.len() {
            break;
        }
        found.push(at..end);
        at = end;
    }
    found
}

/// Tags worth giving a frame: each framing tag, record tags near the kinds the samples hold, none known.
const FRAME_TAGS: [u16; 12] = [0, 1, 2, 3, 4, 5, 16, 17, 20, 24, 61, 0xffff];

/// One mutation of the binary trace `trace`, frame-aware: what a cut recording, a writer's bug or a hostile file
/// would hold.
fn mutate_binary(trace: &[u8], rng: &mut Rng) -> Vec<u8> {
    let frames = frames(trace);
    let mut out = trace.to_vec();
    if frames.is_empty() {
        out.truncate(rng.index(out.len()));
        return out;
    }
    let frame = frames[rng.index(frames.len())].clone();
    let word = |out: &mut Vec<u8>, at: usize, bytes: &[u8]| {
        let end = (at + bytes.len()).min(out.len());
        out[at..end].copy_from_slice(&bytes[..end - at]);
    };
    match rng.index(10) {
        0 => overwrite_bytes(&mut out, rng),
        1 => out.truncate(rng.index(out.len())),
        2 => {
            // A frame's length made wrong: zero, one short or long, past the file, past the bound.
            let len = (frame.len() - FRAME_HEAD_BYTES) as u32;
            let wrong = [0, len.wrapping_sub(1), len + 1, u32::MAX, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1];
            word(&mut out, frame.start + 4, &wrong[rng.index(wrong.len())].to_le_bytes());
        }
        3 => {
            // A frame given another tag: a record read by another kind's layout, a string frame's text read as a
            // record, an unknown frame; or the two reserved bytes set.
            if rng.index(4) == 0 {
                word(&mut out, frame.start + 2, &[1 + rng.index(255) as u8, 0]);
            } else {
                word(&mut out, frame.start, &FRAME_TAGS[rng.index(FRAME_TAGS.len())].to_le_bytes());
            }
        }
        4 | 5 => {
            // Whole frames: dropped (a string a later record names, a thread a later op runs on), repeated (a
            // stream declared twice) or swapped.
            let other = frames[rng.index(frames.len())].clone();
            let mut pieces: Vec<&[u8]> = frames.iter().map(|f| &trace[f.clone()]).collect();
            let (a, b) = (rng.index(pieces.len()), rng.index(pieces.len()));
            match rng.index(3) {
                0 => pieces.insert(a, &trace[other]),
                1 => {
                    pieces.remove(a);
                }
                _ => pieces.swap(a, b),
            }
            out = trace[..PREAMBLE_BYTES].to_vec();
            out.extend(pieces.concat());
        }
        6 => {
            // A value in a frame's body made extreme: a presence mask with every bit, a count, an address, a size.
            let body = frame.start + FRAME_HEAD_BYTES..frame.end;
            if !body.is_empty() {
                let at = body.start + rng.index(body.len());
                let extreme: [&[u8]; 5] =
                    [&[0xff; 8], &[0xff; 4], &[0; 8], &(u64::MAX / 2 + 1).to_le_bytes(), &1u64.to_le_bytes()];
                let value = extreme[rng.index(extreme.len())];
                let end = (at + value.len()).min(body.end);
                out[at..end].copy_from_slice(&value[..end - at]);
            }
        }
        7 => {
            // The string table reset where a later record still names its strings.
            let reset = [2u8, 0, 0, 0, 0, 0, 0, 0];
            out.splice(frame.start..frame.start, reset);
        }
        8 => {
            // A line frame with an extreme place, or a frame cut on its boundary.
            if rng.index(2) == 0 {
                let mut line = vec![4u8, 0, 0, 0, 8, 0, 0, 0];
                line.extend([u64::MAX, 0, 1 << 63][rng.index(3)].to_le_bytes());
                out.splice(frame.start..frame.start, line);
            } else {
                out.truncate(frame.start);
            }
        }
        _ => {
            // The preamble changed: another version, the reserved word set, the magic broken.
            let at = rng.index(PREAMBLE_BYTES);
            out[at] = out[at].wrapping_add(1 + rng.index(255) as u8);
        }
    }
    out
}

/// `streamtrace convert` of `input` to `to`, its output dropped: an error must name `name`, nothing may panic.
fn converts_or_names_the_file(name: &str, input: &[u8], to: TraceEncoding) {
    let outcome = std::panic::catch_unwind(|| convert(Path::new(name), input, to, &mut std::io::sink()));
    match outcome {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => assert!(error.to_string().contains(name), "an error that does not name {name}: {error}"),
        Err(_) => panic!("{name}: converting it panicked"),
    }
}

/// The binary encoding of a JSON trace, or None when the trace cannot be converted (a hostile sample).
fn to_binary(path: &Path, text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    convert(path, text, TraceEncoding::Binary, &mut out).ok()?;
    Some(out)
}

/// The samples, the hostile cases and a deterministic fifth of the real captures, each converted to binary (and
/// the samples once more with a recording's header, read tolerantly), changed frame by frame: no input may panic,
/// every error must name the file. The capture library writes this encoding by default, so a trace cut off
/// or damaged in it must be told as clearly as one in JSON.
#[test]
fn mutated_binary_traces_never_panic_and_every_error_names_the_file() {
    count_panics();
    let mut rng = Rng(23);
    let mut inputs: Vec<(PathBuf, usize)> = samples(&repo().join("samples/json"), "json")
        .into_iter()
        .chain(samples(&repo().join("tests/hostile"), "json"))
        .map(|p| (p, BINARY_MUTATIONS_PER_SAMPLE))
        .collect();
    let mut captures = Vec::new();
    for dir in ["samples/capture", "samples/capture/torch-t2", "samples/capture/cuda-samples"] {
        captures.extend(samples(&repo().join(dir), "json"));
    }
    captures.retain(|p| std::fs::metadata(p).is_ok_and(|m| m.len() < 150_000));
    inputs.extend(captures.into_iter().step_by(5).map(|p| (p, BINARY_MUTATIONS_PER_SAMPLE / 5)));
    let (mut runs, mut refused, mut converted) = (0, 0, 0);
    for (sample, mutations) in &inputs {
        let text = std::fs::read(sample).expect("sample");
        let recording = {
            let header = b"{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\"}\n";
            let rest = text.split_inclusive(|&b| b == b'\n').skip(1).flatten().copied();
            header.iter().copied().chain(rest).collect::<Vec<u8>>()
        };
        let bases: Vec<Vec<u8>> = [&text, &recording].into_iter().filter_map(|t| to_binary(sample, t)).collect();
        converted += bases.len();
        for (b, base) in bases.iter().enumerate() {
            let file = sample.file_stem().and_then(|n| n.to_str()).unwrap_or("sample");
            for i in 0..mutations * scale() / bases.len() {
                let name = format!("mutant-{i}-{b}-{file}.stbin");
                let mutant = mutate_binary(base, &mut rng);
                converts_or_names_the_file(&name, &mutant, TraceEncoding::Json);
                refused += usize::from(run_mutant(&name, mutant, TraceEncoding::Binary));
                runs += 1;
            }
        }
    }
    assert!(converted > inputs.len(), "most samples convert, and their recordings too: {converted} traces");
    no_panic_and_some_refused("binary mutation test", runs, refused, runs / 4);
}

/// Hostile shapes (issue 27), made small enough for this test's budget: child graphs nested up to past the depth
/// bound with one to three children per level, graphs of chained nodes, every operation at a source line of its
/// own, module records naming devices and FIFOs-to-be, and records repeated that the strict reader refuses.
fn hostile_shape(rng: &mut Rng) -> String {
    let mut lines = vec![
        r#"{"type":"streamtrace","version":1}"#.to_string(),
        r#"{"type":"stream","id":1,"stream_kind":"non_blocking"}"#.to_string(),
        r#"{"type":"stream","id":2,"stream_kind":"non_blocking"}"#.to_string(),
    ];
    match rng.index(5) {
        0 => {
            let fan = 1 + rng.index(3);
            // At most 4,096 leaves, or one level past the bound of 256 with one child each.
            let depth = if fan == 1 { 1 + rng.index(260) } else { 1 + rng.index(if fan == 2 { 12 } else { 7 }) };
            lines.push(r#"{"type":"graph_create","graph":0}"#.into());
            lines.push(r#"{"type":"graph_node","graph":0,"node":1,"name":"leaf","writes":[[4096,64]]}"#.into());
            for level in 1..=depth {
                lines.push(format!(r#"{{"type":"graph_create","graph":{level}}}"#));
                for node in 0..fan {
                    let deps = if node == 0 { String::new() } else { format!(r#","deps":[{}]"#, node - 1) };
                    let child = rng.index(level);
                    lines.push(format!(
                        r#"{{"type":"graph_node","graph":{level},"node":{node},"node_kind":"child","child":{child}{deps}}}"#
                    ));
                }
            }
            lines.push(format!(r#"{{"type":"graph_instantiate","graph":{depth},"exec":1}}"#));
            lines.push(r#"{"type":"graph_launch","exec":1,"stream":1}"#.into());
        }
        1 => {
            let nodes: Vec<String> = (0..1 + rng.index(3000))
                .map(|i| {
                    let deps = if i == 0 { String::new() } else { format!(r#","deps":[{}]"#, rng.index(i)) };
                    format!(r#"{{"writes":[[{},64]]{deps}}}"#, 4096 + rng.index(64) * 64)
                })
                .collect();
            lines.push(format!(r#"{{"type":"graph","stream":1,"name":"chain","nodes":[{}]}}"#, nodes.join(",")));
        }
        2 => {
            for i in 0..1 + rng.index(3000) {
                let stream = 1 + rng.index(2);
                lines.push(format!(
                    r#"{{"type":"kernel","stream":{stream},"name":"k","src":"gen.py:{i}","writes":[[{},64]]}}"#,
                    4096 + rng.index(8) * 64
                ));
            }
        }
        3 => {
            let path = ["/dev/zero", "/dev/urandom", "/dev/stdin", "/proc/self/mem", "/"][rng.index(5)];
            lines.push(format!(
                r#"{{"type":"module","path":"{path}","base":"0x400000","addr":"0x400000","size":65536}}"#
            ));
            lines.push(r#"{"type":"callsite","id":1,"frames":["0x401234"]}"#.into());
            lines.push(r#"{"type":"kernel","stream":1,"name":"a","writes":[[4096,64]],"site":1}"#.into());
            lines.push(r#"{"type":"kernel","stream":2,"name":"b","writes":[[4096,64]],"site":1}"#.into());
        }
        _ => {
            let refused = [
                r#"{"type":"gpu_time","corr":5,"gpu_start":100,"gpu_end":50}"#,
                r#"{"type":"stream","id":3,"stream_kind":"legacy_default"}"#,
                r#"{"type":"stream","id":4,"stream_kind":"legacy_default"}"#,
                r#"{"type":"graph_create","graph":9}"#,
                r#"{"type":"graph_node","graph":9,"node":1,"name":"twice"}"#,
            ];
            if rng.index(3) == 0 {
                let headers = [
                    r#"{"type":"streamtrace","version":1,"rank":7,"world_size":2}"#,
                    r#"{"type":"streamtrace","version":1,"rank":4294967296,"world_size":2}"#,
                ];
                lines[0] = headers[rng.index(2)].to_string();
            }
            lines.push(r#"{"type":"kernel","stream":1,"name":"a","writes":[[4096,64]]}"#.into());
            for _ in 0..1 + rng.index(6) {
                lines.push(refused[rng.index(refused.len())].into());
            }
        }
    }
    lines.join("\n")
}

#[test]
fn hostile_shapes_and_their_mutants_never_panic_and_every_error_names_the_file() {
    count_panics();
    let mut rng = Rng(27);
    let (mut runs, mut refused) = (0, 0);
    for i in 0..HOSTILE_SHAPES * scale() {
        let shape = hostile_shape(&mut rng).into_bytes();
        for (kind, input) in [("shape", shape.clone()), ("mutant", mutate(&shape, &mut rng))] {
            let name = format!("hostile-{kind}-{i}.json");
            refused += usize::from(run_mutant(&name, input, TraceEncoding::Json));
            runs += 1;
        }
    }
    no_panic_and_some_refused("hostile shapes", runs, refused, runs / 8);
}

/// SQL that breaks an export the way real exports break: a table or a name missing, NULLs, values out of range,
/// and (issue 27) correlation ids out of range or colliding, names dangling, sync ids missing.
const SQL_MUTATIONS: [&str; 22] = [
    "DROP TABLE StringIds",
    "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME",
    "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
    "DROP TABLE TARGET_INFO_CUDA_STREAM",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = end, end = start",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = NULL WHERE rowid % 2 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -9223372036854775808, end = 9223372036854775807",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = correlationId % 3",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid % 3 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = -5",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 'x'",
    "UPDATE StringIds SET value = char(27) || '[2J' || char(0) || value",
    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 2 = 1",
    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = 99, bytes = -1",
    "UPDATE TARGET_INFO_CUDA_STREAM SET flag = 77, priority = NULL",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = correlationId + 4294967296 WHERE rowid % 2 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET correlationId = (SELECT MIN(correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = nameId + 1000000 WHERE rowid % 2 = 0",
    "UPDATE CUPTI_ACTIVITY_KIND_CUDA_EVENT SET eventSyncId = NULL",
    "ALTER TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION DROP COLUMN eventSyncId",
    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY",
];

#[test]
fn mutated_nsys_exports_never_panic_and_every_error_names_the_file() {
    count_panics();
    let mut rng = Rng(64);
    let mut exports = samples(&repo().join("samples/nsys"), "sqlite");
    exports.extend(samples(&repo().join("samples/nsys/torch"), "sqlite"));
    let dir = scratch_dir("mutation");
    let (mut runs, mut refused) = (0, 0);
    for (n, export) in exports.iter().enumerate() {
        let bytes = std::fs::read(export).expect("sample");
        let mut one = |suffix: String, change: &dyn Fn(&Path)| {
            let path = dir.join(format!("mutant-{n}-{suffix}.sqlite"));
            std::fs::write(&path, &bytes).expect("copy");
            change(&path);
            let name = path.display().to_string();
            refused += usize::from(run(&name, ingest::open(&path)));
            runs += 1;
            let _ = std::fs::remove_file(&path);
        };
        for (m, sql) in SQL_MUTATIONS.iter().enumerate() {
            // A statement the export's schema does not allow (no such column) leaves it as it was.
            one(format!("sql{m}"), &|path| drop(Connection::open(path).and_then(|c| c.execute_batch(sql))));
        }
        for f in 0..SQLITE_FLIPS_PER_SAMPLE * scale() {
            let flips: Vec<(usize, u8)> = (0..8).map(|_| (rng.index(bytes.len()), rng.next_u64() as u8)).collect();
            one(format!("flip{f}"), &|path| {
                let mut changed = std::fs::read(path).expect("copy");
                for &(at, value) in &flips {
                    changed[at] = value;
                }
                std::fs::write(path, changed).expect("write");
            });
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a reader thread panicked (see above)");
    eprintln!("nsys mutation test: {runs} exports, {refused} refused with an error naming the file, 0 panics");
}
