//! The native PyTorch observer's build cache (capture/python/streamtrace_observer_cache.py): its key, its lock
//! and its atomic install, tested in Python as the bootstrap runs it (observer_cache_test.py beside this file),
//! with a stub torch layout and a stand-in compiler: no torch, no GPU. The capture of a real program in two
//! directories with different options is tests/observer_cache.rs at the top of the workspace.

#[path = "common/python_test.rs"]
mod common_python_test;

#[test]
fn observer_cache_builds_once_installs_whole_libraries_and_never_caches_a_failure() {
    common_python_test::run_python_test("observer_cache_test.py");
}
