//! The fields of the operation records a trace holds the most of (kernels, copies, sets, event records and
//! waits, synchronizations, queries, allocations and frees), typed: filled from a record serde or the scanner
//! decoded ([`OpFields::of`]), or by the binary reader straight from a frame's bytes, without the raw record of
//! every field. The rules of what they mean (records.rs) take them alike, so both encodings read these records
//! by one implementation.

use std::sync::Arc;

use streamtrace_format::binary::read::PointerList;
use streamtrace_format::RecordKind;

use super::accesses::AccessItems;
use super::raw::{RawPointer, RawRange, RawRecord};

/// A name field as the record carried it: text borrowed from the record, or a string a binary trace declared
/// once, which its reader keeps shared: taking it is then a reference count, not a lookup in the table of names
/// (hashing and comparing its bytes for every record that names it).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(in crate::ingest) enum Text<'a> {
    Borrowed(&'a str),
    Shared(&'a Arc<str>),
}

impl<'a> Text<'a> {
    pub fn as_str(self) -> &'a str {
        match self {
            Text::Borrowed(text) => text,
            Text::Shared(text) => text,
        }
    }
}

/// The fields every operation record may carry that say who issued it, when, and from where (the format's
/// common fields but `comment`, which means nothing).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::ingest) struct CommonFields<'a> {
    pub pid: Option<u64>,
    pub thread: Option<u64>,
    pub time: Option<u64>,
    pub time_end: Option<u64>,
    pub gpu_start: Option<u64>,
    pub gpu_end: Option<u64>,
    pub corr: Option<u64>,
    pub api: Option<Text<'a>>,
    pub region: Option<Text<'a>>,
    pub src: Option<&'a str>,
    pub site: Option<u64>,
}

impl<'a> CommonFields<'a> {
    pub fn of(raw: &'a RawRecord) -> CommonFields<'a> {
        CommonFields {
            pid: raw.pid,
            thread: raw.thread,
            time: raw.time,
            time_end: raw.time_end,
            gpu_start: raw.gpu_start,
            gpu_end: raw.gpu_end,
            corr: raw.corr,
            api: raw.api.as_deref().map(Text::Borrowed),
            region: raw.region.as_deref().map(Text::Borrowed),
            src: raw.src.as_deref(),
            site: raw.site,
        }
    }
}

/// A kernel's `pointers` list as the record carried it: decoded from JSON (`"r"`, `"w"`, or the first
/// hand-written traces' `"read"` and `"write"`), or a binary frame's bytes.
#[derive(Copy, Clone, Debug)]
pub(in crate::ingest) enum PointerItems<'a> {
    Decoded(&'a [RawPointer<'a>]),
    Frame(PointerList<'a>),
}

impl Default for PointerItems<'_> {
    fn default() -> Self {
        PointerItems::Decoded(&[])
    }
}

/// The fields of a record of one of [`OpFields::KINDS`] (each kind carries some of them).
#[derive(Copy, Clone, Debug, Default)]
pub(in crate::ingest) struct OpFields<'a> {
    pub common: CommonFields<'a>,
    pub stream: Option<u64>,
    pub event: Option<u64>,
    pub device: Option<u64>,
    pub context: Option<u64>,
    pub name: Option<Text<'a>>,
    pub reads: AccessItems<'a>,
    pub writes: AccessItems<'a>,
    pub pointers: PointerItems<'a>,
    pub coverage: Option<&'a str>,
    pub unseen: Option<&'a str>,
    pub copy: Option<&'a str>,
    pub from: Option<RawRange>,
    pub to: Option<RawRange>,
    pub from_memory: Option<&'a str>,
    pub to_memory: Option<&'a str>,
    pub bytes: Option<u64>,
    pub sync: Option<bool>,
    pub ready: Option<bool>,
    pub id: Option<u64>,
    pub addr: Option<u64>,
    pub size: Option<u64>,
    pub alloc_kind: Option<&'a str>,
    pub free_kind: Option<&'a str>,
    pub label: Option<&'a str>,
}

impl<'a> OpFields<'a> {
    /// The kinds whose records these fields hold.
    pub const KINDS: [RecordKind; 9] = [
        RecordKind::Kernel,
        RecordKind::Memcpy,
        RecordKind::Memset,
        RecordKind::Record,
        RecordKind::Wait,
        RecordKind::Sync,
        RecordKind::Query,
        RecordKind::Alloc,
        RecordKind::Free,
    ];

    /// Whether records of `kind` are read through these fields.
    pub fn holds(kind: RecordKind) -> bool {
        OpFields::KINDS.contains(&kind)
    }

    pub fn of(raw: &'a RawRecord) -> OpFields<'a> {
        OpFields {
            common: CommonFields::of(raw),
            stream: raw.stream,
            event: raw.event,
            device: raw.device,
            context: raw.context,
            name: raw.name.as_deref().map(Text::Borrowed),
            reads: AccessItems::Decoded(raw.reads()),
            writes: AccessItems::Decoded(raw.writes()),
            pointers: PointerItems::Decoded(raw.pointers.as_deref().unwrap_or(&[])),
            coverage: raw.coverage.as_deref(),
            unseen: raw.unseen.as_deref(),
            copy: raw.copy.as_deref(),
            from: raw.from,
            to: raw.to,
            from_memory: raw.from_memory.as_deref(),
            to_memory: raw.to_memory.as_deref(),
            bytes: raw.bytes,
            sync: raw.sync,
            ready: raw.ready,
            id: raw.id,
            addr: raw.addr.map(|addr| addr.0),
            size: raw.size.map(|size| size.0),
            alloc_kind: raw.alloc_kind.as_deref(),
            free_kind: raw.free_kind.as_deref(),
            label: raw.label.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use streamtrace_format::Field;

    use super::*;

    /// Whether `field` is one of the fields `OpFields::of` takes (or `comment`, which a record may carry and
    /// which means nothing).
    fn held(field: Field) -> bool {
        use Field as F;
        matches!(
            field,
            F::Type
                | F::Comment
                | F::Pid
                | F::Thread
                | F::Time
                | F::TimeEnd
                | F::GpuStart
                | F::GpuEnd
                | F::Corr
                | F::Api
                | F::Region
                | F::Src
                | F::Site
                | F::Stream
                | F::Event
                | F::Device
                | F::Context
                | F::Name
                | F::Reads
                | F::Writes
                | F::Pointers
                | F::Coverage
                | F::Unseen
                | F::Copy
                | F::From
                | F::To
                | F::FromMemory
                | F::ToMemory
                | F::Bytes
                | F::Sync
                | F::Ready
                | F::Id
                | F::Addr
                | F::Size
                | F::AllocKind
                | F::FreeKind
                | F::Label
        )
    }

    /// A field the format lets these kinds carry that `OpFields::of` did not take would be lost on the way.
    #[test]
    fn every_field_the_kinds_may_carry_is_held() {
        for kind in OpFields::KINDS {
            for field in kind.allowed_fields().iter() {
                assert!(held(field), "{kind}: {field}");
            }
        }
    }
}
