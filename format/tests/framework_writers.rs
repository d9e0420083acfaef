//! The PyTorch observers write their records in their own languages (capture/python/sitecustomize.py and
//! capture/python/torch_observer.cpp). This reads their sources and checks every record kind, field and
//! enumerated value they spell against the vocabulary, so that an observer cannot write what the reader refuses.

use std::path::Path;

use streamtrace_format::{AllocKind, CopyKind, Field, FreeKind, RecordKind, StreamKind};

/// One record an observer spells: its kind, the fields it writes and the enumerated values it names.
#[derive(Debug)]
struct SpelledRecord {
    kind: String,
    fields: Vec<String>,
    values: Vec<(String, String)>,
}

/// `"name":` keys as JSON text spells them (no space after the colon, which keeps Python's `d["k"]: ...` and
/// `{"k": v}` out), with the string value that follows each when there is one, in source order.
fn keys(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('"') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('"') else { break };
        let word = &after[..close];
        let tail = &after[close + 1..];
        let is_key = tail.starts_with(':')
            && tail[1..].chars().next().is_some_and(|c| !c.is_whitespace())
            && !word.is_empty()
            && word.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if is_key {
            let value = tail[1..].strip_prefix('"').and_then(|v| v.split_once('"')).map(|(v, _)| v.to_string());
            out.push((word.to_string(), value));
            rest = &tail[1..];
        } else {
            rest = after;
        }
    }
    out
}

/// The records a source spells, in order: each `"type":` key starts one, and the keys after it are its fields.
/// C++ escapes the quotes of its JSON text, so `\"` reads as `"` first.
fn spelled_records(path: &Path) -> Vec<SpelledRecord> {
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let text = source.replace("\\\"", "\"");
    let mut records: Vec<SpelledRecord> = Vec::new();
    for (key, value) in keys(&text) {
        if key == "type" {
            records.push(SpelledRecord { kind: value.unwrap_or_default(), fields: Vec::new(), values: Vec::new() });
        } else if let Some(record) = records.last_mut() {
            if let Some(value) = value {
                record.values.push((key.clone(), value));
            }
            record.fields.push(key);
        }
    }
    records
}

fn check(path: &str, must_write: &[RecordKind]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let records = spelled_records(&root.join(path));
    for expected in must_write {
        assert!(
            records.iter().any(|r| r.kind == expected.as_str()),
            "{path}: no `{expected}` record found: {records:?}"
        );
    }
    for record in &records {
        let kind = RecordKind::parse(&record.kind).unwrap_or_else(|e| panic!("{path}: {e}"));
        for name in &record.fields {
            let field = Field::parse(name).unwrap_or_else(|e| panic!("{path}, a {kind} record: {e}"));
            assert!(kind.allows(field), "{path}: a {kind} record may not carry `{field}`");
        }
        for (name, value) in &record.values {
            let parsed = match Field::parse(name) {
                Ok(Field::AllocKind) => AllocKind::parse(value).map(|_| ()),
                Ok(Field::FreeKind) => FreeKind::parse(value).map(|_| ()),
                Ok(Field::StreamKind) => StreamKind::parse(value).map(|_| ()),
                Ok(Field::Copy) => CopyKind::parse(value).map(|_| ()),
                _ => Ok(()),
            };
            parsed.unwrap_or_else(|e| panic!("{path}, a {kind} record: {e}"));
        }
    }
}

#[test]
fn the_python_observer_writes_the_vocabulary() {
    use RecordKind::*;
    check("capture/python/sitecustomize.py", &[OpEnd, CallBegin, CallEnd, Alloc, Free, HostAccess]);
}

#[test]
fn the_native_observer_writes_the_vocabulary() {
    use RecordKind::*;
    check("capture/python/torch_observer.cpp", &[OpEnd, Alloc, Free, HostAccess]);
}

#[test]
fn a_misspelled_record_is_caught() {
    let records = {
        let dir = std::env::temp_dir().join(format!("streamtrace-format-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("observer.py");
        std::fs::write(&path, "emit('{\"type\":\"op_end\",\"nmae\":\"%s\",\"free_kind\":\"pool\"}')\n").expect("write");
        let records = spelled_records(&path);
        let _ = std::fs::remove_dir_all(&dir);
        records
    };
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].kind, "op_end");
    assert_eq!(records[0].fields, ["nmae", "free_kind"]);
    assert!(Field::parse(&records[0].fields[0]).is_err());
    assert!(FreeKind::parse(&records[0].values[1].1).is_err());
}
