//! The terminal report, in the manner of ThreadSanitizer: one block per finding, then a summary line. A finding
//! opens with a header line (its kind and the two operations' short names), lists each access with its frames
//! numbered one per line (with the source text where the file is readable here), describes each stream once in
//! a block of its own and names it by its handle everywhere else, then says why nothing orders the two and the
//! fix. Every line fits [`WIDTH`] columns (longer ones are wrapped, indented under their start). What the
//! analysis saw besides (operation counts, the unordered pair total, the capture's cost, the access tiers) is
//! printed with `--verbose` (and is in the JSON report). Every piece of text that comes from the trace goes
//! through [`printable`] on its way out.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use super::fix::fix_text_in;
use super::{describe_why_in, printable, short_label, stream_label, Report, Words};
use crate::analysis::Analysis;
use crate::findings::{
    AccessAction, AccessExtent, EdgeKind, OpClass, OpOccurrence, RaceFinding, SiteId, UnrecordedWait,
};
use crate::hb::HostOrder;
use crate::ingest::Counter;
use crate::model::{GraphBuild, SourceLocation, StreamId, StreamKind};
use crate::names::short::{short_name, stream_number};
use crate::resolve::Lookup;

/// The widest line the report prints.
pub const WIDTH: usize = 120;
/// How many unordered-pair groups the report lists.
const PAIR_GROUPS_SHOWN: usize = 10;

/// The text report; `verbose` adds what the analysis saw besides its findings.
#[derive(Copy, Clone, Debug, Default)]
pub struct TextReport {
    pub verbose: bool,
}

impl TextReport {
    /// The report without `--verbose`.
    pub const PLAIN: TextReport = TextReport { verbose: false };
}

fn access_word(action: AccessAction) -> &'static str {
    match action {
        AccessAction::Read => "Read",
        AccessAction::Write => "Write",
        AccessAction::Free => "Free",
        AccessAction::Alloc => "Allocation",
    }
}

/// A path as the report shows it: relative to the working folder when it lies below it.
fn relative(file: &str) -> String {
    let below =
        std::env::current_dir().ok().and_then(|dir| Path::new(file).strip_prefix(dir).ok().map(Path::to_path_buf));
    below.map_or_else(|| file.to_string(), |p| p.display().to_string())
}

/// A line as the text report shows it: `file:line in function`, the path relative, printable.
fn place(source: &SourceLocation) -> String {
    let shown = SourceLocation { file: relative(&source.file).into(), ..source.clone() };
    printable(&shown.to_string()).into_owned()
}

/// The source files the report quotes, each read once.
#[derive(Default)]
struct SourceText(HashMap<String, Option<Vec<String>>>);

impl SourceText {
    /// The text of `source`'s line, when its file is readable here.
    fn line(&mut self, source: &SourceLocation) -> Option<String> {
        let number = source.line? as usize;
        let lines = self.0.entry(source.file.to_string()).or_insert_with(|| {
            let text = std::fs::read(&*source.file).ok()?;
            Some(String::from_utf8_lossy(&text).lines().map(str::to_string).collect())
        });
        let text = lines.as_ref()?.get(number.checked_sub(1)?)?.trim();
        (!text.is_empty()).then(|| text.to_string())
    }
}

/// Who did an operation, in the access's heading: `kernel write_kernel`, `mul (kernel vectorized_elementwise_kernel)`,
/// `memcpy HtoD`.
fn who(look: Lookup, id: SiteId) -> String {
    let site = look.site(id);
    let own = match site.class {
        OpClass::Kernel | OpClass::GraphNode | OpClass::GraphLaunch => {
            format!("{} {}", site.class.as_str(), short_name(&site.name))
        }
        _ => site.name.to_string(),
    };
    match &site.region {
        Some(_) if site.class != OpClass::HostAccess => format!("{} ({own})", short_label(site)),
        _ => own,
    }
}

/// Where an operation ran, in the access's heading: `on stream 0x55d360add950, host thread 936`, or
/// `on host thread 936`.
fn ran_on(look: Lookup, id: SiteId) -> String {
    let tid = look.tid(look.site(id).thread);
    match look.stream_of(id) {
        Some(stream) if stream.kind != StreamKind::HostThread => {
            format!("on {}, host thread {tid}", stream_label(stream))
        }
        _ => format!("on host thread {tid}"),
    }
}

