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
use common_compiler::compiler_for;
use common_library::library;

fn build(cxx: &str, dir: &Path) -> PathBuf {
    let binary = dir.join("host_sync_program");
    common_compiler::build(cxx, &["-std=c++20", "-O1", "-pthread"], "host_sync_program.cpp", &binary);
    binary
}

/// An empty folder of this test process's, `streamtrace-LABEL-PID` under the temporary folder.
fn fresh_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("streamtrace-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
    let Some(cxx) = compiler_for("the interposers' test") else { return };
    let dir = fresh_dir("host-sync");
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
    // libstdc++'s futex calls (futures, C++20 waits) come through the C library's syscall.
    let pthreads = ["pthread_mutex_lock", "pthread_cond_wait", "pthread_create", "sem_post", "pthread_once", "syscall"];
    for symbol in pthreads {
        let to_library = format!("to {} [0]: normal symbol `{symbol}'", library.display());
        assert!(bound.lines().any(|l| l.contains(&to_library)), "{symbol} is not bound to the library");
    }
    let alone = run(&binary, &[], None, &traces);
    assert!(String::from_utf8_lossy(&alone.stdout)
        .contains("threads: cancelled, cleanups 1, exit value 42; futex waiter cancelled, cleanups 1, destructors 1"));
    assert!(String::from_utf8_lossy(&alone.stdout).contains("forked child: 7"));
    assert!(String::from_utf8_lossy(&alone.stdout).contains("futures: 1135"));
    // Latches: 10 rounds of 3 parts (3 * 45 + 30); the semaphore's token: 10 turns of 11; the barrier: 10
    // phases; the atomic wait: 5000.
    assert!(String::from_utf8_lossy(&alone.stdout).contains("C++20 waits: 6275"));
    assert_eq!(run(&binary, &["exit", "3"], None, &traces).status.code(), Some(3));
    assert_eq!(run(&binary, &["signal"], None, &traces).status.signal(), Some(libc::SIGTERM));
    assert!(!traces.exists(), "a process without CUDA writes no trace");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A library's constructor that waits for a thread making its first system call through syscall() and its first
/// lock and semaphore calls (tests/constructor_thread.cpp) loads as it does without the library: the real
/// functions were looked up when the library was loaded, not on first use inside the dlopen that holds the
/// loader's lock.
#[test]
fn a_constructor_waiting_for_a_thread_loads_with_the_interposers() {
    let Some(cxx) = compiler_for("the constructor's test") else { return };
    let dir = fresh_dir("constructor");
    let (loader, constructed) = (dir.join("loader"), dir.join("libconstructed.so"));
    common_compiler::build(&cxx, &["-O1", "-DLOADER"], "constructor_thread.cpp", &loader);
    common_compiler::build(&cxx, &["-O1", "-fPIC", "-shared", "-pthread"], "constructor_thread.cpp", &constructed);
    let traces = dir.join("traces");
    let argument = constructed.to_str().unwrap();
    let alone = run(&loader, &[argument], None, &traces);
    assert_eq!(String::from_utf8_lossy(&alone.stdout), "loaded: the worker ran\n", "{alone:?}");
    for round in 0..3 {
        // Under a time limit: the deadlock fails the test instead of hanging it.
        let limited = ["20", loader.to_str().unwrap(), argument];
        let preloaded = run(Path::new("timeout"), &limited, Some(&library().display().to_string()), &traces);
        assert_eq!(preloaded.stdout, alone.stdout, "round {round}: {preloaded:?}");
        assert!(preloaded.status.success(), "round {round}: {preloaded:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The capture library preloaded stands in front of libgomp's entry points (src/host_sync/interpose/openmp.rs):
/// an OpenMP program prints what it printed without it, and two libraries that each carry their own copy of
/// libgomp, loaded outside the global scope as Python loads extensions, each run their regions on their own.
#[test]
fn preloaded_openmp_stand_ins_leave_openmp_programs_as_they_were() {
    let Some(cxx) = compiler_for("the OpenMP stand-ins' test") else { return };
    let dir = fresh_dir("openmp");
    let library = library();
    let traces = dir.join("traces");

    let program = dir.join("openmp_program");
    common_compiler::build(&cxx, &["-std=c++17", "-O1", "-fopenmp"], "openmp_program.cpp", &program);
    let alone = run(&program, &[], None, &traces);
    assert!(alone.status.success(), "{alone:?}");
    for round in 0..3 {
        let preloaded = run(&program, &[], Some(&library.display().to_string()), &traces);
        assert_eq!(preloaded.stdout, alone.stdout, "round {round}: {preloaded:?}");
        assert_eq!(String::from_utf8_lossy(&preloaded.stderr), "", "round {round}");
    }
    let mut bindings = Command::new(&program);
    bindings.env("LD_PRELOAD", &library).env("LD_DEBUG", "bindings").env("STREAMTRACE_OUTPUT", traces.join("t.%p"));
    let bound = String::from_utf8_lossy(&bindings.output().unwrap().stderr).to_string();
    for symbol in
        ["GOMP_parallel", "GOMP_barrier", "GOMP_single_copy_start", "GOMP_critical_name_start", "omp_set_lock"]
    {
        let to_library = format!("to {} [0]: normal symbol `{symbol}'", library.display());
        assert!(bound.lines().any(|l| l.contains(&to_library)), "{symbol} is not bound to the library");
    }

    // A second copy of libgomp under another name, as a wheel's copy is (auditwheel renames it), and one library
    // built against each copy.
    let gomp = Command::new(&cxx).arg("-print-file-name=libgomp.so").output().unwrap().stdout;
    let gomp = std::fs::canonicalize(String::from_utf8_lossy(&gomp).trim()).expect("the compiler's libgomp");
    let bytes = std::fs::read(&gomp).unwrap();
    let soname = b"libgomp.so.1\0";
    let at = bytes.windows(soname.len()).position(|w| w == soname).expect("libgomp's soname");
    let mut copy = bytes.clone();
    copy[at..at + soname.len()].copy_from_slice(b"libgomq.so.1\0");
    std::fs::write(dir.join("libgomq.so.1"), copy).unwrap();
    // Each library in two builds: as it is, and running a region with a barrier in its constructor too (inside
    // dlopen, which holds the loader's lock while the team's threads meet the barrier).
    let mut libraries = Vec::new();
    for (label, define) in [("", "-DNO_CONSTRUCTOR"), ("_ctor", "-DIN_CONSTRUCTOR")] {
        let object = dir.join(format!("openmp_library{label}.o"));
        common_compiler::build(&cxx, &["-O1", "-fPIC", "-fopenmp", "-c", define], "openmp_library.cpp", &object);
        let system_copys = dir.join(format!("libteam_system{label}.so"));
        let linked = Command::new(&cxx).args(["-shared", "-fopenmp", "-o"]).arg(&system_copys).arg(&object).status();
        assert!(linked.unwrap().success());
        let renamed_copys = dir.join(format!("libteam_renamed{label}.so"));
        let linked = Command::new(&cxx)
            .args(["-shared", "-o"])
            .arg(&renamed_copys)
            .arg(&object)
            .arg(format!("-L{}", dir.display()))
            .arg("-l:libgomq.so.1")
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .status();
        assert!(linked.unwrap().success());
        libraries.push([system_copys.display().to_string(), renamed_copys.display().to_string()]);
    }
    let [system_copys, renamed_copys] = &libraries[0];
    let [system_ctor, renamed_ctor] = &libraries[1];
    let loader = dir.join("openmp_loader");
    common_compiler::build(&cxx, &["-O1"], "openmp_loader.cpp", &loader);
    let counted = "1004, then 603";
    let at_load = "1004, then 603, at load 302";
    let cases: [(&[&str], String); 5] = [
        // Each library's regions on its own copy.
        (&[system_copys, renamed_copys], format!("library 1: {counted}\nlibrary 2: {counted}\n")),
        // The renamed copy's library keeps its own copy after another copy comes into the global scope.
        (&[renamed_copys, "+global", renamed_copys], format!("library 1: {counted}\nlibrary 3: {counted}\n")),
        // A region in a constructor, on each copy.
        (&[system_ctor, renamed_ctor], format!("library 1: {at_load}\nlibrary 2: {at_load}\n")),
        (&["+global", renamed_ctor], format!("library 2: {at_load}\n")),
        // A region of the renamed copy's library inside one of the system copy's: a team of its own, of 3.
        (&["nest", system_copys, renamed_copys], "nested 603\n".to_string()),
    ];
    for (arguments, expected) in &cases {
        assert_eq!(&String::from_utf8_lossy(&run(&loader, arguments, None, &traces).stdout), expected, "{arguments:?}");
        for round in 0..3 {
            // Under a time limit: a deadlock fails the test instead of hanging it.
            let mut limited = vec!["20", loader.to_str().unwrap()];
            limited.extend(arguments.iter());
            let preloaded = run(Path::new("timeout"), &limited, Some(&library.display().to_string()), &traces);
            let said = String::from_utf8_lossy(&preloaded.stdout);
            assert_eq!(&said, expected, "{arguments:?}, round {round}: {preloaded:?}");
        }
    }
    let libraries = [system_copys.as_str(), renamed_copys.as_str()];
    let (system_copys, renamed_copys) = (Path::new(system_copys), Path::new(renamed_copys));
    let mut bindings = Command::new(&loader);
    bindings.args(libraries).env("LD_PRELOAD", &library).env("LD_DEBUG", "bindings");
    let bound =
        String::from_utf8_lossy(&bindings.env("STREAMTRACE_OUTPUT", traces.join("t.%p")).output().unwrap().stderr)
            .to_string();
    for caller in [&system_copys, &renamed_copys] {
        let from = format!(
            "binding file {} [0] to {} [0]: normal symbol `GOMP_parallel'",
            caller.display(),
            library.display()
        );
        assert!(
            bound.lines().any(|l| l.contains(&from)),
            "{} does not call the library's GOMP_parallel",
            caller.display()
        );
    }
    assert!(!traces.exists(), "a process without CUDA writes no trace");
    let _ = std::fs::remove_dir_all(&dir);
}
