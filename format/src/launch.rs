//! What `streamtrace capture` and the injected capture library agree on besides the trace file: the
//! environment variables the command sets for the program, and where libcupti is looked for.

use std::path::{Path, PathBuf};

/// Where each process writes its trace; `%p` stands for the process id.
pub const ENV_OUTPUT: &str = "STREAMTRACE_OUTPUT";
/// How the trace is encoded: `binary` (the default) or `json` (`streamtrace capture --trace-format json`); a
/// [`crate::TraceEncoding`] name.
pub const ENV_TRACE_FORMAT: &str = "STREAMTRACE_TRACE_FORMAT";
/// The libcupti the command found; the library tries it first.
pub const ENV_CUPTI: &str = "STREAMTRACE_CUPTI";
/// Collect GPU start and end times (CUPTI activity records).
pub const ENV_GPU_TIMES: &str = "STREAMTRACE_GPU_TIMES";
/// Record no native call sites (the stack walk on every recorded call; docs/performance.md says what it costs).
pub const ENV_NO_CALL_SITES: &str = "STREAMTRACE_NO_CALL_SITES";
/// Record with the exact-access backend (the Compute Sanitizer API; `streamtrace capture --exact`).
pub const ENV_EXACT: &str = "STREAMTRACE_EXACT";
/// The libsanitizer-public.so the command found; the library tries it first.
pub const ENV_SANITIZER: &str = "STREAMTRACE_SANITIZER";
/// `--exact-kernels`: the kernels the exact-access backend instruments, comma-separated name patterns (`*`
/// matches any text; a pattern without one matches any name containing it). Unset: every kernel.
pub const ENV_EXACT_KERNELS: &str = "STREAMTRACE_EXACT_KERNELS";
/// Watch the host's own accesses of pinned, registered and managed memory (docs/capture.md, host watch): set by
/// `streamtrace capture` for every program unless `--no-host-watch`; the library leaves it off in Python
/// programs, whose observers report host accesses, and where it was not preloaded.
pub const ENV_HOST_WATCH: &str = "STREAMTRACE_HOST_WATCH";
/// `--no-host-sync` while the library is preloaded for the host watch: its pthread interposers pass every call on.
pub const ENV_NO_HOST_SYNC: &str = "STREAMTRACE_NO_HOST_SYNC";
/// Record in capture ranges started by this trigger (a [`crate::RangeTrigger`] name: `cudaProfilerApi`, `nvtx`,
/// `time`); unset: the whole run.
pub const ENV_RANGES: &str = "STREAMTRACE_RANGES";
/// With the `nvtx` trigger: the NVTX range that is the capture range, `NAME`, `NAME@DOMAIN` or `NAME@*`.
pub const ENV_NVTX_CAPTURE: &str = "STREAMTRACE_NVTX_CAPTURE";
/// What happens when a range ends: `stop` (no more ranges, the default), `repeat`, or `repeat:N` (at most N).
pub const ENV_RANGE_END: &str = "STREAMTRACE_RANGE_END";
/// The monotonic times (`CLOCK_MONOTONIC`, ns) between which ranges may be open, `START[,END]` (`--delay`,
/// `--duration`, counted from the program's start by the command).
pub const ENV_RANGE_WINDOW: &str = "STREAMTRACE_RANGE_WINDOW";
/// NVTX's own variable: the library NVTX hands its calls to (the capture library, for `--capture-range=nvtx`).
pub const ENV_NVTX_INJECTION: &str = "NVTX_INJECTION64_PATH";
/// The Unix socket an online capture's analyzer listens on: each process's writer connects once and sends the
/// lines of its trace there as it writes them (`streamtrace capture` analyzes them as they come).
pub const ENV_STREAM: &str = "STREAMTRACE_STREAM";
/// `--no-trace`: with [`ENV_STREAM`], the trace goes only to the analyzer, no file is written (unless the
/// analyzer cannot be reached).
pub const ENV_NO_TRACE: &str = "STREAMTRACE_NO_TRACE";
/// Leave the program alone: the library returns at once from its initialization.
pub const ENV_DISABLE: &str = "STREAMTRACE_DISABLE";
/// A distributed job's launcher (torchrun) tells each process its rank, its rank on its host and the job's size;
/// the trace header carries them.
pub const ENV_RANK: &str = "RANK";
pub const ENV_LOCAL_RANK: &str = "LOCAL_RANK";
pub const ENV_WORLD_SIZE: &str = "WORLD_SIZE";

/// libcupti's file names, newest CUDA first.
const CUPTI_NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];
/// Folders of a CUDA toolkit that hold libcupti.
const TOOLKIT_DIRS: [&str; 3] = ["targets/x86_64-linux/lib", "extras/CUPTI/lib64", "lib64"];
/// Folders of the distribution's CUDA packages.
const SYSTEM_DIRS: [&str; 2] = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"];

/// Where libcupti may be, in order: each CUDA toolkit root given (`CUDA_HOME`, `CUDA_PATH`), then
/// /usr/local/cuda, then the distribution's folders. The caller picks the first that exists.
pub fn cupti_candidates(toolkit_roots: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = toolkit_roots.into_iter().collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    let mut paths = Vec::new();
    for root in &roots {
        for dir in TOOLKIT_DIRS {
            paths.extend(CUPTI_NAMES.iter().map(|name| root.join(dir).join(name)));
        }
    }
    for dir in SYSTEM_DIRS {
        paths.extend(CUPTI_NAMES.iter().map(|name| Path::new(dir).join(name)));
    }
    paths
}

/// Where the Compute Sanitizer API's library may be, in order: under each CUDA toolkit root given, then
/// /usr/local/cuda (the toolkit puts it beside the compute-sanitizer tool). The caller picks the first that
/// exists; the PyPI wheel (nvidia-cuda-sanitizer-api) is looked for by the command.
pub fn sanitizer_candidates(toolkit_roots: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = toolkit_roots.into_iter().collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.iter().map(|root| root.join("compute-sanitizer").join(SANITIZER_NAME)).collect()
}

/// The Compute Sanitizer API's library.
pub const SANITIZER_NAME: &str = "libsanitizer-public.so";

/// The CUDA toolkit roots the environment names (`CUDA_HOME`, then `CUDA_PATH`).
pub fn toolkit_roots_from_env() -> Vec<PathBuf> {
    ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_roots_come_before_the_usual_places() {
        let paths = cupti_candidates([PathBuf::from("/opt/cuda")]);
        assert_eq!(paths[0], PathBuf::from("/opt/cuda/targets/x86_64-linux/lib/libcupti.so.13"));
        assert!(paths.contains(&PathBuf::from("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12")));
        assert_eq!(paths.last(), Some(&PathBuf::from("/usr/lib64/libcupti.so")));
    }

    #[test]
    fn the_sanitizer_library_is_looked_for_beside_compute_sanitizer() {
        let paths = sanitizer_candidates([PathBuf::from("/opt/cuda")]);
        assert_eq!(
            paths,
            vec![
                PathBuf::from("/opt/cuda/compute-sanitizer/libsanitizer-public.so"),
                PathBuf::from("/usr/local/cuda/compute-sanitizer/libsanitizer-public.so"),
            ]
        );
    }
}