/// An operation's frames, numbered, each with its source text when the file is readable here; a graph node
/// then says where its graph was launched.
fn write_frames(out: &mut String, look: Lookup, id: SiteId, files: &mut SourceText) {
    let frames = look.frames(id);
    for (number, frame) in frames.iter().enumerate() {
        let _ = writeln!(out, "    #{number} {}", place(frame));
        if let Some(text) = files.line(frame) {
            let _ = writeln!(out, "         | {}", printable(&text));
        }
    }
    if frames.is_empty() {
        let _ = writeln!(out, "    #0 (no source line in the trace)");
    }
    if let Some(graph) = &look.site(id).graph {
        let made = match graph.build {
            GraphBuild::Captured => "captured into",
            GraphBuild::Explicit => "added to",
            GraphBuild::Inline => "in",
        };
        let launched = look.launched_at(id).map_or("an unknown line".to_string(), place);
        let _ = writeln!(out, "    {made} {}, launched at {launched}", printable(&graph.graph));
    }
}

fn write_occurrence(
    out: &mut String,
    look: Lookup,
    heading: &str,
    op: &OpOccurrence,
    race: &RaceFinding,
    files: &mut SourceText,
) {
    let _ = writeln!(
        out,
        "  {heading} of {} bytes at {:#x} by {} {}:",
        race.range.len,
        race.range.start,
        printable(&who(look, op.site)),
        ran_on(look, op.site)
    );
    write_frames(out, look, op.site, files);
}

/// A strided access says which bytes of its extent it touched (tier T2).
fn write_view(out: &mut String, view: Option<&str>) {
    if let Some(view) = view {
        let _ = writeln!(out, "    as the strided view {}", printable(view));
    }
}

/// The streams a finding names, each described once: its handle, kind, and the name people know it by.
fn write_streams(out: &mut String, look: Lookup, streams: &[Option<StreamId>]) {
    let mut shown: Vec<StreamId> = Vec::new();
    for id in streams.iter().flatten() {
        if !shown.contains(id) && look.stream(*id).is_some_and(|s| s.kind != StreamKind::HostThread) {
            shown.push(*id);
        }
    }
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(out, "  Streams:");
    for id in shown {
        let Some(stream) = look.stream(id) else { continue };
        let name = stream.name.known_as.as_ref().map_or(String::new(), |name| format!(": {}", printable(name)));
        let _ = writeln!(out, "    {} ({}){name}", stream_label(stream), stream.kind.as_str());
    }
}

/// Where the racing bytes are: the block holding them (its kind and where it was created), and for a
/// caching-allocator block handed out again while the earlier access still used the memory, the freed block.
fn write_location(out: &mut String, look: Lookup, race: &RaceFinding) {
    let Some(alloc) = &race.allocation else {
        let _ = writeln!(out, "  Location: {} is in no allocation the trace recorded", race.range);
        return;
    };
    let label = alloc.label.as_deref().map_or(String::new(), |l| format!(" `{}`", printable(l)));
    let source = look.allocation_source(alloc).map_or(String::new(), |s| format!(", allocated at {}", place(s)));
    let _ = writeln!(
        out,
        "  Location: allocation {}{label} {} ({} bytes, {}){source}",
        alloc.handle,
        alloc.range,
        alloc.range.len,
        alloc.kind.as_str()
    );
    if let Some(old) = &alloc.reuses {
        let at = |label: &str, s: &Option<SourceLocation>| {
            s.as_ref().map_or(String::new(), |s| format!(", {label} {}", place(s)))
        };
        let _ = writeln!(
            out,
            "  It reuses the memory of allocation {} {}{}{}, which the previous access used: that block went back to the pool while its stream could still use it (in PyTorch, `tensor.record_stream(stream)` before freeing keeps it)",
            old.handle,
            old.range,
            at("allocated at", &old.source),
            at("freed at", &old.freed_at)
        );
    }
}

/// What a race ordered only by timing is, said under its heading.
const TIMING_ONLY: &str = "ordered only by timing, or by host synchronization the capture cannot see";

