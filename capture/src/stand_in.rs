//! What the stand-ins in front of a library's calls (nccl.rs, cublas.rs) share: their bookkeeping, run so that a
//! panic neither unwinds into the program nor stops its call, and the one line said where the library they
//! stand in front of is missing. Touches standard error.

use std::panic::AssertUnwindSafe;
use std::sync::Once;

/// Runs a stand-in's bookkeeping: a panic loses what it would have found (the default), never the call.
pub fn quietly<T: Default>(work: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(work)).unwrap_or_default()
}

/// Says once per `said` that no `library` defines `name` and how the call fails instead (`fails_as`).
pub fn say_missing(said: &Once, library: &str, name: &str, fails_as: &str) {
    // Not eprintln!, which panics where standard error is closed.
    said.call_once(|| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "streamtrace: no {library} defines {name}: the call fails as {fails_as}");
    });
}
