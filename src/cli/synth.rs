//! `streamtrace synth`: writes a synthetic trace for benchmarks, in JSON or the binary encoding.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::Context;

use super::args::SynthArgs;
use crate::synth::{write_trace_as, SynthSpec};
use streamtrace_format::TraceEncoding;

pub fn run(args: &SynthArgs) -> anyhow::Result<()> {
    let spec = SynthSpec {
        operations: args.ops,
        streams: args.streams,
        live_ranges: args.ranges,
        events: args.events,
        seed: args.seed,
    };
    let path = &args.output;
    // `--format`, else the extension (`.stbin`: binary), else JSON.
    let encoding =
        args.format.map(TraceEncoding::from).or_else(|| TraceEncoding::of_path(path)).unwrap_or(TraceEncoding::Json);
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    write_trace_as(&spec, encoding, &mut out)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", path.display()))
}
