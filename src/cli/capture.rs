//! `streamtrace capture -- cmd args...`: runs a program with the capture library injected, stays out of its way
//! (its standard streams, exit status and signals stay its own), and analyzes the trace of each of its
//! processes as the program runs (online.rs: each process streams its records to this one), then reports.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use streamtrace_format::{launch, Producer, RecordKind, TraceEncoding};

use super::args::CaptureArgs;
use super::online::OnlineAnalysis;
use super::python_bootstrap;
use super::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};
use crate::hb::EngineOptions;
use crate::job;
use crate::output::output_dir;
use crate::report::{text::TextReport, Report};
use crate::symbols::BinarySearch;

/// The injected library's file name, looked for beside the streamtrace binary.
const LIBRARY: &str = "libstreamtrace_capture.so";

fn capture_library() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("STREAMTRACE_CAPTURE_LIB") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot find the streamtrace binary's directory")?;
    let beside = exe.with_file_name(LIBRARY);
    if beside.exists() {
        return Ok(beside);
    }
    bail!(
        "the capture library {LIBRARY} is not beside {} (build it with `cargo build --release -p streamtrace-capture`, or set STREAMTRACE_CAPTURE_LIB)",
        exe.display()
    )
}

/// The libcupti matching the driver: CUDA toolkit locations, then the PyPI wheels (nvidia-cuda-cupti) of the
/// Python environments on the machine.
fn find_cupti() -> Option<PathBuf> {
    let toolkit = launch::cupti_candidates(launch::toolkit_roots_from_env());
    toolkit
        .into_iter()
        .find(|p| p.exists())
        .or_else(|| in_python_wheels(&["nvidia/cu13/lib/libcupti.so.13", "nvidia/cuda_cupti/lib/libcupti.so.12"]))
}

/// The Compute Sanitizer library for `--exact`: the one named, else beside the toolkit's compute-sanitizer,
/// else the PyPI wheel (nvidia-cuda-sanitizer-api). Without one, capture cannot run: one sentence, exit 2, and
/// the program is not started.
fn find_sanitizer(named: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = named {
        if path.is_file() {
            return Ok(path.to_path_buf());
        }
        bail!("--sanitizer-lib {}: no such file", path.display());
    }
    let toolkit = launch::sanitizer_candidates(launch::toolkit_roots_from_env());
    let wheels = ["nvidia/cu13/lib/libsanitizer-public.so", "nvidia/cuda_sanitizer_api/lib/libsanitizer-public.so"];
    toolkit.into_iter().find(|p| p.exists()).or_else(|| in_python_wheels(&wheels)).ok_or_else(|| {
        anyhow::anyhow!(
            "capture --exact needs the Compute Sanitizer API ({}), which is not on this machine: install the CUDA \
             toolkit's compute-sanitizer or `pip install nvidia-cuda-sanitizer-api`, or name the library with \
             --sanitizer-lib PATH",
            launch::SANITIZER_NAME
        )
    })
}

/// The first of `files` (paths under a site-packages folder) in the Python environments of the machine.
fn in_python_wheels(files: &[&str]) -> Option<PathBuf> {
    let mut site_dirs = Vec::new();
    for base in ["/usr/local/lib", "/usr/lib"] {
        if let Ok(entries) = std::fs::read_dir(base) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if name.starts_with("python3") {
                    site_dirs.push(entry.path().join("dist-packages"));
                    site_dirs.push(entry.path().join("site-packages"));
                }
            }
        }
    }
    site_dirs.iter().flat_map(|site| files.iter().map(move |file| site.join(file))).find(|path| path.exists())
}

/// Ignores SIGINT and SIGQUIT while the child runs: the terminal delivers them to the child too, and capture must
/// outlive the child to analyze its trace. Restores the previous handlers when dropped.
struct IgnoreTerminalSignals {
    previous: [libc::sighandler_t; 2],
}

