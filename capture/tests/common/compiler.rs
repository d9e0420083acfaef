//! The C++ compiler the PyTorch bootstrap looks for, for the tests that build its native parts without torch.

use std::process::Command;

/// The C++ compiler the bootstrap looks for (`$CXX`, `c++`, `g++`).
pub fn compiler() -> Option<String> {
    let candidates = std::env::var("CXX").ok().into_iter().chain(["c++".to_string(), "g++".to_string()]);
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}
