//! Dense identifiers. Ingesters map the handles found in a trace (stream numbers, event handles, thread ids) onto
//! these small indexes so that the engine can keep its per-entity state in vectors.

use serde::Serialize;

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index of this entity in per-entity tables.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

dense_id!(
    /// A process of the traced program; address spaces and streams never cross it.
    ProcessId
);
dense_id!(
    /// A GPU as seen by one process.
    DeviceId
);
dense_id!(
    /// A CUDA context; each has its own legacy default stream.
    ContextId
);
dense_id!(
    /// A CUDA stream.
    StreamId
);
dense_id!(
    /// A CUDA event.
    EventId
);
dense_id!(
    /// A host thread that calls the CUDA API.
    ThreadId
);
dense_id!(
    /// One allocation (one lifetime of a block of memory).
    AllocId
);
