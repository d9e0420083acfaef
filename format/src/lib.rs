//! The streamtrace trace format, spelled once: what a trace file may say and how it is written.
//!
//! The trace is the seam between the capture library (which writes it inside the user's program) and the
//! analyzer (which reads it). Both sides name every record kind, field and value through this crate, so that a
//! writer cannot spell what the reader does not know:
//! - [`vocabulary`]: record kinds with the fields each may carry, and the enumerated values (stream kinds, copy
//!   kinds, allocation and free kinds) with their spellings;
//! - [`line`]: the writer helper that appends one record as one JSON line;
//! - [`binary`]: the binary encoding of the same records (fixed little-endian layouts, strings declared once),
//!   which the capture library writes by default; [`encoding`]: the two encodings, and the field calls that
//!   write a record to either;
//! - [`launch`]: what the `streamtrace capture` command and the injected library agree on besides the file
//!   (environment variables, where libcupti is looked for).
//!
//! The PyTorch observers (capture/python/) write their records in Python and C++; a test of this crate reads
//! their sources and checks every record kind, field and value they spell against [`vocabulary`].
//!
//! docs/trace-format.md describes the format for people.

pub mod binary;
pub mod encoding;
pub mod launch;
pub mod line;
pub mod vocabulary;

pub use encoding::{AnyRecord, FieldNumber, FieldSink, TraceEncoding, TraceWriter};
pub use line::{parse_address, push_address, push_escaped, push_number, ByteRuns, RecordLine};
pub use vocabulary::{
    access_range, AccessFlag, AllocKind, CopyKind, Coverage, FaultKind, Field, FieldSet, FreeKind, MemoryKind,
    NodeKind, Producer, RangeTrigger, RecordKind, StreamKind, UnknownName, Unseen, WatchState, COMMON_FIELDS,
    GRAPH_NODE_FIELDS,
};

/// The version of the format this crate describes; the header carries it.
pub const FORMAT_VERSION: u32 = 1;

/// The deepest `frame_line` a trace may hold (`depth`, 0 the innermost function of a return address): the capture
/// writes no deeper one, and a reader refuses it, since the analyzer keeps one entry per depth of an address
/// (a depth of 2^40 in a damaged trace would ask for terabytes). Inlining chains are a few functions deep.
pub const MAX_FRAME_LINE_DEPTH: u32 = 255;

/// The `host_acquire` object of host function `id` (its `host_func` record's id): the thread that runs the
/// function acquires it when the function starts, and the analysis holds there the function's place in its
/// stream, so that what the thread hands on (a thread it starts, a mutex it unlocks) is ordered after that place.
/// Apart from the capture's own marks (a thread's serial number above bit 40, from 1 up): the serial all ones.
pub const fn host_func_object(id: u64) -> u64 {
    HOST_FUNC_OBJECTS | (id & ((1 << 40) - 1))
}

/// The first of the objects [`host_func_object`] names.
pub const HOST_FUNC_OBJECTS: u64 = 0xff_ffff << 40;

/// Where a process stands in a distributed job, as its launcher (torchrun, `mpirun` wrappers that set the same
/// variables) told it: the header of its trace says so, and reports label its findings with it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct JobPlace {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
}

impl JobPlace {
    /// The process's place from `RANK`, `LOCAL_RANK` and `WORLD_SIZE` in `env` (a variable that is not a
    /// number is left out).
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> JobPlace {
        let number = |name: &str| env(name).and_then(|v| v.trim().parse().ok());
        JobPlace {
            rank: number(launch::ENV_RANK),
            local_rank: number(launch::ENV_LOCAL_RANK),
            world_size: number(launch::ENV_WORLD_SIZE),
        }
    }
}

/// The header line a trace file starts with, for a trace written by `producer` (`None`: written by hand or by a
/// generator, read strictly).
pub fn header_line(producer: Option<Producer>, comment: Option<&str>) -> String {
    job_header_line(producer, Recorded::default(), comment)
}

/// What a recording's header says of the process and how it was recorded.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The process's place in a distributed job.
    pub job: JobPlace,
    /// Whether the trace records the host synchronization between the process's threads.
    pub host_sync: bool,
    /// What started its capture ranges, when it was recorded in ranges (`--capture-range`, `--delay`).
    pub ranges: Option<RangeTrigger>,
}

/// The header line of a trace of one process of a distributed job, recorded as `recorded` says.
pub fn job_header_line(producer: Option<Producer>, recorded: Recorded, comment: Option<&str>) -> String {
    let mut out = String::new();
    let mut line = RecordLine::begin(&mut out, RecordKind::Header);
    header_fields(&mut line, producer, recorded, comment);
    line.end();
    out
}

/// The preamble and header record of a binary trace, as [`job_header_line`] says them.
pub fn binary_header(
    writer: &mut binary::write::BinaryWriter,
    producer: Option<Producer>,
    recorded: Recorded,
    comment: Option<&str>,
) -> Vec<u8> {
    let mut out = binary::preamble().to_vec();
    let mut record = writer.begin(&mut out, RecordKind::Header);
    header_fields(&mut record, producer, recorded, comment);
    // Every header field is in the header's layout.
    let _ = record.end();
    out
}

fn header_fields(sink: &mut impl FieldSink, producer: Option<Producer>, recorded: Recorded, comment: Option<&str>) {
    let Recorded { job, host_sync, ranges } = recorded;
    sink.unsigned(Field::Version, u64::from(FORMAT_VERSION));
    if let Some(producer) = producer {
        sink.name(Field::Producer, producer.as_str());
    }
    for (field, value) in
        [(Field::Rank, job.rank), (Field::LocalRank, job.local_rank), (Field::WorldSize, job.world_size)]
    {
        if let Some(value) = value {
            sink.unsigned(field, u64::from(value));
        }
    }
    if host_sync {
        sink.boolean(Field::HostSync, true);
    }
    if let Some(trigger) = ranges {
        sink.name(Field::Ranges, trigger.as_str());
    }
    if let Some(comment) = comment {
        sink.string(Field::Comment, comment);
    }
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

    #[test]
    fn a_job_header_says_where_the_process_stands() {
        let env = |name: &str| match name {
            "RANK" => Some("3".to_string()),
            "LOCAL_RANK" => Some("1".to_string()),
            "WORLD_SIZE" => Some("four".to_string()),
            _ => None,
        };
        let job = JobPlace::from_env(env);
        assert_eq!(
            job,
            JobPlace { rank: Some(3), local_rank: Some(1), world_size: None },
            "a variable that is no number is left out"
        );
        assert_eq!(
            job_header_line(Some(Producer::Capture), Recorded { job, ..Recorded::default() }, None),
            "{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\",\"rank\":3,\"local_rank\":1}\n"
        );
        assert_eq!(
            job_header_line(Some(Producer::Capture), Recorded { host_sync: true, ..Recorded::default() }, None),
            "{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\",\"host_sync\":true}\n"
        );
        let ranged = Recorded { ranges: Some(RangeTrigger::ProfilerApi), ..Recorded::default() };
        assert_eq!(
            job_header_line(Some(Producer::Capture), ranged, None),
            "{\"type\":\"streamtrace\",\"version\":1,\"producer\":\"capture\",\"ranges\":\"cudaProfilerApi\"}\n"
        );
    }
}
