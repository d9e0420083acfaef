//! Why a record of a JSON trace could not be taken, and the import counter a recording's reading counts it
//! under.

use crate::ingest::counters::Counter;

/// Why a record could not be taken, and under which counter a recording's reading counts it.
#[derive(Debug)]
pub(in crate::ingest) struct Problem {
    pub kind: ProblemKind,
    pub message: String,
}

#[derive(Copy, Clone, Debug)]
pub(in crate::ingest) enum ProblemKind {
    /// Not valid JSON, or a value of the wrong type or out of range.
    Malformed,
    /// A record type this build does not know.
    UnknownKind,
    /// It refers to what the trace before it never introduced (an undeclared stream, a block not live), or
    /// declares again what exists.
    Inconsistent,
    /// An `op_end` or `call_end` with no open op or call to end.
    UnmatchedFrameEnd,
}

impl ProblemKind {
    /// The import counter a recording's reading counts a skipped record under.
    pub fn counter(self) -> Counter {
        match self {
            ProblemKind::Malformed => Counter::JsonSkippedMalformed,
            ProblemKind::UnknownKind => Counter::JsonSkippedUnknownKind,
            ProblemKind::Inconsistent => Counter::JsonSkippedInconsistent,
            ProblemKind::UnmatchedFrameEnd => Counter::JsonSkippedUnmatchedFrameEnds,
        }
    }
}

impl Problem {
    pub fn malformed(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Malformed, message: message.into() }
    }

    pub fn inconsistent(message: impl Into<String>) -> Problem {
        Problem { kind: ProblemKind::Inconsistent, message: message.into() }
    }
}
