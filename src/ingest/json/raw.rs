//! One record of the JSON trace as it was written: every field any record kind may carry, decoded without
//! interpretation (which fields a kind needs is checked by the parser, so that a missing field gets a message
//! naming the record kind), and which of them the record actually carried.

use std::borrow::Cow;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use streamtrace_format::{access_range, Field, FieldSet, RecordKind};

/// A byte address: a JSON number or a string in hex (`"0x7f00"`) or decimal.
#[derive(Copy, Clone, Debug)]
pub(in crate::ingest) struct Address(pub u64);

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AddressVisitor;
        impl Visitor<'_> for AddressVisitor {
            type Value = Address;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an address: a non-negative integer or a string like \"0x7f0000\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Address, E> {
                Ok(Address(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Address, E> {
                u64::try_from(v).map(Address).map_err(|_| E::custom(format!("negative address {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Address, E> {
                parse_address(v).map(Address).ok_or_else(|| E::custom(format!("`{v}` is not an address")))
            }
        }
        d.deserialize_any(AddressVisitor)
    }
}

/// The format crate's address parser (one for both encodings), here for the scanner.
pub(super) use streamtrace_format::parse_address;

/// `[address, "r" | "w"]`: a pointer argument of a kernel.
#[derive(Deserialize, Debug)]
pub(in crate::ingest) struct RawPointer<'a>(pub Address, #[serde(borrow)] pub Cow<'a, str>);

/// `[address, size]`.
#[derive(Deserialize, Debug, Clone, Copy)]
pub(in crate::ingest) struct RawRange(pub Address, pub Address);

/// The strided part of a view item: element size and `[size, stride]` per dimension, outermost first.
#[derive(Debug, Clone)]
pub(in crate::ingest) struct RawView {
    pub element_size: u64,
    pub dims: Vec<(u64, u64)>,
}

/// One item of a `reads` or `writes` list: `[address, size]`, or a strided view
/// `[address, extent, element size, [[size, stride], ...]]` (the format's `access_range`).
#[derive(Debug, Clone)]
pub(in crate::ingest) struct RawAccessRange {
    pub range: RawRange,
    /// Boxed: plain ranges are nearly all items, and stay three words.
    pub view: Option<Box<RawView>>,
}

impl<'de> Deserialize<'de> for RawAccessRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = RawAccessRange;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("[address, size] or [address, extent, element size, [[size, stride], ...]]")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawAccessRange, A::Error> {
                let start: Address = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let len: Address = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                let range = RawRange(start, len);
                let Some(element_size) = seq.next_element::<u64>()? else {
                    return Ok(RawAccessRange { range, view: None });
                };
                let dims: Vec<(u64, u64)> = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(3, &self))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(access_range::VIEW_ITEMS + 1, &self));
                }
                if dims.len() > access_range::MAX_VIEW_DIMS {
                    return Err(de::Error::custom(format!(
                        "a view of {} dimensions (at most {})",
                        dims.len(),
                        access_range::MAX_VIEW_DIMS
                    )));
                }
                Ok(RawAccessRange { range, view: Some(Box::new(RawView { element_size, dims })) })
            }
        }
        d.deserialize_seq(ItemVisitor)
    }
}

/// One node of a `graph` record (its fields are `GRAPH_NODE_FIELDS` of the format).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(in crate::ingest) struct RawGraphNode<'a> {
    #[serde(borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub reads: Vec<RawAccessRange>,
    #[serde(default)]
    pub writes: Vec<RawAccessRange>,
    #[serde(default)]
    pub deps: Vec<usize>,
    #[allow(dead_code)]
    pub comment: Option<serde_json::Value>,
}