impl IgnoreTerminalSignals {
    fn new() -> IgnoreTerminalSignals {
        // Safety: installs SIG_IGN for two signals; the previous dispositions are restored on drop.
        let previous =
            unsafe { [libc::signal(libc::SIGINT, libc::SIG_IGN), libc::signal(libc::SIGQUIT, libc::SIG_IGN)] };
        IgnoreTerminalSignals { previous }
    }
}

impl Drop for IgnoreTerminalSignals {
    fn drop(&mut self) {
        // Safety: restores the dispositions saved in `new`.
        unsafe {
            libc::signal(libc::SIGINT, self.previous[0]);
            libc::signal(libc::SIGQUIT, self.previous[1]);
        }
    }
}

pub fn run(args: &CaptureArgs) -> anyhow::Result<u8> {
    let Some((program, program_args)) = args.command.split_first() else {
        bail!("no command to run: streamtrace capture -- cmd args...")
    };
    if let Some(other) = std::env::var_os("CUDA_INJECTION64_PATH") {
        // Another tool (nsys, ncu) already injects itself; only one injection library can be named, and taking
        // its place would break that tool. Run the program under it, untouched.
        eprintln!(
            "streamtrace: another CUDA injection library is set (CUDA_INJECTION64_PATH={}): capture is off for this run",
            other.to_string_lossy()
        );
        let status = {
            let mut child =
                Command::new(program).args(program_args).spawn().map_err(|e| ProgramNotStarted::new(program, e))?;
            let _ignore = IgnoreTerminalSignals::new();
            child.wait().with_context(|| format!("waiting for {program}"))?
        };
        return Ok(exit_like(status));
    }
    let library = capture_library()?;
    let sanitizer = if args.exact { Some(find_sanitizer(args.sanitizer_lib.as_deref())?) } else { None };
    let cupti = match &args.cupti {
        Some(path) => Some(path.clone()),
        None => find_cupti(),
    };
    let dir = &args.output;
    output_dir(dir)?;
    remove_earlier_traces(dir)?;
    let encoding = TraceEncoding::from(args.trace_format);
    let template = dir.join(format!("trace.%p.{}", encoding.extension()));
    // Python programs pick the bootstrap up as sitecustomize; it chains to the program's own sitecustomize, if any.
    let python = python_bootstrap::install(dir)?;
    let mut command = Command::new(program);
    command
        .args(program_args)
        .env("CUDA_INJECTION64_PATH", &library)
        .env(launch::ENV_OUTPUT, &template)
        .env(launch::ENV_TRACE_FORMAT, encoding.as_str())
        .env("PYTHONPATH", python.python_path)
        .env(python_bootstrap::ENV_OBSERVER_CACHE, python.observer_cache);
    if args.gpu_times {
        command.env(launch::ENV_GPU_TIMES, "1");
    }
    if args.no_call_sites {
        command.env(launch::ENV_NO_CALL_SITES, "1");
    }
    // The driver loads the library with dlopen, which cannot stand in front of the pthread and signal functions:
    // the loader must, for the program and every process it starts. The host watch needs it for its SIGSEGV
    // handler to stay first; it leaves itself off in Python programs (their observers report host accesses).
    if !args.no_host_sync || !args.no_host_watch {
        match preloading(&library, std::env::var_os("LD_PRELOAD")) {
            Ok(preload) => {
                command.env("LD_PRELOAD", preload);
            }
            Err(why) => eprintln!("streamtrace: {why}: host synchronization and host accesses are not recorded"),
        }
    }
    if args.no_host_sync {
        command.env(launch::ENV_NO_HOST_SYNC, "1");
    }
    if !args.no_host_watch {
        command.env(launch::ENV_HOST_WATCH, "1");
    }
    for (name, value) in range_environment(args, &library, now_monotonic_ns())? {
        command.env(name, value);
    }
    // The analysis runs beside the program, fed as the records are written.
    let online = if args.no_analyze {
        None
    } else {
        match OnlineAnalysis::start(EngineOptions::default()) {
            Ok(online) => Some(online),
            Err(e) if args.no_trace => {
                bail!("cannot listen for the online analysis ({e}), and --no-trace keeps no trace")
            }
            Err(e) => {
                eprintln!("streamtrace: cannot listen for the online analysis ({e}): the traces are analyzed at exit");
                None
            }
        }
    };
    if let Some(online) = &online {
        command.env(launch::ENV_STREAM, online.socket());
        if args.no_trace {
            command.env(launch::ENV_NO_TRACE, "1");
        }
    }
    match (&sanitizer, &cupti) {
        (Some(sanitizer), _) => {
            command.env(launch::ENV_EXACT, "1").env(launch::ENV_SANITIZER, sanitizer);
            if let Some(kernels) = &args.exact_kernels {
                command.env(launch::ENV_EXACT_KERNELS, kernels);
            }
        }
        (None, Some(path)) => {
            command.env(launch::ENV_CUPTI, path);
        }
        (None, None) => eprintln!("streamtrace: libcupti not found in the usual places; the capture library will search again (pass --cupti PATH)"),
    }
    let mut child = command.spawn().map_err(|e| ProgramNotStarted::new(program, e))?;
    let status = {
        let _ignore = IgnoreTerminalSignals::new();
        child.wait().with_context(|| format!("waiting for {program}"))?
    };
    if !args.no_analyze {
        let mut analyzed = online.map(OnlineAnalysis::finish).unwrap_or_default();
        let files: Vec<PathBuf> = std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("trace.")))
            .collect();
        // A stream that lost records (the analyzer fell behind) gives way to its process's file, which has them.
        let lost = |trace: &job::JobTrace| {
            trace.outcome.as_ref().is_ok_and(|a| a.import.get(crate::ingest::Counter::CaptureStreamLostRecords) > 0)
        };
        analyzed.retain(|trace| {
            !(lost(trace)
                && streamed_pid(&trace.path).is_some_and(|pid| files.iter().any(|f| file_pid(f) == Some(pid))))
        });
        // The files of processes that did not stream (they could not reach the analyzer, and said so).
        let streamed: Vec<u32> = analyzed.iter().filter_map(|t| streamed_pid(&t.path)).collect();
        let mut traces: Vec<PathBuf> =
            files.into_iter().filter(|p| file_pid(p).map_or(true, |pid| !streamed.contains(&pid))).collect();
        traces.sort();
        if traces.is_empty() && analyzed.is_empty() {
            eprintln!(
                "streamtrace: no trace was recorded (the program made no CUDA call, or capture was disabled: see above)"
            );
        }
        // Every process's trace at once (a launcher such as torchrun starts one process per GPU), then one
        // report in rank order.
        analyzed.extend(job::analyze_job(&traces, EngineOptions::default(), &BinarySearch::default(), false));
        job::in_rank_order(&mut analyzed);
        let stderr = std::io::stderr();
        let mut out = stderr.lock();
        if analyzed.len() > 1 {
            super::job::write_text(&analyzed, &mut out).context("writing the report")?;
        } else {
            for trace in &analyzed {
                eprintln!("streamtrace: {}", trace.path.display());
                match &trace.outcome {
                    // Several capture ranges (`--capture-range-end=repeat`): a section per range.
                    Ok(analysis) if analysis.ranges.len() > 1 => {
                        let sections: Vec<job::JobTrace> = analysis
                            .range_sections()
                            .into_iter()
                            .map(|section| job::JobTrace { path: trace.path.clone(), outcome: Ok(section) })
                            .collect();
                        super::job::write_text(&sections, &mut out).context("writing the report")?;
                    }
                    Ok(analysis) => TextReport::PLAIN.write(analysis, &mut out).context("writing the report")?,
                    Err(e) => eprintln!("streamtrace: cannot analyze {}: {e}", trace.path.display()),
                }
            }
        }
    }
    Ok(exit_like(status))
}

