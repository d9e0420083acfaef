//! One record frame of a binary trace decoded into the raw record the JSON reader decodes its text into, so that
//! both encodings are taken by the same record reader (`json::parser`): every rule of what a record may carry
//! and what it means is applied once.

use std::borrow::Cow;

use streamtrace_format::binary::read::{fields, AccessList, DecodeError, Value};
use streamtrace_format::{AccessFlag, Field, FieldSet, RecordKind};

use super::strings::{text, wrong, Strings};
use crate::ingest::json::raw::{Address, RawAccessRange, RawPointer, RawRange, RawRecord, RawView};

/// The lists a record's decoding fills, kept from record to record so that reading one allocates nothing.
#[derive(Default)]
pub(super) struct SpareLists {
    reads: Vec<RawAccessRange>,
    writes: Vec<RawAccessRange>,
}

impl SpareLists {
    /// Takes back the lists `raw` was given, for the next record (which empties them before filling them).
    pub fn recycle(&mut self, raw: &mut RawRecord) {
        for (list, spare) in [(raw.reads.take(), &mut self.reads), (raw.writes.take(), &mut self.writes)] {
            if let Some(list) = list {
                *spare = list;
            }
        }
    }
}

/// Decodes a record frame's body of `kind` into `raw`, a default record; strings are borrowed from `strings`,
/// lists taken from `spare` (give them back with [`SpareLists::recycle`]).
pub(super) fn decode_record<'s>(
    kind: RecordKind,
    body: &[u8],
    strings: &'s Strings,
    spare: &mut SpareLists,
    raw: &mut RawRecord<'s>,
) -> Result<(), DecodeError> {
    raw.kind = Cow::Borrowed(kind.as_str());
    raw.known_kind = Some(kind);
    raw.present = FieldSet::EMPTY.with(Field::Type);
    let mut values = fields(kind, body)?;
    while let Some(item) = values.next() {
        let (field, value) = item?;
        raw.present = raw.present.with(field);
        let wrong = |what: &str| wrong(field, what.to_string());
        let text = |index: u32| text(strings, index, field).map(|text| Cow::Borrowed(&**text));
        let narrow = |v: u64| u32::try_from(v).map_err(|_| wrong(&format!("{v} is past 2^32")));
        match (field, value) {
            (Field::Version, Value::Unsigned(v)) => raw.version = Some(narrow(v)?),
            (Field::Rank, Value::Unsigned(v)) => raw.rank = Some(narrow(v)?),
            (Field::LocalRank, Value::Unsigned(v)) => raw.local_rank = Some(narrow(v)?),
            (Field::WorldSize, Value::Unsigned(v)) => raw.world_size = Some(narrow(v)?),
            (Field::Depth, Value::Unsigned(v)) => raw.depth = Some(narrow(v)?),
            (Field::Priority, Value::Signed(v)) => {
                raw.priority = Some(i32::try_from(v).map_err(|_| wrong(&format!("priority {v} is past 32 bits")))?)
            }
            (Field::Addr, Value::Unsigned(v)) => raw.addr = Some(Address(v)),
            (Field::Size, Value::Unsigned(v)) => raw.size = Some(Address(v)),
            (Field::Base, Value::Unsigned(v)) => raw.base = Some(Address(v)),
            (field, Value::Unsigned(v)) => *unsigned(raw, field).ok_or_else(|| wrong("not a number field"))? = Some(v),
            (field, Value::Bool(v)) => match field {
                Field::Sync => raw.sync = Some(v),
                Field::Ready => raw.ready = Some(v),
                Field::HostSync => raw.host_sync = Some(v),
                _ => return Err(wrong("not a boolean field")),
            },
            (Field::Comment, Value::Text(index)) => {
                raw.comment = Some(serde_json::Value::String(text(index)?.into_owned()))
            }
            (field, Value::Text(index)) => {
                *text_field(raw, field).ok_or_else(|| wrong("not a text field"))? = Some(text(index)?)
            }
            (Field::From, Value::Range(a, s)) => raw.from = Some(RawRange(Address(a), Address(s))),
            (Field::To, Value::Range(a, s)) => raw.to = Some(RawRange(Address(a), Address(s))),
            (Field::Reads, Value::Accesses(items)) => raw.reads = Some(accesses(items, &mut spare.reads)),
            (Field::Writes, Value::Accesses(items)) => raw.writes = Some(accesses(items, &mut spare.writes)),
            (Field::Pointers, Value::Pointers(items)) => {
                let flag = |flag: AccessFlag| Cow::Borrowed(flag.as_str());
                raw.pointers = Some(items.iter().map(|(a, f)| RawPointer(Address(a), flag(f))).collect())
            }
            (Field::Deps, Value::Unsigneds(items)) => raw.deps = Some(items.iter().collect()),
            (Field::Bodies, Value::Unsigneds(items)) => raw.bodies = Some(items.iter().collect()),
            (Field::Frames, Value::Unsigneds(items)) => raw.frames = Some(items.iter().map(Address).collect()),
            _ => return Err(wrong("a value of another shape than its field's")),
        }
    }
    Ok(())
}

