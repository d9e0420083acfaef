//! The happens-before engine alone, on one thread: the trace is parsed into memory first, then fed to the
//! engine `ROUNDS` times (a fresh engine each round), so that parsing and the parser thread do not blur what
//! the engine costs. Prints the best and median rounds, by wall time and by the engine thread's CPU time (which
//! a busy machine inflates less: a round that waits for a core does not count its wait).
//!
//!     cargo bench --bench engine -- TRACE [ROUNDS]

use std::time::Instant;

use streamtrace::hb::{Engine, EngineOptions};
use streamtrace::model::TraceRecord;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Some(path) = args.first() else { anyhow::bail!("usage: cargo bench --bench engine -- TRACE [ROUNDS]") };
    let rounds: usize = args.get(1).map(|r| r.parse()).transpose()?.unwrap_or(5);
    let parse_start = Instant::now();
    let records: Vec<TraceRecord> = streamtrace::ingest::open(std::path::Path::new(path))?.collect::<Result<_, _>>()?;
    let parse = parse_start.elapsed().as_secs_f64();
    println!(
        "parse (its own thread, collected in memory): {} records in {parse:.3} s ({:.2} M/s)",
        records.len(),
        records.len() as f64 / parse / 1e6
    );
    let prefetch = std::env::var_os("STREAMTRACE_BENCH_NO_PREFETCH").is_none();
    let mut seconds = Vec::new();
    let mut cpu_seconds = Vec::new();
    for _ in 0..rounds {
        let mut engine = Engine::new(EngineOptions::default());
        let round = records.clone();
        let start = Instant::now();
        let cpu_start = thread_cpu_seconds();
        for (i, record) in round.iter().enumerate() {
            if prefetch {
                engine.prefetch(|k| round.get(i + k));
            }
            engine.apply(record)?;
        }
        seconds.push(start.elapsed().as_secs_f64());
        cpu_seconds.push(thread_cpu_seconds() - cpu_start);
        drop(engine);
    }
    seconds.sort_by(f64::total_cmp);
    cpu_seconds.sort_by(f64::total_cmp);
    let rate = |s: f64| records.len() as f64 / s / 1e6;
    println!(
        "engine{}: {} records, best {:.3} s ({:.2} M/s), median {:.3} s ({:.2} M/s)",
        if prefetch { "" } else { " (no prefetch)" },
        records.len(),
        seconds[0],
        rate(seconds[0]),
        seconds[seconds.len() / 2],
        rate(seconds[seconds.len() / 2])
    );
    println!(
        "engine thread CPU: best {:.3} s ({:.2} M/s), median {:.3} s",
        cpu_seconds[0],
        rate(cpu_seconds[0]),
        cpu_seconds[cpu_seconds.len() / 2]
    );
    Ok(())
}

/// CPU time of the calling thread so far (user and system).
fn thread_cpu_seconds() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // Safety: `now` is a valid timespec to write; the clock id is a constant the kernel knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}
