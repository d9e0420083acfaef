//! The native PyTorch observer reads an op's Python line from the calling thread's own frames without the GIL
//! (capture/python/python_frames.h), by CPython's internal layouts. This builds the walk into a probe library
//! (tests/python_frames_probe.cpp) and runs tests/python_frames_test.py under every CPython it finds (`python3`
//! on the PATH, pyenv's versions, and the paths in STREAMTRACE_TEST_PYTHONS, colon-separated; 3.10 and later, as
//! the observer needs): where the layout
//! is known, every walk must give the frames Python gives; elsewhere no layout may be chosen.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/compiler.rs"]
mod common_compiler;
use common_compiler::{build, compiler_for};

/// The Pythons to run the test under, each once.
fn pythons() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    if let Some(listed) = std::env::var_os("STREAMTRACE_TEST_PYTHONS") {
        found.extend(std::env::split_paths(&listed));
    }
    if Command::new("python3").arg("-c").arg("pass").output().is_ok_and(|o| o.status.success()) {
        found.push(PathBuf::from("python3"));
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".pyenv")));
    if let Some(Ok(versions)) = pyenv.map(|root| std::fs::read_dir(root.join("versions"))) {
        let mut more: Vec<PathBuf> =
            versions.flatten().map(|entry| entry.path().join("bin/python3")).filter(|p| p.exists()).collect();
        more.sort();
        found.extend(more);
    }
    // The observer needs 3.10 or later (the frame API it declares); older ones cannot load the probe either.
    found.retain(|python| {
        let new_enough = Command::new(python).args(["-c", "import sys; sys.exit(sys.version_info < (3, 10))"]).output();
        new_enough.is_ok_and(|o| o.status.success())
    });
    found
}

#[test]
fn the_frame_walk_reads_what_python_says_under_every_cpython_found() {
    let Some(cxx) = compiler_for("the frame walk's test, as the bootstrap does,") else { return };
    let pythons = pythons();
    if pythons.is_empty() {
        eprintln!("skipped: no python3 found");
        return;
    }
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let probe = std::env::temp_dir().join(format!("streamtrace-python-frames-{}.so", std::process::id()));
    build(&cxx, &["-std=c++20", "-O1", "-shared", "-fPIC"], "python_frames_probe.cpp", &probe);
    for python in &pythons {
        let run = Command::new(python).arg(tests.join("python_frames_test.py")).arg(&probe).output().expect("runs");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{}: {stdout}{}", python.display(), String::from_utf8_lossy(&run.stderr));
        eprintln!("{}: {}", python.display(), stdout.trim());
    }
    let _ = std::fs::remove_file(&probe);
}
