//! Ingest: turning trace files into the model's record stream, the way Perfetto's importers do it: readers that
//! only turn their input into records, and stages that every reader shares.
//!
//! - `open` picks the reader by the input's first bytes. Each reader is a [`RecordSource`] (`record_source`) of
//!   records in host issue order, run on a background thread (`background`), with [`ImportCounters`] that say
//!   what was read and what was lost (`counters`: one table of every counter).
//! - `json` reads our trace files and hand-written traces (lines and records decoded, then what each record
//!   means); `binary` reads the binary encoding of the same records, decoding each into the JSON reader's raw
//!   record, which the same record reader takes; `nsys` reads Nsight Systems exports (tables merged by correlation id, then rows mapped).
//! - `live` takes the traces of a running program from the capture library's socket (`streamtrace capture`),
//!   each connection one trace read by the JSON reader as it comes.
//! - `convert`: a trace from one encoding to the other, record by record (`streamtrace convert`).
//! - `stages`: the dense ids every reader draws, and the framework frames and CUDA graph assembly that every
//!   reader's operations pass through.
//!
//! The readers parse and map ids; they decide nothing about ordering. One stage does, and is named for it:
//! `stages::graphs` gives a graph's nodes their dependencies, from the order of a capture and the calls that
//! built the graph (DESIGN.md, CUDA graphs); the engine orders the nodes by them.

mod background;
pub mod binary;
pub mod convert;
mod counters;
pub mod json;
pub mod live;
pub mod nsys;
mod open;
mod record_source;
mod stages;

pub use background::BackgroundReader;
pub use counters::{Counter, CounterRow, ImportCounter, ImportCounters, Severity};
pub use open::{open, STDIN};
pub use record_source::{AccessTier, IngestError, RecordObserver, RecordPreparer, RecordSource};
