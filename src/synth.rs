//! A synthetic trace generator for benchmarks: many streams, random event and host synchronization, and a large
//! set of live ranges with allocation churn. Deterministic for a given seed.

use std::io::{self, Write};

/// Shape of a generated trace.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    pub operations: u64,
    pub streams: u32,
    pub live_ranges: u32,
    pub events: u32,
    pub seed: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec { operations: 1_000_000, streams: 16, live_ranges: 100_000, events: 64, seed: 1 }
    }
}

/// SplitMix64: small, fast and good enough to pick streams and ranges.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }
}

const BASE: u64 = 0x7f00_0000_0000;
const SLOT: u64 = 0x1_0000;
const KERNELS: [&str; 8] = ["gemm", "softmax", "layernorm", "gelu", "add", "reduce", "copy_tile", "scatter"];

/// Writes a trace of `spec.operations` operations (besides declarations) to `out`.
pub fn write_trace(spec: &SynthSpec, out: &mut dyn Write) -> io::Result<()> {
    let mut rng = Rng(spec.seed);
    writeln!(out, r#"{{"type":"streamtrace","version":1}}"#)?;
    writeln!(out, r#"{{"type":"stream","id":0,"stream_kind":"legacy_default"}}"#)?;
    for s in 1..=spec.streams {
        let kind = if s % 4 == 0 { "blocking" } else { "non_blocking" };
        writeln!(out, r#"{{"type":"stream","id":{s},"stream_kind":"{kind}"}}"#)?;
    }
    for e in 0..spec.events {
        writeln!(out, r#"{{"type":"event","id":{e}}}"#)?;
    }
    let size_of = |slot: u64| 4096 + (slot * 7919 % 15) * 4096;
    for r in 0..spec.live_ranges as u64 {
        writeln!(out, r#"{{"type":"alloc","id":{r},"addr":{},"size":{}}}"#, BASE + r * SLOT, size_of(r))?;
    }
    // Allocation ids of each slot; churn gives a slot a new id.
    let mut ids: Vec<u64> = (0..spec.live_ranges as u64).collect();
    let mut next_id = spec.live_ranges as u64;
    let ranges = spec.live_ranges as u64;
    let streams = spec.streams as u64;
    let mut stream = || 1 + rng.below(streams);
    let mut rng2 = Rng(spec.seed ^ 0x5bd1_e995);
    for _ in 0..spec.operations {
        let roll = rng2.below(1000);
        let s = stream();
        match roll {
            0..=699 => {
                let name = KERNELS[rng2.below(KERNELS.len() as u64) as usize];
                let a = rng2.below(ranges);
                let b = rng2.below(ranges);
                let w = rng2.below(ranges);
                writeln!(
                    out,
                    r#"{{"type":"kernel","stream":{s},"name":"{name}","reads":[[{},{}],[{},{}]],"writes":[[{},{}]]}}"#,
                    BASE + a * SLOT,
                    size_of(a),
                    BASE + b * SLOT,
                    size_of(b),
                    BASE + w * SLOT,
                    size_of(w)
                )?;
            }
            700..=779 => {
                let a = rng2.below(ranges);
                let b = rng2.below(ranges);
                // A partial copy: exercises segment splitting.
                let len = size_of(a).min(size_of(b)) / 2;
                writeln!(
                    out,
                    r#"{{"type":"memcpy","stream":{s},"copy":"DtoD","from":[{},{len}],"to":[{},{len}]}}"#,
                    BASE + a * SLOT,
                    BASE + b * SLOT
                )?;
            }
            780..=799 => {
                let a = rng2.below(ranges);
                writeln!(out, r#"{{"type":"memset","stream":{s},"to":[{},{}]}}"#, BASE + a * SLOT, size_of(a))?;
            }
            800..=889 => {
                let e = rng2.below(spec.events as u64);
                writeln!(out, r#"{{"type":"record","stream":{s},"event":{e}}}"#)?;
            }
            890..=969 => {
                let e = rng2.below(spec.events as u64);
                writeln!(out, r#"{{"type":"wait","stream":{s},"event":{e}}}"#)?;
            }
            970..=979 => {
                let e = rng2.below(spec.events as u64);
                writeln!(out, r#"{{"type":"query","event":{e},"ready":{}}}"#, rng2.below(2) == 0)?;
            }
            980..=989 => writeln!(out, r#"{{"type":"sync","stream":{s}}}"#)?,
            990 => writeln!(out, r#"{{"type":"sync","device":0}}"#)?,
            _ => {
                // Churn: free a block stream-ordered and allocate the slot again on another stream.
                let slot = rng2.below(ranges);
                let old = ids[slot as usize];
                writeln!(out, r#"{{"type":"free","id":{old},"free_kind":"stream_ordered","stream":{s}}}"#)?;
                ids[slot as usize] = next_id;
                writeln!(
                    out,
                    r#"{{"type":"alloc","id":{next_id},"addr":{},"size":{},"alloc_kind":"stream_ordered","stream":{}}}"#,
                    BASE + slot * SLOT,
                    size_of(slot),
                    stream()
                )?;
                next_id += 1;
            }
        }
    }
    Ok(())
}
