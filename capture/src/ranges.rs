//! Capture ranges (`streamtrace capture --capture-range`, `--delay`, `--duration`): the parts of the run whose
//! work the trace holds. Outside a range the capture keeps only what the analysis of a later range needs:
//! streams and their flags, events and the stream each was last recorded on, allocations (the caching
//! allocator's blocks too), kernels' names, graphs being built or captured, call sites; launches, copies, sets,
//! waits, synchronizations, queries and framework ops are neither looked at nor written (docs/capture.md).
//!
//! A range is open while its trigger says so (between `cuProfilerStart` and `cuProfilerStop`, or inside an
//! NVTX range of the name asked for: nvtx.rs) and the time window allows it (`--delay`, `--duration`); with
//! the `time` trigger the window alone decides. The triggers only flip atomics, on whatever thread they run:
//! the range's edges are written by the state, under its lock, before the first record made after they
//! moved ([`Edges`]), so that they sit in call order. A framework op keeps the side of the edge it began on
//! (an op begun before a range is left out whole; one running when it ends keeps its records), through a
//! per-thread stack of the frames open.
//!
//! Touches its own switches, a thread-local and the monotonic clock; nothing when no range is asked for.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

use rustc_hash::FxHashMap as HashMap;
use streamtrace_format::{launch, RangeTrigger};

use crate::graph_record::GraphRecord;
use crate::origin::now_ns;
use crate::record::{Batch, Call, Record};

/// How the ranges of this process are started and how many there may be (from the environment the capture
/// command set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub trigger: RangeTrigger,
    /// With the `nvtx` trigger: the range's name, and its domain (None: the default domain; `*`: any).
    pub nvtx: Option<NvtxName>,
    /// The most ranges (None: as many as the trigger starts, `--capture-range-end=repeat`).
    pub limit: Option<u32>,
    /// Monotonic times between which ranges may be open (`--delay`, `--duration`).
    pub window: Window,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvtxName {
    pub name: String,
    pub domain: NvtxDomain,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NvtxDomain {
    Default,
    Named(String),
    Any,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: Option<u64>,
}

impl Window {
    fn contains(&self, now: u64) -> bool {
        now >= self.start_ns && self.end_ns.is_none_or(|end| now < end)
    }

    fn is_whole_run(&self) -> bool {
        self.start_ns == 0 && self.end_ns.is_none()
    }
}

impl Config {
    /// The configuration the environment gives; None when no range is asked for. A value that cannot be read
    /// is said once and leaves ranges off (the whole run is recorded).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
        let Some(trigger) = env(launch::ENV_RANGES) else { return Ok(None) };
        let trigger = RangeTrigger::parse(&trigger).map_err(|e| e.to_string())?;
        let nvtx = match (trigger, env(launch::ENV_NVTX_CAPTURE)) {
            (RangeTrigger::Nvtx, Some(text)) => Some(NvtxName::parse(&text)),
            (RangeTrigger::Nvtx, None) => return Err(format!("{} names no NVTX range", launch::ENV_NVTX_CAPTURE)),
            _ => None,
        };
        let limit = match env(launch::ENV_RANGE_END).as_deref() {
            None | Some("stop") => Some(1),
            Some("repeat") => None,
            Some(other) => match other.strip_prefix("repeat:").map(str::parse::<u32>) {
                Some(Ok(n)) if n > 0 => Some(n),
                _ => return Err(format!("{} `{other}` is not stop, repeat or repeat:N", launch::ENV_RANGE_END)),
            },
        };
        let window = match env(launch::ENV_RANGE_WINDOW) {
            None => Window::default(),
            Some(text) => {
                let bad = || format!("{} `{text}` is not START_NS[,END_NS]", launch::ENV_RANGE_WINDOW);
                let (start, end) = text.split_once(',').map_or((text.as_str(), None), |(s, e)| (s, Some(e)));
                Window {
                    start_ns: start.trim().parse().map_err(|_| bad())?,
                    end_ns: end.map(|e| e.trim().parse().map_err(|_| bad())).transpose()?,
                }
            }
        };
        Ok(Some(Config { trigger, nvtx, limit, window }))
    }
}

