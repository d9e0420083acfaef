//! The command line: arguments, the commands, and the one place that decides the exit status.

mod analyze;
mod args;
mod capture;
mod convert;
mod job;
mod online;
mod python_bootstrap;
mod stats;
mod synth;

use std::process::ExitCode;

use clap::Parser;

pub use args::{Cli, Command};

use crate::findings::Verdict;

/// Exit status when the analysis found nothing.
pub const EXIT_CLEAN: u8 = 0;
/// Exit status when the analysis found races or waits before their event's record.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit status for bad input, bad usage or an I/O failure (clap uses it for usage errors too).
pub const EXIT_ERROR: u8 = 2;
/// Exit status when the only findings are races ordered only by timing, or by host synchronization the capture
/// cannot see (docs/host-order.md): a race unless the program hands the work over in a way the capture does
/// not see (a std::atomic flag), which a CI job may accept and the status lets it tell apart.
pub const EXIT_TIMING_ONLY: u8 = 3;
/// `capture`: the program is found but cannot be run (as shells say it).
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
/// `capture`: the program is not found (as shells say it).
pub const EXIT_NOT_FOUND: u8 = 127;

/// The exit status of an analysis's verdict.
pub fn exit_status(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Clean => EXIT_CLEAN,
        Verdict::TimingOnly => EXIT_TIMING_ONLY,
        Verdict::Findings => EXIT_FINDINGS,
    }
}

/// Parses the arguments, runs the command and maps the outcome to an exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Analyze(args) => analyze::run(&args),
        Command::Capture(args) => capture::run(&args),
        Command::Stats(args) => stats::run(&args).map(|()| EXIT_CLEAN),
        Command::Convert(args) => convert::run(&args).map(|()| EXIT_CLEAN),
        Command::Synth(args) => synth::run(&args).map(|()| EXIT_CLEAN),
    };
    match outcome {
        Ok(status) => ExitCode::from(status),
        Err(error) => {
            // Messages quote the trace (a record type, a field, a file name): escaped as the reports are, so
            // that a trace cannot put control characters on the terminal.
            eprintln!("streamtrace: error: {}", crate::report::printable(&format!("{error:#}")));
            match error.downcast_ref::<capture::ProgramNotStarted>() {
                Some(not_started) => ExitCode::from(not_started.exit_status()),
                None => ExitCode::from(EXIT_ERROR),
            }
        }
    }
}
