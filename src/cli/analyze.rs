//! `streamtrace analyze`: one trace in, one report out, and the exit status.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;

use super::args::{AnalyzeArgs, OutputFormat};
use super::{EXIT_CLEAN, EXIT_FINDINGS};
use crate::analysis::{analyze_path, analyze_path_with_timeline};
use crate::hb::EngineOptions;
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

/// Writes to a temporary file beside `path` and renames it into place, so that a failed run never leaves a
/// partial report that looks whole.
fn write_atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    // A device or pipe (/dev/null, /dev/stdout, a FIFO) is written in place: renaming over it would replace it.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let file = File::options().write(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut out = BufWriter::new(file);
        return write(&mut out).and_then(|()| out.flush()).with_context(|| format!("writing {}", path.display()));
    }
    let file_name = path.file_name().with_context(|| format!("{} is not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(".{}.tmp", file_name.to_string_lossy()));
    let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut out = BufWriter::new(file);
    let written = write(&mut out).and_then(|()| out.flush());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move the report to {}", path.display()))
}

/// Peak resident memory of this process, from /proc (Linux).
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_string())
}
