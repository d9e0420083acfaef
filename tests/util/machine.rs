//! What some integration tests need from the machine besides Rust: headless Chromium (the HTML report in a real
//! browser), a TrueType font (the PNG pictures), a C toolchain (the native call sites) and Python (the PyTorch
//! bootstrap's observer cache). A fresh machine with only Rust may lack them, and README's `cargo test` must pass
//! there: a test that needs one prints a notice and checks nothing more. Where the environment says the tool is
//! required (`STREAMTRACE_REQUIRE_BROWSER=1`, `STREAMTRACE_REQUIRE_FONT=1`, `STREAMTRACE_REQUIRE_CC=1`,
//! `STREAMTRACE_REQUIRE_PYTHON=1`, which .ci/run sets after installing them), its absence fails the test instead,
//! so that CI never skips silently.

use std::path::{Path, PathBuf};

/// The variable that makes the browser tests required.
pub const REQUIRE_BROWSER: &str = "STREAMTRACE_REQUIRE_BROWSER";
/// The variable that makes the picture tests required.
pub const REQUIRE_FONT: &str = "STREAMTRACE_REQUIRE_FONT";
/// The variable that makes the tests that compile C (`cc`, `strip`) required.
pub const REQUIRE_CC: &str = "STREAMTRACE_REQUIRE_CC";
/// The variable that makes the tests that run the Python bootstrap (`python3`) required.
pub const REQUIRE_PYTHON: &str = "STREAMTRACE_REQUIRE_PYTHON";

/// Names headless Chromium goes by, looked for on PATH in this order.
const CHROMIUM_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/// The first Chromium on the directories of `path` (a PATH value).
pub fn chromium_on(path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .flat_map(|dir| CHROMIUM_NAMES.iter().map(move |name| dir.join(name)))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What a test does when a tool it needs is missing: skip it with a notice, or fail when `require_var` is 1.
#[derive(Debug, PartialEq, Eq)]
pub enum Missing {
    Skip(String),
    Fail(String),
}

/// Decides what `test` does without `tool` (`why` says why it is missing), given the value of `require_var`.
pub fn missing(test: &str, tool: &str, why: &str, require_var: &str, required: Option<&str>) -> Missing {
    if required.is_some_and(|v| v == "1") {
        Missing::Fail(format!("{test}: {tool} is required here ({require_var}=1) but missing: {why}"))
    } else {
        Missing::Skip(format!(
            "note: {test} skipped: {tool} is missing ({why}); set {require_var}=1 to make it required"
        ))
    }
}

/// `test` lacks `tool` (`why`): prints the skip notice and returns false, or panics where `require_var` is 1.
pub fn lacking(test: &str, tool: &str, why: &str, require_var: &str) -> bool {
    match missing(test, tool, why, require_var, std::env::var(require_var).ok().as_deref()) {
        Missing::Skip(notice) => {
            // Written to the process's standard error itself, which the test harness does not capture (it
            // captures only the print macros), so that a skip shows in every `cargo test` run.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{notice}");
            false
        }
        Missing::Fail(message) => panic!("{message}"),
    }
}

/// Headless Chromium on PATH, or None after the skip notice of `test` (a panic when it is required).
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    match chromium_on(&path) {
        Some(found) => Some(found),
        None => {
            let why = format!("none of {} on PATH", CHROMIUM_NAMES.join(", "));
            lacking(test, "headless Chromium", &why, REQUIRE_BROWSER);
            None
        }
    }
}

/// Whether the pictures can be drawn here (a font is found as streamtrace looks for one); false after the
/// skip notice of `test` (a panic when a font is required).
pub fn font_or_skip(test: &str) -> bool {
    match streamtrace::report::png::font_path() {
        Ok(_) => true,
        Err(why) => lacking(test, "a TrueType font", &why, REQUIRE_FONT),
    }
}
