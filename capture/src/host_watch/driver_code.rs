//! Where the driver's code is mapped, found once when CUPTI is set up (mod.rs's `start`): a guard fault whose
//! instruction lies there is the driver's own access, not the program's (faults.rs asks from the signal
//! handler). Touches /proc/self/maps once and two atomics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where the driver's code is mapped: a fault there is the driver's access.
static DRIVER_START: AtomicU64 = AtomicU64::new(0);
static DRIVER_END: AtomicU64 = AtomicU64::new(0);

/// Whether `pc` is in the driver's code (async-signal-safe).
pub fn in_driver_code(pc: u64) -> bool {
    DRIVER_START.load(Ordering::Relaxed) <= pc && pc < DRIVER_END.load(Ordering::Relaxed)
}

/// Notes where the driver is mapped, when it is.
pub fn find() {
    if let Some((start, end)) = find_driver() {
        DRIVER_START.store(start, Ordering::Relaxed);
        DRIVER_END.store(end, Ordering::Relaxed);
    }
}

/// The driver's mapped range, from /proc/self/maps.
fn find_driver() -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let mut range: Option<(u64, u64)> = None;
    for line in maps.lines().filter(|l| l.rsplit('/').next().is_some_and(|f| f.starts_with("libcuda.so"))) {
        let (from, to) = line.split_whitespace().next()?.split_once('-')?;
        let (from, to) = (u64::from_str_radix(from, 16).ok()?, u64::from_str_radix(to, 16).ok()?);
        range = Some(range.map_or((from, to), |(a, b)| (a.min(from), b.max(to))));
    }
    range
}
