//! Happens-before: vector clocks (`clock`), shadow memory (`shadow`), the sites it names (`sites`), the
//! allocations it attributes ranges to (`allocations`), and the engine that applies DESIGN.md's rules
//! (`engine`). Nothing here formats output.

mod allocations;
pub mod clock;
mod engine;
pub mod shadow;
pub mod sites;

pub use engine::{analyze_records, Engine, EngineError, EngineOptions, EngineStats, HbEdge, HostOrder};