fn write_race(out: &mut String, look: Lookup, race: &RaceFinding, timing_only: bool, files: &mut SourceText) {
    let (earlier, later) = (look.site(race.earlier.site), look.site(race.later.site));
    let names = format!("{} and {}", printable(&short_label(earlier)), printable(&short_label(later)));
    let _ = writeln!(out, "==================");
    if timing_only {
        let _ = writeln!(out, "WARNING: streamtrace: data race {TIMING_ONLY} ({}) between {names}", race.kind.as_str());
    } else {
        let _ = writeln!(out, "WARNING: streamtrace: data race ({}) between {names}", race.kind.as_str());
    }
    write_occurrence(out, look, access_word(race.later.action), &race.later, race, files);
    write_view(out, race.later_view.as_deref());
    let _ = writeln!(out);
    let previous = format!("Previous {}", access_word(race.earlier.action).to_lowercase());
    write_occurrence(out, look, &previous, &race.earlier, race, files);
    write_view(out, race.earlier_view.as_deref());
    let _ = writeln!(out);
    write_location(out, look, race);
    write_streams(out, look, &[later.stream, earlier.stream]);
    let _ = writeln!(out);
    let _ = writeln!(out, "  Why: {}", printable(&describe_why_in(look, race, Words::Short)));
    if timing_only {
        let _ = writeln!(
            out,
            "  Only the timing of this run orders the two host calls: taken in their timestamp order they are ordered, but no host synchronization the capture saw (a join, a mutex, a condition variable, a semaphore) hands the work over between the threads. Unless something it cannot see does (a std::atomic flag, a spin loop, a futex), this is a race."
        );
    }
    let _ = writeln!(out, "  Fix: {}", printable(&fix_text_in(look, race, Words::Short)));
    if race.extent == AccessExtent::WholeBlockArguments {
        let _ = writeln!(
            out,
            "  Note: this race rests on a kernel's pointer argument taken for its whole allocation block: the capture does not know which bytes of the block the kernel touched (a slice of its own, one member of a struct of buffers). `streamtrace capture --exact` records the bytes each kernel touched and confirms or clears it."
        );
    }
    if race.count > 1 {
        let _ = writeln!(out, "  Seen {} times (first occurrence shown).", race.count);
    }
    let _ = writeln!(out, "==================");
}

/// The event a wait waited on, by its handle, and the name people know it by when known.
fn event_label(wait: &UnrecordedWait) -> String {
    format!("event {}", stream_number(wait.event))
}

fn write_wait_before_record(out: &mut String, look: Lookup, wait: &UnrecordedWait, files: &mut SourceText) {
    let _ = writeln!(out, "==================");
    let _ = writeln!(out, "WARNING: streamtrace: wait on an event before its record");
    let _ = writeln!(
        out,
        "  {} {} waits on {}, which is recorded only later:",
        printable(&wait.wait_name(look)),
        ran_on(look, wait.wait.site),
        event_label(wait)
    );
    write_frames(out, look, wait.wait.site, files);
    let _ = writeln!(out);
    if let Some(name) = look.event_name(wait.event_id) {
        let _ = writeln!(out, "  Events:");
        let _ = writeln!(out, "    {}: {}", event_label(wait), printable(name));
    }
    write_streams(out, look, &[look.site(wait.wait.site).stream]);
    let _ = writeln!(
        out,
        "  The wait orders nothing: CUDA takes the event as it is at the wait. Record the event before waiting on it."
    );
    if wait.count > 1 {
        let _ = writeln!(out, "  Seen {} times.", wait.count);
    }
    let _ = writeln!(out, "==================");
}

impl UnrecordedWait {
    /// The wait's call as the report names it.
    fn wait_name(&self, look: Lookup) -> String {
        look.site(self.wait.site).name.to_string()
    }
}

/// Each line of `text` cut to at most `width` columns: broken at the last space that fits, the rest indented four
/// columns deeper than the line's start (a word longer than a line is cut where the line ends).
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let hanging = (indent + 4).min(width / 2);
        let mut rest = line;
        let mut first = true;
        // Nearly every line is ASCII, where a column is a byte: its cuts are found without walking characters.
        let ascii = line.is_ascii();
        loop {
            let room = if first { width } else { width - hanging };
            if !first {
                out.extend(std::iter::repeat(' ').take(hanging));
            }
            // Most lines fit, and a text of no more bytes than columns has no more characters: not counted.
            if rest.len() <= room || (!ascii && rest.chars().count() <= room) {
                out.push_str(rest);
                out.push('\n');
                break;
            }
            let cut_at = if ascii { room } else { rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i) };
            let head = &rest[..cut_at];
            let cut = match head.rfind(' ') {
                Some(space) if !head[..space].trim().is_empty() && space > indent => space,
                _ => cut_at,
            };
            out.push_str(rest[..cut].trim_end());
            out.push('\n');
            rest = rest[cut..].trim_start();
            first = false;
            if rest.is_empty() {
                break;
            }
        }
    }
    out
}

