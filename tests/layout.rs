//! The source tree keeps the promises DESIGN.md makes about where things are: each ordering rule 1-13 is applied
//! in one place, marked `rule N` there, so that one search finds it. Counted in the non-test code of `src/` and
//! `capture/src/`: a file's lines before its first `#[cfg(test)]`.

use std::fs;
use std::path::{Path, PathBuf};

/// The rules DESIGN.md lists, each applied by the engine.
const APPLIED_RULES: std::ops::RangeInclusive<u32> = 1..=13;

/// Whether `line` holds `rule N` as a whole number, as `grep "rule N\b"` finds it: `rule 1` is not `rule 10`.
fn mentions_rule(line: &str, rule: u32) -> bool {
    let token = format!("rule {rule}");
    line.match_indices(&token).any(|(at, _)| {
        let next = line[at + token.len()..].chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())).path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Every `rule N` mention in non-test code, as `path:line` per rule.
fn rule_markers(root: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    for dir in ["src", "capture/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut markers = vec![Vec::new(); *APPLIED_RULES.end() as usize + 1];
    for path in files {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let shown = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        let non_test = text.lines().enumerate().take_while(|(_, line)| !line.trim_start().starts_with("#[cfg(test)]"));
        for (index, line) in non_test {
            for rule in APPLIED_RULES {
                if mentions_rule(line, rule) {
                    markers[rule as usize].push(format!("{shown}:{}", index + 1));
                }
            }
        }
    }
    markers
}

#[test]
fn each_rule_is_marked_at_exactly_one_place() {
    let markers = rule_markers(Path::new(env!("CARGO_MANIFEST_DIR")));
    let wrong: Vec<String> = APPLIED_RULES
        .filter(|&rule| markers[rule as usize].len() != 1)
        .map(|rule| format!("rule {rule}: {} places {:?}", markers[rule as usize].len(), markers[rule as usize]))
        .collect();
    assert!(
        wrong.is_empty(),
        "each rule must be marked `rule N` once, where it is applied; elsewhere name the behaviour instead \
         (\"see DESIGN.md, the legacy default stream\"):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_rule_number_is_matched_whole() {
    assert!(mentions_rule("// rule 1: operations on one stream", 1));
    assert!(mentions_rule("(rule 1)", 1));
    assert!(mentions_rule("ends with rule 1", 1));
    assert!(!mentions_rule("// rule 10: host threads", 1));
    assert!(!mentions_rule("// rule 11", 1));
    assert!(mentions_rule("// rule 11", 11));
    assert!(!mentions_rule("rules 2 and 7", 2));
}

/// Cargo.toml sets `autotests = false`: a file of tests/ runs only as a module that tests/tests.rs declares, so
/// a file added beside the others and not declared there would never run.
#[test]
fn every_file_of_tests_is_a_module_of_the_test_binary() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let root = fs::read_to_string(tests.join("tests.rs")).expect("tests/tests.rs");
    let declared: Vec<&str> =
        root.lines().filter_map(|line| line.strip_prefix("mod ").and_then(|rest| rest.strip_suffix(';'))).collect();
    let mut files = Vec::new();
    for entry in fs::read_dir(&tests).expect("tests/") {
        let path = entry.expect("tests/").path();
        let module = path.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default().to_string();
        let is_module = path.extension().is_some_and(|ext| ext == "rs") || path.join("mod.rs").is_file();
        if is_module && module != "tests" {
            files.push(module);
        }
    }
    let undeclared: Vec<&String> = files.iter().filter(|module| !declared.contains(&module.as_str())).collect();
    assert!(undeclared.is_empty(), "tests/tests.rs must declare `mod NAME;` for {undeclared:?}, or they never run");
    assert!(files.len() > 10 && declared.contains(&"util"), "found {files:?}, declared {declared:?}");
}
