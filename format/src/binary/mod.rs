//! The binary encoding of the trace: the same records as the JSON format, in fixed little-endian layouts that a
//! reader takes without tokenizing text (docs/trace-format.md, "The binary encoding").
//!
//! A file is the [`MAGIC`] bytes and the encoding's [`BINARY_VERSION`], then frames. Every frame starts with
//! the same 8 bytes (its [`Tag`], two zero bytes, and the length of what follows), so that a reader can skip a
//! frame it does not know. A record frame of kind K holds a presence mask (bit i: the i-th field of K's
//! [`layout`] is there) and then each present field's value in layout order, each of a fixed size by its
//! [`ValueType`]; lists (ranges, pointers, handles) are a count and fixed-size items. Strings (kernel names,
//! APIs, source lines, enumerated values) are declared once by a string frame and named by index. A record
//! that no layout holds (a `graph` with its inline nodes, a comment that is not a string, a field this build
//! does not know) travels as one embedded JSON object and is read by the JSON record reader.
//!
//! Writers: [`write`] (the capture library, `streamtrace synth`, `streamtrace convert`). Reader: [`read`]
//! decodes frames and field values; the analyzer maps them to its records.

pub mod read;
#[cfg(feature = "json")]
pub mod transcode;
pub mod write;

use crate::vocabulary::{Field, RecordKind, COMMON_FIELDS};

/// The first bytes of a binary trace: a byte with the high bit set (a reader of text, or a transfer that
/// strips the eighth bit, stops at once), the name, and a CR LF that a newline conversion would change.
pub const MAGIC: [u8; 8] = *b"\x89STBIN\r\n";
/// The version of the binary encoding, after the magic bytes (apart from the format's version in the header).
pub const BINARY_VERSION: u32 = 1;
/// The magic bytes, the version (u32) and four zero bytes.
pub const PREAMBLE_BYTES: usize = 16;
/// Tag (u16), two zero bytes, and the length of the body that follows (u32).
pub const FRAME_HEAD_BYTES: usize = 8;
/// The longest body a frame may have, as the JSON reader's longest record: a length past it is refused before
/// anything is allocated for it.
pub const MAX_FRAME_BYTES: u32 = 64 << 20;
/// Strings a writer declares before it starts its table over with a reset frame: the table of a program that
/// names a million different things stays bounded on both sides.
pub const MAX_STRINGS: u32 = 1 << 20;
/// The most bytes the strings declared since the last reset may hold, on the reader's side.
pub const MAX_STRING_TABLE_BYTES: usize = 1 << 30;
/// The largest line a line frame may name (lines count from 1): the records numbered on from it never overflow.
pub const MAX_LINE: u64 = 1 << 63;
/// The preamble of a binary trace file.
pub fn preamble() -> [u8; PREAMBLE_BYTES] {
    let mut bytes = [0u8; PREAMBLE_BYTES];
    bytes[..8].copy_from_slice(&MAGIC);
    bytes[8..12].copy_from_slice(&BINARY_VERSION.to_le_bytes());
    bytes
}

/// What a frame holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tag {
    /// A string (UTF-8), which becomes the next index of the string table.
    String,
    /// The string table starts over: the next string is index 0.
    StringsReset,
    /// One record as a JSON object of the JSON format.
    Json,
    /// The next record's place in the text it was converted from (its line), when that is not one past the
    /// last (a hand-written trace with blank lines or records over several lines): reports name places by it.
    Line,
    /// A record of this kind in its layout.
    Record(RecordKind),
    /// A tag this build does not know (a newer writer's): its frame is skipped by length.
    Unknown(u16),
}

