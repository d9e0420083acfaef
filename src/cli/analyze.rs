//! `streamtrace analyze`: one trace in, one report out, and the exit status.

use std::io::{self, BufWriter, Write};
use std::time::Instant;

use anyhow::Context;

use super::args::{AnalyzeArgs, OutputFormat};
use super::{EXIT_CLEAN, EXIT_FINDINGS};
use crate::analysis::{analyze_path, analyze_path_with_timeline};
use crate::hb::EngineOptions;
use crate::output::write_atomically;
use crate::report::{html::HtmlReport, json::JsonReport, perfetto::PerfettoReport, text::TextReport, Report};

pub fn run(args: &AnalyzeArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let options = EngineOptions { host_order: args.host_order.into() };
    let wants_timeline = args.html.is_some() || args.perfetto.is_some() || args.png.is_some();
    let analysis = if wants_timeline {
        analyze_path_with_timeline(&args.trace, options)?
    } else {
        analyze_path(&args.trace, options)?
    };
    let elapsed = started.elapsed();
    let report: &dyn Report = match args.format {
        OutputFormat::Text => &TextReport,
        OutputFormat::Json => &JsonReport,
    };
    match &args.output {
        Some(path) => write_atomically(path, |out| report.write(&analysis, out))?,
        None => {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            report.write(&analysis, &mut out).and_then(|()| out.flush()).context("writing the report")?;
        }
    }
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
    Ok(if analysis.findings.has_problems() { EXIT_FINDINGS } else { EXIT_CLEAN })
}

/// Peak resident memory of this process, from /proc (Linux).
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_string())
}
