//! `streamtrace analyze`: one trace in, one report out, and the exit status; a directory of traces (a job's, one per
//! process) gives one report for the job (cli/job.rs).

use std::io::Write;
use std::time::Instant;

use super::args::{AnalyzeArgs, OutputFormat};
use crate::analysis::analyze_path_with;
use crate::hb::EngineOptions;
use crate::job;
use crate::output::{protect_input, write_atomically, write_report};
use crate::report::{html::HtmlReport, json::JsonReport, perfetto::PerfettoReport, text::TextReport, Report};
use crate::symbols::BinarySearch;

pub fn run(args: &AnalyzeArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let options = EngineOptions { host_order: args.host_order.into(), check_thread: args.check_thread.into() };
    let wants_timeline = args.html.is_some() || args.perfetto.is_some() || args.png.is_some();
    protect_input(&args.trace);
    if args.trace.is_dir() {
        return run_job(args, options);
    }
    let binaries = BinarySearch { dirs: args.binary_dir.clone() };
    let analysis = analyze_path_with(&args.trace, options, &binaries, wants_timeline)?;
    let elapsed = started.elapsed();
    // A trace of several capture ranges (`--capture-range-end=repeat`): a section per range, as a job's traces.
    if analysis.ranges.len() > 1 {
        let sections: Vec<job::JobTrace> = analysis
            .range_sections()
            .into_iter()
            .map(|section| job::JobTrace { path: args.trace.clone(), outcome: Ok(section) })
            .collect();
        let write = |out: &mut dyn Write| match args.format {
            OutputFormat::Text => super::job::write_text(&sections, out),
            OutputFormat::Json => super::job::write_json(&args.trace, &sections, out),
        };
        write_report(args.output.as_deref(), write)?;
        for (path, extra) in [(&args.html, &HtmlReport as &dyn Report), (&args.perfetto, &PerfettoReport)] {
            if let Some(path) = path {
                write_atomically(path, |out| extra.write(&analysis, out))?;
            }
        }
        if let Some(path) = &args.png {
            crate::report::png::write_timeline(&analysis, path)?;
        }
        return Ok(super::job::status(&sections));
    }
    let report: &dyn Report = match args.format {
        OutputFormat::Text => &TextReport { verbose: args.verbose },
        OutputFormat::Json => &JsonReport,
    };
    write_report(args.output.as_deref(), |out| report.write(&analysis, out))?;
    for (path, extra) in [(&args.html, &HtmlReport as &dyn Report), (&args.perfetto, &PerfettoReport)] {
        if let Some(path) = path {
            write_atomically(path, |out| extra.write(&analysis, out))?;
        }
    }
    if let Some(path) = &args.png {
        crate::report::png::write_timeline(&analysis, path)?;
    }
    if args.timing {
        let ops = analysis.stats.operations as f64;
        let secs = elapsed.as_secs_f64();
        eprintln!(
            "timing: {} operations in {:.3} s = {:.0} operations/s; peak RSS {}; peak shadow segments {}; peak live allocations {}",
            analysis.stats.operations,
            secs,
            ops / secs.max(1e-9),
            peak_rss().unwrap_or_else(|| "unknown".into()),
            analysis.stats.peak_shadow_segments,
            analysis.stats.peak_live_allocations
        );
    }
    Ok(super::exit_status(analysis.findings.verdict()))
}

/// A directory of traces, one per process of a job: every trace analyzed in parallel, one report, the worst
/// status (src/job.rs).
fn run_job(args: &AnalyzeArgs, options: EngineOptions) -> anyhow::Result<u8> {
    if args.perfetto.is_some() || args.png.is_some() {
        anyhow::bail!(
            "--perfetto and --png take one trace; for a directory of traces, --html draws every rank's lanes"
        );
    }
    let traces = job::traces_in(&args.trace)?;
    if traces.is_empty() {
        anyhow::bail!("{} holds no trace (*.stbin, *.json)", args.trace.display());
    }
    let binaries = BinarySearch { dirs: args.binary_dir.clone() };
    traces.iter().for_each(|trace| protect_input(trace));
    let analyzed = job::analyze_job(&traces, options, &binaries, args.html.is_some());
    let write = |out: &mut dyn Write| match args.format {
        OutputFormat::Text => super::job::write_text(&analyzed, out),
        OutputFormat::Json => super::job::write_json(&args.trace, &analyzed, out),
    };
    write_report(args.output.as_deref(), write)?;
    if let Some(path) = &args.html {
        if let Some(merged) = job::merged_for_timeline(&args.trace, &analyzed) {
            write_atomically(path, |out| HtmlReport.write(&merged, out))?;
        }
    }
    Ok(super::job::status(&analyzed))
}

/// Peak resident memory of this process, from /proc (Linux).
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_string())
}
