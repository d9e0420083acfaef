//! `streamtrace capture`'s online analysis: every process of the program sends its trace over the socket of
//! ingest::live as it records it, and each connection is analyzed on a thread of its own as it comes, with the
//! same reader and engine as a trace file; the reports are ready when the program exits, and memory follows
//! the program's live state, not the length of the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::analysis::{analyze_source, AnalysisError};
use crate::hb::EngineOptions;
use crate::ingest::live::{open_connection, LiveConnection, LiveListener};
use crate::ingest::Counter;
use crate::job::{self, JobTrace};

/// The listener and the thread that accepts the program's processes. Dropped unfinished (the program could
/// not be started), it stops taking processes, so that the listener's private folder goes with it.
pub struct OnlineAnalysis {
    listener: Arc<LiveListener>,
    /// Taken by [`OnlineAnalysis::finish`].
    accepting: Option<JoinHandle<Vec<JoinHandle<Analyzed>>>>,
}

/// What one connection gave.
enum Analyzed {
    Trace { pid: u32, trace: Box<JobTrace> },
    Lost { pid: u32, records: u64 },
}

impl OnlineAnalysis {
    /// Listens, and analyzes each process that connects from now on.
    pub fn start(options: EngineOptions) -> std::io::Result<OnlineAnalysis> {
        let listener = Arc::new(LiveListener::bind()?);
        let accepted = Arc::clone(&listener);
        let accepting =
            std::thread::Builder::new().name("live-accept".into()).spawn(move || accept_all(&accepted, options))?;
        Ok(OnlineAnalysis { listener, accepting: Some(accepting) })
    }

    /// The socket, for STREAMTRACE_STREAM.
    pub fn socket(&self) -> &Path {
        self.listener.path()
    }

    /// After the program exited: takes no more processes, waits for the analyses of those that came (each
    /// ends when its process closed its end, at its exit), and returns them in rank order, each with the
    /// records its process said it lost.
    pub fn finish(mut self) -> Vec<JobTrace> {
        self.listener.close();
        let analyses = self.accepting.take().and_then(|accepting| accepting.join().ok()).unwrap_or_default();
        let mut traces: Vec<(u32, JobTrace)> = Vec::new();
        let mut losses = Vec::new();
        for analysis in analyses {
            match analysis.join() {
                Ok(Analyzed::Trace { pid, trace }) => traces.push((pid, *trace)),
                Ok(Analyzed::Lost { pid, records }) => losses.push((pid, records)),
                Err(_) => eprintln!("streamtrace: an online analysis failed with an internal error"),
            }
        }
        for (pid, records) in losses {
            // The loss goes to the process's latest trace (an exec'd image keeps its process id).
            let Some((_, trace)) = traces.iter_mut().rev().find(|(p, _)| *p == pid) else { continue };
            if let Ok(analysis) = trace.outcome.as_mut() {
                analysis.import.bump(Counter::CaptureStreamLostRecords, records);
            }
        }
        let mut traces: Vec<JobTrace> = traces.into_iter().map(|(_, trace)| trace).collect();
        job::in_rank_order(&mut traces);
        traces
    }
}

impl Drop for OnlineAnalysis {
    fn drop(&mut self) {
        if let Some(accepting) = self.accepting.take() {
            // Its hold on the listener ends with it; analyses it started (none, unless the program ran) are
            // left to end with their connections.
            self.listener.close();
            let _ = accepting.join();
        }
    }
}

