//! What the integration tests share: the repository and its built binary, scratch paths, the scenario traces
//! the rule tests write (scenario.rs), and what to do when the machine lacks a tool a test needs (machine.rs).

pub mod machine;
pub mod random;
pub mod scenario;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The repository's root: samples and test data are named from it, and the binary runs in it.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built `streamtrace` binary, to run in the repository.
pub fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_streamtrace"));
    command.current_dir(repo());
    command
}

/// `streamtrace ARGS` run in the repository, to its end.
pub fn streamtrace(args: &[&str]) -> Output {
    binary().args(args).output().expect("the streamtrace binary runs")
}

/// A text report's words, each run of spaces and line breaks made one space: what the tests look for in a
/// report whose lines are wrapped at 120 columns.
pub fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The standard error of a finished run, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What the scratch folders are called, before the process id.
const SCRATCH_PREFIX: &str = "streamtrace-tests-";

/// This process's scratch folder: every test writes under it, each at a path of its own (all tests share one
/// process, so the path names the module, as `hostile/outputs`). A run cannot remove its own (nothing runs
/// after its last test), so the first call removes those of earlier runs whose process is gone.
pub fn scratch_root() -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_scratch_of_ended_runs);
    std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}", std::process::id()))
}

/// Removes the scratch folders of test processes that are no longer running (another checkout's run, going on
/// beside this one, keeps its folder).
fn remove_scratch_of_ended_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Removes whatever is at `path` (a file or a folder), so that a test starts from nothing.
fn remove(path: &Path) {
    let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir_all(path));
}

/// A path `name` (`module/file`) in the scratch folder, with its folder made and nothing at it yet.
pub fn scratch_file(name: &str) -> PathBuf {
    let path = scratch_root().join(name);
    let parent = path.parent().expect("a scratch path has a folder");
    std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("cannot make {}: {e}", parent.display()));
    remove(&path);
    path
}

/// An empty folder `name` (`module/folder`) in the scratch folder.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = scratch_file(name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
    dir
}

/// The import counter `name` of a JSON report; 0 where the report has none.
pub fn counter(json: &Value, name: &str) -> u64 {
    json["import"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .map_or(0, |c| c["count"].as_u64().unwrap_or(0))
}

/// `streamtrace analyze TRACE --format json`: its exit status and its report.
pub fn analyze_json(trace: &str) -> (i32, Value) {
    let out = binary().args(["analyze", trace, "--format", "json"]).output().expect("runs");
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{trace}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().expect("exit code"), json)
}

/// The text report of `streamtrace analyze TRACE`.
pub fn analyze_text(trace: &str) -> String {
    let out = binary().args(["analyze", trace]).output().expect("runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
