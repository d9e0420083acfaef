//! The terminal report, in the manner of ThreadSanitizer: one block per finding, then a summary line. Every
//! piece of text that comes from the trace goes through [`printable`] on its way out.

use std::io;

use super::fix::fix_text;
use super::{
    describe_location, describe_op, describe_why, event_phrase, ordinal, printable, shorten, stream_words, Report,
};
use crate::analysis::Analysis;
use crate::findings::{AccessAction, EdgeKind, OpOccurrence, RaceFinding, Site};
use crate::hb::HostOrder;
use crate::ingest::Counter;
use crate::model::{GraphBuild, SourceLocation};
use crate::names::short::short_name;
use crate::resolve::Lookup;

/// How many unordered-pair groups the text report lists.
const PAIR_GROUPS_SHOWN: usize = 10;

pub struct TextReport;

fn access_word(action: AccessAction) -> &'static str {
    match action {
        AccessAction::Read => "Read",
        AccessAction::Write => "Write",
        AccessAction::Free => "Free",
        AccessAction::Alloc => "Allocation",
    }
}

/// A line as the text report shows it: printable, or "unknown source".
fn place(source: Option<&SourceLocation>) -> String {
    source.map_or("unknown source".to_string(), |s| printable(&s.to_string()).into_owned())
}

fn write_occurrence(
    out: &mut dyn io::Write,
    look: Lookup,
    heading: &str,
    op: &OpOccurrence,
    bytes: u64,
    at: u64,
) -> io::Result<()> {
    writeln!(out, "  {heading} of {bytes} bytes at {at:#x} by {}:", printable(&describe_op(look, op)))?;
    let source = place(look.source(op.site));
    let position = op.stream_position.map_or(String::new(), |p| format!(", {} on its stream", ordinal(p)));
    let Some(graph) = &look.site(op.site).graph else {
        return writeln!(out, "    at {source} (operation {}{position}, input line/row {})", op.seq, op.origin);
    };
    // A graph node was issued where it was captured or added, and ran where its graph was launched.
    let made = match graph.build {
        GraphBuild::Captured => "captured at",
        GraphBuild::Explicit => "added at",
        GraphBuild::Inline => "at",
    };
    if look.source(op.site).is_some() {
        writeln!(out, "    {made} {source}")?;
    }
    let launched = place(look.launched_at(op.site));
    writeln!(
        out,
        "    in {}, launched at {launched} (operation {}{position}, input line/row {})",
        printable(&graph.graph),
        op.seq,
        op.origin
    )
}

/// A strided access says which bytes of its extent it touched (tier T2).
fn write_view(out: &mut dyn io::Write, view: Option<&str>) -> io::Result<()> {
    match view {
        Some(view) => writeln!(out, "    as the strided view {}", printable(view)),
        None => Ok(()),
    }
}

/// What a race ordered only by timing is, said under its heading.
const TIMING_ONLY: &str = "ordered only by timing, or by host synchronization the capture cannot see";

fn write_race(out: &mut dyn io::Write, look: Lookup, race: &RaceFinding, timing_only: bool) -> io::Result<()> {
    writeln!(out, "==================")?;
    if timing_only {
        writeln!(out, "WARNING: streamtrace: data race {TIMING_ONLY} ({})", race.kind.as_str())?;
    } else {
        writeln!(out, "WARNING: streamtrace: data race ({})", race.kind.as_str())?;
    }
    let (bytes, at) = (race.range.len, race.range.start);
    write_occurrence(out, look, access_word(race.later.action), &race.later, bytes, at)?;
    write_view(out, race.later_view.as_deref())?;
    writeln!(out)?;
    let previous = format!("Previous {}", access_word(race.earlier.action).to_lowercase());
    write_occurrence(out, look, &previous, &race.earlier, bytes, at)?;
    write_view(out, race.earlier_view.as_deref())?;
    writeln!(out)?;
    for line in describe_location(look, race) {
        writeln!(out, "  {}", printable(&line))?;
    }
    writeln!(out)?;
    writeln!(out, "  Why: {}", printable(&describe_why(look, race)))?;
    if timing_only {
        writeln!(
            out,
            "  Only the timing of this run orders the two host calls: taken in their timestamp order they are ordered, but no host synchronization the capture saw (a join, a mutex, a condition variable, a semaphore) hands the work over between the threads. Unless something it cannot see does (a std::atomic flag, a spin loop, a futex), this is a race."
        )?;
    }
    writeln!(out, "  Fix: {}", printable(&fix_text(look, race)))?;
    if race.count > 1 {
        writeln!(out, "  Seen {} times (first occurrence shown).", race.count)?;
    }
    writeln!(out, "==================")
}

