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
    /// A launch of the kernel declared by the `Function` record `function`; its pointer words are
    /// `pointers[first_pointer..first_pointer + pointer_count]` of the batch (no allocation per launch).
    Kernel { stream: u64, function: u32, first_pointer: u32, pointer_count: u32, api: &'static str },
    /// Names kernel `index` for the writer, which keeps the names across batches; writes no line.
    Function { index: u32, name: Arc<str> },
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
    /// At exit: the driver calls recorded in this process and the time the callback spent on them.
    CaptureStats { calls: u64, callback_ns: u64 },
    /// A record written by a framework hook (the PyTorch bootstrap): one JSON object, passed through with the
    /// calling thread's id added.
    Raw(String),
    /// A framework operation (a PyTorch op) begins on the calling thread; its `op_end` record, sent through
    /// `Raw`, says what it was.
    OpBegin,
}

/// One record with its call, ready to format.
#[derive(Clone, Debug)]
pub struct Entry {
    pub call: Call,
    pub record: Record,
}

/// Records waiting for the writer, in call order, with the pointer words their kernel launches refer to.
#[derive(Debug, Default)]
pub struct Batch {
    pub entries: Vec<Entry>,
    pub pointers: Vec<PointerArg>,
}

impl Batch {
    pub fn with_capacity(entries: usize) -> Batch {
        Batch { entries: Vec::with_capacity(entries), pointers: Vec::with_capacity(entries * 2) }
    }

    pub fn push(&mut self, call: Call, record: Record) {
        self.entries.push(Entry { call, record });
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.pointers.clear();
    }

    /// Appends every record as one JSON line. `names` holds the kernel names declared so far, escaped for JSON
    /// once (this batch's `Function` records join it): a launch copies its kernel's name, often hundreds of
    /// bytes of template arguments, as it is.
    pub fn write_lines(&self, names: &mut Vec<String>, out: &mut String) {
        for entry in &self.entries {
            if let Record::Function { index, name } = &entry.record {
                let index = *index as usize;
                if names.len() <= index {
                    names.resize(index + 1, "kernel".to_string());
                }
                let mut escaped = String::with_capacity(name.len());
                escape(name, &mut escaped);
                names[index] = escaped;
                continue;
            }
            entry.write_line(self, names, out);
        }
    }
}

fn common(out: &mut String, call: &Call, api: Option<&str>) {
    out.push_str(",\"thread\":");
    push_number(out, call.tid);
    out.push_str(",\"time\":");
    push_number(out, call.time_ns);
    out.push_str(",\"corr\":");
    push_number(out, call.correlation);
    if let Some(api) = api {
        out.push_str(",\"api\":\"");
        out.push_str(api);
        out.push('"');
    }
}