/// What the capture cost the program: per recorded call on its threads, and the one-time set-up apart (captures
/// before the set-up was counted apart have it inside the calls' time, which the line then says).
fn write_capture_cost(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    let recorded_calls = analysis.import.get(Counter::CaptureRecordedCalls);
    if recorded_calls == 0 {
        return Ok(());
    }
    let ns = analysis.import.get(Counter::CaptureCallbackNs);
    let setup = analysis.import.bumped(Counter::CaptureSetupNs);
    let apart = match setup {
        Some(setup) => format!("; one-time set-up apart: {:.2} ms (loading CUPTI, creating the trace file and its writer)", setup as f64 / 1e6),
        None => "; this capture counted its one-time set-up into the calls, so a short program's calls look costlier than they are".to_string(),
    };
    writeln!(
        out,
        "Capture cost: {recorded_calls} driver calls recorded, {:.2} ms in the capture library ({:.2} us a call, on the program's threads){apart}.",
        ns as f64 / 1e6,
        ns as f64 / 1e3 / recorded_calls as f64
    )
}

/// What the capture's host watch saw of native code's own accesses, and what it cannot see (docs/capture.md, host
/// watch). Said once a trace's capture watched something; a watch the system refused is a data-loss warning.
fn write_host_watch(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    let guarded = analysis.import.get(Counter::CaptureHostWatchGuarded);
    let managed = analysis.import.get(Counter::CaptureHostWatchManaged);
    if guarded == 0 && managed == 0 {
        return Ok(());
    }
    let faults = analysis.import.get(Counter::CaptureHostWatchFaults);
    let windows = analysis.import.get(Counter::CaptureHostWatchWindows);
    write!(
        out,
        "Host watch: {faults} host access{} of native code seen as faults",
        if faults == 1 { "" } else { "es" }
    )?;
    if guarded > 0 {
        write!(
            out,
            " ({windows} guarded window{}). Pinned, registered and managed buffers are guarded from a copy's or kernel's call until the host learns it is done: the first load or store in each window is seen, on the whole pages inside the copy's range; later accesses in the same window, a buffer's partial pages and memory the capture did not see allocated are not",
            if windows == 1 { "" } else { "s" }
        )?;
    }
    if managed > 0 {
        write!(
            out,
            ". Managed memory also through CPU page faults from CUPTI where the driver delivers them: a page already on the host does not fault, so only the first host touch after the GPU had the page is seen, taken as a read by the thread that last issued work"
        )?;
    }
    writeln!(out, ".")
}

impl Report for TextReport {
    fn write(&self, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
        let mut wrapped = WrappedLines { out, text: String::new() };
        self.render(analysis, &mut wrapped)?;
        wrapped.finish()
    }
}

/// The report's text wrapped and written as it is rendered, a finding at a time, so that a report of many
/// findings is never held whole (it was twice over: as rendered and as wrapped: 56 MB each on 10 M synthetic
/// operations). Lines are wrapped one by one, so wrapping the complete lines as they come writes what wrapping
/// the whole text would.
struct WrappedLines<'a> {
    out: &'a mut dyn io::Write,
    text: String,
}

impl WrappedLines<'_> {
    /// Wraps and writes the complete lines rendered so far.
    fn flush_lines(&mut self) -> io::Result<()> {
        let Some(end) = self.text.rfind('\n') else { return Ok(()) };
        self.out.write_all(wrap(&self.text[..=end], WIDTH).as_bytes())?;
        self.text.drain(..=end);
        Ok(())
    }

    /// Wraps and writes the rest.
    fn finish(self) -> io::Result<()> {
        self.out.write_all(wrap(&self.text, WIDTH).as_bytes())
    }
}

/// A note on waits set aside as info (`what` they are), when there are any: how many, and that they are no
/// findings.
fn note_harmless_waits(out: &mut String, waits: &[UnrecordedWait], what: &str) {
    if waits.is_empty() {
        return;
    }
    let total: u64 = waits.iter().map(|w| w.count).sum();
    let plural = if total == 1 { "" } else { "s" };
    let _ =
        writeln!(out, "Note: {total} stream wait{plural} {what}, so they are not findings (listed in --format json).");
}

/// Findings rendered in one piece: few enough that two pieces in flight stay small (about a kilobyte a finding,
/// half a megabyte a piece), many enough that starting a thread for one is nothing beside rendering it.
const FINDINGS_PER_PIECE: usize = 512;

