//! What the capture writes: one line of the streamtrace JSON trace format (docs/trace-format.md) per record.
//! Records are built on the application's threads (cheap, no I/O) and formatted on the writer thread.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::args::PointerArg;

/// Where and when a call was made.
#[derive(Copy, Clone, Debug)]
pub struct Call {
    pub tid: u64,
    pub time_ns: u64,
    pub correlation: u32,
}

#[derive(Clone, Debug)]
pub enum SyncTarget {
    Stream(u64),
    Event(u64),
    Context(u32),
}

#[derive(Clone, Debug)]
pub enum Record {
    Stream { handle: u64, kind: &'static str, priority: Option<i32>, context: u32, device: Option<u32> },
    Event { handle: u64 },
    Kernel { stream: u64, name: Arc<str>, pointers: Vec<PointerArg>, api: &'static str },
    Memcpy { stream: u64, copy: &'static str, src: u64, dst: u64, bytes: u64, synchronous: bool, api: &'static str },
    Memset { stream: u64, dst: u64, bytes: u64, synchronous: bool, api: &'static str },
    EventRecord { event: u64, stream: u64 },
    Wait { stream: u64, event: u64 },
    Sync { target: SyncTarget, api: &'static str },
    Query { target: SyncTarget, ready: bool, api: &'static str },
    Alloc { id: u64, address: u64, bytes: u64, kind: &'static str, stream: Option<u64>, api: &'static str },
    Free { id: u64, kind: &'static str, stream: Option<u64>, api: &'static str },
    GraphLaunch { stream: u64 },
    GpuTime { correlation: u32, start: u64, end: u64 },
    /// A record written by a framework hook (the PyTorch bootstrap): one JSON object, passed through as is.
    Raw(String),
}

/// One record with its call, ready to format.
#[derive(Clone, Debug)]
pub struct Entry {
    pub call: Call,
    pub record: Record,
}

fn common(out: &mut String, call: &Call, api: Option<&str>) {
    let _ = write!(out, ",\"thread\":{},\"time\":{},\"corr\":{}", call.tid, call.time_ns, call.correlation);
    if let Some(api) = api {
        let _ = write!(out, ",\"api\":\"{api}\"");
    }
}

/// JSON string contents: kernel names can hold quotes or backslashes in template arguments.
fn escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

impl Entry {
    /// Appends the record as one JSON line.
    pub fn write_line(&self, out: &mut String) {
        let call = &self.call;
        match &self.record {
            Record::Stream { handle, kind, priority, context, device } => {
                let _ = write!(out, "{{\"type\":\"stream\",\"id\":{handle},\"stream_kind\":\"{kind}\",\"context\":{context}");
                if let Some(p) = priority {
                    let _ = write!(out, ",\"priority\":{p}");
                }
                if let Some(d) = device {
                    let _ = write!(out, ",\"device\":{d}");
                }
                let _ = write!(out, ",\"thread\":{}", call.tid);
            }
            Record::Event { handle } => {
                let _ = write!(out, "{{\"type\":\"event\",\"id\":{handle},\"thread\":{}", call.tid);
            }
            Record::Kernel { stream, name, pointers, api } => {
                let _ = write!(out, "{{\"type\":\"kernel\",\"stream\":{stream},\"name\":\"");
                escape(name, out);
                out.push_str("\",\"pointers\":[");
                for (i, p) in pointers.iter().enumerate() {
                    let _ = write!(out, "{}[\"{:#x}\",\"{}\"]", if i > 0 { "," } else { "" }, p.address, if p.writes { "w" } else { "r" });
                }
                out.push(']');
                common(out, call, Some(api));
            }
            Record::Memcpy { stream, copy, src, dst, bytes, synchronous, api } => {
                let _ = write!(
                    out,
                    "{{\"type\":\"memcpy\",\"stream\":{stream},\"copy\":\"{copy}\",\"from\":[\"{src:#x}\",{bytes}],\"to\":[\"{dst:#x}\",{bytes}],\"sync\":{synchronous}"
                );
                common(out, call, Some(api));
            }
            Record::Memset { stream, dst, bytes, synchronous, api } => {
                let _ = write!(out, "{{\"type\":\"memset\",\"stream\":{stream},\"to\":[\"{dst:#x}\",{bytes}],\"sync\":{synchronous}");
                common(out, call, Some(api));
            }
            Record::EventRecord { event, stream } => {
                let _ = write!(out, "{{\"type\":\"record\",\"event\":{event},\"stream\":{stream}");
                common(out, call, Some("cuEventRecord"));
            }
            Record::Wait { stream, event } => {
                let _ = write!(out, "{{\"type\":\"wait\",\"stream\":{stream},\"event\":{event}");
                common(out, call, Some("cuStreamWaitEvent"));
            }
            Record::Sync { target, api } | Record::Query { target, api, .. } => {
                let kind = if matches!(self.record, Record::Sync { .. }) { "sync" } else { "query" };
                let _ = write!(out, "{{\"type\":\"{kind}\"");
                match target {
                    SyncTarget::Stream(s) => {
                        let _ = write!(out, ",\"stream\":{s}");
                    }
                    SyncTarget::Event(e) => {
                        let _ = write!(out, ",\"event\":{e}");
                    }
                    SyncTarget::Context(c) => {
                        let _ = write!(out, ",\"context\":{c}");
                    }
                }
                if let Record::Query { ready, .. } = &self.record {
                    let _ = write!(out, ",\"ready\":{ready}");
                }
                common(out, call, Some(api));
            }
            Record::Alloc { id, address, bytes, kind, stream, api } => {
                let _ = write!(out, "{{\"type\":\"alloc\",\"id\":{id},\"addr\":\"{address:#x}\",\"size\":{bytes},\"alloc_kind\":\"{kind}\"");
                if let Some(s) = stream {
                    let _ = write!(out, ",\"stream\":{s}");
                }
                common(out, call, Some(api));
            }
            Record::Free { id, kind, stream, api } => {
                let _ = write!(out, "{{\"type\":\"free\",\"id\":{id},\"free_kind\":\"{kind}\"");
                if let Some(s) = stream {
                    let _ = write!(out, ",\"stream\":{s}");
                }
                common(out, call, Some(api));
            }
            Record::GraphLaunch { stream } => {
                let _ = write!(out, "{{\"type\":\"graph\",\"stream\":{stream},\"name\":\"cuGraphLaunch\",\"nodes\":[]");
                common(out, call, Some("cuGraphLaunch"));
            }
            Record::Raw(text) => {
                // One record, one line: a stray newline would split it.
                out.extend(text.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
                out.push('\n');
                return;
            }
            Record::GpuTime { correlation, start, end } => {
                let _ = write!(out, "{{\"type\":\"gpu_time\",\"corr\":{correlation},\"gpu_start\":{start},\"gpu_end\":{end}");
            }
        }
        out.push_str("}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Call {
        Call { tid: 7, time_ns: 100, correlation: 3 }
    }

    #[test]
    fn kernel_line_is_valid_json_with_escaped_name() {
        let entry = Entry {
            call: call(),
            record: Record::Kernel {
                stream: 5,
                name: Arc::from("k<\"x\\y\">(float const*)"),
                pointers: vec![PointerArg { address: 0x1000, writes: false }],
                api: "cuLaunchKernel",
            },
        };
        let mut line = String::new();
        entry.write_line(&mut line);
        let value: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(value["name"], "k<\"x\\y\">(float const*)");
        assert_eq!(value["pointers"][0][0], "0x1000");
        assert_eq!(value["pointers"][0][1], "r");
        assert_eq!(value["thread"], 7);
    }

    #[test]
    fn query_and_sync_lines() {
        let mut line = String::new();
        Entry { call: call(), record: Record::Query { target: SyncTarget::Event(9), ready: true, api: "cuEventQuery" } }
            .write_line(&mut line);
        Entry { call: call(), record: Record::Sync { target: SyncTarget::Context(1), api: "cuCtxSynchronize" } }.write_line(&mut line);
        let lines: Vec<serde_json::Value> = line.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines[0]["type"], "query");
        assert_eq!(lines[0]["ready"], true);
        assert_eq!(lines[1]["context"], 1);
    }
}
