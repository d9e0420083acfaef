//! Runs one of this folder's Python unit tests (the bootstrap's Python parts, tested without torch or a GPU) with
//! the interpreter the bootstrap would find.

use std::path::Path;
use std::process::Command;

/// The Python interpreter the tests run with (`$PYTHON`, `python3`).
fn python() -> Option<String> {
    let candidates = std::env::var("PYTHON").ok().into_iter().chain(["python3".to_string()]);
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// Runs `tests/TEST` (a `unittest` file) and fails with its output unless every test in it passed. Without
/// Python the test is skipped, unless STREAMTRACE_REQUIRE_PYTHON is set (.ci/run sets it: CI installs Python).
pub fn run_python_test(test: &str) {
    let Some(python) = python() else {
        // README's `cargo test` passes on a machine with Rust alone; .ci/run installs Python and requires it.
        let message = format!("no Python (python3 or $PYTHON): {test} needs one, as the bootstrap does");
        assert!(std::env::var_os("STREAMTRACE_REQUIRE_PYTHON").is_none(), "{message}");
        eprintln!("skipped: {message}");
        return;
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(test);
    let run = Command::new(&python).arg(&path).output().expect("the test runs");
    let output = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{output}");
    assert!(output.contains("\nOK"), "{output}");
}