impl NvtxName {
    /// `RANGE`, `RANGE@DOMAIN` or `RANGE@*`, as nsys's `--nvtx-capture` takes them.
    pub fn parse(text: &str) -> NvtxName {
        match text.rsplit_once('@') {
            Some((name, "*")) => NvtxName { name: name.to_string(), domain: NvtxDomain::Any },
            Some((name, domain)) => NvtxName { name: name.to_string(), domain: NvtxDomain::Named(domain.to_string()) },
            None => NvtxName { name: text.to_string(), domain: NvtxDomain::Default },
        }
    }

    /// Whether a range of `message` in `domain` (None: the default domain) is the capture range.
    pub fn matches(&self, message: &str, domain: Option<&str>) -> bool {
        message == self.name
            && match (&self.domain, domain) {
                (NvtxDomain::Any, _) => true,
                (NvtxDomain::Default, None) => true,
                (NvtxDomain::Named(wanted), Some(domain)) => wanted == domain,
                _ => false,
            }
    }
}

/// Whether ranges are in use in this process.
static IN_USE: AtomicBool = AtomicBool::new(false);
static CONFIG: OnceLock<Option<Config>> = OnceLock::new();
/// Whether the trigger has a range open (not the `time` trigger's: its window is its range).
static TRIGGERED: AtomicBool = AtomicBool::new(false);
/// Counts the ranges the trigger started: a range that ends and another that begins with no record between
/// them stay two, and `stop` / `repeat:N` stop starting them.
static STARTED: AtomicU32 = AtomicU32::new(0);
/// Open NVTX capture ranges over all threads: nested or overlapping ones make one range.
static NVTX_OPEN: AtomicU32 = AtomicU32::new(0);
/// Stream captures in progress: while one is, everything is written, since work issued to a capturing stream
/// becomes graph nodes that a later range may launch.
static CAPTURING: AtomicU32 = AtomicU32::new(0);

/// Reads the configuration from the environment, once; later calls change nothing.
pub fn configure() {
    CONFIG.get_or_init(|| match Config::from_env(|name| std::env::var(name).ok()) {
        Ok(config) => {
            IN_USE.store(config.is_some(), Ordering::SeqCst);
            config
        }
        Err(why) => {
            eprintln!("streamtrace: capture ranges are off ({why}): the whole run is recorded");
            None
        }
    });
}

fn config() -> Option<&'static Config> {
    CONFIG.get().and_then(Option::as_ref)
}

/// What starts this process's ranges, None when the whole run is recorded.
pub fn trigger() -> Option<RangeTrigger> {
    config().map(|c| c.trigger)
}

/// Whether this process's ranges are started by `trigger`.
pub fn triggered_by(trigger: RangeTrigger) -> bool {
    config().is_some_and(|c| c.trigger == trigger)
}

/// Whether this process records in ranges.
#[inline]
pub fn in_use() -> bool {
    IN_USE.load(Ordering::Relaxed)
}

/// The generation of the range open now (distinct for each range), None outside ranges.
fn open_now() -> Option<u32> {
    let config = config()?;
    if !config.window.is_whole_run() && !config.window.contains(now_ns()) {
        return None;
    }
    match config.trigger {
        RangeTrigger::Time => Some(1),
        RangeTrigger::ProfilerApi | RangeTrigger::Nvtx => {
            TRIGGERED.load(Ordering::Acquire).then(|| STARTED.load(Ordering::Acquire))
        }
    }
}

/// Whether the program's work is recorded now: no ranges asked for, or one is open.
pub fn recording() -> bool {
    !in_use() || open_now().is_some()
}

