//! Seeded choices for the generated traces of the fuzz tests (check_thread_fuzz.rs, ordering_oracle.rs), on the
//! crate's own SplitMix64 (`synth::Rng`): a failing seed is reproduced by running it alone.

use streamtrace::synth::Rng as SplitMix;

pub struct Rng(SplitMix);

impl Rng {
    /// Seeds next to each other start far apart.
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d))
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.0.index(items.len())]
    }
}

/// The seeds a fuzz test runs: `{PREFIX}_SEED=N` runs seed N alone (and `show` prints its trace),
/// `{PREFIX}_SEEDS=N` runs seeds 1 to N, and `default` seeds run otherwise.
pub fn seeds_to_run(prefix: &str, default: u64, show: impl Fn(u64)) -> Vec<u64> {
    let number = |name: &str| std::env::var(format!("{prefix}_{name}")).ok().and_then(|s| s.parse().ok());
    match number("SEED") {
        Some(seed) => {
            show(seed);
            vec![seed]
        }
        None => (1..=number("SEEDS").unwrap_or(default)).collect(),
    }
}

/// A JSON address.
pub fn hex(address: u64) -> String {
    format!("\"0x{address:x}\"")
}