/// A `reads` or `writes` list, into the list kept from the record before.
fn accesses(items: AccessList, spare: &mut Vec<RawAccessRange>) -> Vec<RawAccessRange> {
    let mut list = std::mem::take(spare);
    list.clear();
    list.extend(items.iter().map(|item| RawAccessRange {
        range: RawRange(Address(item.address), Address(item.len)),
        view: item.view.map(|(element_size, dims)| Box::new(RawView { element_size, dims })),
    }));
    list
}

/// The raw record's member of a u64 field (address and size fields are `Address`es: handled by the caller).
fn unsigned<'r>(raw: &'r mut RawRecord, field: Field) -> Option<&'r mut Option<u64>> {
    Some(match field {
        Field::Pid => &mut raw.pid,
        Field::Thread => &mut raw.thread,
        Field::Time => &mut raw.time,
        Field::TimeEnd => &mut raw.time_end,
        Field::GpuStart => &mut raw.gpu_start,
        Field::GpuEnd => &mut raw.gpu_end,
        Field::Corr => &mut raw.corr,
        Field::Id => &mut raw.id,
        Field::Device => &mut raw.device,
        Field::Context => &mut raw.context,
        Field::Stream => &mut raw.stream,
        Field::Event => &mut raw.event,
        Field::Bytes => &mut raw.bytes,
        Field::Calls => &mut raw.calls,
        Field::CallbackNs => &mut raw.callback_ns,
        Field::Graph => &mut raw.graph,
        Field::Exec => &mut raw.exec,
        Field::Node => &mut raw.node,
        Field::Child => &mut raw.child,
        Field::Original => &mut raw.original,
        Field::SetupNs => &mut raw.setup_ns,
        Field::Site => &mut raw.site,
        Field::Offset => &mut raw.offset,
        Field::Object => &mut raw.object,
        Field::HostFunc => &mut raw.host_func,
        Field::Windows => &mut raw.windows,
        Field::Faults => &mut raw.faults,
        Field::Dropped => &mut raw.dropped,
        Field::Ignored => &mut raw.ignored,
        _ => return None,
    })
}

