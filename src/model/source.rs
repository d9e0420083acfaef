//! Where in the program something was issued, made or allocated: a source line (a Python line, or one a
//! hand-written trace gives), a native call site (the return addresses the capture recorded, symbolized only
//! when a report shows them: src/symbols/), or both. Operations, streams and events carry both, each optional. Plain values, no I/O; the model's other files build on it
//! and it depends on none of them.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// Where in the program's source an operation was issued: a file and line, and for a native frame the
/// function (`file:line in function`), or only the function with an offset when the binary has no line
/// table (`app in main+0x2c`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SourceLocation {
    pub file: Arc<str>,
    pub line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<Arc<str>>,
}

impl SourceLocation {
    /// Parses `file:line` (or a bare `file`).
    pub fn parse(text: &str) -> SourceLocation {
        let (file, line) = match text.rsplit_once(':') {
            Some((file, line)) if !file.is_empty() => match line.parse() {
                Ok(line) => (file, Some(line)),
                Err(_) => (text, None),
            },
            _ => (text, None),
        };
        SourceLocation { file: file.into(), line, function: None }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}", self.file, line)?,
            None => write!(f, "{}", self.file)?,
        }
        match &self.function {
            Some(function) => write!(f, " in {function}"),
            None => Ok(()),
        }
    }
}

/// A loaded binary that native call sites point into, as the trace's `module` record describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NativeModule {
    pub path: Arc<str>,
    /// What the loader added to the addresses the file states.
    pub bias: u64,
    /// The mapped range.
    pub start: u64,
    pub size: u64,
    /// The GNU build id (hex), which the symbolizer checks against the file it reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id: Option<Arc<str>>,
}

impl NativeModule {
    pub fn contains(&self, address: u64) -> bool {
        address >= self.start && address - self.start < self.size
    }
}

/// What the capture said, at the program's exit where its binaries were, about one return address of a module
/// (a `frame_line` record): one of the functions the call sits in, `depth` 0 the innermost (inlined) one, with
/// its line, or from a symbol table only the function and how far into it the address is. The symbolizer takes
/// these before reading any binary, so a trace names its lines on a machine without the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedLine {
    /// The module's path, as its `module` record gave it.
    pub module: Arc<str>,
    /// The return address as the file states it (the load bias taken off).
    pub address: u64,
    pub depth: u32,
    pub function: Option<Arc<str>>,
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
    pub offset: Option<u64>,
}

/// One frame of a native call site: a return address, and the module that maps it when the trace said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeFrame {
    pub address: u64,
    pub module: Option<Arc<NativeModule>>,
}

/// A native call site as the capture recorded it: return addresses, innermost first, and for a call a Python
/// program made outside any framework op (a ctypes or pybind11 extension's launch) the Python line that made it.
/// Every operation made from one place shares it, and two sites are the same when they are the same record (one
/// per distinct chain of frames and line in a process).
#[derive(Clone, Debug)]
pub struct NativeSite(Arc<SiteFrames>);

#[derive(Debug)]
struct SiteFrames {
    frames: Box<[NativeFrame]>,
    python_line: Option<SourceLocation>,
}

impl NativeSite {
    pub fn new(frames: Vec<NativeFrame>) -> NativeSite {
        NativeSite::with_python_line(frames, None)
    }

    pub fn with_python_line(frames: Vec<NativeFrame>, python_line: Option<SourceLocation>) -> NativeSite {
        NativeSite(Arc::new(SiteFrames { frames: frames.into(), python_line }))
    }

    pub fn frames(&self) -> &[NativeFrame] {
        &self.0.frames
    }

    /// The Python line under the native frames, when the call came from Python code outside any op.
    pub fn python_line(&self) -> Option<&SourceLocation> {
        self.0.python_line.as_ref()
    }
}

impl PartialEq for NativeSite {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for NativeSite {}

impl Hash for NativeSite {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state);
    }
}

/// Serialized as its return addresses, in hex.
impl Serialize for NativeSite {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.frames().iter().map(|frame| format!("{:#x}", frame.address)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_location_parses_line() {
        let loc = SourceLocation::parse("train.py:12");
        assert_eq!(&*loc.file, "train.py");
        assert_eq!(loc.line, Some(12));
        assert_eq!(SourceLocation::parse("weird").line, None);
        assert_eq!(SourceLocation::parse("C:/x.cu:7").line, Some(7));
    }

    #[test]
    fn native_locations_name_their_function() {
        let mut loc = SourceLocation::parse("pipeline.cu:40");
        loc.function = Some("launch_step(float*)".into());
        assert_eq!(loc.to_string(), "pipeline.cu:40 in launch_step(float*)");
        let bare = SourceLocation { file: "app".into(), line: None, function: Some("main+0x2c".into()) };
        assert_eq!(bare.to_string(), "app in main+0x2c");
    }

    #[test]
    fn native_sites_are_the_same_only_when_shared() {
        let frames = || vec![NativeFrame { address: 0x401000, module: None }];
        let site = NativeSite::new(frames());
        assert_eq!(site, site.clone());
        assert_ne!(site, NativeSite::new(frames()), "another record with the same addresses (another process)");
        assert_eq!(serde_json::to_string(&site).expect("json"), "[\"0x401000\"]");
    }
}
