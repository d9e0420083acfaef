//! The online analyzer's end of a process's trace (`streamtrace capture` without `--no-analyze`): the same bytes
//! the trace file gets (binary frames, or JSON lines), sent over the Unix socket `STREAMTRACE_STREAM` names, one
//! connection per process. Batches go whole or not at all, so what the analyzer gets is always a prefix of the
//! trace that ends between records (and, in binary, whose strings were all declared). The drain hands each
//! batch's bytes to a queue and returns; a sender thread of its own writes the queue into
//! the socket, so neither the program's threads nor the writer thread ever wait for the analyzer. The queue is
//! bounded: when the analyzer falls so far behind that it is full, this batch and every later one are dropped
//! (the analyzer keeps a prefix of the trace it can analyze exactly, not a trace with holes in it) and counted;
//! at exit the count goes to the analyzer on a connection of its own (`{"type":"stream_lost"}`), whose report
//! says so. A socket that takes nothing for [`SEND_TIMEOUT`] is dead: the sender stops and says so once.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The most trace text queued for the analyzer; a batch that would pass it is dropped.
pub const QUEUE_BYTES: usize = 256 << 20;
/// How long a write may make no progress before the analyzer counts as gone.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(20);

/// The first line of a connection that only reports a loss (read by the analyzer: src/ingest/live.rs).
pub const LOSS_KIND: &str = "stream_lost";

pub struct StreamSink {
    shared: Arc<Shared>,
    path: PathBuf,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the sender (text queued, or closing) and the closer (the sender finished).
    changed: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Text queued, with how many records each holds.
    chunks: VecDeque<(Vec<u8>, u64)>,
    bytes: usize,
    /// Records not sent: dropped when the queue was full, or queued when the socket died.
    lost_records: u64,
    state: Flow,
    closing: bool,
    /// The sender is writing a chunk it took from the queue.
    in_flight: bool,
    sender_done: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Flow {
    /// Every batch so far went into the queue.
    #[default]
    Open,
    /// The queue was full once: what is queued still goes out, nothing after it.
    Overflowed,
    /// The socket failed: nothing more goes out.
    Dead,
}

/// What became of the stream, said at its end.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub lost_records: u64,
    /// Whether the socket failed (the loss could not be told to the analyzer).
    pub dead: bool,
}

impl StreamSink {
    /// Connects to the analyzer at `path` and starts the sender thread.
    pub fn connect(path: &Path) -> std::io::Result<StreamSink> {
        StreamSink::connect_with(path, SEND_TIMEOUT)
    }

