//! What the host watch counted, for the `host_watch` record (mod.rs writes it at exit). Plain atomics in a file
//! of their own, so that the parts that count (the in-flight windows, the fault queue, the hold) need not import
//! the host watch's hooks that call them.

use std::sync::atomic::AtomicU64;

/// In-flight windows in which a range was guarded.
pub static WINDOWS: AtomicU64 = AtomicU64::new(0);
/// Faults recorded as host accesses.
pub static FAULTS: AtomicU64 = AtomicU64::new(0);
/// Accesses seen but not recorded (the fault queue full, a host function's record already written).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Faults that were the driver's own.
pub static IGNORED: AtomicU64 = AtomicU64::new(0);
/// Ranges that could not be guarded (the table full, the system refused).
pub static UNWATCHED: AtomicU64 = AtomicU64::new(0);