/// Renders `items` in order, a piece of [`FINDINGS_PER_PIECE`] at a time, each wrapped and written as it is done.
/// With many findings two pieces are rendered at once, on two threads (the reader's core is idle by now: a
/// report of 54,000 races took 0.2 s of a 2.8 s analysis on one); the output is the same either way.
fn write_in_order<T: Sync>(
    items: &[T],
    out: &mut dyn io::Write,
    files: &mut [SourceText; 2],
    render: impl Fn(&mut String, &T, &mut SourceText) + Sync,
) -> io::Result<()> {
    let render_piece = |piece: &[T], files: &mut SourceText| {
        let mut text = String::new();
        piece.iter().for_each(|item| render(&mut text, item, files));
        wrap(&text, WIDTH)
    };
    let two_threads =
        items.len() > FINDINGS_PER_PIECE && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if !two_threads {
        return items
            .chunks(FINDINGS_PER_PIECE)
            .try_for_each(|piece| out.write_all(render_piece(piece, &mut files[0]).as_bytes()));
    }
    let [first_files, second_files] = files;
    for pair in items.chunks(2 * FINDINGS_PER_PIECE) {
        let (first, second) = pair.split_at(pair.len().min(FINDINGS_PER_PIECE));
        let (first_text, second_text) = std::thread::scope(|scope| {
            let other = scope.spawn(|| render_piece(second, second_files));
            let first_text = render_piece(first, first_files);
            (first_text, other.join())
        });
        out.write_all(first_text.as_bytes())?;
        match second_text {
            Ok(text) => out.write_all(text.as_bytes())?,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    Ok(())
}

impl TextReport {
    fn render(&self, analysis: &Analysis, wrapped: &mut WrappedLines) -> io::Result<()> {
        let (findings, look) = (&analysis.findings, analysis.lookup());
        // One cache of source files per thread that renders.
        let mut files = [SourceText::default(), SourceText::default()];
        if !analysis.stats.has_addresses {
            write_without_addresses(&mut wrapped.text, analysis);
        }
        wrapped.flush_lines()?;
        write_in_order(&findings.races, wrapped.out, &mut files, |out, race, files| {
            write_race(out, look, race, false, files)
        })?;
        write_in_order(&findings.timing_only_races, wrapped.out, &mut files, |out, race, files| {
            write_race(out, look, race, true, files)
        })?;
        write_in_order(&findings.unrecorded_waits, wrapped.out, &mut files, |out, wait, files| {
            write_wait_before_record(out, look, wait, files)
        })?;
        self.render_notes(analysis, &mut wrapped.text).map_err(io::Error::other)
    }

    /// What follows the findings: notes, warnings and the summary.
    fn render_notes(&self, analysis: &Analysis, out: &mut String) -> std::fmt::Result {
        let (findings, look) = (&analysis.findings, analysis.lookup());
        note_harmless_waits(
            out,
            &findings.waits_on_never_recorded_events,
            "on events that nothing records: CUDA makes them no-ops and NCCL makes them on purpose",
        );
        note_harmless_waits(
            out,
            &findings.waits_before_a_pipelines_first_record,
            "came before the first record of an event that the program waits on again once recorded: the first turn of a pipeline, whose first stage has no stage before it to wait for. CUDA makes them no-ops",
        );
        if !findings.waits_with_unknown_record.is_empty() {
            let total: u64 = findings.waits_with_unknown_record.iter().map(|w| w.count).sum();
            let streams: std::collections::BTreeSet<_> =
                findings.waits_with_unknown_record.iter().filter_map(|w| look.site(w.wait.site).stream).collect();
            let _ = writeln!(
                out,
                "Note: {total} stream wait{} on {} stream{} on events whose record is not in this trace: they order nothing here, so some unordered pairs may in fact be ordered (nsys profile --cuda-event-trace=true records the records; --verbose lists the waits).",
                if total == 1 { "" } else { "s" },
                streams.len(),
                if streams.len() == 1 { "" } else { "s" }
            );
            if self.verbose {
                for wait in &findings.waits_with_unknown_record {
                    let _ = writeln!(
                        out,
                        "  {} {} on {} x{}",
                        printable(&wait.wait_name(look)),
                        ran_on(look, wait.wait.site),
                        event_label(wait),
                        wait.count
                    );
                }
            }
        }
        write_host_watch(out, analysis)?;
        write_exact_kernels(out, &analysis.stats.exact_kernels)?;
        if analysis.stats.assumed_view_overlaps > 0 {
            let _ = writeln!(
                out,
                "warning: {} overlap questions between strided views ran past their step budget and were taken as overlapping: a race on such views may not be one",
                analysis.stats.assumed_view_overlaps
            );
        }
        for lost in analysis.import.data_loss() {
            let first = lost.first.as_deref().map(|at| format!("; first at {}", printable(at))).unwrap_or_default();
            let _ = writeln!(
                out,
                "warning: {} {} ({}{first}): findings may be incomplete",
                lost.count,
                lost.counter.description(),
                lost.counter.name()
            );
        }
        write_missing_binaries(out, analysis)?;
        write_host_order(out, analysis)?;
        if self.verbose {
            write_seen(out, analysis)?;
        }
        write_summary(out, analysis);
        Ok(())
    }
}

/// The summary line: races and waits before their record, or, without addresses, the candidates.
fn write_summary(out: &mut String, analysis: &Analysis) {
    let findings = &analysis.findings;
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let trace = printable(&analysis.trace);
    if !analysis.stats.has_addresses {
        let pairs = findings.stream_pair_totals.pairs;
        let _ = writeln!(
            out,
            "SUMMARY: streamtrace: races cannot be decided without addresses; {pairs} unordered cross-stream operation pair{} {} candidates, in {trace}",
            if pairs == 1 { "" } else { "s" },
            if pairs == 1 { "is a race candidate" } else { "are race" },
        );
        return;
    }
    let occurrences: u64 = findings.races.iter().map(|r| r.count).sum();
    let mut line = format!(
        "SUMMARY: streamtrace: {} race{} ({occurrences} occurrence{})",
        findings.races.len(),
        plural(findings.races.len()),
        if occurrences == 1 { "" } else { "s" },
    );
    if !findings.unrecorded_waits.is_empty() {
        let waits = findings.unrecorded_waits.len();
        let _ = write!(line, ", {waits} wait{} before the event's record", plural(waits));
    }
    let _ = writeln!(out, "{line} in {trace}");
    if analysis.host_order == HostOrder::PerThread && analysis.host_sync_recorded {
        let timing = &findings.timing_only_races;
        let occurrences: u64 = timing.iter().map(|r| r.count).sum();
        let _ = writeln!(
            out,
            "SUMMARY: streamtrace: {} race{} ({occurrences} occurrence{}) {TIMING_ONLY}",
            timing.len(),
            plural(timing.len()),
            if occurrences == 1 { "" } else { "s" },
        );
    }
}

/// A trace without addresses (an Nsight Systems export): said at the top, with the unordered cross-stream
/// operation pairs, grouped by their sites and counted, as the candidates.
fn write_without_addresses(out: &mut String, analysis: &Analysis) {
    let (findings, look) = (&analysis.findings, analysis.lookup());
    let pairs = findings.stream_pair_totals.pairs;
    if analysis.cut_short() {
        let _ = writeln!(
            out,
            "No addresses were read from this recording, which was cut short (see the warning below): what it would have recorded is unknown."
        );
    } else {
        let _ = writeln!(
            out,
            "No addresses in this trace (an Nsight Systems export records none): races cannot be decided, only pairs of operations on different streams that nothing orders. `streamtrace capture` records the addresses."
        );
    }
    if findings.unordered_pairs.is_empty() {
        let _ = writeln!(
            out,
            "No unordered cross-stream operation pairs: every pair of operations on two streams is ordered."
        );
        return;
    }
    let _ = writeln!(
        out,
        "Race candidates: {pairs} unordered cross-stream operation pair{}, by the two operations' sites (most first):",
        if pairs == 1 { "" } else { "s" }
    );
    for group in findings.unordered_pairs.iter().take(PAIR_GROUPS_SHOWN) {
        let side = |id: SiteId| {
            let site = look.site(id);
            let stream = look.stream_of(id).map_or("host".to_string(), stream_label);
            let range = site.region.as_ref().map_or(String::new(), |r| format!(" in NVTX range `{}`", printable(r)));
            format!("{} {} on {stream}{range}", site.class.as_str(), printable(&super::shorten(&site.name)))
        };
        let _ = writeln!(out, "  {:>8} x  {}  ||  {}", group.pairs, side(group.earlier), side(group.later));
    }
    if findings.unordered_pairs.len() > PAIR_GROUPS_SHOWN {
        let _ = writeln!(
            out,
            "  ... {} more groups (see --format json)",
            findings.unordered_pairs.len() - PAIR_GROUPS_SHOWN
        );
    }
    let mut streams: Vec<StreamId> = Vec::new();
    for group in findings.unordered_pairs.iter().take(PAIR_GROUPS_SHOWN) {
        for id in [group.earlier, group.later] {
            if let Some(stream) = look.site(id).stream.filter(|s| !streams.contains(s)) {
                streams.push(stream);
            }
        }
    }
    let mut block = String::new();
    write_streams(&mut block, look, &streams.iter().copied().map(Some).collect::<Vec<_>>());
    out.push_str(&block);
    if analysis.import.get(Counter::NsysStreamFlagsUnknown) > 0 {
        let _ = writeln!(
            out,
            "  (the export lacks the creation flags of {} stream{}: taken as non-blocking, which orders least)",
            analysis.import.get(Counter::NsysStreamFlagsUnknown),
            if analysis.import.get(Counter::NsysStreamFlagsUnknown) == 1 { "" } else { "s" }
        );
    }
}

/// What the analysis saw besides its findings (`--verbose`): operations, streams, the unordered pairs, the
/// happens-before edges of a trace without addresses, how kernels' accesses were known, the capture's cost.
fn write_seen(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    let (findings, look, stats) = (&analysis.findings, analysis.lookup(), &analysis.stats);
    let pairs = findings.stream_pair_totals.pairs;
    let _ = writeln!(
        out,
        "Seen: {} operations, {} accesses, on {} streams (idle ones included); {pairs} unordered cross-stream operation pairs in {} stream pairs.",
        stats.operations,
        stats.accesses,
        stats.streams,
        findings.stream_pair_totals.stream_pairs
    );
    if !stats.has_addresses && !findings.edges.is_empty() {
        let _ = writeln!(out, "Happens-before edges found:");
        for edge in &findings.edges {
            let to = edge.to.map_or("the host".to_string(), |s| Words::Short.stream(look, s));
            let via = match edge.via {
                EdgeKind::EventWait => "event record -> wait",
                EdgeKind::HostSync => "host synchronization",
                EdgeKind::LegacyDefault => "legacy default stream",
            };
            let _ = writeln!(out, "  {} -> {to}: {} ({via})", Words::Short.stream(look, edge.from), edge.count);
        }
    }
    let framework_ops = analysis.import.get(Counter::JsonFrameworkOps);
    if framework_ops > 0 {
        let _ = writeln!(
            out,
            "Kernel accesses: {framework_ops} framework ops gave their kernels the exact bytes of their tensors; {} kernels outside any op stood for the whole blocks their pointer arguments point into.",
            stats.kernels_with_pointers
        );
    } else if stats.kernels_with_pointers > 0 && stats.exact_kernels.is_empty() {
        let _ = writeln!(
            out,
            "Kernel accesses: each pointer argument stands for the whole allocation block it points into (`streamtrace capture --exact` records the bytes each kernel touched)."
        );
    }
    write_capture_cost(out, analysis)
}

/// Binaries the trace names that a finding's frames needed and that are not here, said once.
fn write_missing_binaries(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    let missing = &analysis.tables.symbols.missing_binaries;
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = missing.iter().map(|path| printable(path).into_owned()).collect();
    writeln!(
        out,
        "Note: {} named by the trace {} not on this machine, so {} frames are shown as module+offset; \
         --binary-dir DIR looks for {} elsewhere: {}",
        if missing.len() == 1 { "a binary" } else { "binaries" },
        if missing.len() == 1 { "is" } else { "are" },
        if missing.len() == 1 { "its" } else { "their" },
        if missing.len() == 1 { "it" } else { "them" },
        list.join(", ")
    )
}

/// Which order the host threads were taken in, where the trace has more than one.
fn write_host_order(out: &mut String, analysis: &Analysis) -> std::fmt::Result {
    if analysis.stats.threads < 2 {
        return Ok(());
    }
    let stats = &analysis.stats;
    match (analysis.host_order, analysis.host_sync_recorded) {
        (HostOrder::PerThread, true) => writeln!(
            out,
            "Host order: per thread, joined by the host synchronization the capture recorded ({} release{}, {} acquire{}).",
            stats.host_releases,
            if stats.host_releases == 1 { "" } else { "s" },
            stats.host_acquires,
            if stats.host_acquires == 1 { "" } else { "s" }
        ),
        (HostOrder::PerThread, false) => writeln!(
            out,
            "Host order: per thread, as asked: only CUDA synchronization orders the threads (the trace records no host synchronization between them)."
        ),
        (_, true) => writeln!(
            out,
            "Host order: timestamps, as asked: the threads' calls are taken in the order of their timestamps, besides the host synchronization the capture recorded."
        ),
        (_, false) => writeln!(
            out,
            "Host order: timestamps: the trace records no host synchronization between its threads, so their calls are taken in the order of their timestamps (docs/host-order.md)."
        ),
    }
}

/// Which kernels of an exact-access capture (`capture --exact`) were seen whole, in part, or not at all, and why.
fn write_exact_kernels(out: &mut String, exact: &crate::hb::ExactKernels) -> std::fmt::Result {
    if exact.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "Exact accesses (--exact): {} kernel launches seen whole; {} seen in part, their pointer arguments' blocks \
         counted too; {} with their pointer arguments' blocks only.",
        exact.whole, exact.partly, exact.arguments_only
    )?;
    for unseen in &exact.unseen {
        let why = match crate::model::Unseen::parse(unseen.reason) {
            Ok(crate::model::Unseen::AsyncCopies) => "asynchronous (tensor-map) copies the patches cannot see",
            Ok(crate::model::Unseen::TableFull) => "more memory touched than the launch's table held",
            Ok(crate::model::Unseen::NotInstrumented) => "code the patches did not reach",
            Ok(crate::model::Unseen::NotSelected) => "left out by --exact-kernels",
            Ok(crate::model::Unseen::GraphNode) => "graph launches, which keep their arguments' blocks",
            Ok(crate::model::Unseen::NotReadBack) | Err(_) => "accesses that could not be read back",
        };
        let names: Vec<String> = unseen.kernels.iter().map(|k| printable(&short_name(k)).into_owned()).collect();
        writeln!(out, "  {} launches: {why} ({})", unseen.launches, names.join(", "))?;
    }
    if exact.graph_nodes_with_arguments > 0 {
        writeln!(
            out,
            "  {} graph kernel nodes: graph launches, which keep their arguments' blocks",
            exact.graph_nodes_with_arguments
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{wrap, write_in_order, SourceText, WrappedLines, FINDINGS_PER_PIECE, WIDTH};

    /// Pieces rendered on two threads come out in the findings' order, as one thread renders them.
    #[test]
    fn findings_rendered_on_two_threads_are_written_in_order() {
        let items: Vec<usize> = (0..5 * FINDINGS_PER_PIECE + 17).collect();
        let render = |out: &mut String, item: &usize, _: &mut SourceText| {
            out.push_str(&format!("finding {item}: {}\n", "word ".repeat(item % 40)));
        };
        let mut out = Vec::new();
        write_in_order(&items, &mut out, &mut Default::default(), render).expect("a vector takes every write");
        let mut whole = String::new();
        items.iter().for_each(|item| render(&mut whole, item, &mut SourceText::default()));
        assert_eq!(String::from_utf8(out).expect("text"), wrap(&whole, WIDTH));
    }

    #[test]
    fn lines_wrapped_as_they_come_are_the_whole_text_wrapped() {
        let text = format!("first\n  Why: {}\n\nmiddle {}\nlast without its end", "word ".repeat(60), "x".repeat(200));
        for cuts in [vec![], vec![3, 40], vec![6, 7, 100, 250], vec![text.len() - 2]] {
            let mut out = Vec::new();
            let mut wrapped = WrappedLines { out: &mut out, text: String::new() };
            let mut from = 0;
            for cut in cuts.into_iter().chain([text.len()]) {
                wrapped.text.push_str(&text[from..cut]);
                wrapped.flush_lines().expect("a vector takes every write");
                from = cut;
            }
            wrapped.finish().expect("a vector takes every write");
            assert_eq!(String::from_utf8(out).expect("text"), wrap(&text, WIDTH));
        }
    }

    #[test]
    fn long_lines_wrap_at_spaces_under_their_start() {
        let line = format!("  Why: {}", "word ".repeat(40));
        let wrapped = wrap(&line, 40);
        assert!(wrapped.lines().all(|l| l.chars().count() <= 40), "{wrapped}");
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("      word")), "indented under the start: {wrapped}");
        assert_eq!(crate_words(&wrapped), crate_words(&line), "no word lost");
        let token = format!("  {}", "x".repeat(90));
        assert!(wrap(&token, 40).lines().all(|l| l.chars().count() <= 40), "a word longer than a line is cut");
        assert_eq!(wrap("short\n\nlines", 40), "short\n\nlines\n");
        // Characters of two bytes: columns are characters, and a line of them is cut where an ASCII one would be.
        let wide = format!("  Why: {}", "été ".repeat(40));
        let wrapped_wide = wrap(&wide, 40);
        assert!(wrapped_wide.lines().all(|l| l.chars().count() <= 40), "{wrapped_wide}");
        assert_eq!(wrapped_wide.replace('é', "e"), wrap(&wide.replace('é', "e"), 40));
        assert_eq!(wrap(&format!("  {}", "é".repeat(90)), 40).replace('é', "x"), wrap(&token, 40));
    }

    fn crate_words(text: &str) -> Vec<&str> {
        text.split_whitespace().collect()
    }
}
