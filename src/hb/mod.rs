//! Happens-before, as a star: at the bottom the engine's state (`state`) over its parts (vector clocks `clock`
//! over `slot_values`,
//! shadow memory `shadow`, the sites it names `sites`, the allocations it attributes ranges to `allocations`,
//! the ordered sets of addresses both of those search (`sorted_keys`),
//! the overlap of strided views `view_overlap`, and the shadow check on a thread of its own with the replicas it
//! checks against, `checker`); in the middle the rule files, each importing the state and
//! never a sibling: every synchronization (`sync_rules`), the order among host threads (`host_order`), memory
//! operations and the access check (`access`, with the accesses of one operation that can race in
//! `racing_accesses`), conflicts made findings (`race_report`), CUDA graphs (`graph`), tier T0's unordered pairs
//! (`unordered_pairs`), the books that let declared streams that ran nothing cost nothing (`idle_streams`), and
//! the dropping of sites nothing refers to (`site_collection`); on top the dispatch (`engine`). Beside them, the
//! sites the reader's thread numbers ahead of the engine (`site_hints`). Nothing here formats output.

mod access;
mod allocations;
mod checker;
pub mod clock;
mod engine;
mod graph;
mod host_order;
mod idle_streams;
mod node_pairs;
mod race_report;
mod racing_accesses;
mod ranges;
pub mod shadow;
mod site_collection;
pub mod site_hints;
pub mod sites;
mod slot_values;
mod sorted_keys;
mod state;
mod sync_rules;
mod unordered_pairs;
pub mod view_overlap;

pub use engine::analyze_records;
pub use state::{
    CheckThread, Engine, EngineError, EngineOptions, EngineStats, ExactKernels, HbEdge, HostOrder, UnseenKernels,
};
