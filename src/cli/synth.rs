//! `streamtrace synth`: writes a synthetic trace for benchmarks.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::Context;

use super::args::SynthArgs;
use crate::synth::{write_trace, SynthSpec};

pub fn run(args: &SynthArgs) -> anyhow::Result<()> {
    let spec = SynthSpec {
        operations: args.ops,
        streams: args.streams,
        live_ranges: args.ranges,
        events: args.events,
        seed: args.seed,
    };
    let path = &args.output;
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    write_trace(&spec, &mut out).and_then(|()| out.flush()).with_context(|| format!("writing {}", path.display()))
}
