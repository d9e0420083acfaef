//! The integration tests, one binary (as ripgrep's tests/tests.rs): each file below is a module, and what they
//! share is written once in util/. One binary links the crate and its dependencies (polars, rusqlite, plotters)
//! once instead of once per file. Modules are named by what they test; their data sits beside them
//! (tests/callsites/, tests/hostile/).

mod util;

mod binary_trace;
mod callsites;
mod capture;
mod check_thread;
mod check_thread_fuzz;
mod cli;
mod exact;
mod format_roundtrip;
mod hostile;
mod idle_streams;
mod layout;
mod mutation;
mod names;
mod nsys;
mod ordering_oracle;
mod ranges;
mod reports;
mod rules;
mod rules_graphs;
mod rules_views;
mod site_hints;
mod stats;