/// The process an online trace came from (online.rs names them `process PID`).
fn streamed_pid(name: &Path) -> Option<u32> {
    name.to_str()?.strip_prefix("process ")?.split(' ').next()?.parse().ok()
}

/// The process a trace file is of (`trace.PID.stbin`, `trace.PID.N.stbin` after an exec; `.json` alike).
fn file_pid(path: &Path) -> Option<u32> {
    path.file_name()?.to_str()?.strip_prefix("trace.")?.split('.').next()?.parse().ok()
}

/// The monotonic clock the capture library reads (`CLOCK_MONOTONIC`, ns): `--delay` counts from here.
fn now_monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // Safety: writes the current time into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The variables that tell the capture library its capture ranges (ranges.rs there), with the program started
/// at `start_ns`; none when the whole run is recorded. NVTX is pointed at the library, which takes its range
/// calls.
fn range_environment(
    args: &CaptureArgs,
    library: &Path,
    start_ns: u64,
) -> anyhow::Result<Vec<(&'static str, std::ffi::OsString)>> {
    use super::args::CaptureRangeTrigger as T;
    let seconds = |value: Option<f64>, flag: &str| -> anyhow::Result<Option<u64>> {
        match value {
            None => Ok(None),
            Some(s) if s.is_finite() && s >= 0.0 => Ok(Some((s * 1e9) as u64)),
            Some(s) => bail!("{flag} {s}: not a number of seconds"),
        }
    };
    let (delay, duration) = (seconds(args.delay, "--delay")?, seconds(args.duration, "--duration")?);
    let trigger = match (args.capture_range, delay.or(duration)) {
        (Some(T::CudaProfilerApi), _) => streamtrace_format::RangeTrigger::ProfilerApi,
        (Some(T::Nvtx), _) => streamtrace_format::RangeTrigger::Nvtx,
        (None, Some(_)) => streamtrace_format::RangeTrigger::Time,
        (None, None) => {
            if args.nvtx_capture.is_some() {
                bail!("--nvtx-capture needs --capture-range=nvtx");
            }
            return Ok(Vec::new());
        }
    };
    let end = args.capture_range_end.as_str();
    let end_ok = matches!(end, "stop" | "repeat")
        || end.strip_prefix("repeat:").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n > 0);
    if !end_ok {
        bail!("--capture-range-end {end}: not stop, repeat or repeat:N");
    }
    let mut vars = vec![(launch::ENV_RANGES, trigger.as_str().into()), (launch::ENV_RANGE_END, end.into())];
    if delay.is_some() || duration.is_some() {
        let start = start_ns + delay.unwrap_or(0);
        let window = match duration {
            Some(d) => format!("{start},{}", start + d),
            None => start.to_string(),
        };
        vars.push((launch::ENV_RANGE_WINDOW, window.into()));
    }
    if trigger == streamtrace_format::RangeTrigger::Nvtx {
        let Some(range) = &args.nvtx_capture else { bail!("--capture-range=nvtx needs --nvtx-capture RANGE") };
        vars.push((launch::ENV_NVTX_CAPTURE, range.into()));
        vars.push((launch::ENV_NVTX_INJECTION, library.as_os_str().to_owned()));
    }
    Ok(vars)
}

