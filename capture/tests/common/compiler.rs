//! The C++ compiler the PyTorch bootstrap looks for, and the build of a test's C++ source with it: for the tests
//! that build native programs or the bootstrap's native parts without torch.

use std::path::Path;
use std::process::Command;

/// The C++ compiler the bootstrap looks for (`$CXX`, `c++`, `g++`).
pub fn compiler() -> Option<String> {
    let candidates = std::env::var("CXX").ok().into_iter().chain(["c++".to_string(), "g++".to_string()]);
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// The compiler for `test`, which needs one: None where none is installed (README's `cargo test` passes on a
/// machine with Rust alone: the test says it skipped), and a failure where .ci/run installed one and requires it
/// (`STREAMTRACE_REQUIRE_CXX`).
pub fn compiler_for(test: &str) -> Option<String> {
    let found = compiler();
    if found.is_none() {
        let message = format!("no C++ compiler (c++, g++ or $CXX): {test} needs one");
        assert!(std::env::var_os("STREAMTRACE_REQUIRE_CXX").is_none(), "{message}");
        eprintln!("skipped: {message}");
    }
    found
}

/// Builds `tests/SOURCE` with `cxx` and `flags` into `output`; fails the test, with the compiler's messages, when
/// it does not build.
pub fn build(cxx: &str, flags: &[&str], source: &str, output: &Path) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(source);
    let built = Command::new(cxx).args(flags).arg("-o").arg(output).arg(path).output().expect("the compiler runs");
    assert!(built.status.success(), "building {source} failed:\n{}", String::from_utf8_lossy(&built.stderr));
}