    fn connect_with(path: &Path, timeout: Duration) -> std::io::Result<StreamSink> {
        // std opens it close-on-exec: an exec'd image connects anew, and never writes into this connection.
        let socket = UnixStream::connect(path)?;
        socket.set_write_timeout(Some(timeout))?;
        let shared = Arc::new(Shared { queue: Mutex::new(Queue::default()), changed: Condvar::new() });
        let sender = Arc::clone(&shared);
        std::thread::Builder::new().name("streamtrace-stream".into()).spawn(move || {
            // Nothing may unwind into the program: a panic ends the stream as a failed socket would.
            let done = Arc::clone(&sender);
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| send_loop(&sender, socket))).is_err() {
                done.lock().state = Flow::Dead;
            }
            let mut queue = done.lock();
            queue.sender_done = true;
            drop(queue);
            done.changed.notify_all();
        })?;
        Ok(StreamSink { shared, path: path.to_path_buf() })
    }

    /// Queues a batch's text (`records` of them) for the analyzer; never waits for it. False once nothing more
    /// can reach it (the socket failed).
    pub fn send(&self, text: &[u8], records: u64) -> bool {
        let mut queue = self.shared.lock();
        if queue.state == Flow::Open && queue.bytes + text.len() > QUEUE_BYTES {
            queue.state = Flow::Overflowed;
            eprintln!(
                "streamtrace: the analyzer fell behind by {} MiB of trace: the rest of this process's trace is \
                 not analyzed (the report counts what was lost)",
                QUEUE_BYTES >> 20
            );
        }
        if queue.state != Flow::Open {
            queue.lost_records += records;
            return queue.state != Flow::Dead;
        }
        queue.bytes += text.len();
        queue.chunks.push_back((text.to_vec(), records));
        drop(queue);
        self.shared.changed.notify_all();
        true
    }

    /// Waits until what is queued has gone out, at most [`SEND_TIMEOUT`] without progress (a forked child,
    /// which ends in `_exit` with no at-exit flush, at its synchronizations: as its file gets the batch at once).
    pub fn flush(&self) {
        let mut queue = self.shared.lock();
        while (!queue.chunks.is_empty() || queue.in_flight) && !queue.sender_done {
            queue = self.shared.changed.wait(queue).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Sends what is queued and ends the stream (at exit): waits while the analyzer takes the text, at most
    /// [`SEND_TIMEOUT`] without progress, then tells it what was lost.
    pub fn finish(&self) -> Outcome {
        let mut queue = self.shared.lock();
        queue.closing = true;
        self.shared.changed.notify_all();
        while !queue.sender_done {
            queue = self.shared.changed.wait(queue).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let outcome = Outcome { lost_records: queue.lost_records, dead: queue.state == Flow::Dead };
        drop(queue);
        // A dead socket's analyzer may still be there (stalled, not gone): it is told too, if it listens.
        if outcome.lost_records > 0 {
            let told = UnixStream::connect(&self.path).and_then(|mut socket| {
                socket.set_write_timeout(Some(SEND_TIMEOUT))?;
                socket.write_all(
                    format!("{{\"type\":\"{LOSS_KIND}\",\"records\":{}}}\n", outcome.lost_records).as_bytes(),
                )
            });
            if told.is_err() {
                eprintln!("streamtrace: {} records were not analyzed (the analyzer fell behind)", outcome.lost_records);
            }
        }
        outcome
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The sender thread: writes the queue into the socket until the stream closes or the socket fails.
fn send_loop(shared: &Shared, mut socket: UnixStream) {
    loop {
        let mut queue = shared.lock();
        while queue.chunks.is_empty() && !queue.closing && queue.state != Flow::Dead {
            queue = shared.changed.wait(queue).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let Some((chunk, records)) = queue.chunks.pop_front().filter(|_| queue.state != Flow::Dead) else { return };
        queue.in_flight = true;
        drop(queue);
        let written = socket.write_all(&chunk);
        let mut queue = shared.lock();
        queue.bytes -= chunk.len();
        queue.in_flight = false;
        shared.changed.notify_all();
        if let Err(e) = written {
            queue.state = Flow::Dead;
            let queued: u64 = queue.chunks.drain(..).map(|(_, records)| records).sum();
            queue.lost_records += records + queued;
            queue.bytes = 0;
            eprintln!("streamtrace: the online analyzer stopped taking the trace ({e}): the rest is not analyzed");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    fn listener(name: &str) -> (UnixListener, PathBuf) {
        let path = std::env::temp_dir().join(format!("st-sink-{name}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        (UnixListener::bind(&path).unwrap(), path)
    }

    #[test]
    fn the_analyzer_gets_every_line_in_order() {
        let (listener, path) = listener("order");
        let sink = StreamSink::connect(&path).unwrap();
        let (socket, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || BufReader::new(socket).lines().map(Result::unwrap).collect::<Vec<_>>());
        for i in 0..1000 {
            assert!(sink.send(format!("{{\"n\":{i}}}\n").as_bytes(), 1));
        }
        sink.flush();
        assert_eq!(sink.shared.lock().bytes, 0, "flushed: nothing queued");
        assert_eq!(sink.finish(), Outcome { lost_records: 0, dead: false });
        drop(sink);
        let lines = reader.join().unwrap();
        assert_eq!(lines.len(), 1000);
        assert!(lines.iter().enumerate().all(|(i, line)| *line == format!("{{\"n\":{i}}}")));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_full_queue_drops_the_rest_and_the_loss_is_reported() {
        let (listener, path) = listener("full");
        let sink = StreamSink::connect(&path).unwrap();
        let (socket, _) = listener.accept().unwrap();
        // The analyzer reads nothing yet: the socket's buffer and then the queue fill up.
        let chunk = vec![b'x'; 1 << 20];
        let mut sent = 0;
        while sink.send(&chunk, 1) && sink.shared.lock().state == Flow::Open {
            sent += 1;
            assert!(sent < 2 * (QUEUE_BYTES >> 20), "the queue never filled");
        }
        assert!(sink.send(b"after\n", 3), "dropped, not failed");
        let drained = std::thread::spawn(move || std::io::copy(&mut &socket, &mut std::io::sink()).unwrap());
        let finishing = std::thread::spawn(move || sink.finish());
        let (report, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(report).read_line(&mut line).unwrap();
        let outcome = finishing.join().unwrap();
        assert_eq!(outcome.lost_records, 4, "the batch that did not fit and the one after it");
        assert!(!outcome.dead);
        assert_eq!(line, "{\"type\":\"stream_lost\",\"records\":4}\n");
        assert_eq!(drained.join().unwrap(), sent as u64 * (1 << 20), "what was queued still went out");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_stalled_analyzer_cannot_hold_the_program_at_exit() {
        let (listener, path) = listener("stall");
        let sink = StreamSink::connect_with(&path, Duration::from_millis(200)).unwrap();
        let (_socket, _) = listener.accept().unwrap();
        // Accepted, never read: more than the socket's buffer takes.
        for _ in 0..64 {
            sink.send(&vec![b'x'; 1 << 20], 1);
        }
        let outcome = sink.finish();
        assert!(outcome.dead, "the write that made no progress ended the stream");
        assert!(outcome.lost_records > 0 && outcome.lost_records <= 64, "{outcome:?}");
        assert!(!sink.send(b"more\n", 1), "nothing more goes out");
        let _ = std::fs::remove_file(&path);
    }
}