fn text_field<'r, 's>(raw: &'r mut RawRecord<'s>, field: Field) -> Option<&'r mut Option<Cow<'s, str>>> {
    Some(match field {
        Field::Producer => &mut raw.producer,
        Field::Api => &mut raw.api,
        Field::Region => &mut raw.region,
        Field::Src => &mut raw.src,
        Field::Name => &mut raw.name,
        Field::StreamKind => &mut raw.stream_kind,
        Field::Copy => &mut raw.copy,
        Field::FromMemory => &mut raw.from_memory,
        Field::ToMemory => &mut raw.to_memory,
        Field::AllocKind => &mut raw.alloc_kind,
        Field::FreeKind => &mut raw.free_kind,
        Field::Label => &mut raw.label,
        Field::NodeKind => &mut raw.node_kind,
        Field::Path => &mut raw.path,
        Field::BuildId => &mut raw.build_id,
        Field::ProcessGroup => &mut raw.process_group,
        Field::Coverage => &mut raw.coverage,
        Field::Unseen => &mut raw.unseen,
        Field::Fault => &mut raw.fault,
        Field::Guard => &mut raw.guard,
        Field::Managed => &mut raw.managed,
        Field::Ranges => &mut raw.ranges,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use streamtrace_format::binary::read::{FrameOutcome, FrameReader};
    use streamtrace_format::binary::write::BinaryWriter;
    use streamtrace_format::binary::{preamble, Tag};

    use super::*;

    /// The bodies of the record frames `write` makes, with the strings it declared.
    fn record_frames(write: impl FnOnce(&mut BinaryWriter, &mut Vec<u8>)) -> (Vec<(RecordKind, Vec<u8>)>, Strings) {
        let mut out = preamble().to_vec();
        write(&mut BinaryWriter::new(), &mut out);
        let mut frames = FrameReader::new(&out[..]).expect("a binary trace");
        let (mut records, mut strings) = (Vec::new(), Strings::new());
        while let FrameOutcome::Frame { head, .. } = frames.next_frame() {
            match head.tag {
                Tag::String => strings.push(Some(std::str::from_utf8(frames.body()).expect("text").into())),
                Tag::Record(kind) => records.push((kind, frames.body().to_vec())),
                other => panic!("a {other:?} frame"),
            }
        }
        (records, strings)
    }

    fn ranges(list: &Option<Vec<RawAccessRange>>) -> Option<Vec<(u64, u64)>> {
        list.as_ref().map(|list| list.iter().map(|item| (item.range.0 .0, item.range.1 .0)).collect())
    }

    #[test]
    fn a_record_decoded_into_lists_kept_from_the_one_before_carries_nothing_of_it() {
        let (records, strings) = record_frames(|writer, out| {
            let mut first = writer.begin(out, RecordKind::Kernel);
            first.unsigned(Field::Stream, 1).string(Field::Name, "k").ranges(Field::Reads, [(0x10, 4), (0x20, 4)]);
            first.ranges(Field::Writes, [(0x30, 8)]);
            first.end().expect("encodable");
            let mut second = writer.begin(out, RecordKind::Kernel);
            second.unsigned(Field::Stream, 2).ranges(Field::Reads, [(0x40, 16)]);
            second.end().expect("encodable");
        });
        let mut spare = SpareLists::default();
        let decode = |spare: &mut SpareLists, (kind, body): &(RecordKind, Vec<u8>)| {
            let mut raw = RawRecord::default();
            decode_record(*kind, body, &strings, spare, &mut raw).expect("decodes");
            let seen = (raw.stream, raw.name.as_deref().map(str::to_string), ranges(&raw.reads), ranges(&raw.writes));
            let present = raw.fields_present();
            spare.recycle(&mut raw);
            (seen, present, raw.known_kind)
        };
        let (first, _, kind) = decode(&mut spare, &records[0]);
        assert_eq!(first, (Some(1), Some("k".to_string()), Some(vec![(0x10, 4), (0x20, 4)]), Some(vec![(0x30, 8)])));
        assert_eq!(kind, Some(RecordKind::Kernel), "the kind as the frame's tag gave it");
        assert!(spare.reads.capacity() >= 2 && spare.writes.capacity() >= 1, "the lists are kept");
        let (second, present, _) = decode(&mut spare, &records[1]);
        assert_eq!(second, (Some(2), None, Some(vec![(0x40, 16)]), None), "only its own fields and items");
        assert!(!present.contains(Field::Writes) && !present.contains(Field::Name));
    }
}