/// Decimal digits of an integer (the formatting machinery of `write!` costs several times more, and the writer
/// formats every launch).
fn push_number(out: &mut String, value: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// An address as a JSON string, "0x" and lower-case hex digits.
fn push_address(out: &mut String, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = DIGITS[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    out.push_str("\"0x");
    out.extend(digits[start..].iter().map(|&d| d as char));
    out.push('"');
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
    /// Appends the record as one JSON line; `batch` holds its pointer words and `names` its kernel's name.
    fn write_line(&self, batch: &Batch, names: &[String], out: &mut String) {
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
            Record::Kernel { stream, function, first_pointer, pointer_count, api } => {
                out.push_str("{\"type\":\"kernel\",\"stream\":");
                push_number(out, *stream);
                out.push_str(",\"name\":\"");
                out.push_str(names.get(*function as usize).map_or("kernel", |n| n));
                out.push_str("\",\"pointers\":[");
                let first = *first_pointer as usize;
                let pointers = batch.pointers.get(first..first + *pointer_count as usize).unwrap_or(&[]);
                for (i, p) in pointers.iter().enumerate() {
                    out.push_str(if i > 0 { ",[" } else { "[" });
                    push_address(out, p.address);
                    out.push_str(if p.writes { ",\"w\"]" } else { ",\"r\"]" });
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
                out.push_str("{\"type\":\"record\",\"event\":");
                push_number(out, *event);
                out.push_str(",\"stream\":");
                push_number(out, *stream);
                common(out, call, Some("cuEventRecord"));
            }
            Record::Wait { stream, event } => {
                out.push_str("{\"type\":\"wait\",\"stream\":");
                push_number(out, *stream);
                out.push_str(",\"event\":");
                push_number(out, *event);
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
                // The hook's object with the thread in front; one record, one line: a stray newline would split it.
                let fields = text.trim_start().strip_prefix('{').unwrap_or(text);
                out.push_str("{\"thread\":");
                push_number(out, call.tid);
                out.push(',');
                if fields.contains(['\n', '\r']) {
                    out.extend(fields.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
                } else {
                    out.push_str(fields);
                }
                out.push('\n');
                return;
            }
            Record::OpBegin => {
                let _ = write!(out, "{{\"type\":\"op_begin\",\"thread\":{}", call.tid);
            }
            Record::Function { .. } => return,
            Record::CaptureStats { calls, callback_ns } => {
                let _ = write!(out, "{{\"type\":\"capture_stats\",\"calls\":{calls},\"callback_ns\":{callback_ns}");
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
        let mut batch = Batch::default();
        batch.push(call(), Record::Function { index: 0, name: Arc::from("k<\"x\\y\">(float const*)") });
        batch.pointers.extend([PointerArg { address: 0x9999, writes: true }, PointerArg { address: 0x1000, writes: false }]);
        batch.push(call(), Record::Kernel { stream: 5, function: 0, first_pointer: 1, pointer_count: 1, api: "cuLaunchKernel" });
        let (mut names, mut line) = (Vec::new(), String::new());
        batch.write_lines(&mut names, &mut line);
        assert_eq!(line.lines().count(), 1, "a function declaration writes no line");
        let value: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(value["name"], "k<\"x\\y\">(float const*)");
        assert_eq!(value["pointers"][0][0], "0x1000");
        assert_eq!(value["pointers"][0][1], "r");
        assert_eq!(value["pointers"].as_array().map(Vec::len), Some(1));
        assert_eq!(value["thread"], 7);
    }

    #[test]
    fn numbers_and_addresses_format_as_the_standard_formatter_would() {
        for value in [0u64, 1, 9, 10, 0xabc, 0x7f00_1234_5678, u64::MAX] {
            let (mut address, mut number) = (String::new(), String::new());
            push_address(&mut address, value);
            push_number(&mut number, value);
            assert_eq!(address, format!("\"{value:#x}\""));
            assert_eq!(number, value.to_string());
        }
    }

    #[test]
    fn query_and_sync_lines() {
        let mut batch = Batch::default();
        batch.push(call(), Record::Query { target: SyncTarget::Event(9), ready: true, api: "cuEventQuery" });
        batch.push(call(), Record::Sync { target: SyncTarget::Context(1), api: "cuCtxSynchronize" });
        let mut line = String::new();
        batch.write_lines(&mut Vec::new(), &mut line);
        let lines: Vec<serde_json::Value> = line.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines[0]["type"], "query");
        assert_eq!(lines[0]["ready"], true);
        assert_eq!(lines[1]["context"], 1);
    }

    #[test]
    fn framework_records_take_the_calling_thread() {
        let mut batch = Batch::default();
        batch.push(call(), Record::OpBegin);
        batch.push(call(), Record::Raw("{\"type\":\"op_end\",\"name\":\"a\nb\"}".into()));
        let mut text = String::new();
        batch.write_lines(&mut Vec::new(), &mut text);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0]["type"].as_str(), lines[0]["thread"].as_u64()), (Some("op_begin"), Some(7)));
        assert_eq!((lines[1]["type"].as_str(), lines[1]["thread"].as_u64()), (Some("op_end"), Some(7)));
    }
}
