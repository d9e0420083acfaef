//! Between the two encodings, record by record: a JSON object of the JSON format to a binary record frame (the
//! capture library's framework records, `streamtrace convert`), and a binary record frame back to one JSON
//! line. A JSON object whose kind, fields or values a layout cannot hold exactly as the JSON reader would take
//! them (an unknown kind or field, a value of another shape, a graph's inline nodes) is embedded as it is, so
//! that the binary trace reads as the JSON one did, errors included.

use serde_json::{Map, Value as Json};

use super::read::{fields, AccessValue, DecodeError, Value};
use super::write::{AccessItem, BinaryWriter};
use super::{value_type, ValueType};
use crate::line::{parse_address, RecordLine};
use crate::vocabulary::{access_range, AccessFlag, Field, RecordKind};

/// Appends the record `text` (one JSON object) to `out`: in its kind's layout when one holds it, else
/// embedded. True when it was laid out.
pub fn json_to_binary(writer: &mut BinaryWriter, out: &mut Vec<u8>, text: &[u8]) -> bool {
    let laid_out = serde_json::from_slice::<Json>(text)
        .ok()
        .and_then(|value| match value {
            Json::Object(object) => Some(object),
            _ => None,
        })
        .is_some_and(|object| encode_object(writer, out, &object));
    if !laid_out {
        writer.json_record(out, text);
    }
    laid_out
}

/// Appends `object` as a record frame when its kind's layout holds every field as the JSON reader would take
/// it; false (nothing but strings appended) when not.
pub fn encode_object(writer: &mut BinaryWriter, out: &mut Vec<u8>, object: &Map<String, Json>) -> bool {
    let Some(kind) = object.get(Field::Type.as_str()).and_then(Json::as_str).and_then(|t| RecordKind::parse(t).ok())
    else {
        return false;
    };
    // Decide first, so that nothing is declared for a record that is embedded.
    if !object.iter().all(|(key, value)| key == Field::Type.as_str() || encodable(kind, key, value)) {
        return false;
    }
    let mut record = writer.begin(out, kind);
    for (key, value) in object {
        let Ok(field) = Field::parse(key) else { continue };
        if value.is_null() {
            continue;
        }
        match value_type(field) {
            ValueType::Unsigned => record.unsigned(field, value.as_u64().unwrap_or_default()),
            ValueType::Address => record.unsigned(field, address(value).unwrap_or_default()),
            ValueType::Signed => record.signed(field, value.as_i64().unwrap_or_default()),
            ValueType::Bool => record.boolean(field, value.as_bool().unwrap_or_default()),
            ValueType::Text => record.string(field, value.as_str().unwrap_or_default()),
            ValueType::Range => {
                let (a, s) = range(value).unwrap_or_default();
                record.range(field, a, s)
            }
            ValueType::Accesses => {
                let items: Vec<AccessValue> =
                    value.as_array().map(|a| a.iter().filter_map(access).collect()).unwrap_or_default();
                record.accesses(
                    field,
                    items.iter().map(|item| AccessItem {
                        address: item.address,
                        len: item.len,
                        view: item.view.as_ref().map(|(e, d)| (*e, d.as_slice())),
                    }),
                )
            }
            ValueType::Pointers => record.pointers(field, value.as_array().into_iter().flatten().filter_map(pointer)),
            ValueType::Unsigneds => {
                record.numbers(field, value.as_array().into_iter().flatten().filter_map(Json::as_u64))
            }
            ValueType::Addresses => record.addresses(field, value.as_array().into_iter().flatten().filter_map(address)),
            ValueType::JsonOnly => continue,
        };
    }
    record.end().is_ok()
}

/// Whether `key: value` of a `kind` record has a place in its layout, with a value the JSON reader takes.
fn encodable(kind: RecordKind, key: &str, value: &Json) -> bool {
    let Ok(field) = Field::parse(key) else { return false };
    if super::slot(kind, field).is_none() {
        return false;
    }
    // The JSON reader takes `null` as the field's absence (the PyTorch observers write `"src": null`).
    if value.is_null() {
        return true;
    }
    // The JSON reader decodes these into 32-bit fields.
    let narrow = matches!(field, Field::Version | Field::Rank | Field::LocalRank | Field::WorldSize | Field::Depth);
    match value_type(field) {
        ValueType::Unsigned => value.as_u64().is_some_and(|v| !narrow || v <= u64::from(u32::MAX)),
        ValueType::Address => address(value).is_some(),
        ValueType::Signed => value.as_i64().is_some_and(|v| i32::try_from(v).is_ok()),
        ValueType::Bool => value.is_boolean(),
        ValueType::Text => value.is_string(),
        ValueType::Range => range(value).is_some(),
        ValueType::Accesses => value.as_array().is_some_and(|items| items.iter().all(|item| access(item).is_some())),
        ValueType::Pointers => value.as_array().is_some_and(|items| items.iter().all(|item| pointer(item).is_some())),
        ValueType::Unsigneds => value.as_array().is_some_and(|items| items.iter().all(|item| item.is_u64())),
        ValueType::Addresses => value.as_array().is_some_and(|items| items.iter().all(|item| address(item).is_some())),
        ValueType::JsonOnly => false,
    }
}

