//! What finding a call site costs on the recording path: `CallSites::site_of_this_call` from the bottom of a
//! chain of nested calls, as deep as a CUDA call's stack under the CUPTI callback, after its first time (rules
//! cached, site known). `cargo bench -p streamtrace-capture --bench unwind`; prints ns per call for a few depths.

use std::hint::black_box;
use std::time::Instant;

use streamtrace_capture::sites::CallSites;
use streamtrace_capture::unwind::Start;

/// Calls `f` from `depth` nested frames down.
#[inline(never)]
fn nested(depth: u32, sites: &mut CallSites, f: &mut dyn FnMut(&mut CallSites) -> u32) -> u32 {
    if depth == 0 {
        return f(sites);
    }
    black_box(nested(black_box(depth - 1), sites, f)) + 1
}

/// The best of five timings of `rounds` calls of `f` from `depth` frames down, in ns a call.
fn best_ns(depth: u32, rounds: u32, sites: &mut CallSites, f: &mut dyn FnMut(&mut CallSites) -> u32) -> f64 {
    nested(depth, sites, f);
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..rounds {
                black_box(nested(depth, sites, f));
            }
            start.elapsed().as_nanos() as f64 / f64::from(rounds)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let rounds = 100_000u32;
    for depth in [8, 24, 40] {
        let mut sites = CallSites::new();
        let mut records = 0usize;
        let with_walk = best_ns(depth, rounds, &mut sites, &mut |sites| {
            sites.site_of_this_call(Start::here(), None, |_| records += 1)
        });
        // The nested calls alone, to take out of the figure.
        let alone = best_ns(depth, rounds, &mut sites, &mut |_| black_box(1));
        let stats = sites.stats();
        println!(
            "depth {depth:>2}: {:.0} ns a call site ({with_walk:.0} ns with the nested calls; {} walks replayed, {} along the tree)",
            with_walk - alone,
            stats.replayed,
            stats.walked
        );
    }
}