/// The code of every record kind's frame. Codes are never reused: a kind the vocabulary gains takes a new one.
const RECORD_TAGS: &[(RecordKind, u16)] = &[
    (RecordKind::Header, 16),
    (RecordKind::Stream, 17),
    (RecordKind::Event, 18),
    (RecordKind::Thread, 19),
    (RecordKind::Process, 20),
    (RecordKind::Kernel, 21),
    (RecordKind::Memcpy, 22),
    (RecordKind::Memset, 23),
    (RecordKind::Record, 24),
    (RecordKind::Wait, 25),
    (RecordKind::Sync, 26),
    (RecordKind::Query, 27),
    (RecordKind::Alloc, 28),
    (RecordKind::Free, 29),
    (RecordKind::Graph, 30),
    (RecordKind::CaptureBegin, 31),
    (RecordKind::CaptureEnd, 32),
    (RecordKind::GraphCreate, 33),
    (RecordKind::GraphNode, 34),
    (RecordKind::GraphDepAdd, 35),
    (RecordKind::GraphDepRemove, 36),
    (RecordKind::GraphNodeUpdate, 37),
    (RecordKind::GraphNodeDestroy, 38),
    (RecordKind::GraphClone, 39),
    (RecordKind::GraphInstantiate, 40),
    (RecordKind::GraphExecUpdate, 41),
    (RecordKind::GraphDestroy, 42),
    (RecordKind::GraphExecDestroy, 43),
    (RecordKind::GraphLaunch, 44),
    (RecordKind::GpuTime, 45),
    (RecordKind::CaptureStats, 46),
    (RecordKind::OpBegin, 47),
    (RecordKind::OpEnd, 48),
    (RecordKind::CallBegin, 49),
    (RecordKind::CallEnd, 50),
    (RecordKind::HostAccess, 51),
    (RecordKind::HostFunc, 52),
    (RecordKind::HostWatch, 53),
    (RecordKind::Creation, 54),
    (RecordKind::Module, 55),
    (RecordKind::Callsite, 56),
    (RecordKind::FrameLine, 57),
    (RecordKind::HostRelease, 58),
    (RecordKind::HostAcquire, 59),
    (RecordKind::RangeBegin, 60),
    (RecordKind::RangeEnd, 61),
    (RecordKind::CaptureInfo, 62),
    (RecordKind::CaptureDepsSet, 63),
    (RecordKind::CaptureDepsAdd, 64),
];

const TAG_STRING: u16 = 1;
const TAG_STRINGS_RESET: u16 = 2;
const TAG_JSON: u16 = 3;
const TAG_LINE: u16 = 4;

impl Tag {
    pub fn code(self) -> u16 {
        match self {
            Tag::String => TAG_STRING,
            Tag::StringsReset => TAG_STRINGS_RESET,
            Tag::Json => TAG_JSON,
            Tag::Line => TAG_LINE,
            Tag::Record(kind) => RECORD_CODES[kind as usize],
            Tag::Unknown(code) => code,
        }
    }

    pub fn from_code(code: u16) -> Tag {
        match code {
            TAG_STRING => Tag::String,
            TAG_STRINGS_RESET => Tag::StringsReset,
            TAG_JSON => Tag::Json,
            TAG_LINE => Tag::Line,
            _ => match KINDS_BY_CODE.get(code as usize) {
                Some(Some(kind)) => Tag::Record(*kind),
                _ => Tag::Unknown(code),
            },
        }
    }
}

/// Each code's kind, by code (a frame's tag is looked up once per record).
static KINDS_BY_CODE: [Option<RecordKind>; 256] = {
    let mut kinds = [None; 256];
    let mut i = 0;
    while i < RECORD_TAGS.len() {
        let (kind, code) = RECORD_TAGS[i];
        assert!((code as usize) < 256, "record codes stay below 256");
        kinds[code as usize] = Some(kind);
        i += 1;
    }
    kinds
};

/// Each kind's code, by kind.
static RECORD_CODES: [u16; RecordKind::ALL.len()] = {
    let mut codes = [0u16; RecordKind::ALL.len()];
    let mut i = 0;
    while i < RECORD_TAGS.len() {
        codes[RECORD_TAGS[i].0 as usize] = RECORD_TAGS[i].1;
        i += 1;
    }
    codes
};

/// How one field's value is laid out.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// u64.
    Unsigned,
    /// u64, an address or a size, which JSON may give as a number or a string (`addr` and `base` are written
    /// in hex, `size` as a number).
    Address,
    /// i64.
    Signed,
    /// One byte, 0 or 1.
    Bool,
    /// u32: the index of a declared string.
    Text,
    /// `[address, size]`: two u64.
    Range,
    /// A `reads` or `writes` list: u32 count, then per item u64 address, u64 length, u8 dimensions (0: a plain
    /// range), and for a strided view u64 element size and per dimension u64 size and u64 stride.
    Accesses,
    /// A kernel's pointer arguments: u32 count, then per item u64 address and u8 (0 read, 1 write).
    Pointers,
    /// u32 count, then u64 each (graph node handles).
    Unsigneds,
    /// u32 count, then u64 each, addresses (a call site's frames).
    Addresses,
    /// Not in any layout: a record carrying it is embedded as JSON.
    JsonOnly,
}

