//! The native PyTorch observer's build cache (capture/python/streamtrace_observer_cache.py): its key, its lock
//! and its atomic install, tested in Python as the bootstrap runs it (observer_cache_test.py beside this file),
//! with a stub torch layout and a stand-in compiler: no torch, no GPU. The capture of a real program in two
//! directories with different options is tests/observer_cache.rs at the top of the workspace.

use std::path::Path;
use std::process::Command;

/// The Python interpreter the test runs with (`$PYTHON`, `python3`).
fn python() -> Option<String> {
    let candidates = std::env::var("PYTHON").ok().into_iter().chain(["python3".to_string()]);
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

#[test]
fn observer_cache_builds_once_installs_whole_libraries_and_never_caches_a_failure() {
    let Some(python) = python() else {
        // README's `cargo test` passes on a machine with Rust alone; .ci/run installs Python and requires it.
        let message = "no Python (python3 or $PYTHON): the observer cache's test needs one, as the bootstrap does";
        assert!(std::env::var_os("STREAMTRACE_REQUIRE_PYTHON").is_none(), "{message}");
        eprintln!("skipped: {message}");
        return;
    };
    let test = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("observer_cache_test.py");
    let run = Command::new(&python).arg(&test).output().expect("the test runs");
    let output = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{output}");
    assert!(output.contains("\nOK"), "{output}");
}