/// The trigger starts a range (`cuProfilerStart`, the NVTX capture range's start): none when one is open
/// already or the ranges asked for were all taken.
fn start() {
    let Some(config) = config() else { return };
    if TRIGGERED.load(Ordering::Acquire) || config.limit.is_some_and(|limit| STARTED.load(Ordering::Acquire) >= limit) {
        return;
    }
    STARTED.fetch_add(1, Ordering::AcqRel);
    TRIGGERED.store(true, Ordering::Release);
}

/// The trigger ends the range it started.
fn stop() {
    TRIGGERED.store(false, Ordering::Release);
}

/// `cuProfilerStart` / `cudaProfilerStart` (`torch.cuda.profiler.start()`).
pub fn profiler_started() {
    if config().is_some_and(|c| c.trigger == RangeTrigger::ProfilerApi) {
        start();
    }
}

/// `cuProfilerStop`.
pub fn profiler_stopped() {
    if config().is_some_and(|c| c.trigger == RangeTrigger::ProfilerApi) {
        stop();
    }
}

/// Whether an NVTX range of `message` in `domain` is the capture range (so its end must be told).
pub fn is_capture_range(message: &str, domain: Option<&str>) -> bool {
    config().and_then(|c| c.nvtx.as_ref()).is_some_and(|name| name.matches(message, domain))
}

/// The NVTX capture range began on some thread.
pub fn nvtx_range_began() {
    if NVTX_OPEN.fetch_add(1, Ordering::AcqRel) == 0 {
        start();
    }
}

/// An NVTX capture range ended: the range ends with the last of them.
pub fn nvtx_range_ended() {
    let ended_last = NVTX_OPEN.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)) == Ok(1);
    if ended_last {
        stop();
    }
}

/// Whether a stream capture is in progress in this process.
fn capturing() -> bool {
    CAPTURING.load(Ordering::Relaxed) > 0
}

/// The most framework frames a thread's stack keeps apart; deeper ones take their parent's side.
const FRAME_BITS: u32 = 64;

thread_local! {
    /// The framework frames (ops and calls) open on this thread: bit i says whether frame i began in a range
    /// (or while a graph was captured), and how many are open.
    static FRAMES: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
}

/// Whether the calling thread's work is recorded now: the side of the innermost framework frame open on it,
/// else whether a range is open or a graph is being captured.
#[inline]
pub fn thread_recording() -> bool {
    if !in_use() {
        return true;
    }
    // A thread's locals may be gone while it exits: it records as outside a frame then.
    let (bits, depth) = FRAMES.try_with(Cell::get).unwrap_or((0, 0));
    match depth {
        0 => capturing() || recording(),
        d => bits >> (d.min(FRAME_BITS) - 1) & 1 == 1,
    }
}

/// A framework frame (an op, a call) begins on this thread; whether its records are written.
pub fn frame_began() -> bool {
    if !in_use() {
        return true;
    }
    let kept = thread_recording();
    let _ = FRAMES.try_with(|frames| {
        let (bits, depth) = frames.get();
        let bits = if depth < FRAME_BITS { bits | (kept as u64) << depth } else { bits };
        frames.set((bits, depth.saturating_add(1)));
    });
    kept
}

/// The innermost framework frame of this thread ends; whether its end is written (as its begin was).
pub fn frame_ended() -> bool {
    if !in_use() {
        return true;
    }
    let ended = FRAMES.try_with(|frames| {
        let (bits, depth) = frames.get();
        let Some(inner) = depth.checked_sub(1) else { return recording() };
        let kept = bits >> inner.min(FRAME_BITS - 1) & 1 == 1;
        let bits = if inner < FRAME_BITS { bits & !(1 << inner) } else { bits };
        frames.set((bits, inner));
        kept
    });
    ended.unwrap_or_else(|_| recording())
}

