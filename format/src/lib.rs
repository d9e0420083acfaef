//! The streamtrace trace format, spelled once: what a trace file may say and how it is written.
//!
//! The trace is the seam between the capture library (which writes it inside the user's program) and the
//! analyzer (which reads it). Both sides name every record kind, field and value through this crate, so that a
//! writer cannot spell what the reader does not know:
//! - [`vocabulary`]: record kinds with the fields each may carry, and the enumerated values (stream kinds, copy
//!   kinds, allocation and free kinds) with their spellings;
//! - [`line`]: the writer helper that appends one record as one JSON line;
//! - [`launch`]: what the `streamtrace capture` command and the injected library agree on besides the file
//!   (environment variables, where libcupti is looked for).
//!
//! The PyTorch observers (capture/python/) write their records in Python and C++; a test of this crate reads
//! their sources and checks every record kind, field and value they spell against [`vocabulary`].
//!
//! docs/trace-format.md describes the format for people.

pub mod launch;
pub mod line;
pub mod vocabulary;

pub use line::{push_address, push_escaped, push_number, RecordLine};
pub use vocabulary::{
    AccessFlag, AllocKind, CopyKind, Field, FieldSet, FreeKind, MemoryKind, NodeKind, Producer, RecordKind, StreamKind, UnknownName, COMMON_FIELDS,
    GRAPH_NODE_FIELDS, access_range,
};

/// The version of the format this crate describes; the header carries it.
pub const FORMAT_VERSION: u32 = 1;

/// The header line a trace file starts with, for a trace written by `producer` (`None`: written by hand or by a
/// generator, read strictly).
pub fn header_line(producer: Option<Producer>, comment: Option<&str>) -> String {
    let mut out = String::new();
    let mut line = RecordLine::begin(&mut out, RecordKind::Header);
    line.number(Field::Version, FORMAT_VERSION);
    if let Some(producer) = producer {
        line.name(Field::Producer, producer.as_str());
    }
    if let Some(comment) = comment {
        line.string(Field::Comment, comment);
    }
    line.end();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_its_version_and_producer() {
        assert_eq!(header_line(None, None), "{\"type\":\"streamtrace\",\"version\":1}\n");
        assert_eq!(
            header_line(Some(Producer::Capture), Some("recorded by streamtrace capture")),
            "{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\",\"comment\":\"recorded by streamtrace capture\"}\n"
        );
    }
}
