//! The trace file of one process. Records collect in a buffer under the capture's state lock; a background
//! thread drains it every 100 ms and formats and writes the batch, so the application's threads never touch
//! the file or wake another thread per record. 100 ms bounds what a SIGKILL loses. A thread about to wait for
//! the GPU drains at once, too. This file touches the file and the switches; what a drain takes and in which
//! order it hands the batches over is state.rs's. The trace is written in the binary encoding
//! unless `STREAMTRACE_TRACE_FORMAT=json` (`--trace-format json`) asks for JSON lines. Under `streamtrace
//! capture` the same bytes also go to the online analyzer (stream_sink.rs), or only there with `--no-trace`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streamtrace_format::{Producer, TraceEncoding, TraceWriter};

use crate::control::disable;
use crate::record::{Batch, KernelName};
use crate::stream_sink::StreamSink;

/// How often the writer thread drains; bounds what a SIGKILL loses.
const DRAIN_INTERVAL: Duration = Duration::from_millis(100);

pub struct Writer {
    file: Arc<Mutex<TraceFile>>,
    pub path: PathBuf,
}

/// The open file and the analyzer's stream (either or both), the kernel names declared so far (launch records
/// carry only an index), and the trace's encoder (its binary string table, and the bytes of the last batch,
/// whose room the next one reuses: a fresh buffer of megabytes every 100 ms costs page faults).
struct TraceFile {
    out: Option<File>,
    stream: Option<StreamSink>,
    names: Vec<KernelName>,
    trace: TraceWriter,
    /// Room for a framework record's text.
    scratch: String,
}

/// The encoding `STREAMTRACE_TRACE_FORMAT` names (`streamtrace capture --trace-format`); when it is unset, the
/// one `path`'s extension says (`.json`, `.stbin`), else binary. A name that is no encoding is said once.
pub fn encoding_for(path: &Path) -> TraceEncoding {
    match std::env::var(streamtrace_format::launch::ENV_TRACE_FORMAT) {
        Err(_) => TraceEncoding::of_path(path).unwrap_or_default(),
        Ok(name) => TraceEncoding::parse(&name).unwrap_or_else(|| {
            eprintln!("streamtrace: unknown trace format `{name}` (binary or json): writing binary");
            TraceEncoding::default()
        }),
    }
}

/// `template` with `%p` replaced by the process id; a suffix `.N` is added before the extension if the file
/// already exists (an exec keeps the process id, and must not overwrite the trace of the image before it).
pub fn trace_path(template: &str, pid: u32) -> PathBuf {
    let base = template.replace("%p", &pid.to_string());
    let path = PathBuf::from(&base);
    if !path.exists() {
        return path;
    }
    let (stem, extension) = match base.rsplit_once('.') {
        Some((stem, ext)) if !ext.contains('/') => (stem.to_string(), format!(".{ext}")),
        _ => (base.clone(), String::new()),
    };
    (1..).map(|n| PathBuf::from(format!("{stem}.{n}{extension}"))).find(|p| !p.exists()).unwrap_or(path)
}

fn create(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().write(true).create_new(true).open(path)
}

impl Writer {
    /// Creates the trace file, connects to the online analyzer when `streamtrace capture` runs one, and writes
    /// the header to both. Without the file (`--no-trace`) an analyzer that cannot be reached gets the file
    /// instead, said once.
    pub fn create(path: PathBuf) -> std::io::Result<Writer> {
        Writer::create_as(path.clone(), encoding_for(&path))
    }

    /// [`create`](Self::create) in the encoding `encoding`.
    pub fn create_as(path: PathBuf, encoding: TraceEncoding) -> std::io::Result<Writer> {
        let stream = std::env::var_os(streamtrace_format::launch::ENV_STREAM).and_then(|socket| {
            StreamSink::connect(Path::new(&socket))
                .map_err(|e| {
                    eprintln!(
                        "streamtrace: cannot reach the online analyzer ({e}): the trace goes to {} only, analyzed at exit",
                        path.display()
                    )
                })
                .ok()
        });
        let no_trace = std::env::var_os(streamtrace_format::launch::ENV_NO_TRACE).is_some();
        let mut out = if stream.is_some() && no_trace { None } else { Some(create(&path)?) };
        // A recording: the analyzer counts and skips a record it cannot take instead of refusing the trace.
        let job = streamtrace_format::JobPlace::from_env(|name| std::env::var(name).ok());
        // Whether this process's host synchronization reaches the trace: the interposers stand in front (asked
        // at start-up, setup.rs).
        let host_sync = crate::control::HOST_SYNC.load(Ordering::Relaxed);
        // Whether only the capture ranges' work is recorded (ranges.rs): the analyzer then reads the ranges.
        let ranges = crate::ranges::trigger();
        let recorded = streamtrace_format::Recorded { job, host_sync, ranges };
        let mut trace = TraceWriter::new(encoding);
        trace.header(Some(Producer::Capture), recorded, Some("recorded by streamtrace capture"));
        if let Some(out) = out.as_mut() {
            out.write_all(trace.bytes())?;
        }
        if let Some(stream) = &stream {
            stream.send(trace.bytes(), 0);
        }
        trace.clear(KEPT_BUFFER);
        let file = TraceFile { out, stream, names: Vec::new(), trace, scratch: String::new() };
        Ok(Writer { file: Arc::new(Mutex::new(file)), path })
    }

