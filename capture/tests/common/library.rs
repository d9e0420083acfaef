//! The capture library cargo built beside the running test binary, for the tests that preload it into programs
//! as `streamtrace capture` does.

use std::path::PathBuf;

/// The library cargo built beside this test.
pub fn library() -> PathBuf {
    let deps = std::env::current_exe().expect("the test binary").parent().expect("its folder").to_path_buf();
    let library = deps.join("libstreamtrace_capture.so");
    assert!(library.exists(), "{} was not built", library.display());
    library
}
