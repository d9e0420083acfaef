//! A record frame of the operation kinds a trace holds the most of (`OpFields::KINDS`: kernels, copies, sets,
//! event records and waits, synchronizations, queries, allocations and frees) decoded straight into those
//! fields, for the record reader's rules: no raw record of every field is filled and emptied again, lists stay
//! in the frame's bytes until the rules take their items, strings are borrowed from the table. What a frame may
//! hold and how a value is wrong is the same as for the raw record (raw.rs): the same reading of fields, the
//! same string lookup.

use streamtrace_format::binary::read::{fields, DecodeError};
use streamtrace_format::{Field, RecordKind};

use super::strings::{text, wrong, Strings};
use crate::ingest::json::accesses::AccessItems;
use crate::ingest::json::op_fields::{OpFields, PointerItems, Text};
use crate::ingest::json::raw::{Address, RawRange};

/// Decodes a record frame's body of `kind`, one of `OpFields::KINDS`, into `op` (empty: `OpFields::default()`,
/// filled where it stands rather than returned, the fields being a few hundred bytes).
pub(super) fn decode_op<'a>(
    kind: RecordKind,
    body: &'a [u8],
    strings: &'a Strings,
    op: &mut OpFields<'a>,
) -> Result<(), DecodeError> {
    let mut values = fields(kind, body)?;
    // Each field read by the reader of its type, as `Fields::value` reads it.
    while let Some(field) = values.next_field()? {
        let common = &mut op.common;
        match field {
            Field::Pid => common.pid = Some(values.unsigned(field)?),
            Field::Thread => common.thread = Some(values.unsigned(field)?),
            Field::Time => common.time = Some(values.unsigned(field)?),
            Field::TimeEnd => common.time_end = Some(values.unsigned(field)?),
            Field::GpuStart => common.gpu_start = Some(values.unsigned(field)?),
            Field::GpuEnd => common.gpu_end = Some(values.unsigned(field)?),
            Field::Corr => common.corr = Some(values.unsigned(field)?),
            Field::Site => common.site = Some(values.unsigned(field)?),
            Field::Stream => op.stream = Some(values.unsigned(field)?),
            Field::Event => op.event = Some(values.unsigned(field)?),
            Field::Device => op.device = Some(values.unsigned(field)?),
            Field::Context => op.context = Some(values.unsigned(field)?),
            Field::Bytes => op.bytes = Some(values.unsigned(field)?),
            Field::Sync => op.sync = Some(values.boolean(field)?),
            Field::Ready => op.ready = Some(values.boolean(field)?),
            Field::Id => op.id = Some(values.unsigned(field)?),
            Field::Addr => op.addr = Some(values.unsigned(field)?),
            Field::Size => op.size = Some(values.unsigned(field)?),
            Field::From | Field::To => {
                let (address, size) = values.range(field)?;
                let range = Some(RawRange(Address(address), Address(size)));
                if field == Field::From {
                    op.from = range;
                } else {
                    op.to = range;
                }
            }
            Field::Reads => op.reads = AccessItems::Frame(values.accesses(field)?),
            Field::Writes => op.writes = AccessItems::Frame(values.accesses(field)?),
            Field::Pointers => op.pointers = PointerItems::Frame(values.pointers(field)?),
            Field::Api
            | Field::Region
            | Field::Src
            | Field::Name
            | Field::Coverage
            | Field::Unseen
            | Field::Copy
            | Field::FromMemory
            | Field::ToMemory
            | Field::AllocKind
            | Field::FreeKind
            | Field::Label
            | Field::Comment => {
                let shared = text(strings, values.text(field)?, field)?;
                let text = Some(&**shared);
                match field {
                    Field::Api => common.api = Some(Text::Shared(shared)),
                    Field::Region => common.region = Some(Text::Shared(shared)),
                    Field::Src => common.src = text,
                    Field::Name => op.name = Some(Text::Shared(shared)),
                    Field::Coverage => op.coverage = text,
                    Field::Unseen => op.unseen = text,
                    Field::Copy => op.copy = text,
                    Field::FromMemory => op.from_memory = text,
                    Field::ToMemory => op.to_memory = text,
                    Field::AllocKind => op.alloc_kind = text,
                    Field::FreeKind => op.free_kind = text,
                    Field::Label => op.label = text,
                    // Means nothing, but must name a string as any text does.
                    _ => {}
                }
            }
            // No layout of these kinds holds another field (a test below gives every field of each).
            _ => {
                values.value(field)?;
                return Err(wrong(field, "a value of another shape than its field's"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use streamtrace_format::binary::read::{FrameOutcome, FrameReader};
    use streamtrace_format::binary::write::{AccessItem, BinaryWriter};
    use streamtrace_format::binary::{layout, preamble, Tag, ValueType};
    use streamtrace_format::AccessFlag;

    use super::super::raw::{decode_record, SpareLists};
    use super::*;
    use crate::ingest::json::op_fields::CommonFields;
    use crate::ingest::json::raw::RawRecord;

    /// What a decoding gave, lists read out, to compare.
    fn seen(op: &OpFields) -> String {
        let reads: Vec<_> = match op.reads {
            AccessItems::Decoded(items) => {
                items.iter().map(|i| (i.range.0 .0, i.range.1 .0, i.view.is_some())).collect()
            }
            AccessItems::Frame(items) => items.iter().map(|i| (i.address, i.len, i.view.is_some())).collect(),
        };
        let writes: Vec<_> = match op.writes {
            AccessItems::Decoded(items) => {
                items.iter().map(|i| (i.range.0 .0, i.range.1 .0, i.view.is_some())).collect()
            }
            AccessItems::Frame(items) => items.iter().map(|i| (i.address, i.len, i.view.is_some())).collect(),
        };
        let pointers: Vec<_> = match op.pointers {
            PointerItems::Decoded(items) => items.iter().map(|p| (p.0 .0, p.1.to_string())).collect(),
            PointerItems::Frame(items) => items.iter().map(|(a, f)| (a, f.as_str().to_string())).collect(),
        };
        let ranges = (op.from.map(|r| (r.0 .0, r.1 .0)), op.to.map(|r| (r.0 .0, r.1 .0)));
        let name = op.name.map(Text::as_str);
        let texts = (name, op.coverage, op.unseen, op.copy, op.from_memory, op.to_memory);
        let common = (op.common.api.map(Text::as_str), op.common.region.map(Text::as_str));
        let common = (common, CommonFields { api: None, region: None, ..op.common });
        let numbers = (op.stream, op.event, op.device, op.context, op.bytes, op.sync);
        let memory = (op.ready, op.id, op.addr, op.size, op.alloc_kind, op.free_kind, op.label);
        format!("{:?} {numbers:?} {texts:?} {ranges:?} {reads:?} {writes:?} {pointers:?} {memory:?}", common)
    }

    /// Every field of every kind's layout given (strings among the first declared), the frame decoded both ways:
    /// into the raw record and from it, and straight into the fields.
    #[test]
    fn a_frame_decoded_straight_gives_what_the_raw_record_gives() {
        for kind in OpFields::KINDS {
            let mut out = preamble().to_vec();
            let mut writer = BinaryWriter::new();
            let mut record = writer.begin(&mut out, kind);
            for (i, field) in layout(kind).iter().enumerate() {
                let n = 100 + i as u64;
                match streamtrace_format::binary::value_type(*field) {
                    ValueType::Unsigned | ValueType::Address => record.unsigned(*field, n),
                    ValueType::Bool => record.boolean(*field, true),
                    ValueType::Text => record.string(*field, &format!("{field} {n}")),
                    ValueType::Range => record.range(*field, 0x1000 * n, n),
                    ValueType::Accesses => record.accesses(
                        *field,
                        [
                            AccessItem { address: 0x10 * n, len: 8, view: None },
                            AccessItem { address: 0x20 * n, len: 24, view: Some((4, &[(3, 2)])) },
                        ],
                    ),
                    ValueType::Pointers => record.pointers(*field, [(n, AccessFlag::Read), (n + 1, AccessFlag::Write)]),
                    other => panic!("{kind}: {field} is {other:?}"),
                };
            }
            record.end().expect("encodable");
            let mut frames = FrameReader::new(&out[..]).expect("a binary trace");
            let mut strings = Strings::new();
            let body = loop {
                match frames.next_frame() {
                    FrameOutcome::Frame { head, .. } if head.tag == Tag::String => {
                        strings.push(Some(std::str::from_utf8(frames.body()).expect("text").into()))
                    }
                    FrameOutcome::Frame { .. } => break frames.body().to_vec(),
                    other => panic!("{other:?}"),
                }
            };
            let mut raw = RawRecord::default();
            decode_record(kind, &body, &strings, &mut SpareLists::default(), &mut raw).expect("decodes");
            let mut straight = OpFields::default();
            decode_op(kind, &body, &strings, &mut straight).expect("decodes");
            assert_eq!(seen(&straight), seen(&OpFields::of(&raw)), "{kind}");
            assert!(seen(&straight).contains("100"), "{kind}: the fields are there");
        }
    }

    #[test]
    fn a_string_never_declared_is_refused_naming_its_field_as_the_raw_record_refuses_it() {
        let mut out = Vec::new();
        let mut writer = BinaryWriter::new();
        let mut record = writer.begin(&mut out, RecordKind::Kernel);
        record.unsigned(Field::Stream, 1).string(Field::Name, "k");
        record.end().expect("encodable");
        // The record frame alone, after the string frame its name needs.
        let body = &out[8 + 1 + 8..];
        let none = Strings::new();
        let straight = decode_op(RecordKind::Kernel, body, &none, &mut OpFields::default()).unwrap_err();
        let raw = decode_record(RecordKind::Kernel, body, &none, &mut SpareLists::default(), &mut RawRecord::default());
        assert_eq!(straight, raw.unwrap_err());
        assert_eq!(straight.field, Some(Field::Name));
        assert!(straight.message.contains("never declared"), "{straight}");
    }
}