/// Every field any record kind may carry (the format's `Field`s, by the same names). Unknown fields are refused
/// here; fields of another kind by [`RawRecord::fields_present`] and the parser.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(in crate::ingest) struct RawRecord<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    pub version: Option<u32>,
    #[serde(borrow)]
    pub producer: Option<Cow<'a, str>>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub comment: Option<serde_json::Value>,
    pub pid: Option<u64>,
    pub thread: Option<u64>,
    pub time: Option<u64>,
    pub time_end: Option<u64>,
    pub gpu_start: Option<u64>,
    pub gpu_end: Option<u64>,
    pub corr: Option<u64>,
    #[serde(borrow)]
    pub api: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub region: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub src: Option<Cow<'a, str>>,
    pub id: Option<u64>,
    #[serde(borrow)]
    pub name: Option<Cow<'a, str>>,
    /// `flags` is what the first hand-written traces called it.
    #[serde(borrow, alias = "flags")]
    pub stream_kind: Option<Cow<'a, str>>,
    pub priority: Option<i32>,
    pub device: Option<u64>,
    pub context: Option<u64>,
    pub stream: Option<u64>,
    pub event: Option<u64>,
    pub reads: Option<Vec<RawAccessRange>>,
    pub writes: Option<Vec<RawAccessRange>>,
    #[serde(borrow)]
    pub pointers: Option<Vec<RawPointer<'a>>>,
    #[serde(borrow)]
    pub copy: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub from_memory: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub to_memory: Option<Cow<'a, str>>,
    pub from: Option<RawRange>,
    pub to: Option<RawRange>,
    pub bytes: Option<u64>,
    pub sync: Option<bool>,
    pub ready: Option<bool>,
    pub addr: Option<Address>,
    pub size: Option<Address>,
    #[serde(borrow)]
    pub alloc_kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub free_kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub label: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub nodes: Option<Vec<RawGraphNode<'a>>>,
    pub calls: Option<u64>,
    pub callback_ns: Option<u64>,
    pub graph: Option<u64>,
    pub exec: Option<u64>,
    pub node: Option<u64>,
    #[serde(borrow)]
    pub node_kind: Option<Cow<'a, str>>,
    /// A `graph_node`'s dependencies, by node handle (a `graph` record's nodes list theirs by index).
    pub deps: Option<Vec<u64>>,
    pub child: Option<u64>,
    /// A conditional `graph_node`'s body graphs.
    pub bodies: Option<Vec<u64>>,
    pub original: Option<u64>,
    pub setup_ns: Option<u64>,
    pub site: Option<u64>,
    pub frames: Option<Vec<Address>>,
    #[serde(borrow)]
    pub path: Option<Cow<'a, str>>,
    pub base: Option<Address>,
    #[serde(borrow)]
    pub build_id: Option<Cow<'a, str>>,
    pub depth: Option<u32>,
    pub offset: Option<u64>,
    #[serde(borrow)]
    pub process_group: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub coverage: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub unseen: Option<Cow<'a, str>>,
    pub host_sync: Option<bool>,
    pub object: Option<u64>,
    pub host_func: Option<u64>,
    #[serde(borrow)]
    pub fault: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub guard: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub managed: Option<Cow<'a, str>>,
    pub windows: Option<u64>,
    pub faults: Option<u64>,
    pub dropped: Option<u64>,
    pub ignored: Option<u64>,
    #[serde(borrow)]
    pub ranges: Option<Cow<'a, str>>,
    /// The fields this record carried: noted while reading its keys by the scanner (scanner.rs), from the
    /// decoded values after serde ([`RawRecord::decode`]).
    #[serde(skip)]
    pub present: FieldSet,
    /// The kind `kind` names, where the decoding knew it (a binary frame's tag): not parsed again from the text.
    #[serde(skip)]
    pub known_kind: Option<RecordKind>,
}

