//! CUPTI takes one subscriber: under capture, a program's own subscription made before CUDA starts (PyTorch's
//! profiler library does when a program profiles before its first CUDA call) must be refused, or the capture, which
//! subscribes when the driver loads it, is left off (src/cupti_owner.rs). This builds a program that calls
//! `cuptiSubscribe` through the dynamic linker, as a library linked against libcupti does, against a stand-in
//! libcupti, and runs it with the capture library preloaded as `streamtrace capture` preloads it.

use std::path::Path;
use std::process::Command;

#[path = "common/compiler.rs"]
mod common_compiler;
#[path = "common/library.rs"]
mod common_library;
use common_compiler::compiler;
use common_library::library;

fn run(binary: &Path, preload: Option<&Path>, under_capture: bool) -> String {
    let mut command = Command::new(binary);
    command.env_remove("LD_PRELOAD").env_remove("STREAMTRACE_OUTPUT");
    command.env("LD_LIBRARY_PATH", binary.parent().expect("its folder"));
    if let Some(preload) = preload {
        command.env("LD_PRELOAD", preload);
    }
    if under_capture {
        command.env("STREAMTRACE_OUTPUT", binary.with_file_name("trace.%p.json"));
    }
    let out = command.output().expect("the program runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_programs_cupti_subscription_is_refused_under_capture() {
    let Some(cxx) = compiler() else {
        eprintln!("skipped: no C++ compiler");
        return;
    };
    let dir = std::env::temp_dir().join(format!("st-cupti-owner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let stand_in = dir.join("libcupti.so");
    common_compiler::build(&cxx, &["-shared", "-fPIC"], "cupti_stand_in.cpp", &stand_in);
    let binary = dir.join("cupti_owner_program");
    // Linked against the stand-in after the source, as a library linked against libcupti is.
    let linked = Command::new(&cxx)
        .arg("-o")
        .arg(&binary)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cupti_owner_program.cpp"))
        .arg(format!("-L{}", dir.display()))
        .arg("-lcupti")
        .output()
        .expect("the compiler runs");
    assert!(linked.status.success(), "{}", String::from_utf8_lossy(&linked.stderr));

    let library = library();
    assert_eq!(run(&binary, None, true), "answer 0, reached libcupti 1 time(s)", "without the library");
    assert_eq!(run(&binary, Some(&library), false), "answer 0, reached libcupti 1 time(s)", "not under capture");
    // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, and libcupti never asked.
    assert_eq!(run(&binary, Some(&library), true), "answer 39, reached libcupti 0 time(s)", "under capture");
    let _ = std::fs::remove_dir_all(&dir);
}
