//! For tests that drive the library's entry points with the capture switched on, as InitializeInjection would
//! (without CUDA), and read back what reached the trace file. Tests of one binary run side by side, so each
//! looks only at the lines of the threads it made.

use serde_json::Value;

use crate::control::ENABLED;
use crate::process_state::ProcessState;
use crate::record::Call;
use crate::state::{drain_into, state_for_this_process, STATE};

/// What the tests' trace folders are called, before the process id.
const FOLDER_PREFIX: &str = "st-live-capture-";

/// Switches the capture on, once per test binary, with this process's trace in a folder of its own. The trace
/// is written until the process ends, so the folder stays; the folders of test processes that have ended are
/// removed here.
pub fn capture_on() {
    static ON: std::sync::Once = std::sync::Once::new();
    ON.call_once(|| {
        remove_folders_of_ended_runs();
        let dir = std::env::temp_dir().join(format!("{FOLDER_PREFIX}{}", std::process::id()));
        std::env::set_var(streamtrace_format::launch::ENV_OUTPUT, dir.join("trace.%p.json"));
        crate::origin::note_pid();
        ENABLED.store(true, std::sync::atomic::Ordering::SeqCst);
    });
}

/// Removes the trace folders of test processes that are no longer running.
fn remove_folders_of_ended_runs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(FOLDER_PREFIX)).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The trace's records so far whose thread is one of `threads`, in file order (what is pending is written
/// first). A last line without its newline is another thread's record being written meanwhile (the tests of
/// this binary share one capture): it is left out.
pub fn trace_lines_of(threads: &[u64]) -> Vec<Value> {
    let writer = STATE.lock().unwrap().as_ref().map(|state| state.writer.handle()).expect("a trace");
    drain_into(&writer);
    let text = std::fs::read_to_string(&writer.path).expect("the trace");
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON"))
        .filter(|v| v["thread"].as_u64().is_some_and(|t| threads.contains(&t)))
        .collect()
}

/// Runs `work` with the capture's state and a call of this thread, as a recorded call does.
pub fn with_state(work: impl FnOnce(&mut ProcessState, Call)) {
    let mut slot = STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let state = state_for_this_process(&mut slot).expect("capture is on");
    let call = Call { tid: crate::origin::thread_id(), time_ns: crate::origin::now_ns(), correlation: 0, site: 0 };
    work(state, call);
}

/// Set in a process that [`alone`] starts: the test it names runs its case there.
const ALONE: &str = "STREAMTRACE_TEST_ALONE";

/// For a test that needs a process of its own (the capture's state untouched by the other tests, fork handlers
/// registered in a known order): true in that process, where the caller runs its case and returns; elsewhere
/// runs the test `name` (its full path) there and panics unless it passed within a minute.
pub fn alone(name: &str) -> bool {
    if std::env::var(ALONE).is_ok_and(|running| running == name) {
        return true;
    }
    let mut case = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", name, "--test-threads=1"])
        .env(ALONE, name)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = case.try_wait().expect("waited") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = case.kill();
            panic!("{name} hung in a process of its own");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut case.stdout.take().expect("piped"), &mut out).expect("read");
    assert!(status.success() && out.contains("1 passed"), "{name}: {status}: {out}");
    false
}