/// What the capture cost the program: per recorded call on its threads, and the one-time set-up apart (captures
/// before the set-up was counted apart have it inside the calls' time, which the line then says).
fn write_capture_cost(out: &mut dyn io::Write, analysis: &Analysis) -> io::Result<()> {
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
fn write_host_watch(out: &mut dyn io::Write, analysis: &Analysis) -> io::Result<()> {
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
        let (findings, look) = (&analysis.findings, analysis.lookup());
        for race in &findings.races {
            write_race(out, look, race, false)?;
        }
        for race in &findings.timing_only_races {
            write_race(out, look, race, true)?;
        }
        for wait in &findings.unrecorded_waits {
            writeln!(out, "==================")?;
            writeln!(out, "WARNING: streamtrace: wait on an event that was never recorded")?;
            writeln!(
                out,
                "  {} waits on {}, which no record preceded:",
                printable(&describe_op(look, &wait.wait)),
                printable(&event_phrase(look, wait))
            )?;
            let source = place(look.source(wait.wait.site));
            writeln!(out, "    at {source} (operation {}, input line/row {})", wait.wait.seq, wait.wait.origin)?;
            writeln!(out, "  The wait orders nothing. Record the event before waiting on it (check the order of record and wait).")?;
            if wait.count > 1 {
                writeln!(out, "  Seen {} times.", wait.count)?;
            }
            writeln!(out, "==================")?;
        }
        if !findings.waits_on_never_recorded_events.is_empty() {
            let total: u64 = findings.waits_on_never_recorded_events.iter().map(|w| w.count).sum();
            writeln!(
                out,
                "Note: {total} stream wait{} on events that no record ever named (no-ops in CUDA; libraries such as NCCL make them on purpose), not counted as findings (listed in --format json).",
                if total == 1 { "" } else { "s" }
            )?;
        }
        if !findings.waits_with_unknown_record.is_empty() {
            let total: u64 = findings.waits_with_unknown_record.iter().map(|w| w.count).sum();
            writeln!(
                out,
                "NOTE: {total} stream wait{} on events whose record is not in this trace: the recording stream is unknown, so \
                 these waits order nothing here and some unordered pairs below may in fact be ordered. Capture event records \
                 too (nsys profile --cuda-event-trace=true) to resolve them.",
                if total == 1 { "" } else { "s" }
            )?;
            for wait in &findings.waits_with_unknown_record {
                writeln!(out, "  {} x{}", printable(&describe_op(look, &wait.wait)), wait.count)?;
            }
        }
        if !analysis.stats.has_addresses && !findings.edges.is_empty() {
            writeln!(out, "Happens-before edges found:")?;
            for edge in &findings.edges {
                let to = edge.to.map_or("the host".to_string(), |s| printable(&stream_words(look, s)).into_owned());
                let via = match edge.via {
                    EdgeKind::EventWait => "event record -> wait",
                    EdgeKind::HostSync => "host synchronization",
                    EdgeKind::LegacyDefault => "legacy default stream",
                };
                writeln!(out, "  {} -> {to}: {} ({via})", printable(&stream_words(look, edge.from)), edge.count)?;
            }
        }
        let total_pairs: u64 = findings.stream_pairs.iter().map(|p| p.pairs).sum();
        write_capture_cost(out, analysis)?;
        write_host_watch(out, analysis)?;
        let framework_ops = analysis.import.get(Counter::JsonFrameworkOps);
        if framework_ops > 0 {
            writeln!(
                out,
                "Access tier T2: {framework_ops} framework ops gave their kernels exact tensor extents; {} kernels outside any op used their pointer arguments (T1).",
                analysis.stats.kernels_with_pointers
            )?;
        } else if analysis.stats.kernels_with_pointers > 0 {
            writeln!(
                out,
                "Access tier T1: kernels' pointer arguments stand for whole allocation blocks, so tensors sharing a block (PyTorch's allocator segments) are not told apart."
            )?;
        }
        write_exact_kernels(out, &analysis.stats.exact_kernels)?;
        if !analysis.stats.has_addresses {
            if analysis.cut_short() {
                writeln!(
                    out,
                    "No addresses were read from this recording, which was cut short (see the warning below): what it would have recorded is unknown."
                )?;
            } else {
                writeln!(
                    out,
                    "No addresses in this trace (access tier T0): address-level race detection needs `streamtrace capture`."
                )?;
            }
            if !findings.unordered_pairs.is_empty() {
                writeln!(out, "Unordered cross-stream operation pairs, by site (most first):")?;
                for group in findings.unordered_pairs.iter().take(PAIR_GROUPS_SHOWN) {
                    let stream = |site: &Site| {
                        site.stream.map_or("stream 0".to_string(), |s| printable(&stream_words(look, s)).into_owned())
                    };
                    let (earlier, later) = (look.site(group.earlier), look.site(group.later));
                    writeln!(
                        out,
                        "  {:>10} pairs  {} `{}` ({}) || {} `{}` ({}), first at operations {} and {}",
                        group.pairs,
                        earlier.class.as_str(),
                        printable(&shorten(&earlier.name)),
                        stream(earlier),
                        later.class.as_str(),
                        printable(&shorten(&later.name)),
                        stream(later),
                        group.first.0,
                        group.first.1
                    )?;
                }
                if findings.unordered_pairs.len() > PAIR_GROUPS_SHOWN {
                    writeln!(
                        out,
                        "  ... {} more groups (see --format json)",
                        findings.unordered_pairs.len() - PAIR_GROUPS_SHOWN
                    )?;
                }
            }
        }
        if analysis.stats.assumed_view_overlaps > 0 {
            writeln!(
                out,
                "warning: {} overlap questions between strided views ran past their step budget and were taken as overlapping: a race on such views may not be one",
                analysis.stats.assumed_view_overlaps
            )?;
        }
        for lost in analysis.import.data_loss() {
            let first = lost.first.as_deref().map(|at| format!("; first at {}", printable(at))).unwrap_or_default();
            writeln!(
                out,
                "warning: {} {} ({}{first}): findings may be incomplete",
                lost.count,
                lost.counter.description(),
                lost.counter.name()
            )?;
        }
        let stats = &analysis.stats;
        write_host_order(out, analysis)?;
        let occurrences: u64 = findings.races.iter().map(|r| r.count).sum();
        writeln!(
            out,
            "SUMMARY: streamtrace: {} race{} ({occurrences} occurrence{}), {} wait{} on never-recorded events, {total_pairs} unordered cross-stream operation pairs in {} stream pair{}; {} operations, {} accesses on {} streams in {}",
            findings.races.len(),
            if findings.races.len() == 1 { "" } else { "s" },
            if occurrences == 1 { "" } else { "s" },
            findings.unrecorded_waits.len(),
            if findings.unrecorded_waits.len() == 1 { "" } else { "s" },
            findings.stream_pairs.len(),
            if findings.stream_pairs.len() == 1 { "" } else { "s" },
            stats.operations,
            stats.accesses,
            stats.streams,
            printable(&analysis.trace)
        )?;
        if analysis.host_order == HostOrder::PerThread && analysis.host_sync_recorded {
            let timing = &findings.timing_only_races;
            let occurrences: u64 = timing.iter().map(|r| r.count).sum();
            writeln!(
                out,
                "SUMMARY: streamtrace: {} race{} ({occurrences} occurrence{}) {TIMING_ONLY}",
                timing.len(),
                if timing.len() == 1 { "" } else { "s" },
                if occurrences == 1 { "" } else { "s" },
            )?;
        }
        Ok(())
    }
}

/// Which order the host threads were taken in, where the trace has more than one.
fn write_host_order(out: &mut dyn io::Write, analysis: &Analysis) -> io::Result<()> {
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
fn write_exact_kernels(out: &mut dyn io::Write, exact: &crate::hb::ExactKernels) -> io::Result<()> {
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
