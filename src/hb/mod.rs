//! Happens-before: vector clocks (`clock`), shadow memory (`shadow`), the sites it names (`sites`), the
//! allocations it attributes ranges to (`allocations`), and the engine that applies DESIGN.md's rules: its state
//! and dispatch (`engine`), every synchronization (`sync_rules`), the order among host threads (`host_order`), memory operations and the access check
//! (`access`), conflicts made findings (`race_report`), CUDA graphs (`graph`), tier T0's unordered pairs
//! (`unordered_pairs`), the books that let declared streams that ran nothing cost nothing (`idle_streams`), and
//! the overlap of strided views (`view_overlap`). Nothing here formats output.

mod access;
mod allocations;
pub mod clock;
mod engine;
mod graph;
mod host_order;
mod idle_streams;
mod race_report;
pub mod shadow;
pub mod sites;
mod sync_rules;
mod unordered_pairs;
pub mod view_overlap;

pub use engine::{analyze_records, Engine, EngineError, EngineOptions, EngineStats, HbEdge, HostOrder};
