//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use streamtrace_format::TraceEncoding;

use crate::hb::{CheckThread, HostOrder};

#[derive(Parser, Debug)]
#[command(name = "streamtrace", version, about = "Finds cross-stream synchronization bugs in CUDA programs")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Analyze a trace: report unordered accesses to the same memory from different streams.
    ///
    /// Exit status: 0 when clean, 1 when races or waits before their event's record (a wait on an event that is
    /// recorded only later) were found, 2 on bad input or usage, 3 when the only findings are races ordered only
    /// by timing, or by host synchronization the capture cannot see (the per-thread host order finds them, the
    /// timestamp order does not). A wait on an event that nothing ever records is a no-op that NCCL makes on
    /// purpose: a note, not a finding. Without addresses (an nsys export) races cannot be decided: 0, with the
    /// unordered cross-stream operation pairs listed as candidates.
    Analyze(AnalyzeArgs),
    /// Run a CUDA program with capture injected, then analyze its trace. Exits with the program's status.
    Capture(CaptureArgs),
    /// Summaries as `nsys stats` gives them: kernels, per-stream busy time and overlap, synchronization calls,
    /// copies by kind.
    Stats(StatsArgs),
    /// Convert a trace between the binary encoding and JSON, record by record (the same records either way).
    Convert(ConvertArgs),
    /// Write a synthetic trace (for benchmarks).
    #[command(hide = true)]
    Synth(SynthArgs),
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum HostOrderArg {
    /// Per-thread where the trace records the host synchronization between its threads (`streamtrace capture`
    /// records it), global where it does not (nsys exports, older traces). The report says which it used.
    Auto,
    /// Order host API calls of all threads of a process by their timestamps (host-side synchronization that
    /// the trace does not record is taken to follow them).
    Global,
    /// One clock per host thread: only CUDA synchronization and the host synchronization the trace records
    /// order threads (exact where the trace records it all, strict elsewhere).
    PerThread,
}

impl From<HostOrderArg> for HostOrder {
    fn from(arg: HostOrderArg) -> HostOrder {
        match arg {
            HostOrderArg::Auto => HostOrder::Auto,
            HostOrderArg::Global => HostOrder::Global,
            HostOrderArg::PerThread => HostOrder::PerThread,
        }
    }
}

/// Where the shadow check runs.
#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum CheckThreadArg {
    /// On a thread of its own where three cores or more are free for the analysis.
    Auto,
    /// On a thread of its own.
    On,
    /// On the engine's thread.
    Off,
}

