//! Opening a trace: the reader is chosen by the input's first bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::nsys::rep as nsys_rep;
use super::record_source::{IngestError, RecordSource};
use super::{binary, json, nsys};

/// The first bytes of an SQLite database.
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// The path that names standard input.
pub const STDIN: &str = "-";

/// Opens a trace, choosing the reader from its first bytes: SQLite (an nsys export), an nsys report (converted
/// with `nsys export`), a binary trace (its magic bytes), or JSON. The input is opened once and its first bytes are read from the same reader that
/// then reads the rest, so a pipe, a FIFO, `/dev/stdin` and `-` (standard input) work for JSON traces. SQLite
/// reads its file by path and seeks in it, so an export or report that comes through a pipe is refused with a
/// message saying so, rather than spooled to a temporary copy of unknown size.
pub fn open(path: &Path) -> Result<Box<dyn RecordSource>, IngestError> {
    let (name, mut input, regular): (PathBuf, Box<dyn Read + Send>, bool) = if path == Path::new(STDIN) {
        let regular = std::fs::metadata("/dev/stdin").is_ok_and(|m| m.is_file());
        (PathBuf::from("<stdin>"), Box::new(std::io::stdin()), regular)
    } else {
        let file = std::fs::File::open(path).map_err(|e| IngestError::new(path, None, format!("cannot open: {e}")))?;
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        (path.to_path_buf(), Box::new(file), regular)
    };
    let mut head = Vec::with_capacity(32);
    (&mut input)
        .take(32)
        .read_to_end(&mut head)
        .map_err(|e| IngestError::new(&name, None, format!("cannot read: {e}")))?;
    let sqlite = head.starts_with(SQLITE_MAGIC);
    if sqlite || head.starts_with(nsys_rep::MAGIC) {
        let what = if sqlite { "an nsys SQLite export" } else { "an Nsight Systems report" };
        if !regular {
            return Err(IngestError::new(
                &name,
                None,
                format!(
                    "{what} that is not a regular file (a pipe?): SQLite reads a file by path; name the file itself"
                ),
            ));
        }
        // A regular file given as standard input (`< report.sqlite`) is read through its /dev/stdin link.
        let file = if path == Path::new(STDIN) { Path::new("/dev/stdin") } else { path };
        let export = if sqlite { file.to_path_buf() } else { nsys_rep::to_sqlite(file)? };
        return nsys::NsysReader::open(&export).map(|r| Box::new(r) as Box<dyn RecordSource>);
    }
    let rest = std::io::Cursor::new(head.clone()).chain(input);
    if streamtrace_format::binary::read::is_binary(&head) {
        return binary::BinaryTraceReader::from_reader(name, rest).map(|r| Box::new(r) as Box<dyn RecordSource>);
    }
    json::JsonTraceReader::from_reader(name, rest).map(|r| Box::new(r) as Box<dyn RecordSource>)
}
