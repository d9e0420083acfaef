//! `streamtrace convert IN OUT`: a trace from one encoding to the other (`ingest::convert`).

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use streamtrace_format::TraceEncoding;

use super::args::ConvertArgs;
use crate::ingest::convert::convert;
use crate::ingest::STDIN;
use crate::output::{protect_input, write_atomically};

pub fn run(args: &ConvertArgs) -> anyhow::Result<()> {
    let to = match args.to {
        Some(to) => TraceEncoding::from(to),
        None => TraceEncoding::of_path(&args.output).with_context(|| {
            format!(
                "cannot tell the encoding to write from {}: name it .stbin (binary) or .json, or say --to",
                args.output.display()
            )
        })?,
    };
    protect_input(&args.input);
    let input: Box<dyn io::Read> = if args.input == Path::new(STDIN) {
        Box::new(io::stdin())
    } else {
        let file = std::fs::File::open(&args.input).with_context(|| format!("cannot open {}", args.input.display()))?;
        Box::new(file)
    };
    let name = if args.input == Path::new(STDIN) { Path::new("<stdin>") } else { args.input.as_path() };
    // An input that cannot be converted leaves no output file behind.
    let write = |out: &mut dyn Write| convert(name, input, to, out).map(|_| ()).map_err(io::Error::other);
    if args.output == Path::new("-") {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        write(&mut out).and_then(|()| out.flush()).context("writing the converted trace")
    } else {
        write_atomically(&args.output, write)
    }
}