impl From<CheckThreadArg> for CheckThread {
    fn from(arg: CheckThreadArg) -> CheckThread {
        match arg {
            CheckThreadArg::Auto => CheckThread::Auto,
            CheckThreadArg::On => CheckThread::On,
            CheckThreadArg::Off => CheckThread::Off,
        }
    }
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// The trace: a streamtrace JSON trace (docs/trace-format.md), `-` for standard input, or an nsys .sqlite
    /// export or .nsys-rep report.
    pub trace: PathBuf,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Write the report to this file instead of standard output (replaced whole once written; a path that
    /// exists and is not a regular file is refused, except the null device).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// How the host threads of a process are ordered among themselves (docs/host-order.md). In the per-thread
    /// order of a trace that records its host synchronization, a race that the global order does not find is
    /// reported apart: ordered only by timing, or by host synchronization the capture cannot see (std::atomic
    /// flags, spin loops, futexes).
    #[arg(long, value_enum, default_value_t = HostOrderArg::Auto)]
    pub host_order: HostOrderArg,
    /// Where the shadow check (every access against the memory's history) runs. The findings are the same; on
    /// two cores a thread of its own costs more than it gives.
    #[arg(long, value_enum, default_value_t = CheckThreadArg::Auto)]
    pub check_thread: CheckThreadArg,
    /// Print throughput and peak memory to standard error.
    #[arg(long)]
    pub timing: bool,
    /// In the text report, also what the analysis saw besides its findings: operations, accesses and streams
    /// (idle ones included), the unordered cross-stream operation pairs, how kernels' accesses were known, what
    /// the capture cost the program, and each wait whose record is not in the trace (the JSON report has all).
    #[arg(short, long)]
    pub verbose: bool,
    /// A folder to look in for the program's binaries (executables, shared libraries) when they are not at the
    /// path the trace names, as on another machine than the one that ran it (repeatable; a file of the same name
    /// is taken when its build id is the one that ran). Lines the capture wrote into the trace need none.
    #[arg(long, value_name = "DIR")]
    pub binary_dir: Vec<std::path::PathBuf>,
    /// Also write a self-contained HTML timeline report to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Also write a Perfetto / Chrome trace (JSON, for ui.perfetto.dev) to this file.
    #[arg(long)]
    pub perfetto: Option<PathBuf>,
    /// Also write the timeline as a PNG picture, races marked.
    #[arg(long)]
    pub png: Option<PathBuf>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatsFormat {
    Table,
    Csv,
    Json,
    Parquet,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The trace: an nsys .sqlite export or .nsys-rep report, or a streamtrace JSON trace.
    pub trace: PathBuf,
    #[arg(long, value_enum, default_value_t = StatsFormat::Table)]
    pub format: StatsFormat,
    /// Where to write: a file for `table`; a directory (one file per table) for csv, json and parquet.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Also draw busy time per stream and the kernels taking the most GPU time into this PNG.
    #[arg(long)]
    pub png: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Directory for the traces, one per process (trace.PID.stbin, or trace.PID.json with --trace-format json).
    /// Traces an earlier capture wrote in it are removed; a trace file that capture did not write makes capture
    /// refuse to run.
    #[arg(short = 'o', long, default_value = "streamtrace-trace")]
    pub output: PathBuf,
    /// How the traces are encoded: binary (smaller and faster to read), or JSON lines (the documented
    /// interchange format; `streamtrace convert` turns either into the other).
    #[arg(long, value_enum, default_value = "binary", env = "STREAMTRACE_TRACE_FORMAT")]
    pub trace_format: TraceFormatArg,
    /// Record only; do not analyze.
    #[arg(long)]
    pub no_analyze: bool,
    /// Write no trace file: each process's records go only to the analyzer, which analyzes them while the
    /// program runs (it always does, unless --no-analyze), so a long run needs no disk for its trace. A process
    /// that cannot reach the analyzer writes its file after all, and says so (docs/capture.md, online analysis).
    #[arg(long, conflicts_with = "no_analyze")]
    pub no_trace: bool,
    /// Path of libcupti (found in CUDA and PyPI locations when not given).
    #[arg(long)]
    pub cupti: Option<PathBuf>,
    /// Also record GPU start and end times (CUPTI activity records), for timelines. Costs more than capture alone.
    #[arg(long, conflicts_with = "exact")]
    pub gpu_times: bool,
    /// Record with the exact-access backend (tier T3): the Compute Sanitizer API instead of CUPTI, with every
    /// kernel instrumented so that each launch records the bytes it read and wrote (32-byte granules), whatever
    /// pointer they came through. Much slower than the default backend (docs/performance.md); no GPU times.
    #[arg(long)]
    pub exact: bool,
    /// With --exact: the Compute Sanitizer library (libsanitizer-public.so; found beside the CUDA toolkit's
    /// compute-sanitizer or in the nvidia-cuda-sanitizer-api wheel when not given).
    #[arg(long, requires = "exact")]
    pub sanitizer_lib: Option<PathBuf>,
    /// With --exact: instrument only kernels whose name matches one of these comma-separated patterns (`*`
    /// matches any text; a pattern without `*` matches names containing it); the others keep tier T1, and the
    /// report says which kernels ran at which tier.
    #[arg(long, requires = "exact", value_name = "PATTERNS")]
    pub exact_kernels: Option<String>,
    /// Record no native call sites. Saves the stack walk on each recorded CUDA call (about 0.15-0.2 us on the
    /// GPU machine, some 5% of a kernel launch's time; docs/performance.md); findings of C++ programs then name no
    /// source lines.
    #[arg(long)]
    pub no_call_sites: bool,
    /// Record no host synchronization between the program's threads (thread create and join, mutexes,
    /// condition variables, semaphores: the capture library is put in LD_PRELOAD to see them). The analysis
    /// then orders the threads by their calls' timestamps (docs/host-order.md).
    #[arg(long)]
    pub no_host_sync: bool,
    /// Do not watch the host's own accesses of pinned, registered and managed memory (native programs: guarded
    /// pages while copies are in flight, CPU page faults on managed memory; docs/capture.md, host watch).
    #[arg(long)]
    pub no_host_watch: bool,
    /// Record only inside capture ranges, as Nsight Systems' option of that name: `cudaProfilerApi` (between
    /// `cudaProfilerStart` and `cudaProfilerStop`, which `torch.cuda.profiler.start()` / `stop()` call) or `nvtx`
    /// (inside the NVTX range `--nvtx-capture` names). Outside a range only what a range's analysis needs is
    /// kept (streams, events, allocations, graphs: docs/capture.md, capture ranges).
    #[arg(long, value_enum, conflicts_with = "exact")]
    pub capture_range: Option<CaptureRangeTrigger>,
    /// With `--capture-range=nvtx`: the NVTX range, `NAME`, `NAME@DOMAIN` or `NAME@*` (any domain).
    #[arg(long, value_name = "RANGE")]
    pub nvtx_capture: Option<String>,
    /// Seconds from the program's start before anything is recorded (alone: one range from then on).
    #[arg(long, value_name = "SECONDS", conflicts_with = "exact")]
    pub delay: Option<f64>,
    /// Seconds after the delay during which ranges may be open (alone: one range that long).
    #[arg(long, value_name = "SECONDS", conflicts_with = "exact")]
    pub duration: Option<f64>,
    /// What a range's end does: `stop` (no more ranges), `repeat` (the next start opens another; each range
    /// gets its own report section), or `repeat:N` (at most N ranges).
    #[arg(long, value_name = "stop|repeat|repeat:N", default_value = "stop")]
    pub capture_range_end: String,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// What starts a capture range (`--capture-range`), in Nsight Systems' words.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CaptureRangeTrigger {
    #[value(name = "cudaProfilerApi")]
    CudaProfilerApi,
    #[value(name = "nvtx")]
    Nvtx,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The trace to convert (`-`: standard input); its encoding is told by its first bytes.
    pub input: PathBuf,
    /// Where to write the converted trace (`-`: standard output).
    pub output: PathBuf,
    /// The encoding to write; without it, OUTPUT's extension decides (`.stbin`: binary, `.json`: JSON).
    #[arg(long, value_enum)]
    pub to: Option<TraceFormatArg>,
}

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Where to write the trace.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = 1_000_000)]
    pub ops: u64,
    #[arg(long, default_value_t = 16)]
    pub streams: u32,
    #[arg(long, default_value_t = 100_000)]
    pub ranges: u32,
    #[arg(long, default_value_t = 64)]
    pub events: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The trace's encoding; without it, the output's extension decides (`.stbin`: binary), else JSON.
    #[arg(long, value_enum)]
    pub format: Option<TraceFormatArg>,
}

/// A trace file's encoding.
#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum TraceFormatArg {
    /// The binary encoding (docs/trace-format.md, "The binary encoding").
    Binary,
    /// JSON lines, the documented interchange format.
    Json,
}

impl From<TraceFormatArg> for TraceEncoding {
    fn from(arg: TraceFormatArg) -> TraceEncoding {
        match arg {
            TraceFormatArg::Binary => TraceEncoding::Binary,
            TraceFormatArg::Json => TraceEncoding::Json,
        }
    }
}
