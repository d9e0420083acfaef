//! The capture library in LD_PRELOAD, as `streamtrace capture` puts it there, stands in front of the C
//! library's pthread and semaphore functions in every process the program starts, with CUDA or without. This
//! builds tests/host_sync_program.cpp (every interposed call, a cancelled wait, pthread_exit, fork, a shell)
//! with the C++ compiler and runs it with and without the library: it must print the same, exit the same and
//! die of the same signal, and, with no CUDA, write no trace. What the interposers record is tested inside the
//! library (src/host_sync/tests.rs); on the GPU machine, benches/gpu_host_sync.sh.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/compiler.rs"]
mod common_compiler;
#[path = "common/library.rs"]
mod common_library;
use common_compiler::compiler;
use common_library::library;

fn build(cxx: &str, dir: &Path) -> PathBuf {
    let binary = dir.join("host_sync_program");
    common_compiler::build(cxx, &["-std=c++20", "-O1", "-pthread"], "host_sync_program.cpp", &binary);
    binary
}

/// Runs the program with `args`, with the library preloaded (after the LD_PRELOAD given) or not.
fn run(binary: &Path, args: &[&str], preload: Option<&str>, traces: &Path) -> Output {
    let mut command = Command::new(binary);
    command.args(args).env_remove("LD_PRELOAD").env("STREAMTRACE_OUTPUT", traces.join("trace.%p.json"));
    if let Some(preload) = preload {
        command.env("LD_PRELOAD", preload);
    }
    command.output().expect("the program runs")
}

#[test]
fn preloaded_interposers_leave_a_program_without_cuda_as_it_was() {
    let Some(cxx) = compiler() else {
        // README's `cargo test` passes on a machine with Rust alone; .ci/run installs a compiler and requires it.
        let message = "no C++ compiler (c++, g++ or $CXX): the interposers' test needs one";
        assert!(std::env::var_os("STREAMTRACE_REQUIRE_CXX").is_none(), "{message}");
        eprintln!("skipped: {message}");
        return;
    };
    let dir = std::env::temp_dir().join(format!("streamtrace-host-sync-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let binary = build(&cxx, &dir);
    let library = library();
    let traces = dir.join("traces");
    // The user's own LD_PRELOAD stays in front, as `streamtrace capture` keeps it.
    let libstdcxx =
        String::from_utf8(Command::new(&cxx).arg("-print-file-name=libstdc++.so.6").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
    let preloads = [library.display().to_string(), format!("{libstdcxx} {}", library.display())];
    for args in [&[][..], &["exit", "3"], &["signal"]] {
        let alone = run(&binary, args, None, &traces);
        for preload in &preloads {
            // Several rounds: a wrong order between threads shows as a wrong sum only sometimes.
            for round in 0..3 {
                let preloaded = run(&binary, args, Some(preload), &traces);
                let said = |o: &Output| String::from_utf8_lossy(&o.stdout).to_string();
                assert_eq!(said(&preloaded), said(&alone), "{args:?} with LD_PRELOAD={preload}, round {round}");
                assert_eq!(preloaded.status.code(), alone.status.code(), "{args:?}, round {round}");
                assert_eq!(preloaded.status.signal(), alone.status.signal(), "{args:?}, round {round}");
                assert_eq!(String::from_utf8_lossy(&preloaded.stderr), "", "nothing said, {args:?}, round {round}");
            }
        }
    }
    // The calls did go through the library: the loader bound the program's and libstdc++'s to it.
    let mut bindings = Command::new(&binary);
    bindings.env("LD_PRELOAD", &library).env("LD_DEBUG", "bindings").env("STREAMTRACE_OUTPUT", traces.join("t.%p"));
    let bound = String::from_utf8_lossy(&bindings.output().unwrap().stderr).to_string();
    for symbol in ["pthread_mutex_lock", "pthread_cond_wait", "pthread_create", "sem_post", "pthread_once"] {
        let to_library = format!("to {} [0]: normal symbol `{symbol}'", library.display());
        assert!(bound.lines().any(|l| l.contains(&to_library)), "{symbol} is not bound to the library");
    }
    let alone = run(&binary, &[], None, &traces);
    assert!(String::from_utf8_lossy(&alone.stdout).contains("threads: cancelled, cleanups 1, exit value 42"));
    assert!(String::from_utf8_lossy(&alone.stdout).contains("forked child: 7"));
    assert_eq!(run(&binary, &["exit", "3"], None, &traces).status.code(), Some(3));
    assert_eq!(run(&binary, &["signal"], None, &traces).status.signal(), Some(libc::SIGTERM));
    assert!(!traces.exists(), "a process without CUDA writes no trace");
    let _ = std::fs::remove_dir_all(&dir);
}
