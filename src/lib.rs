//! streamtrace finds cross-stream synchronization bugs in CUDA programs.
//!
//! Data flows through the modules in this order: [`ingest`] reads a trace into the [`model`]'s record stream,
//! [`hb`] applies the happens-before rules and checks accesses, [`findings`] folds what it found, and
//! [`report`] renders it. [`analysis`] ties them together for one trace file; a [`timeline`] of every operation
//! and edge is collected beside it when a drawn report asks for one, and the [`names`] people know streams and
//! events by always are. Findings hold ids; after the engine, [`resolve`] looks them up once (names, and the
//! source lines [`symbols`] finds for native call sites), and reports only format. Every file written goes
//! through [`output`].

pub mod analysis;
pub mod cli;
pub mod findings;
pub mod hb;
pub mod ingest;
pub mod job;
pub mod model;
pub mod names;
pub mod output;
pub mod report;
pub mod resolve;
pub mod stats;
pub mod symbols;
pub mod synth;
pub mod timeline;
pub mod timestamp_twin;
