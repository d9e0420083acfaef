//! One record frame of a binary trace decoded into the raw record the JSON reader decodes its text into, so that
//! both encodings are taken by the same record reader (`json::parser`): every rule of what a record may carry
//! and what it means is applied once.

use std::borrow::Cow;

use streamtrace_format::binary::read::{fields, AccessValue, DecodeError, Value};
use streamtrace_format::{Field, FieldSet, RecordKind};

use crate::ingest::json::raw::{Address, RawAccessRange, RawPointer, RawRange, RawRecord, RawView};

/// The strings declared so far; None for one that was not UTF-8 (a record naming it is malformed).
pub(super) type Strings = Vec<Option<String>>;

/// Decodes a record frame's body of `kind`; strings are borrowed from `strings`.
pub(super) fn raw_record<'s>(
    kind: RecordKind,
    body: &[u8],
    strings: &'s Strings,
) -> Result<RawRecord<'s>, DecodeError> {
    let mut raw = RawRecord { kind: Cow::Borrowed(kind.as_str()), ..RawRecord::default() };
    raw.present = FieldSet::EMPTY.with(Field::Type);
    let mut values = fields(kind, body)?;
    while let Some(item) = values.next() {
        let (field, value) = item?;
        raw.present = raw.present.with(field);
        let wrong = |what: &str| DecodeError { at: 0, field: Some(field), message: what.to_string() };
        let text = |index: u32| -> Result<Cow<'s, str>, DecodeError> {
            match strings.get(index as usize) {
                Some(Some(text)) => Ok(Cow::Borrowed(text.as_str())),
                Some(None) => Err(wrong(&format!("string {index} is not UTF-8"))),
                None => Err(wrong(&format!("string {index} was never declared"))),
            }
        };
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
            (field, Value::Unsigned(v)) => {
                *unsigned(&mut raw, field).ok_or_else(|| wrong("not a number field"))? = Some(v)
            }
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
                *text_field(&mut raw, field).ok_or_else(|| wrong("not a text field"))? = Some(text(index)?)
            }
            (Field::From, Value::Range(a, s)) => raw.from = Some(RawRange(Address(a), Address(s))),
            (Field::To, Value::Range(a, s)) => raw.to = Some(RawRange(Address(a), Address(s))),
            (Field::Reads, Value::Accesses(items)) => raw.reads = Some(items.into_iter().map(access).collect()),
            (Field::Writes, Value::Accesses(items)) => raw.writes = Some(items.into_iter().map(access).collect()),
            (Field::Pointers, Value::Pointers(items)) => {
                raw.pointers = Some(
                    items.into_iter().map(|(a, flag)| RawPointer(Address(a), Cow::Borrowed(flag.as_str()))).collect(),
                )
            }
            (Field::Deps, Value::Unsigneds(items)) => raw.deps = Some(items),
            (Field::Frames, Value::Unsigneds(items)) => raw.frames = Some(items.into_iter().map(Address).collect()),
            _ => return Err(wrong("a value of another shape than its field's")),
        }
    }
    Ok(raw)
}

fn access(item: AccessValue) -> RawAccessRange {
    RawAccessRange {
        range: RawRange(Address(item.address), Address(item.len)),
        view: item.view.map(|(element_size, dims)| Box::new(RawView { element_size, dims })),
    }
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