/// Accepts until closed, one analysis thread per connection.
fn accept_all(listener: &LiveListener, options: EngineOptions) -> Vec<JoinHandle<Analyzed>> {
    let mut analyses = Vec::new();
    let mut seen: Vec<u32> = Vec::new();
    loop {
        let (stream, pid) = match listener.next() {
            Ok(Some(accepted)) => accepted,
            Ok(None) => break,
            Err(e) => {
                eprintln!("streamtrace: the online analysis stopped taking processes: {e}");
                break;
            }
        };
        // How reports name the trace: the process, and which of its images (an exec keeps the process id).
        let images = seen.iter().filter(|&&p| p == pid).count();
        seen.push(pid);
        let name = match images {
            0 => PathBuf::from(format!("process {pid}")),
            n => PathBuf::from(format!("process {pid} (image {})", n + 1)),
        };
        let analysis = std::thread::Builder::new().name("live-analysis".into()).spawn(move || {
            match open_connection(stream, pid, name.clone()) {
                Ok(LiveConnection::Lost { pid, records }) => Analyzed::Lost { pid, records },
                Ok(LiveConnection::Trace { pid, source }) => {
                    let outcome = analyze_source(&name.display().to_string(), source, options);
                    Analyzed::Trace { pid, trace: Box::new(JobTrace { path: name, outcome }) }
                }
                Err(e) => Analyzed::Trace {
                    pid,
                    trace: Box::new(JobTrace { path: name, outcome: Err(AnalysisError::from(e)) }),
                },
            }
        });
        match analysis {
            Ok(handle) => analyses.push(handle),
            Err(e) => eprintln!("streamtrace: cannot analyze process {pid}: {e}"),
        }
    }
    analyses
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{json::JsonReport, Report};
    use std::io::{BufRead, Write};
    use std::os::unix::net::UnixStream;

    /// Sends a trace file into the socket as the capture library does: its lines in batches, as they were
    /// written.
    fn play(socket: &Path, trace: &Path) {
        let mut stream = UnixStream::connect(socket).unwrap();
        let file = std::io::BufReader::new(std::fs::File::open(trace).unwrap());
        let mut batch = String::new();
        for (i, line) in file.lines().enumerate() {
            batch.push_str(&line.unwrap());
            batch.push('\n');
            if i % 500 == 0 {
                stream.write_all(batch.as_bytes()).unwrap();
                batch.clear();
            }
        }
        stream.write_all(batch.as_bytes()).unwrap();
    }

    #[test]
    fn an_analysis_dropped_unfinished_leaves_no_folder() {
        let online = OnlineAnalysis::start(EngineOptions::default()).unwrap();
        let folder = online.socket().parent().expect("the socket's folder").to_path_buf();
        assert!(folder.is_dir());
        drop(online);
        assert!(!folder.exists(), "{} left behind", folder.display());
    }

    /// A trace's JSON report without the trace's name, which is the file's or the process's.
    fn json_report(trace: &JobTrace) -> serde_json::Value {
        let analysis = trace.outcome.as_ref().unwrap_or_else(|e| panic!("{}: {e}", trace.path.display()));
        let mut out = Vec::new();
        JsonReport.write(analysis, &mut out).unwrap();
        let mut report: serde_json::Value = serde_json::from_slice(&out).unwrap();
        report.as_object_mut().expect("a JSON object").remove("trace");
        report
    }

    #[test]
    fn streamed_traces_give_the_findings_of_their_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let jobs: [&[&str]; 2] = [
            &["samples/capture/torch-t2/train_loop.json"],
            &["samples/capture/fork/parent.json", "samples/capture/fork/child.json"],
        ];
        for files in jobs {
            let files: Vec<PathBuf> = files.iter().map(|f| root.join(f)).collect();
            let online = OnlineAnalysis::start(EngineOptions::default()).unwrap();
            let socket = online.socket().to_path_buf();
            // Every process at once, each on its own connection.
            std::thread::scope(|scope| {
                for file in &files {
                    let socket = &socket;
                    scope.spawn(move || play(socket, file));
                }
            });
            let streamed = online.finish();
            let analyzed =
                job::analyze_job(&files, EngineOptions::default(), &crate::symbols::BinarySearch::default(), false);
            assert_eq!(streamed.len(), files.len(), "one trace per connection");
            let own = format!("process {}", std::process::id());
            assert!(streamed.iter().all(|t| t.path.display().to_string().starts_with(&own)));
            // The connections' order is not the files': match them by their reports, each exactly once.
            let mut expected: Vec<serde_json::Value> = analyzed.iter().map(json_report).collect();
            for trace in &streamed {
                let report = json_report(trace);
                let Some(at) = expected.iter().position(|e| *e == report) else {
                    panic!("{}: no file gave the streamed findings of {}", files[0].display(), trace.path.display())
                };
                expected.swap_remove(at);
            }
            let races: usize = streamed.iter().map(|t| t.outcome.as_ref().unwrap().findings.races.len()).sum();
            assert_eq!(races, if files.len() > 1 { 2 } else { 0 }, "a race in each forked process; a clean loop");
        }
    }

    /// A trace streamed in the binary encoding (as the capture library writes it by default), in pieces, gives
    /// the report of its JSON file: the names of its streams, which the binary reader's thread takes note of,
    /// included.
    #[test]
    fn a_streamed_binary_trace_gives_the_report_of_its_json_file() {
        use streamtrace_format::binary::{preamble, transcode::json_to_binary, write::BinaryWriter};
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/capture/torch-t2/train_loop.json");
        let (mut writer, mut bytes) = (BinaryWriter::new(), preamble().to_vec());
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            json_to_binary(&mut writer, &mut bytes, line.as_bytes());
        }
        let online = OnlineAnalysis::start(EngineOptions::default()).unwrap();
        let mut stream = UnixStream::connect(online.socket()).unwrap();
        bytes.chunks(4096).for_each(|piece| stream.write_all(piece).unwrap());
        drop(stream);
        let streamed = online.finish();
        let analyzed = job::analyze_job(
            std::slice::from_ref(&file),
            EngineOptions::default(),
            &crate::symbols::BinarySearch::default(),
            false,
        );
        assert_eq!(streamed.len(), 1);
        let streamed = streamed[0].outcome.as_ref().unwrap();
        assert_eq!(streamed.format, crate::ingest::binary::FORMAT_NAME);
        let names = |analysis: &crate::analysis::Analysis| format!("{:?}", analysis.tables.names);
        assert!(names(streamed).contains("train_loop.py"), "streams named by their Python lines");
        assert_eq!(names(streamed), names(analyzed[0].outcome.as_ref().unwrap()));
    }

    #[test]
    fn a_reported_loss_is_counted_as_data_loss() {
        let online = OnlineAnalysis::start(EngineOptions::default()).unwrap();
        let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/capture/fork/child.json");
        play(online.socket(), &trace);
        let mut lost = UnixStream::connect(online.socket()).unwrap();
        lost.write_all(b"{\"type\":\"stream_lost\",\"records\":12}\n").unwrap();
        drop(lost);
        let streamed = online.finish();
        assert_eq!(streamed.len(), 1, "a loss report is no trace of its own");
        let import = &streamed[0].outcome.as_ref().unwrap().import;
        assert_eq!(import.get(Counter::CaptureStreamLostRecords), 12);
    }
}
