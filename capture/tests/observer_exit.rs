//! The native PyTorch observer's state must outlive its callbacks at exit (issue 14: two-GPU NCCL programs died
//! at exit with the observer loaded). CI has no torch, so this builds tests/observer_exit.cpp, which runs the
//! observer's own lifetime code (capture/python/observer_lifetime.h) in the shape of such an exit: threads and
//! destructors calling back while the process exits, in several processes at once, with the C++ compiler the
//! bootstrap would use. The two-GPU samples (samples/multi_gpu) are the real check, on the GPU machine.

use std::process::Command;

#[path = "common/compiler.rs"]
mod common_compiler;
use common_compiler::{build, compiler_for};

#[test]
fn observer_state_outlives_callbacks_at_exit_in_every_process() {
    let Some(cxx) = compiler_for("the observer's exit test, as the bootstrap does,") else { return };
    let binary = std::env::temp_dir().join(format!("streamtrace-observer-exit-{}", std::process::id()));
    build(&cxx, &["-std=c++20", "-O1", "-pthread"], "observer_exit.cpp", &binary);
    // Several rounds: a state destroyed too early corrupts the heap only when a callback lands after it.
    for round in 0..5 {
        let run = Command::new(&binary).arg("8").output().expect("runs");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "round {round}: {stdout}{}", String::from_utf8_lossy(&run.stderr));
        assert!(stdout.contains("8 of 8 processes exited cleanly"), "round {round}: {stdout}");
    }
    let _ = std::fs::remove_file(&binary);
}