    /// Another handle on the same file, for the draining thread.
    pub fn handle(&self) -> Writer {
        Writer { file: Arc::clone(&self.file), path: self.path.clone() }
    }

    /// The file, for one writer at a time. Batches must be written in the order they were recorded (a launch
    /// names its kernel by an index an earlier batch may have declared), so a drain takes this lock before it
    /// takes the records.
    pub fn lock(&self) -> std::io::Result<WriterGuard<'_>> {
        self.file.lock().map(WriterGuard).map_err(|_| std::io::Error::other("trace file lock poisoned"))
    }
}

/// The most buffer room kept from one batch to the next when a batch needs much less.
const KEPT_BUFFER: usize = 16 << 20;

pub struct WriterGuard<'a>(std::sync::MutexGuard<'a, TraceFile>);

impl WriterGuard<'_> {
    /// Formats a batch and appends it to the file and the stream. An error when the file cannot be written, or
    /// when there is no file and the stream's socket failed: nothing records this process's trace any more.
    pub fn write(&mut self, batch: &Batch) -> std::io::Result<()> {
        let TraceFile { out, stream, names, trace, scratch } = &mut *self.0;
        // A burst (a graph of a million launches) must not keep its buffer for the rest of the run.
        trace.clear(KEPT_BUFFER);
        batch.write_records(names, trace, scratch);
        let bytes = trace.bytes();
        let streamed = stream.as_ref().is_none_or(|stream| stream.send(bytes, batch.entries.len() as u64));
        match out {
            Some(out) => out.write_all(bytes),
            None if streamed => Ok(()),
            None => Err(std::io::Error::other("the online analyzer's socket failed and no trace file is written")),
        }
    }

    /// Waits, boundedly, until the online analyzer has what was written so far (stream_sink.rs).
    pub fn flush_stream(&self) {
        if let Some(stream) = &self.0.stream {
            stream.flush();
        }
    }

    /// Ends the stream to the online analyzer (at exit, after the last drain): waits, boundedly, until it has
    /// what was queued.
    pub fn finish_stream(&mut self) {
        if let Some(stream) = self.0.stream.take() {
            stream.finish();
        }
    }
}

/// Starts the writer thread of one trace: it runs `drain` every 100 ms until `drain` says this trace has ended.
pub(crate) fn start_thread(mut drain: impl FnMut() -> bool + Send + 'static) -> std::io::Result<()> {
    let thread = std::thread::Builder::new().name("streamtrace-writer".into());
    thread.spawn(move || loop {
        std::thread::sleep(DRAIN_INTERVAL);
        // A panic here would end the thread silently and leave the file's lock poisoned: say so, and stop capture.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut drain)) {
            Ok(true) => {}
            Ok(false) => break,
            Err(_) => {
                disable("an internal error in the writer thread");
                break;
            }
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Call, Record};

    #[test]
    fn trace_path_substitutes_pid_and_avoids_overwriting() {
        let dir = std::env::temp_dir().join(format!("st-capture-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let template = format!("{}/trace.%p.json", dir.display());
        let first = trace_path(&template, 42);
        assert_eq!(first, dir.join("trace.42.json"));
        std::fs::write(&first, "x").unwrap();
        assert_eq!(trace_path(&template, 42), dir.join("trace.42.1.json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn written_batches_form_a_trace() {
        let path = std::env::temp_dir().join(format!("st-writer-test-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let writer = Writer::create_as(path.clone(), TraceEncoding::Json).unwrap();
        let call = Call { tid: 1, time_ns: 2, correlation: 3, site: 0 };
        let mut batch = Batch::default();
        batch.push(call, Record::Event { handle: 9 });
        writer.handle().lock().unwrap().write(&batch).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["type"], "streamtrace");
        assert_eq!(lines[1]["type"], "event");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn by_default_the_trace_is_binary() {
        let path = std::env::temp_dir().join(format!("st-writer-test-{}.stbin", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let writer = Writer::create_as(path.clone(), TraceEncoding::default()).unwrap();
        let call = Call { tid: 1, time_ns: 2, correlation: 3, site: 0 };
        let mut batch = Batch::default();
        batch.push(call, Record::Event { handle: 9 });
        writer.handle().lock().unwrap().write(&batch).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(streamtrace_format::binary::read::is_binary(&bytes));
        let mut frames = streamtrace_format::binary::read::FrameReader::new(&bytes[..]).unwrap();
        let mut tags = Vec::new();
        while let streamtrace_format::binary::read::FrameOutcome::Frame { head, .. } = frames.next_frame() {
            tags.push(head.tag);
        }
        use streamtrace_format::{binary::Tag, RecordKind};
        assert!(tags.contains(&Tag::Record(RecordKind::Header)) && tags.ends_with(&[Tag::Record(RecordKind::Event)]));
        std::fs::remove_file(&path).unwrap();
    }
}
