//! What an operation does to memory: a range it touches and how (read or write, all of it or a strided view),
//! and a kernel's pointer argument before it is resolved to the block it points into (tier T1). Plain values
//! that operations and graph nodes both hold.

use std::sync::Arc;

use serde::Serialize;

use super::range::AccessRange;
use super::view::StridedView;

/// Whether an access reads or (may) write.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessMode {
    Read,
    Write,
}

/// A range an operation touches and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Access {
    /// Every byte touched lies here; without a view, every byte here is touched.
    pub range: AccessRange,
    pub mode: AccessMode,
    /// A strided view (tier T2): only the bytes of this pattern, from `range.start`, are touched, and `range`
    /// is their extent. Shared, since an op's accesses are copied into findings and scratch lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<Arc<StridedView>>,
}

impl Access {
    /// An access of every byte of `range`.
    pub fn plain(range: AccessRange, mode: AccessMode) -> Access {
        Access { range, mode, view: None }
    }
}

/// A pointer-sized kernel argument and whether the kernel may write through it (`const T*` parameters only read).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PointerArg {
    pub address: u64,
    pub mode: AccessMode,
}