/// LD_PRELOAD with the capture library after what the user preloads already (their libraries keep their
/// place in front). The loader splits the list at spaces and colons, so a library path holding one cannot be
/// named there.
fn preloading(library: &Path, user: Option<std::ffi::OsString>) -> Result<std::ffi::OsString, String> {
    use std::os::unix::ffi::OsStrExt;
    let named = library.as_os_str();
    if !library.is_file() {
        // The loader would say so on the program's standard error, in every process it starts.
        return Err(format!("the capture library {} does not exist", library.display()));
    }
    if named.as_bytes().iter().any(|b| matches!(b, b' ' | b':' | b'\t' | b'\n')) {
        return Err(format!(
            "the capture library's path {} holds a space or a colon, which LD_PRELOAD cannot",
            library.display()
        ));
    }
    let mut preload = std::ffi::OsString::new();
    if let Some(user) = user.filter(|u| !u.is_empty()) {
        if user.as_bytes().split(|b| matches!(b, b' ' | b':')).any(|entry| entry == named.as_bytes()) {
            return Ok(user);
        }
        preload.push(user);
        preload.push(":");
    }
    preload.push(named);
    Ok(preload)
}

/// The program could not be started. Exits as a shell does: 127 when it is not found, 126 when it is found but
/// cannot be run (not executable, a directory, not a program), so that the program's own exit statuses (2 among
/// them) keep their meaning.
#[derive(Debug, thiserror::Error)]
#[error("cannot run {program}: {cause}")]
pub struct ProgramNotStarted {
    program: String,
    cause: std::io::Error,
}