impl<'a> RawRecord<'a> {
    /// Decodes one record's text with serde: the reading of every record the scanner does not take (scanner.rs),
    /// which gives the error messages of records that cannot be decoded.
    pub fn decode(text: &'a [u8]) -> Result<RawRecord<'a>, serde_json::Error> {
        let mut raw: RawRecord = serde_json::from_slice(text)?;
        raw.present = raw.carried_fields();
        Ok(raw)
    }

    /// Decodes a record from a JSON value (what the tolerant reading kept of one).
    pub fn from_value(value: &'a serde_json::Value) -> Result<RawRecord<'a>, serde_json::Error> {
        let mut raw = RawRecord::deserialize(value)?;
        raw.present = raw.carried_fields();
        Ok(raw)
    }

    /// The fields this record carried.
    pub fn fields_present(&self) -> FieldSet {
        self.present
    }

    /// The fields whose values serde decoded.
    fn carried_fields(&self) -> FieldSet {
        let mut present = FieldSet::EMPTY.with(Field::Type);
        let mut note = |carried: bool, field: Field| {
            if carried {
                present = present.with(field);
            }
        };
        note(self.version.is_some(), Field::Version);
        note(self.producer.is_some(), Field::Producer);
        note(self.rank.is_some(), Field::Rank);
        note(self.local_rank.is_some(), Field::LocalRank);
        note(self.world_size.is_some(), Field::WorldSize);
        note(self.comment.is_some(), Field::Comment);
        note(self.pid.is_some(), Field::Pid);
        note(self.thread.is_some(), Field::Thread);
        note(self.time.is_some(), Field::Time);
        note(self.time_end.is_some(), Field::TimeEnd);
        note(self.gpu_start.is_some(), Field::GpuStart);
        note(self.gpu_end.is_some(), Field::GpuEnd);
        note(self.corr.is_some(), Field::Corr);
        note(self.api.is_some(), Field::Api);
        note(self.region.is_some(), Field::Region);
        note(self.src.is_some(), Field::Src);
        note(self.id.is_some(), Field::Id);
        note(self.name.is_some(), Field::Name);
        note(self.stream_kind.is_some(), Field::StreamKind);
        note(self.priority.is_some(), Field::Priority);
        note(self.device.is_some(), Field::Device);
        note(self.context.is_some(), Field::Context);
        note(self.stream.is_some(), Field::Stream);
        note(self.event.is_some(), Field::Event);
        note(self.reads.is_some(), Field::Reads);
        note(self.writes.is_some(), Field::Writes);
        note(self.pointers.is_some(), Field::Pointers);
        note(self.copy.is_some(), Field::Copy);
        note(self.from_memory.is_some(), Field::FromMemory);
        note(self.to_memory.is_some(), Field::ToMemory);
        note(self.from.is_some(), Field::From);
        note(self.to.is_some(), Field::To);
        note(self.bytes.is_some(), Field::Bytes);
        note(self.sync.is_some(), Field::Sync);
        note(self.ready.is_some(), Field::Ready);
        note(self.addr.is_some(), Field::Addr);
        note(self.size.is_some(), Field::Size);
        note(self.alloc_kind.is_some(), Field::AllocKind);
        note(self.free_kind.is_some(), Field::FreeKind);
        note(self.label.is_some(), Field::Label);
        note(self.nodes.is_some(), Field::Nodes);
        note(self.calls.is_some(), Field::Calls);
        note(self.callback_ns.is_some(), Field::CallbackNs);
        note(self.graph.is_some(), Field::Graph);
        note(self.exec.is_some(), Field::Exec);
        note(self.node.is_some(), Field::Node);
        note(self.node_kind.is_some(), Field::NodeKind);
        note(self.deps.is_some(), Field::Deps);
        note(self.child.is_some(), Field::Child);
        note(self.bodies.is_some(), Field::Bodies);
        note(self.original.is_some(), Field::Original);
        note(self.setup_ns.is_some(), Field::SetupNs);
        note(self.site.is_some(), Field::Site);
        note(self.frames.is_some(), Field::Frames);
        note(self.path.is_some(), Field::Path);
        note(self.base.is_some(), Field::Base);
        note(self.build_id.is_some(), Field::BuildId);
        note(self.depth.is_some(), Field::Depth);
        note(self.offset.is_some(), Field::Offset);
        note(self.process_group.is_some(), Field::ProcessGroup);
        note(self.coverage.is_some(), Field::Coverage);
        note(self.unseen.is_some(), Field::Unseen);
        note(self.host_sync.is_some(), Field::HostSync);
        note(self.object.is_some(), Field::Object);
        note(self.host_func.is_some(), Field::HostFunc);
        note(self.fault.is_some(), Field::Fault);
        note(self.guard.is_some(), Field::Guard);
        note(self.managed.is_some(), Field::Managed);
        note(self.windows.is_some(), Field::Windows);
        note(self.faults.is_some(), Field::Faults);
        note(self.dropped.is_some(), Field::Dropped);
        note(self.ignored.is_some(), Field::Ignored);
        note(self.ranges.is_some(), Field::Ranges);
        present
    }

    pub fn reads(&self) -> &[RawAccessRange] {
        self.reads.as_deref().unwrap_or(&[])
    }

    pub fn writes(&self) -> &[RawAccessRange] {
        self.writes.as_deref().unwrap_or(&[])
    }
}

/// A record of a newer capture may carry fields this build does not know. The tolerant reader keeps the record
/// and drops those fields: it decodes the text as a JSON object, removes every key that is no field of the
/// format, and decodes what is left. Returns the cleaned object and the names dropped; `None` when the text is
/// not an object.
pub(super) fn without_unknown_fields(text: &[u8]) -> Option<(serde_json::Value, Vec<String>)> {
    let mut value: serde_json::Value = serde_json::from_slice(text).ok()?;
    let object = value.as_object_mut()?;
    // `flags` is an alias the reader accepts for `stream_kind`.
    let unknown: Vec<String> =
        object.keys().filter(|key| Field::parse(key).is_err() && key.as_str() != "flags").cloned().collect();
    for key in &unknown {
        object.remove(key);
    }
    Some((value, unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_the_format_is_a_field_here() {
        // A field the format gains must be decoded here too, or every record carrying it would be refused.
        for field in Field::ALL {
            let text = match field {
                Field::Type => continue,
                Field::Reads
                | Field::Writes
                | Field::Pointers
                | Field::Nodes
                | Field::Deps
                | Field::Bodies
                | Field::Frames => {
                    format!("{{\"type\":\"x\",\"{field}\":[]}}")
                }
                Field::From | Field::To => format!("{{\"type\":\"x\",\"{field}\":[1,2]}}"),
                Field::Sync | Field::Ready | Field::HostSync => format!("{{\"type\":\"x\",\"{field}\":true}}"),
                Field::Comment => format!("{{\"type\":\"x\",\"{field}\":{{}}}}"),
                Field::Producer
                | Field::Api
                | Field::Region
                | Field::Src
                | Field::Name
                | Field::StreamKind
                | Field::Copy
                | Field::FromMemory
                | Field::ToMemory
                | Field::AllocKind
                | Field::FreeKind
                | Field::Label
                | Field::NodeKind
                | Field::Path
                | Field::BuildId
                | Field::ProcessGroup
                | Field::Coverage
                | Field::Unseen
                | Field::Fault
                | Field::Guard
                | Field::Managed
                | Field::Ranges => format!("{{\"type\":\"x\",\"{field}\":\"v\"}}"),
                _ => format!("{{\"type\":\"x\",\"{field}\":1}}"),
            };
            let raw = RawRecord::decode(text.as_bytes()).unwrap_or_else(|e| panic!("{field}: {e}"));
            assert!(raw.fields_present().contains(*field), "{field} is decoded but not noted as present");
        }
    }

    #[test]
    fn access_items_are_ranges_or_views() {
        let raw: RawRecord =
            serde_json::from_str(r#"{"type":"op_end","writes":[[4096,64],["0x2000",4092,4,[[512,2]]]]}"#)
                .expect("decodes");
        let writes = raw.writes();
        assert!(writes[0].view.is_none() && writes[0].range.1 .0 == 64);
        let view = writes[1].view.as_ref().expect("a view");
        assert_eq!((writes[1].range.0 .0, view.element_size, view.dims.clone()), (0x2000, 4, vec![(512, 2)]));
        for bad in [r#"[[1,2,4]]"#, r#"[[1,2,4,[[2,-1]]]]"#, r#"[[1,2,4,[],5]]"#, r#"[[1]]"#] {
            let text = format!(r#"{{"type":"op_end","writes":{bad}}}"#);
            assert!(serde_json::from_str::<RawRecord>(&text).is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn addresses_are_parsed_strictly() {
        for good in [("0x10", 16), ("0X7f_0000", 0x7f0000), ("4096", 4096), ("0", 0), ("0xffffffffffffffff", u64::MAX)]
        {
            assert_eq!(parse_address(good.0), Some(good.1), "{}", good.0);
        }
        for bad in [
            "0x+10",
            "+4096",
            "-1",
            "0x",
            "",
            " ",
            " 16",
            "16 ",
            "0x 10",
            "0x_10",
            "1_000",
            "0x10000000000000000",
            "0b101",
        ] {
            assert_eq!(parse_address(bad), None, "`{bad}` was taken");
        }
    }

    #[test]
    fn unknown_fields_are_dropped_and_named() {
        let (value, dropped) =
            without_unknown_fields(b"{\"type\":\"kernel\",\"stream\":1,\"shiny\":2}").expect("an object");
        assert_eq!(dropped, vec!["shiny".to_string()]);
        assert!(value.get("shiny").is_none() && value.get("stream").is_some());
    }
}