/// An address as the JSON reader takes it: a non-negative integer, or a string in hex or decimal.
fn address(value: &Json) -> Option<u64> {
    match value {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => parse_address(s),
        _ => None,
    }
}

fn range(value: &Json) -> Option<(u64, u64)> {
    match value.as_array()?.as_slice() {
        [a, s] => Some((address(a)?, address(s)?)),
        _ => None,
    }
}

/// `[address, size]` or `[address, extent, element size, [[size, stride], ...]]`.
fn access(value: &Json) -> Option<AccessValue> {
    match value.as_array()?.as_slice() {
        [a, s] => Some(AccessValue { address: address(a)?, len: address(s)?, view: None }),
        [a, s, element, dims] => {
            let dims = dims.as_array()?;
            if dims.len() > access_range::MAX_VIEW_DIMS {
                return None;
            }
            let dims: Option<Vec<(u64, u64)>> = dims
                .iter()
                .map(|d| match d.as_array()?.as_slice() {
                    [size, stride] => Some((size.as_u64()?, stride.as_u64()?)),
                    _ => None,
                })
                .collect();
            // A view without dimensions is written as one with none in JSON; the binary item holds at least one.
            let dims = dims.filter(|d| !d.is_empty())?;
            Some(AccessValue { address: address(a)?, len: address(s)?, view: Some((element.as_u64()?, dims)) })
        }
        _ => None,
    }
}

fn pointer(value: &Json) -> Option<(u64, AccessFlag)> {
    match value.as_array()?.as_slice() {
        [a, Json::String(flag)] => Some((address(a)?, AccessFlag::parse(flag).ok()?)),
        _ => None,
    }
}

/// Appends the record frame `body` of `kind` to `out` as one JSON line; `string` gives a declared string by
/// index (None: not declared).
pub fn binary_to_json<'s>(
    kind: RecordKind,
    body: &[u8],
    string: impl Fn(u32) -> Option<&'s str>,
    out: &mut String,
) -> Result<(), DecodeError> {
    let mut values = fields(kind, body)?;
    let mut line = RecordLine::begin(out, kind);
    while let Some(item) = values.next() {
        let (field, value) = item?;
        match value {
            Value::Unsigned(v) if matches!(field, Field::Addr | Field::Base) => line.address(field, v),
            Value::Unsigned(v) => line.number(field, v),
            Value::Signed(v) => line.number(field, v),
            Value::Bool(v) => line.boolean(field, v),
            Value::Text(index) => {
                let Some(text) = string(index) else {
                    return Err(DecodeError {
                        at: 0,
                        field: Some(field),
                        message: format!("string {index} was never declared"),
                    });
                };
                line.string(field, text)
            }
            Value::Range(a, s) => line.range(field, a, s),
            Value::Accesses(items) => {
                let items: Vec<AccessValue> = items.iter().collect();
                line.accesses(
                    field,
                    items.iter().map(|i| (i.address, i.len, i.view.as_ref().map(|(e, d)| (*e, d.as_slice())))),
                )
            }
            Value::Pointers(items) => line.pointers(field, items.iter()),
            Value::Unsigneds(items) if value_type(field) == ValueType::Addresses => line.addresses(field, items.iter()),
            Value::Unsigneds(items) => line.numbers(field, items.iter()),
        };
    }
    line.end();
    Ok(())
}