/// How `field`'s value is laid out.
pub const fn value_type(field: Field) -> ValueType {
    use Field as F;
    match field {
        F::Type | F::Nodes => ValueType::JsonOnly,
        F::Addr | F::Size | F::Base => ValueType::Address,
        F::Priority => ValueType::Signed,
        F::HostSync | F::Sync | F::Ready => ValueType::Bool,
        F::Producer
        | F::Comment
        | F::Api
        | F::Region
        | F::Src
        | F::Name
        | F::StreamKind
        | F::Copy
        | F::FromMemory
        | F::ToMemory
        | F::AllocKind
        | F::FreeKind
        | F::Label
        | F::NodeKind
        | F::Path
        | F::BuildId
        | F::ProcessGroup
        | F::Coverage
        | F::Unseen
        | F::Fault
        | F::Guard
        | F::Managed
        | F::Ranges => ValueType::Text,
        F::From | F::To => ValueType::Range,
        F::Reads | F::Writes => ValueType::Accesses,
        F::Pointers => ValueType::Pointers,
        F::Deps | F::Bodies => ValueType::Unsigneds,
        F::Frames => ValueType::Addresses,
        F::Version
        | F::Rank
        | F::LocalRank
        | F::WorldSize
        | F::Pid
        | F::Thread
        | F::Time
        | F::TimeEnd
        | F::GpuStart
        | F::GpuEnd
        | F::Corr
        | F::Id
        | F::Device
        | F::Context
        | F::Stream
        | F::Event
        | F::Bytes
        | F::Calls
        | F::CallbackNs
        | F::Graph
        | F::Exec
        | F::Node
        | F::Child
        | F::Original
        | F::SetupNs
        | F::Site
        | F::Depth
        | F::Offset
        | F::Object
        | F::HostFunc
        | F::Windows
        | F::Faults
        | F::Dropped
        | F::Ignored => ValueType::Unsigned,
    }
}

/// The most fields one layout holds: one bit each in the presence mask.
pub const MAX_LAYOUT_FIELDS: usize = 32;
const NO_SLOT: u8 = u8::MAX;

/// Each kind's layout as a fixed array (`len` fields), and each field's place in it, computed from the
/// vocabulary: the common fields (not in the header's), then the kind's own, without those no layout holds.
struct Layouts {
    fields: [[Field; MAX_LAYOUT_FIELDS]; RecordKind::ALL.len()],
    len: [u8; RecordKind::ALL.len()],
    slot: [[u8; Field::ALL.len()]; RecordKind::ALL.len()],
}

static LAYOUTS: Layouts = {
    let mut layouts = Layouts {
        fields: [[Field::Type; MAX_LAYOUT_FIELDS]; RecordKind::ALL.len()],
        len: [0; RecordKind::ALL.len()],
        slot: [[NO_SLOT; Field::ALL.len()]; RecordKind::ALL.len()],
    };
    let mut k = 0;
    while k < RecordKind::ALL.len() {
        let kind = RecordKind::ALL[k];
        let mut n = 0;
        let mut part = 0;
        while part < 2 {
            let fields: &[Field] = match (part, kind) {
                (0, RecordKind::Header) => &[],
                (0, _) => COMMON_FIELDS,
                _ => kind.fields(),
            };
            let mut f = 0;
            while f < fields.len() {
                let field = fields[f];
                let listed = layouts.slot[k][field as usize] != NO_SLOT;
                if !listed && !matches!(value_type(field), ValueType::JsonOnly) {
                    assert!(n < MAX_LAYOUT_FIELDS, "a layout holds at most 32 fields");
                    layouts.fields[k][n] = field;
                    layouts.slot[k][field as usize] = n as u8;
                    n += 1;
                }
                f += 1;
            }
            part += 1;
        }
        layouts.len[k] = n as u8;
        k += 1;
    }
    layouts
};

/// The fields of `kind`'s layout, in the order their values follow the presence mask.
#[inline]
pub fn layout(kind: RecordKind) -> &'static [Field] {
    &LAYOUTS.fields[kind as usize][..LAYOUTS.len[kind as usize] as usize]
}

