//! The Python line of a CUDA call that a Python program makes outside any framework op (a kernel of a ctypes
//! or pybind11 extension, a CuPy call in a PyTorch program): the native frames of such a call are the
//! extension's and the interpreter's, and the line of the user's script is what names it. The framework's
//! observer registers its reader of the calling thread's line; this asks it. Touches nothing else.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The observer's reader: writes the calling thread's Python line (`file:line`, escaped as in a JSON string,
/// without quotes) into `out` (`capacity` bytes) and returns its length; 0 when the thread runs no Python or
/// its line cannot be had without taking the GIL. Never blocks and never unwinds.
pub type LineReader = unsafe extern "C" fn(out: *mut u8, capacity: usize) -> usize;

/// The registered reader, as an address (0: none).
static READER: AtomicUsize = AtomicUsize::new(0);

/// Registers the reader (None: forgets it).
pub fn register(reader: Option<LineReader>) {
    READER.store(reader.map_or(0, |f| f as usize), Ordering::Release);
}

/// A line as read, on the stack: the walk that needs it runs under the capture's lock, where nothing allocates
/// that need not.
pub struct PythonLine {
    bytes: [u8; 480],
    len: usize,
}

impl PythonLine {
    pub fn as_str(&self) -> &str {
        // Checked when read.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

/// The calling thread's Python line, when a reader is registered and has one.
pub fn current() -> Option<PythonLine> {
    let reader = READER.load(Ordering::Acquire);
    if reader == 0 {
        return None;
    }
    // Safety: only `register` stores a nonzero value, the address of a `LineReader`.
    let reader: LineReader = unsafe { std::mem::transmute::<usize, LineReader>(reader) };
    let mut line = PythonLine { bytes: [0; 480], len: 0 };
    // Safety: the reader writes at most `capacity` bytes into the buffer.
    let len = unsafe { reader(line.bytes.as_mut_ptr(), line.bytes.len()) };
    if len == 0 || len > line.bytes.len() || std::str::from_utf8(&line.bytes[..len]).is_err() {
        return None;
    }
    line.len = len;
    Some(line)
}

/// The line's text as a `src` field holds it: the reader's JSON escapes undone (a file name with a quote, a
/// backslash or a control character; every other line comes back as it is).
pub fn unescaped(line: &str) -> String {
    if !line.contains('\\') {
        return line.to_string();
    }
    let mut text = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => text.push('\n'),
            Some('t') => text.push('\t'),
            Some('r') => text.push('\r'),
            Some('u') => {
                let code: String = chars.by_ref().take(4).collect();
                text.push(u32::from_str_radix(&code, 16).ok().and_then(char::from_u32).unwrap_or('?'));
            }
            Some(other) => text.push(other),
            None => {}
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn reads_a_line(out: *mut u8, capacity: usize) -> usize {
        let line = b"train.py:12";
        // Safety: the caller gives `capacity` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(line.as_ptr(), out, line.len().min(capacity)) };
        line.len()
    }

    unsafe extern "C" fn has_none(_: *mut u8, _: usize) -> usize {
        0
    }

    #[test]
    fn a_line_is_asked_of_the_registered_reader_only() {
        register(None);
        assert!(current().is_none());
        register(Some(reads_a_line));
        assert_eq!(current().expect("a line").as_str(), "train.py:12");
        register(Some(has_none));
        assert!(current().is_none());
        register(None);
    }

    #[test]
    fn escapes_are_undone() {
        assert_eq!(unescaped("run.py:3"), "run.py:3");
        assert_eq!(unescaped(r#"dir\\a\"b.py:4"#), r#"dir\a"b.py:4"#);
        assert_eq!(unescaped(r#"odd\u0001name.py:5"#), "odd\u{1}name.py:5");
    }
}