/// Whether a record is kept outside a range: what the analysis of a later range needs. Every kind is named:
/// a new one must say.
fn kept_outside(record: &Record) -> bool {
    match record {
        Record::Stream { .. }
        | Record::Event { .. }
        | Record::Function { .. }
        | Record::Alloc { .. }
        | Record::Free { .. }
        | Record::GpuTime { .. }
        | Record::CaptureStats { .. }
        | Record::Module { .. }
        | Record::Callsite { .. }
        | Record::FrameLine { .. }
        | Record::HostRelease { .. }
        | Record::HostAcquire { .. }
        | Record::HostWatch { .. }
        | Record::RangeBegin { .. }
        | Record::RangeEnd { .. } => true,
        // A graph's construction is state; its launch is work.
        Record::Graph { graph, .. } => !matches!(graph, GraphRecord::Launch { .. }),
        Record::Kernel { .. }
        | Record::Memcpy { .. }
        | Record::Memset { .. }
        | Record::PitchedMemcpy { .. }
        | Record::EventRecord { .. }
        | Record::Wait { .. }
        | Record::Sync { .. }
        | Record::Query { .. }
        | Record::OpBegin
        | Record::HostAccess { .. }
        | Record::HostFunc { .. }
        | Record::Raw { .. } => false,
    }
}

/// The kinds of framework records, as far as ranges care: the caching allocator's blocks and the lines that
/// created streams and events are state; op and call frames follow their thread's frames; the rest is work.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FrameworkRecord {
    State,
    OpEnd,
    CallBegin,
    CallEnd,
    Work,
}

impl FrameworkRecord {
    /// The kind of a framework record's text, from its `type`.
    pub fn of(text: &str) -> FrameworkRecord {
        let Some(at) = text.find("\"type\"") else { return FrameworkRecord::Work };
        let rest = text[at + 6..].trim_start().trim_start_matches(':').trim_start();
        let kind = rest.strip_prefix('"').and_then(|r| r.split('"').next()).unwrap_or("");
        use streamtrace_format::RecordKind as K;
        match K::parse(kind) {
            Ok(K::Alloc | K::Free | K::Creation) => FrameworkRecord::State,
            Ok(K::OpEnd) => FrameworkRecord::OpEnd,
            Ok(K::CallBegin) => FrameworkRecord::CallBegin,
            Ok(K::CallEnd) => FrameworkRecord::CallEnd,
            _ => FrameworkRecord::Work,
        }
    }
}

/// Whether a framework record is written, moving the thread's frames as it opens or closes one.
pub fn keeps_framework_record(kind: FrameworkRecord) -> bool {
    match kind {
        FrameworkRecord::State => true,
        FrameworkRecord::CallBegin => frame_began(),
        FrameworkRecord::OpEnd | FrameworkRecord::CallEnd => frame_ended(),
        FrameworkRecord::Work => thread_recording(),
    }
}

/// What a process's state keeps for its ranges: which range its trace last said was open, and the stream
/// each event was last recorded on, so that a range begins with the events recorded before it.
#[derive(Default)]
pub struct Edges {
    /// The generation of the range the trace is in (None: outside ranges).
    announced: Option<u32>,
    /// Ranges this trace has begun.
    written: u32,
    /// Each event's last record: its stream and thread.
    last_recorded: HashMap<u64, (u64, u64)>,
}

impl Edges {
    /// Writes the range edges passed since the last record into `pending`, before the record of `call`: the
    /// end of the range the trace was in, the beginning of the one open now, and with it a record of every
    /// event recorded before it, on the stream it was last recorded on (what a wait inside the range on
    /// such an event needs: it orders nothing that the range holds, and is no wait on a never-recorded event).
    pub fn before(&mut self, call: Call, pending: &mut Batch) {
        if in_use() {
            let name = config().and_then(|c| c.nvtx.as_ref()).map(|n| n.name.as_str());
            self.move_to(open_now(), name, call, pending);
        }
    }

