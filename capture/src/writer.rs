//! The writer thread: takes records from a channel and appends them to this process's trace file. The
//! application's threads never touch the file; a flush every 200 ms bounds what a SIGKILL can lose.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::record::Entry;

const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// What the writer thread receives.
pub enum Message {
    Entry(Entry),
    /// Write everything received so far and confirm.
    Flush(Sender<()>),
}

pub struct Writer {
    pub sender: Sender<Message>,
    pub path: PathBuf,
    pub thread: Option<JoinHandle<()>>,
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
    /// Creates the trace file, writes the header and starts the thread.
    pub fn start(path: PathBuf) -> std::io::Result<Writer> {
        let file = create(&path)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        writeln!(out, "{{\"type\":\"streamtrace\",\"version\":1,\"comment\":\"recorded by streamtrace capture\"}}")?;
        out.flush()?;
        let (sender, receiver) = channel();
        let thread = std::thread::Builder::new().name("streamtrace-writer".into()).spawn(move || run(receiver, out))?;
        Ok(Writer { sender, path, thread: Some(thread) })
    }
}

fn run(receiver: Receiver<Message>, mut out: BufWriter<File>) {
    let mut line = String::with_capacity(512);
    let mut failed = false;
    loop {
        let message = match receiver.recv_timeout(FLUSH_EVERY) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => {
                failed |= out.flush().is_err();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match message {
            Message::Entry(entry) => {
                line.clear();
                entry.write_line(&mut line);
                if !failed && out.write_all(line.as_bytes()).is_err() {
                    failed = true;
                    eprintln!("streamtrace: cannot write the trace any more; the program runs on without capture");
                }
            }
            Message::Flush(done) => {
                failed |= out.flush().is_err();
                let _ = done.send(());
            }
        }
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
