//! Cutting the input into the text of one record at a time, in time linear in the input.
//!
//! Records are usually one per line, but a record may span lines. Which line ends a record is known without
//! parsing: [`Nesting`] counts the brackets and braces opened outside strings, and the record is complete at the
//! end of the line that closes them. The count is taken only when asked: a record's first line is parsed at once
//! (nearly every record is one line, and counting every byte of a large trace would cost more than a tenth of
//! reading it), and only a record that turns out to continue is counted. So a record is parsed once when it is complete, not once
//! per line it spans. A record that never closes (text cut off, or a syntax error inside it) is parsed at 1, 2,
//! 4, 8... lines (twice its text in all): the probe that finds the error gives back the lines after the one it
//! is on, so that a tolerant reading goes on where it would have, had the record been parsed at every line.
//! A record's text is bounded ([`MAX_RECORD_BYTES`]): a file without line ends (`/dev/zero`) is an error naming
//! the line, not an allocation failure.

use std::io::{BufRead, Read};

/// The longest text one record may have. Real records are under a few kilobytes; a graph with a hundred
/// thousand nodes written on one line is about 10 MiB.
pub(in crate::ingest) const MAX_RECORD_BYTES: usize = 64 << 20;

/// Brackets and braces open outside strings, as the text of a record is read.
#[derive(Default)]
struct Nesting {
    depth: i64,
    in_string: bool,
    escaped: bool,
}

impl Nesting {
    fn scan(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.in_string {
                match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth -= 1,
                _ => {}
            }
        }
    }

    /// Whether the text so far ends the record: every bracket it opened is closed (or it opened none). A line
    /// that ends inside a string ends the record too: JSON strings do not span lines, and the parser says so.
    fn closed(&self) -> bool {
        self.depth <= 0 || self.in_string
    }
}

/// Why the next line could not be read: the line, and what is wrong.
pub(in crate::ingest) type LineError = (u64, String);

/// Reads the input line by line, skipping blank lines between records, and gathers one record's text.
pub(in crate::ingest) struct LineRecords<R> {
    reader: R,
    buf: Vec<u8>,
    /// The number of the last line in `buf`.
    line: u64,
    /// The first line of the record in `buf`.
    first: u64,
    nesting: Nesting,
    /// How much of `buf` the nesting count has seen.
    scanned: usize,
    /// Lines a probe gave back, read again before the input.
    replay: Vec<u8>,
    replayed: usize,
}

impl<R: BufRead> LineRecords<R> {
    pub(in crate::ingest) fn new(reader: R) -> Self {
        LineRecords {
            reader,
            buf: Vec::with_capacity(4096),
            line: 0,
            first: 0,
            nesting: Nesting::default(),
            scanned: 0,
            replay: Vec::new(),
            replayed: 0,
        }
    }

    /// Starts the next record at the next non-blank line and returns that line's number, or `None` at the end.
    pub(in crate::ingest) fn next_record(&mut self) -> Result<Option<u64>, LineError> {
        loop {
            self.buf.clear();
            self.nesting = Nesting::default();
            self.scanned = 0;
            self.first = self.line + 1;
            if !self.append_line()? {
                return Ok(None);
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(self.first));
            }
        }
    }

    /// Appends the next line to the current record's text; false at the end of the input.
    pub(in crate::ingest) fn append_line(&mut self) -> Result<bool, LineError> {
        let start = self.buf.len();
        if self.replayed < self.replay.len() {
            let rest = &self.replay[self.replayed..];
            let end = rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |at| at + 1);
            self.buf.extend_from_slice(&rest[..end]);
            self.replayed += end;
        } else {
            // One byte past the limit tells a record at the limit from a longer one.
            let allowed = (MAX_RECORD_BYTES + 1).saturating_sub(start) as u64;
            match (&mut self.reader).take(allowed).read_until(b'\n', &mut self.buf) {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(e) => return Err((self.line + 1, format!("cannot read: {e}"))),
            }
        }
        self.line += 1;
        if self.buf.len() > MAX_RECORD_BYTES {
            let whose = if self.line == self.first {
                "this line".to_string()
            } else {
                format!("the record that starts at line {}", self.first)
            };
            return Err((
                self.line,
                format!(
                    "{whose} is longer than {} MiB, the most a record may hold (is this a trace?)",
                    MAX_RECORD_BYTES >> 20
                ),
            ));
        }
        Ok(true)
    }

    /// Whether the text so far is a whole record (see [`Nesting::closed`]), counting the lines not yet counted.
    pub(in crate::ingest) fn closed(&mut self) -> bool {
        self.nesting.scan(&self.buf[self.scanned..]);
        self.scanned = self.buf.len();
        self.nesting.closed()
    }

    /// Whether a record still open should be parsed now to find an error early: at 1, 2, 4, 8... lines.
    pub(in crate::ingest) fn probe_due(&self) -> bool {
        (self.line - self.first + 1).is_power_of_two()
    }

    /// Keeps the record's first `lines` lines and gives the rest back to be read again.
    pub(in crate::ingest) fn give_back_after(&mut self, lines: u64) {
        let mut kept = 0;
        let cut = self.buf.iter().position(|&b| {
            kept += u64::from(b == b'\n');
            kept == lines
        });
        let Some(cut) = cut.map(|at| at + 1).filter(|&at| at < self.buf.len()) else { return };
        let mut replay = self.buf.split_off(cut);
        replay.extend_from_slice(&self.replay[self.replayed..]);
        self.replay = replay;
        self.replayed = 0;
        self.line = self.first + lines - 1;
    }

    pub(in crate::ingest) fn text(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_ignores_brackets_in_strings() {
        let mut nesting = Nesting::default();
        nesting.scan(br#"{"name": "a}]\"{", "reads": [["#);
        assert_eq!(nesting.depth, 3);
        assert!(!nesting.closed());
        nesting.scan(b"1, 2]]}\n");
        assert!(nesting.closed());
    }

    #[test]
    fn a_line_too_long_is_an_error_naming_it() {
        let zeros = std::io::repeat(0).take(MAX_RECORD_BYTES as u64 + 10);
        let mut lines = LineRecords::new(std::io::BufReader::new(zeros));
        let (line, message) = lines.next_record().expect_err("too long");
        assert_eq!(line, 1);
        assert!(message.contains("this line is longer than 64 MiB"), "{message}");
    }

    #[test]
    fn given_back_lines_are_read_again_with_their_numbers() {
        let mut lines = LineRecords::new(&b"{\"a\":\n1,,\n2\n}\n"[..]);
        assert_eq!(lines.next_record(), Ok(Some(1)));
        while lines.append_line().expect("read") {}
        lines.give_back_after(2);
        assert_eq!(lines.text(), b"{\"a\":\n1,,\n");
        assert_eq!(lines.next_record(), Ok(Some(3)));
        assert_eq!(lines.text(), b"2\n");
    }
}