/// The header record of the binary trace `input` as one JSON line (None: not a binary trace, or no header in its
/// first frames): what a tool that only looks at who wrote a trace reads.
pub fn header_line(input: impl std::io::Read) -> Option<String> {
    let mut frames = super::read::FrameReader::new(input).ok()?;
    let mut strings: Vec<String> = Vec::new();
    loop {
        match frames.next_frame() {
            super::read::FrameOutcome::Frame { head, .. } => match head.tag {
                super::Tag::String => strings.push(String::from_utf8(frames.body().to_vec()).ok()?),
                super::Tag::Record(RecordKind::Header) => {
                    let mut line = String::new();
                    let lookup = |i: u32| strings.get(i as usize).map(String::as_str);
                    binary_to_json(RecordKind::Header, frames.body(), lookup, &mut line).ok()?;
                    return Some(line);
                }
                super::Tag::Json => return String::from_utf8(frames.body().to_vec()).ok(),
                _ => return None,
            },
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::read::{frame_head, FrameHead};
    use super::super::Tag;
    use super::*;

    /// Transcodes each line to binary and back; returns the JSON lines and whether each was laid out.
    fn round_trip(lines: &[&str]) -> Vec<(String, bool)> {
        let mut writer = BinaryWriter::new();
        let mut results = Vec::new();
        let mut strings: Vec<String> = Vec::new();
        for line in lines {
            let mut out = Vec::new();
            let laid_out = json_to_binary(&mut writer, &mut out, line.as_bytes());
            let mut at = 0;
            let mut text = String::new();
            while at < out.len() {
                let FrameHead { tag, len } = frame_head(out[at..at + 8].try_into().unwrap()).unwrap();
                let body = &out[at + 8..at + 8 + len as usize];
                match tag {
                    Tag::String => strings.push(String::from_utf8(body.to_vec()).unwrap()),
                    Tag::Json => text = String::from_utf8(body.to_vec()).unwrap(),
                    Tag::Record(kind) => {
                        binary_to_json(kind, body, |i| strings.get(i as usize).map(String::as_str), &mut text).unwrap()
                    }
                    other => panic!("{other:?}"),
                }
                at += 8 + len as usize;
            }
            results.push((text.trim_end().to_string(), laid_out));
        }
        results
    }

    fn same_json(a: &str, b: &str) -> bool {
        let parse = |t: &str| serde_json::from_str::<Json>(t).unwrap();
        parse(a) == parse(b)
    }

    #[test]
    fn records_of_every_shape_are_laid_out_and_read_back() {
        let lines = [
            r#"{"type":"streamtrace","version":1,"producer":"capture","host_sync":true,"comment":"c"}"#,
            r#"{"type":"stream","id":94855118112,"stream_kind":"non_blocking","priority":-1,"thread":7,"site":2}"#,
            r#"{"type":"kernel","stream":7,"name":"k<\"x\">","pointers":[["0x10","r"],["0x20","w"]],"thread":3,"time":5,"corr":9,"api":"cuLaunchKernel"}"#,
            r#"{"type":"memcpy","stream":7,"copy":"DtoH","from":["0x7f00",4096],"to":["0x1000",4096],"from_memory":"device","to_memory":"pinned","sync":false}"#,
            r#"{"type":"op_end","name":"aten::add","reads":[["0x1000",64],["0x2000",4092,4,[[512,2]]]],"src":"a.py:3","process_group":"default_pg"}"#,
            r#"{"type":"callsite","id":3,"frames":["0x5a3c9e4128b4","0x7f41a0a2a1ca"]}"#,
            r#"{"type":"graph_node","graph":1,"node":2,"deps":[1],"node_kind":"memcpy"}"#,
            r#"{"type":"alloc","id":1,"addr":"0x7f0000000000","size":4096,"label":"buf"}"#,
            r#"{"type":"gpu_time","corr":9,"gpu_start":10,"gpu_end":20}"#,
        ];
        for ((text, laid_out), line) in round_trip(&lines).iter().zip(lines) {
            assert!(laid_out, "{line}");
            assert!(same_json(text, line), "{line}\n  became {text}");
        }
        // A null is the field's absence, as the JSON reader takes it.
        let null = round_trip(&[r#"{"type":"free","id":16,"free_kind":"pool_block","src":null}"#]);
        assert_eq!(null[0], (r#"{"type":"free","id":16,"free_kind":"pool_block"}"#.to_string(), true));
    }

    #[test]
    fn what_no_layout_holds_is_embedded_as_it_was() {
        let lines = [
            r#"{"type":"graph","stream":1,"nodes":[{"name":"a"}]}"#,
            r#"{"type":"kernel","stream":1,"raeds":[]}"#,
            r#"{"type":"memcpy","stream":1,"reads":[]}"#,
            r#"{"type":"stream","id":1,"flags":"non_blocking"}"#,
            r#"{"type":"kernel","stream":-1}"#,
            r#"{"type":"kernel","pointers":[["0x10","x"]]}"#,
            r#"{"type":"event","id":1,"comment":{"why":"a note"}}"#,
            r#"{"type":"frame_line","depth":5000000000}"#,
            r#"{"type":"newer_kind","id":1}"#,
            r#"["not an object"]"#,
        ];
        for ((text, laid_out), line) in round_trip(&lines).iter().zip(lines) {
            assert!(!laid_out, "{line}");
            assert_eq!(text, line);
        }
    }
}
