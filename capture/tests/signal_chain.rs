//! The host watch's SIGSEGV handler must not change what a program that handles SIGSEGV itself does. This
//! builds tests/signal_chain.cpp (its own handlers by sigaction, signal and SA_RESETHAND, a blocked SIGSEGV,
//! raise, SIG_IGN, and at the end a fault with the default action) and runs it plainly and with the capture
//! library preloaded and the host watch asked for, as `streamtrace capture` runs native programs: the output,
//! the exit status and the signal that ended it must be the same, and the preloaded run must really have had
//! the capture's handler in place.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/compiler.rs"]
mod common_compiler;
use common_compiler::{build, compiler_for};

/// The capture library as a shared object: `cargo test` builds only the rlib, so this builds the cdylib the
/// same way (the dependencies are already built).
fn capture_library() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
    let built = Command::new(env!("CARGO"))
        .args(["build", "--lib", "-p", "streamtrace-capture", "--manifest-path"])
        .arg(workspace.join("Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(built.status.success(), "building the capture library failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from);
    let library = target.join("debug").join("libstreamtrace_capture.so");
    assert!(library.exists(), "{} was not built", library.display());
    library
}

fn run(binary: &Path, mode: &str, preload: Option<&Path>) -> Output {
    let mut command = Command::new(binary);
    command.arg(mode).env_remove("LD_PRELOAD").env_remove("STREAMTRACE_HOST_WATCH");
    if let Some(library) = preload {
        command.env("LD_PRELOAD", library).env("STREAMTRACE_HOST_WATCH", "1");
    }
    command.output().expect("the test program runs")
}

fn describe(output: &Output) -> String {
    format!(
        "status {:?}, signal {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        output.status.signal(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_program_handling_its_own_faults_behaves_the_same_with_the_capture_preloaded() {
    let Some(cxx) = compiler_for("the signal chaining test") else { return };
    let binary = std::env::temp_dir().join(format!("streamtrace-signal-chain-{}", std::process::id()));
    build(&cxx, &["-std=c++17", "-O1", "-pthread"], "signal_chain.cpp", &binary);
    let library = capture_library();

    let who = run(&binary, "who", Some(&library));
    assert_eq!(
        String::from_utf8_lossy(&who.stdout),
        "the kernel's handler is the program's: no\n",
        "the capture's handler is not in place: {}",
        describe(&who)
    );
    let plain_who = run(&binary, "who", None);
    assert_eq!(String::from_utf8_lossy(&plain_who.stdout), "the kernel's handler is the program's: yes\n");

    for mode in ["all", "raise-default"] {
        let plain = run(&binary, mode, None);
        let preloaded = run(&binary, mode, Some(&library));
        assert_eq!(
            plain.status.signal(),
            Some(libc::SIGSEGV),
            "{mode}: the plain run ends by SIGSEGV: {}",
            describe(&plain)
        );
        assert!(String::from_utf8_lossy(&plain.stdout).contains("back from the handler"), "{}", describe(&plain));
        assert_eq!(
            (plain.status.code(), plain.status.signal(), &plain.stdout, &plain.stderr),
            (preloaded.status.code(), preloaded.status.signal(), &preloaded.stdout, &preloaded.stderr),
            "{mode}: plain\n{}\npreloaded\n{}",
            describe(&plain),
            describe(&preloaded)
        );
    }
    let _ = std::fs::remove_file(&binary);
}
