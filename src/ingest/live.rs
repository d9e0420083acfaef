//! Traces that arrive while the program runs (`streamtrace capture`): a Unix socket in a private directory,
//! named to the program in STREAMTRACE_STREAM, to which each process's capture library connects once
//! (capture/src/stream_sink.rs) and sends the same bytes its trace file gets (binary frames, or JSON lines). A connection is one
//! trace, read by the binary or the JSON reader (by its first bytes) as it comes; a connection whose first line is `{"type":"stream_lost"}` only says how
//! many records its process dropped when the analyzer fell behind. The listener does not block: it looks
//! whether it was closed (the program exited) while it waits, and then takes the processes that connected
//! before. Processes are told apart by the kernel's
//! word on who connected (SO_PEERCRED), not by anything they send.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::binary::BinaryTraceReader;
use super::json::JsonTraceReader;
use super::record_source::{IngestError, RecordSource};

/// The first line of a loss report (capture/src/stream_sink.rs writes it).
const LOSS_KIND: &str = "stream_lost";
/// The longest first line read before deciding what a connection is; a header is a few hundred bytes.
const FIRST_LINE_LIMIT: u64 = 64 << 10;

/// The listening socket, in a directory only this user can enter; both go when it is dropped.
pub struct LiveListener {
    listener: UnixListener,
    closing: AtomicBool,
    dir: PathBuf,
    path: PathBuf,
}

/// What one connection brought.
pub enum LiveConnection {
    /// A process's trace, read as it comes.
    Trace { pid: u32, source: Box<dyn RecordSource> },
    /// A process dropped this many records of its trace (its stream is a prefix of the run).
    Lost { pid: u32, records: u64 },
}

impl LiveListener {
    /// Makes a private directory under the system's temporary one and listens in it.
    pub fn bind() -> std::io::Result<LiveListener> {
        use std::os::unix::ffi::OsStrExt;
        let template = std::env::temp_dir().join("streamtrace-live-XXXXXX");
        let mut bytes = template.as_os_str().as_bytes().to_vec();
        bytes.push(0);
        // Safety: mkdtemp rewrites the X's of a NUL-terminated buffer it owns for the call; mode 0700.
        if unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) }.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        bytes.pop();
        let dir = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
        let path = dir.join("analyzer.sock");
        match UnixListener::bind(&path).and_then(|listener| listener.set_nonblocking(true).map(|()| listener)) {
            Ok(listener) => Ok(LiveListener { listener, closing: AtomicBool::new(false), dir, path }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The socket's path, for STREAMTRACE_STREAM.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next connection and the process that made it; None once [`close`](Self::close) was called and every
    /// process that connected before has been taken.
    pub fn next(&self) -> std::io::Result<Option<(UnixStream, u32)>> {
        loop {
            // Read before accepting: a connection made before close() is in the backlog, and is taken below.
            let closing = self.closing.load(Ordering::SeqCst);
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false)?;
                    let pid = peer_pid(&stream)?;
                    return Ok(Some((stream, pid)));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if closing {
                        return Ok(None);
                    }
                    wait_readable(&self.listener, CLOSE_POLL_MS);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// No more processes are expected (the program exited): [`next`](Self::next) ends after those already
    /// connected.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }
}

/// How often a waiting [`LiveListener::next`] looks whether it was closed.
const CLOSE_POLL_MS: i32 = 50;

/// Waits until a connection is pending on `listener`, at most `ms` milliseconds.
fn wait_readable(listener: &UnixListener, ms: i32) {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // Safety: polls one descriptor the listener owns; the result only ends the wait.
    unsafe { libc::poll(&mut poll, 1, ms) };
}

impl Drop for LiveListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The process at the other end of a connection.
fn peer_pid(stream: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // Safety: SO_PEERCRED writes one ucred into `cred`, whose size `len` gives.
    let got = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if got != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.pid as u32)
}

/// Reads a connection's first line and opens it as what it is: a trace (named `name` in reports), read on by
/// the JSON reader from that line on, or a loss report.
pub fn open_connection(stream: UnixStream, pid: u32, name: PathBuf) -> Result<LiveConnection, IngestError> {
    let mut input = BufReader::new(stream);
    let mut first = Vec::new();
    (&mut input)
        .take(FIRST_LINE_LIMIT)
        .read_until(b'\n', &mut first)
        .map_err(|e| IngestError::new(&name, None, format!("cannot read the capture's stream: {e}")))?;
    if let Some(records) = loss_report(&first) {
        return Ok(LiveConnection::Lost { pid, records });
    }
    // A binary trace's magic bytes end with a line feed: its first "line" is them.
    let binary = streamtrace_format::binary::read::is_binary(&first);
    let rest = std::io::Cursor::new(first).chain(input);
    let source =
        if binary { BinaryTraceReader::from_reader(name, rest)? } else { JsonTraceReader::from_reader(name, rest)? };
    Ok(LiveConnection::Trace { pid, source: Box::new(source) })
}

/// The records a loss report's line counts; None for any other line.
fn loss_report(line: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    (value["type"] == LOSS_KIND).then(|| value["records"].as_u64()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn connections_are_told_apart_by_their_first_line() {
        let listener = LiveListener::bind().unwrap();
        let dir = listener.path().parent().unwrap().to_path_buf();
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "private");
        }
        let mut lost = UnixStream::connect(listener.path()).unwrap();
        lost.write_all(b"{\"type\":\"stream_lost\",\"records\":7}\n").unwrap();
        drop(lost);
        let (stream, pid) = listener.next().unwrap().unwrap();
        assert_eq!(pid, std::process::id(), "the kernel names who connected");
        assert!(matches!(open_connection(stream, pid, "p".into()).unwrap(), LiveConnection::Lost { records: 7, .. }));
        let mut trace = UnixStream::connect(listener.path()).unwrap();
        trace.write_all(b"{\"type\":\"streamtrace\",\"version\":1}\n").unwrap();
        drop(trace);
        listener.close();
        let mut binary = UnixStream::connect(listener.path()).unwrap();
        let mut writer = streamtrace_format::binary::write::BinaryWriter::new();
        let header = streamtrace_format::binary_header(&mut writer, None, Default::default(), None);
        binary.write_all(&header).unwrap();
        drop(binary);
        let (stream, pid) = listener.next().unwrap().expect("connected before close: still taken");
        assert!(matches!(open_connection(stream, pid, "p".into()).unwrap(), LiveConnection::Trace { .. }));
        let (stream, pid) = listener.next().unwrap().expect("the binary trace");
        let LiveConnection::Trace { source, .. } = open_connection(stream, pid, "p".into()).unwrap() else {
            panic!("a binary trace is a trace")
        };
        assert_eq!(source.format(), crate::ingest::binary::FORMAT_NAME);
        assert!(listener.next().unwrap().is_none(), "closed, and nobody left");
        drop(listener);
        assert!(!dir.exists(), "the directory goes with the listener");
    }
}