impl ProgramNotStarted {
    fn new(program: &str, cause: std::io::Error) -> ProgramNotStarted {
        ProgramNotStarted { program: program.to_string(), cause }
    }

    pub fn exit_status(&self) -> u8 {
        match self.cause.kind() {
            std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
            _ => EXIT_NOT_EXECUTABLE,
        }
    }
}

/// Removes the traces an earlier capture wrote into `dir` (they would be analyzed as this run's), and refuses
/// to run when `dir` holds a `trace.*.stbin` or `trace.*.json` that capture did not write: it is not capture's to delete, and it
/// would be analyzed as this run's. A trace is capture's when its header says `"producer": "capture"`. Nothing
/// is removed unless everything can be. docs/capture.md says so.
fn remove_earlier_traces(dir: &Path) -> anyhow::Result<()> {
    let mut ours = Vec::new();
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let trace_file = TraceEncoding::ALL.iter().any(|e| name.ends_with(&format!(".{}", e.extension())));
        if !(name.starts_with("trace.") && trace_file) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_file()) && written_by_capture(&entry.path()) {
            ours.push(entry.path());
        } else {
            foreign.push(name);
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        anyhow::bail!(
            "{} holds {} that streamtrace capture did not write (no \"producer\": \"capture\" header): capture would \
             analyze it as this run's trace, and does not delete what it did not write; move it away or choose another -o DIR",
            dir.display(),
            foreign.join(", ")
        );
    }
    for path in ours {
        std::fs::remove_file(&path).with_context(|| format!("cannot remove the old trace {}", path.display()))?;
    }
    Ok(())
}

/// Whether the file's header (its first line, or its first record in binary) is that of a trace `streamtrace
/// capture` recorded.
fn written_by_capture(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else { return false };
    // A header is a few dozen bytes: a longer first line is no header of ours.
    let mut head = BufReader::new(file.take(4096));
    let binary = head.fill_buf().is_ok_and(streamtrace_format::binary::read::is_binary);
    let mut first = Vec::new();
    if binary {
        match streamtrace_format::binary::transcode::header_line(head) {
            Some(line) => first = line.into_bytes(),
            None => return false,
        }
    } else if head.read_until(b'\n', &mut first).is_err() {
        return false;
    }
    let Ok(header) = serde_json::from_slice::<serde_json::Value>(&first) else { return false };
    header["type"] == RecordKind::Header.as_str() && header["producer"] == Producer::Capture.as_str()
}