/// `field`'s place in `kind`'s layout (its bit in the presence mask); None when the layout does not hold it.
#[inline]
pub fn slot(kind: RecordKind, field: Field) -> Option<usize> {
    let slot = LAYOUTS.slot[kind as usize][field as usize];
    (slot != NO_SLOT).then_some(slot as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_tag_of_its_own_that_reads_back() {
        let mut codes: Vec<u16> = RECORD_TAGS.iter().map(|(_, code)| *code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), RecordKind::ALL.len(), "one code per kind, none shared");
        for kind in RecordKind::ALL {
            assert_eq!(Tag::from_code(Tag::Record(*kind).code()), Tag::Record(*kind));
        }
        for tag in [Tag::String, Tag::StringsReset, Tag::Json, Tag::Line] {
            assert_eq!(Tag::from_code(tag.code()), tag);
        }
        assert_eq!(Tag::from_code(9999), Tag::Unknown(9999));
    }

    #[test]
    fn layouts_hold_every_field_of_their_kind_but_the_json_only_ones() {
        for kind in RecordKind::ALL {
            for field in kind.allowed_fields().iter() {
                let held = slot(*kind, field).is_some();
                assert_eq!(held, value_type(field) != ValueType::JsonOnly, "{kind:?} {field:?}");
            }
            for (i, field) in layout(*kind).iter().enumerate() {
                assert_eq!(slot(*kind, *field), Some(i));
                assert!(kind.allows(*field));
            }
        }
    }

    /// The layouts are the encoding: a file written by one build is read by the next. A change here (a field
    /// moved, one added in the middle of a kind's list or of the common fields) must bump BINARY_VERSION, or
    /// add the field at the end of its kind's list.
    #[test]
    fn layouts_are_what_version_1_says() {
        let text: Vec<String> = RecordKind::ALL
            .iter()
            .map(|kind| {
                let own = layout(*kind).iter().skip(if *kind == RecordKind::Header { 0 } else { COMMON_FIELDS.len() });
                format!("{}: {}", kind, own.map(|f| f.as_str()).collect::<Vec<_>>().join(" "))
            })
            .collect();
        let common: Vec<&str> = layout(RecordKind::Kernel)[..COMMON_FIELDS.len()].iter().map(|f| f.as_str()).collect();
        assert_eq!(common.join(" "), "pid thread time time_end gpu_start gpu_end corr api region src site comment");
        let expected = [
            "streamtrace: version producer rank local_rank world_size host_sync ranges comment",
            "stream: id stream_kind priority device context",
            "event: id",
            "thread: name",
            "process: name",
            "kernel: stream name reads writes pointers coverage unseen",
            "memcpy: stream copy from to from_memory to_memory bytes sync",
            "memset: stream to to_memory bytes sync",
            "record: stream event",
            "wait: stream event",
            "sync: stream event device context",
            "query: stream event ready",
            "alloc: id addr size alloc_kind stream label name",
            "free: id free_kind stream",
            "graph: stream name",
            "capture_begin: stream graph",
            "capture_end: stream graph",
            "graph_create: graph",
            "graph_node: graph node node_kind deps name reads writes pointers event child bodies",
            "graph_dep_add: graph node deps",
            "graph_dep_remove: graph node deps",
            "graph_node_update: graph exec node node_kind name reads writes pointers event child",
            "graph_node_destroy: graph node",
            "graph_clone: graph original",
            "graph_instantiate: graph exec",
            "graph_exec_update: graph exec",
            "graph_destroy: graph",
            "graph_exec_destroy: exec",
            "graph_launch: exec stream name",
            "gpu_time: ",
            "capture_stats: calls callback_ns setup_ns",
            "op_begin: name reads writes",
            "op_end: name reads writes process_group",
            "call_begin: name",
            "call_end: ",
            "host_access: name reads writes host_func fault",
            // `node` came last (2026-12-03): a file written before never sets its bit, so it reads as it did.
            "host_func: stream id name reads writes node",
            "host_watch: guard managed windows faults dropped ignored",
            "creation: stream event label",
            "module: path base addr size build_id",
            "callsite: id frames",
            "frame_line: path addr depth name offset",
            "host_release: object",
            "host_acquire: object",
            "range_begin: id name",
            "range_end: id",
            "capture_info: stream graph deps",
            "capture_deps_set: stream deps",
            "capture_deps_add: stream deps",
        ];
        assert_eq!(text, expected);
    }
}
