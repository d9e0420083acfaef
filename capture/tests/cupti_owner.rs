//! CUPTI takes one subscriber: under capture, a program's own subscription made before CUDA starts (PyTorch's
//! profiler library does when a program profiles before its first CUDA call) must be refused, or the capture,
//! which subscribes when the driver loads it, is left off (src/cupti_owner.rs); anywhere else it must reach
//! libcupti. This builds a program that calls `cuptiSubscribe` through the dynamic linker, itself and from a
//! library it loads with RTLD_LOCAL, against a stand-in libcupti, and runs it with the capture library preloaded
//! as `streamtrace capture` preloads it: under capture, with capture switched off, under another tool's
//! injection, and not under capture.

use std::path::Path;
use std::process::Command;

#[path = "common/compiler.rs"]
#[allow(dead_code)] // its build() puts flags before the source; this test links after it
mod common_compiler;
#[path = "common/library.rs"]
mod common_library;
use common_compiler::compiler_for;
use common_library::library;

/// What the program says, run with `args`, with the library preloaded or not, its environment given by `env`.
fn run(binary: &Path, args: &[&str], preload: Option<&Path>, env: &[(&str, &Path)]) -> String {
    let mut command = Command::new(binary);
    command.args(args).env_remove("LD_PRELOAD").env_remove("STREAMTRACE_OUTPUT").env_remove("CUDA_INJECTION64_PATH");
    command.env_remove("STREAMTRACE_DISABLE").env("LD_LIBRARY_PATH", binary.parent().expect("its folder"));
    if let Some(preload) = preload {
        command.env("LD_PRELOAD", preload);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("the program runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Builds `source` of this folder with `flags` after it (libraries after the objects that need them).
fn build(cxx: &str, source: &str, output: &Path, flags: &[String]) {
    let built = Command::new(cxx)
        .arg("-o")
        .arg(output)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(source))
        .args(flags)
        .output()
        .expect("the compiler runs");
    assert!(built.status.success(), "building {source}: {}", String::from_utf8_lossy(&built.stderr));
}

#[test]
fn a_programs_cupti_subscription_is_refused_while_the_capture_holds_cupti() {
    let Some(cxx) = compiler_for("the CUPTI subscription test") else { return };
    let dir = std::env::temp_dir().join(format!("st-cupti-owner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let shared = || vec!["-shared".to_string(), "-fPIC".to_string()];
    build(&cxx, "cupti_stand_in.cpp", &dir.join("libcupti.so"), &shared());
    let linked = vec![format!("-L{}", dir.display()), "-lcupti".to_string()];
    let plugin = dir.join("libplugin.so");
    build(&cxx, "cupti_owner_plugin.cpp", &plugin, &[shared(), linked.clone()].concat());
    let binary = dir.join("cupti_owner_program");
    build(&cxx, "cupti_owner_program.cpp", &binary, &[linked, vec!["-ldl".to_string()]].concat());
    // The plugin's loader links no libcupti of its own: the plugin's is then outside the global scope.
    let loader = dir.join("cupti_owner_loader");
    build(&cxx, "cupti_owner_program.cpp", &loader, &["-DPLUGIN_ONLY".to_string(), "-ldl".to_string()]);

    let library = library();
    let trace = dir.join("trace.%p.json");
    let other_tool = dir.join("libcupti.so"); // any file but the capture library
    let captured = [("STREAMTRACE_OUTPUT", trace.as_path()), ("CUDA_INJECTION64_PATH", library.as_path())];
    let passed = "answer 0, reached libcupti 1 time(s)";
    // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, and libcupti never asked.
    let refused = "answer 39, reached libcupti 0 time(s)";
    let plugin_args = ["plugin", plugin.to_str().expect("a path")];
    for (binary, args) in [(&binary, &["direct"][..]), (&binary, &["direct_v2"][..]), (&loader, &plugin_args[..])] {
        assert_eq!(run(binary, args, None, &captured), passed, "{args:?} without the library");
        assert_eq!(run(binary, args, Some(&library), &[]), passed, "{args:?} not under capture");
        assert_eq!(run(binary, args, Some(&library), &captured), refused, "{args:?} under capture");
        let off = [&captured[..], &[("STREAMTRACE_DISABLE", dir.as_path())]].concat();
        assert_eq!(run(binary, args, Some(&library), &off), passed, "{args:?} capture switched off");
        let other = [("STREAMTRACE_OUTPUT", trace.as_path()), ("CUDA_INJECTION64_PATH", other_tool.as_path())];
        assert_eq!(run(binary, args, Some(&library), &other), passed, "{args:?} another tool's injection");
    }
    // The injection named as the driver's dlopen finds it: by a bare name, through the library path.
    let search = std::env::join_paths([dir.as_path(), library.parent().expect("its folder")]).expect("a path list");
    let by_name = [
        ("STREAMTRACE_OUTPUT", trace.as_path()),
        ("CUDA_INJECTION64_PATH", Path::new("libstreamtrace_capture.so")),
        ("LD_LIBRARY_PATH", Path::new(&search)),
    ];
    assert_eq!(run(&binary, &["direct"], Some(&library), &by_name), refused, "the injection by a bare name");
    let _ = std::fs::remove_dir_all(&dir);
}