/// The child's exit status; a child killed by a signal kills capture with the same signal.
fn exit_like(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return code as u8;
    }
    if let Some(signal) = status.signal() {
        // Safety: restores the default action and raises the signal the child died of on ourselves.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return 128u8.wrapping_add(signal as u8);
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture_args(flags: &[&str]) -> CaptureArgs {
        use clap::Parser;
        let mut argv = vec!["streamtrace", "capture"];
        argv.extend_from_slice(flags);
        argv.extend(["--", "prog"]);
        match crate::cli::args::Cli::try_parse_from(argv).expect("parses").command {
            crate::cli::args::Command::Capture(args) => args,
            _ => unreachable!("a capture command"),
        }
    }

    #[test]
    fn capture_ranges_become_the_library_environment() {
        let lib = Path::new("/lib/libstreamtrace_capture.so");
        let env = |flags: &[&str]| {
            range_environment(&capture_args(flags), lib, 1_000)
                .map(|vars| vars.into_iter().map(|(k, v)| format!("{k}={}", v.to_string_lossy())).collect::<Vec<_>>())
        };
        assert!(env(&[]).unwrap().is_empty(), "no range asked for: the whole run");
        assert_eq!(
            env(&["--capture-range=cudaProfilerApi"]).unwrap(),
            ["STREAMTRACE_RANGES=cudaProfilerApi", "STREAMTRACE_RANGE_END=stop"]
        );
        assert_eq!(
            env(&["--capture-range=nvtx", "--nvtx-capture", "step@*", "--capture-range-end", "repeat"]).unwrap(),
            [
                "STREAMTRACE_RANGES=nvtx",
                "STREAMTRACE_RANGE_END=repeat",
                "STREAMTRACE_NVTX_CAPTURE=step@*",
                "NVTX_INJECTION64_PATH=/lib/libstreamtrace_capture.so"
            ]
        );
        assert_eq!(
            env(&["--delay", "2", "--duration", "0.5"]).unwrap(),
            ["STREAMTRACE_RANGES=time", "STREAMTRACE_RANGE_END=stop", "STREAMTRACE_RANGE_WINDOW=2000001000,2500001000"]
        );
        assert!(env(&["--capture-range=nvtx"]).is_err(), "nvtx without a range name");
        assert!(env(&["--nvtx-capture", "step"]).is_err(), "a range name without nvtx");
        assert!(env(&["--capture-range=cudaProfilerApi", "--capture-range-end", "repeat:0"]).is_err());
        assert!(env(&["--delay=-1"]).is_err());
    }

    #[test]
    fn streams_and_files_are_matched_by_process() {
        assert_eq!(streamed_pid(Path::new("process 41")), Some(41));
        assert_eq!(streamed_pid(Path::new("process 41 (image 2)")), Some(41));
        assert_eq!(streamed_pid(Path::new("out/trace.41.json")), None);
        assert_eq!(file_pid(Path::new("out/trace.41.json")), Some(41));
        assert_eq!(file_pid(Path::new("out/trace.41.1.json")), Some(41), "an exec'd image");
        assert_eq!(file_pid(Path::new("out/trace.x.json")), None);
        assert_eq!(file_pid(Path::new("out/trace.41.stbin")), Some(41));
    }

    #[test]
    fn the_library_is_preloaded_after_what_the_user_preloads() {
        let dir = std::env::temp_dir().join(format!("st-preload-{}", std::process::id()));
        let named = |name: &str| {
            let path = dir.join(name).join("libstreamtrace_capture.so");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
            path
        };
        let library = named("st");
        let shown = library.display().to_string();
        assert_eq!(preloading(&library, None).unwrap(), shown.as_str());
        assert_eq!(preloading(&library, Some("".into())).unwrap(), shown.as_str());
        assert_eq!(
            preloading(&library, Some("libjemalloc.so.2 /x/liba.so".into())).unwrap(),
            format!("libjemalloc.so.2 /x/liba.so:{shown}").as_str()
        );
        let already = format!("{shown}:/x/liba.so");
        assert_eq!(preloading(&library, Some(already.clone().into())).unwrap(), already.as_str(), "named once");
        assert!(preloading(&named("my venv"), None).is_err(), "a space");
        assert!(preloading(&named("a:b"), None).is_err(), "a colon");
        assert!(preloading(&dir.join("none/libstreamtrace_capture.so"), None).is_err(), "no such file");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