    /// Writes the edges from the range the trace is in to range `now` (None: outside ranges).
    fn move_to(&mut self, now: Option<u32>, name: Option<&str>, call: Call, pending: &mut Batch) {
        if now == self.announced {
            return;
        }
        let edge = Call { site: 0, correlation: 0, ..call };
        if self.announced.is_some() {
            pending.push(edge, Record::RangeEnd { index: self.written });
        }
        if now.is_some() {
            self.written += 1;
            pending.push(edge, Record::RangeBegin { index: self.written, name: name.map(Into::into) });
            let mut recorded: Vec<_> = self.last_recorded.iter().map(|(&e, &(s, t))| (e, s, t)).collect();
            recorded.sort_unstable();
            for (event, stream, tid) in recorded {
                let call = Call { tid, ..edge };
                pending.push(call, Record::EventRecord { event, stream, api: "cuEventRecord (before the range)" });
            }
        }
        self.announced = now;
    }

    /// Whether `record` of a thread whose work is not recorded now is written, noting what later ranges need
    /// of it (an event's last record, a stream capture's begin and end) either way.
    pub fn keeps(&mut self, call: Call, record: &Record) -> bool {
        match record {
            Record::EventRecord { event, stream, .. } => {
                self.last_recorded.insert(*event, (*stream, call.tid));
            }
            Record::Event { handle } => {
                // A new event at the handle of a destroyed one has not been recorded.
                self.last_recorded.remove(handle);
            }
            Record::Graph { graph: GraphRecord::CaptureBegin { .. }, .. } => {
                CAPTURING.fetch_add(1, Ordering::AcqRel);
            }
            Record::Graph { graph: GraphRecord::CaptureEnd { .. }, .. } => {
                let _ = CAPTURING.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            }
            _ => {}
        }
        thread_recording() || kept_outside(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_environment_says_the_trigger_the_limit_and_the_window() {
        assert_eq!(Config::from_env(env(&[])), Ok(None));
        let config = Config::from_env(env(&[(launch::ENV_RANGES, "cudaProfilerApi")])).unwrap().unwrap();
        assert_eq!(config.trigger, RangeTrigger::ProfilerApi);
        assert_eq!(config.limit, Some(1), "stop by default, as nsys");
        assert!(config.window.is_whole_run());
        let config = Config::from_env(env(&[
            (launch::ENV_RANGES, "nvtx"),
            (launch::ENV_NVTX_CAPTURE, "train_step@*"),
            (launch::ENV_RANGE_END, "repeat:3"),
            (launch::ENV_RANGE_WINDOW, "100,250"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.nvtx, Some(NvtxName { name: "train_step".into(), domain: NvtxDomain::Any }));
        assert_eq!(config.limit, Some(3));
        assert_eq!(config.window, Window { start_ns: 100, end_ns: Some(250) });
        assert!(!config.window.contains(99) && config.window.contains(100) && !config.window.contains(250));
        let repeat = Config::from_env(env(&[(launch::ENV_RANGES, "time"), (launch::ENV_RANGE_END, "repeat")]));
        assert_eq!(repeat.unwrap().unwrap().limit, None);
        assert!(Config::from_env(env(&[(launch::ENV_RANGES, "nvtx")])).is_err(), "nvtx without a name");
        assert!(Config::from_env(env(&[(launch::ENV_RANGES, "sometimes")])).is_err());
        let bad_end = env(&[(launch::ENV_RANGES, "time"), (launch::ENV_RANGE_END, "repeat:0")]);
        assert!(Config::from_env(bad_end).is_err());
        assert!(Config::from_env(env(&[(launch::ENV_RANGES, "time"), (launch::ENV_RANGE_WINDOW, "soon")])).is_err());
    }

    #[test]
    fn nvtx_names_match_in_their_domain() {
        let plain = NvtxName::parse("step");
        assert!(plain.matches("step", None));
        assert!(!plain.matches("step", Some("NCCL")), "another domain");
        assert!(!plain.matches("step 2", None));
        let named = NvtxName::parse("step@trainer");
        assert!(named.matches("step", Some("trainer")) && !named.matches("step", None));
        let any = NvtxName::parse("a@b@*");
        assert_eq!(any.name, "a@b");
        assert!(any.matches("a@b", None) && any.matches("a@b", Some("x")));
    }

    #[test]
    fn framework_records_are_told_apart_by_their_type() {
        assert_eq!(FrameworkRecord::of(r#"{"type":"alloc","id":3}"#), FrameworkRecord::State);
        assert_eq!(FrameworkRecord::of(r#"{"type": "free"}"#), FrameworkRecord::State);
        assert_eq!(FrameworkRecord::of(r#"{"type":"creation"}"#), FrameworkRecord::State);
        assert_eq!(FrameworkRecord::of(r#"{"type":"op_end","name":"x"}"#), FrameworkRecord::OpEnd);
        assert_eq!(FrameworkRecord::of(r#"{"type":"call_begin"}"#), FrameworkRecord::CallBegin);
        assert_eq!(FrameworkRecord::of(r#"{"type":"call_end"}"#), FrameworkRecord::CallEnd);
        assert_eq!(FrameworkRecord::of(r#"{"type":"host_access"}"#), FrameworkRecord::Work);
        assert_eq!(FrameworkRecord::of("{}"), FrameworkRecord::Work);
    }

    #[test]
    fn a_range_begins_with_the_events_recorded_before_it_and_each_range_is_its_own() {
        let mut edges = Edges::default();
        let mut pending = Batch::default();
        let call = |tid| Call { tid, time_ns: 5, correlation: 9, site: 3 };
        edges.keeps(call(1), &Record::EventRecord { event: 70, stream: 40, api: "cuEventRecord" });
        edges.keeps(call(2), &Record::EventRecord { event: 71, stream: 41, api: "cuEventRecord" });
        edges.keeps(call(2), &Record::EventRecord { event: 70, stream: 42, api: "cuEventRecord" });
        edges.keeps(call(2), &Record::EventRecord { event: 72, stream: 42, api: "cuEventRecord" });
        edges.keeps(call(2), &Record::Event { handle: 72 });
        edges.move_to(None, None, call(1), &mut pending);
        assert!(pending.is_empty(), "outside ranges nothing moves");
        edges.move_to(Some(1), Some("step"), call(3), &mut pending);
        edges.move_to(Some(1), Some("step"), call(3), &mut pending);
        // A range that ends and another that begins before the next record: two ranges.
        edges.move_to(Some(2), Some("step"), call(3), &mut pending);
        edges.move_to(None, Some("step"), call(3), &mut pending);
        let written: Vec<String> = pending.entries.iter().map(|e| format!("{:?} {}", e.record, e.call.tid)).collect();
        assert_eq!(
            written,
            [
                "RangeBegin { index: 1, name: Some(\"step\") } 3",
                "EventRecord { event: 70, stream: 42, api: \"cuEventRecord (before the range)\" } 2",
                "EventRecord { event: 71, stream: 41, api: \"cuEventRecord (before the range)\" } 2",
                "RangeEnd { index: 1 } 3",
                "RangeBegin { index: 2, name: Some(\"step\") } 3",
                "EventRecord { event: 70, stream: 42, api: \"cuEventRecord (before the range)\" } 2",
                "EventRecord { event: 71, stream: 41, api: \"cuEventRecord (before the range)\" } 2",
                "RangeEnd { index: 2 } 3",
            ]
        );
        assert!(pending.entries.iter().all(|e| e.call.site == 0 && e.call.correlation == 0));
    }

    #[test]
    fn what_later_ranges_need_is_kept_outside_them() {
        let launch = GraphRecord::Launch { exec: 1, stream: 2 };
        assert!(!kept_outside(&Record::Graph { graph: launch, api: "cuGraphLaunch" }));
        assert!(kept_outside(&Record::Graph { graph: GraphRecord::Create { graph: 1 }, api: "cuGraphCreate" }));
        assert!(kept_outside(&Record::Event { handle: 1 }));
        assert!(!kept_outside(&Record::Wait { stream: 1, event: 2, api: "cuStreamWaitEvent" }));
        assert!(!kept_outside(&Record::OpBegin));
    }
}
