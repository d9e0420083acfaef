//! Native call sites in words: each frame the capture recorded becomes `file:line in function` from the
//! binary's line tables, `module in function+0x2c` from its symbol table when it has no line tables, and
//! `module+0x1234` when it has neither (or is not the file that ran), and the program's own frame among them is
//! the one a report names (frames.rs). Streams and events are named from their creation's program frame
//! (`locate_program`, for crate::names).
//!
//! Lazy: only the call sites that findings hold are symbolized (crate::resolve asks), once each, after the
//! analysis. What the capture wrote into the trace at exit (`frame_line` records, [`RecordedLines`]) is taken
//! first: it was read where the binaries were. Otherwise each binary is read once, the first time one of its
//! frames is asked for (the streamtrace-symbols crate), at the path the trace names or, moved, in one of the
//! folders the user named ([`BinarySearch`]). What could not be read is counted here ([`SymbolCounts`]), not
//! among the import's counters.

mod frames;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use streamtrace_symbols::{Binary, Symbolized};

use crate::model::{NativeFrame, NativeSite, RecordedLine, SourceLocation};
use frames::{classify, is_startup_code, kernel_of_stub, module_class, same_function, FrameClass};
pub use streamtrace_symbols::demangle;

/// The most frames a report lists for one call site.
pub const MAX_SHOWN_FRAMES: usize = 6;

/// Where binaries that are not at the path the trace names may be: folders the user named (`--binary-dir`),
/// searched in order for a file of the same name (its build id is checked as at its own path).
#[derive(Clone, Debug, Default)]
pub struct BinarySearch {
    pub dirs: Vec<PathBuf>,
}

/// What the trace's `frame_line` records said, by module path and address as the file states it; each
/// address's entries innermost first.
#[derive(Clone, Debug, Default)]
pub struct RecordedLines(HashMap<(Arc<str>, u64), Vec<Symbolized>>);

impl RecordedLines {
    pub fn add(&mut self, line: &RecordedLine) {
        let entries = self.0.entry((line.module.clone(), line.address)).or_default();
        let depth = line.depth as usize;
        if entries.len() <= depth {
            entries.resize(depth + 1, Symbolized::default());
        }
        entries[depth] = Symbolized {
            function: line.function.clone(),
            offset: line.offset,
            file: line.file.clone(),
            line: line.line,
        };
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why a binary's frames are shown as `module+offset`.
#[derive(Debug)]
enum Unreadable {
    /// Not at its path, nor in a `--binary-dir` folder.
    Missing,
    /// There, but not readable, not ELF, or another build.
    Other(String),
}

/// Reads binaries as their frames are asked for, and remembers what each call site came to.
#[derive(Default)]
pub struct Symbolizer {
    search: BinarySearch,
    recorded: RecordedLines,
    /// Each module file read (or why it could not be).
    binaries: HashMap<Arc<str>, Result<Binary, Unreadable>>,
    sites: HashMap<NativeSite, Option<SourceLocation>>,
}

impl Symbolizer {
    pub fn new(search: BinarySearch, recorded: RecordedLines) -> Symbolizer {
        Symbolizer { search, recorded, ..Symbolizer::default() }
    }

    /// Where a call site is in the program's words: its program frame, else the Python line that made the call,
    /// else its first library frame; None when every frame is CUDA's own.
    pub fn locate(&mut self, site: &NativeSite) -> Option<SourceLocation> {
        if let Some(known) = self.sites.get(site) {
            return known.clone();
        }
        let mut library = None;
        let mut program = None;
        // The caller of nvcc's launch stub may be the host wrapper nvcc writes for the kernel, named like it and
        // placed at its line: CUDA's too. (It may also be gone, when the wrapper jumps to the stub.)
        let mut wrapper: Option<String> = None;
        'frames: for (index, frame) in site.frames().iter().enumerate() {
            let module = frame.module.as_ref().map(|m| &*m.path);
            for entry in self.symbolize(frame) {
                let class = class_after(&mut wrapper, module, &entry);
                match class {
                    FrameClass::Cuda => {}
                    FrameClass::Library => {
                        library.get_or_insert_with(|| location(frame, &entry));
                    }
                    FrameClass::Program if entry == Symbolized::default() => {
                        // Nothing is known of the binary here: its next frames tell this place from others.
                        program = Some(unknown_frames(&site.frames()[index..]));
                        break 'frames;
                    }
                    FrameClass::Program => {
                        program = Some(location(frame, &entry));
                        break 'frames;
                    }
                }
            }
        }
        let located = program.or_else(|| site.python_line().cloned()).or(library);
        self.sites.insert(site.clone(), located.clone());
        located
    }

    /// The frames a report lists for a call site, one per line, outermost last: from the frame [`locate`]
    /// names, every function of the program's own code the call passed through (inlined ones too), up to
    /// [`MAX_SHOWN_FRAMES`], ending where the program's code ends (its C runtime's start, a library), then the
    /// Python line that made the call, when the trace gives one. A frame of a binary nothing is known of is
    /// `module+0x1234`. Empty when every frame is CUDA's own and no Python line is known.
    pub fn stack(&mut self, site: &NativeSite) -> Vec<SourceLocation> {
        let (mut shown, program) = self.native_stack(site);
        if let Some(line) = site.python_line() {
            // Native frames none of which is the program's own are the interpreter's and the framework's: the
            // Python line says more than they do.
            if !program {
                shown.clear();
            }
            shown.truncate(MAX_SHOWN_FRAMES - 1);
            shown.push(line.clone());
        }
        shown
    }

    /// The native part of [`Symbolizer::stack`], and whether its frames are the program's own (else they are
    /// the one library frame or the place shown when no frame is the program's).
    fn native_stack(&mut self, site: &NativeSite) -> (Vec<SourceLocation>, bool) {
        let mut shown = Vec::new();
        let mut wrapper: Option<String> = None;
        for frame in site.frames() {
            let module = frame.module.as_ref().map(|m| &*m.path);
            for entry in self.symbolize(frame) {
                let function = entry.function.as_deref();
                let class = class_after(&mut wrapper, module, &entry);
                let startup = function.is_some_and(is_startup_code);
                match class {
                    FrameClass::Cuda => {}
                    FrameClass::Program if !startup => shown.push(location(frame, &entry)),
                    // The program's code ends here; a library frame is shown only when no frame is the program's.
                    _ if !shown.is_empty() => return (shown, true),
                    _ => {}
                }
                if shown.len() == MAX_SHOWN_FRAMES {
                    return (shown, true);
                }
            }
        }
        if shown.is_empty() {
            // What `locate` names instead: a library frame, never the Python line (the caller adds that).
            let located = self.locate(site).filter(|place| Some(place) != site.python_line());
            return (located.into_iter().collect(), false);
        }
        (shown, true)
    }

    /// Where a call site is in the program's own code, for naming what it created: its program frame, else the
    /// Python line that made the call.
    /// Frames of the CUDA stack and of libraries known by their module's name are passed over without reading
    /// their binaries (a PyTorch pool stream is created inside libtorch, which is not worth reading for a name).
    pub fn locate_program(&mut self, site: &NativeSite) -> Option<SourceLocation> {
        let program_frames: Vec<NativeFrame> = site
            .frames()
            .iter()
            .filter(|frame| module_class(frame.module.as_ref().map(|m| &*m.path)).is_none())
            .cloned()
            .collect();
        if program_frames.is_empty() {
            return site.python_line().cloned();
        }
        // The C runtime's start code in the executable is no place the program wrote.
        self.locate(&NativeSite::new(program_frames))
            .filter(|place| !place.function.as_deref().is_some_and(is_startup_code))
    }

    /// What the frame's binary says about it, innermost inlined function first (one empty entry when the trace
    /// names no module for it or its file cannot be read).
    fn symbolize(&mut self, frame: &NativeFrame) -> Vec<Symbolized> {
        let Some(module) = &frame.module else { return vec![Symbolized::default()] };
        let address = frame.address.wrapping_sub(module.bias);
        if let Some(recorded) = self.recorded.0.get(&(module.path.clone(), address)) {
            return recorded.clone();
        }
        let search = &self.search;
        let binary = self
            .binaries
            .entry(module.path.clone())
            .or_insert_with(|| open_binary(search, &module.path, module.build_id.as_deref()));
        match binary {
            Ok(binary) => binary.symbolize(address),
            Err(_) => vec![Symbolized::default()],
        }
    }

    /// What could not be read so far: the binaries whose frames are shown as `module+offset`, with the first
    /// reason, and those not on this machine at all, by path.
    pub fn counts(&self) -> SymbolCounts {
        let mut missing: Vec<Arc<str>> = Vec::new();
        let mut other: Vec<&String> = Vec::new();
        for (path, binary) in &self.binaries {
            match binary {
                Err(Unreadable::Missing) => missing.push(path.clone()),
                Err(Unreadable::Other(reason)) => other.push(reason),
                Ok(_) => {}
            }
        }
        missing.sort();
        other.sort();
        let first_unreadable = missing
            .first()
            .map(|path| format!("{path} is not on this machine"))
            .or_else(|| other.first().map(|r| r.to_string()));
        SymbolCounts {
            unreadable_modules: (missing.len() + other.len()) as u64,
            first_unreadable,
            missing_binaries: missing,
        }
    }
}

/// The binary at `path`, else a file of its name in one of the search folders (the first there is).
fn open_binary(search: &BinarySearch, path: &str, build_id: Option<&str>) -> Result<Binary, Unreadable> {
    let at = Path::new(path);
    let moved = || {
        let name = at.file_name()?;
        search.dirs.iter().map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
    };
    let found = if at.is_file() { Some(at.to_path_buf()) } else { moved() };
    match found {
        Some(file) => Binary::open(&file, build_id).map_err(Unreadable::Other),
        None => Err(Unreadable::Missing),
    }
}

/// The symbolizer's own counts, which reports list beside the import counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolCounts {
    /// Binaries that could not be read: not found here, not ELF, or another build.
    pub unreadable_modules: u64,
    /// Why the first of them could not be.
    pub first_unreadable: Option<String>,
    /// The binaries the trace names whose frames a report needed and that are not on this machine (not at
    /// their path, nor in a `--binary-dir` folder), by path.
    pub missing_binaries: Vec<Arc<str>>,
}

impl SymbolCounts {
    /// The counter's name and meaning where reports list it.
    pub const UNREADABLE_MODULES: &'static str = "symbols.unreadable_modules";
    pub const UNREADABLE_MODULES_MEANING: &'static str =
        "binaries whose call sites are shown as module+offset: not found here, not ELF, or another build";
}

/// A frame as reports show it: its line, else its function and offset, else its module and offset.
fn location(frame: &NativeFrame, symbolized: &Symbolized) -> SourceLocation {
    let module_file = frame.module.as_ref().map(|m| m.path.rsplit('/').next().unwrap_or(&m.path).to_string());
    match (symbolized, &module_file) {
        (Symbolized { file: Some(file), line, function, .. }, _) => {
            SourceLocation { file: shown_path(file), line: *line, function: function.clone() }
        }
        (Symbolized { function: Some(function), offset, .. }, Some(module)) => SourceLocation {
            file: module.as_str().into(),
            line: None,
            function: Some(format!("{function}+{:#x}", offset.unwrap_or(0)).into()),
        },
        (_, Some(module)) => {
            let bias = frame.module.as_ref().map_or(0, |m| m.bias);
            SourceLocation {
                file: format!("{module}+{:#x}", frame.address.wrapping_sub(bias)).into(),
                line: None,
                function: None,
            }
        }
        (_, None) => SourceLocation { file: format!("{:#x}", frame.address).into(), line: None, function: None },
    }
}

/// Frames of a binary nothing is known of (not found here, stripped, another build), as reports name them: the
/// first as `module+0x1234`, then up to three callers in the same module (`, called from +0x8abd, +0x8dc5`),
/// which an `addr2line -e module` where the binary is turns into lines.
fn unknown_frames(frames: &[NativeFrame]) -> SourceLocation {
    let first = location(&frames[0], &Symbolized::default());
    let module = frames[0].module.as_ref();
    let callers: Vec<String> = frames[1..]
        .iter()
        .take_while(|frame| frame.module.is_some() && frame.module.as_ref() == module)
        .take(3)
        .map(|frame| format!("+{:#x}", frame.address.wrapping_sub(module.map_or(0, |m| m.bias))))
        .collect();
    if callers.is_empty() {
        return first;
    }
    SourceLocation { file: format!("{}, called from {}", first.file, callers.join(", ")).into(), ..first }
}

/// A source file as reports name it: relative to the current folder when it lies below it.
fn shown_path(file: &Arc<str>) -> Arc<str> {
    let relative = std::env::current_dir()
        .ok()
        .and_then(|dir| Path::new(&**file).strip_prefix(dir).ok().map(|p| p.display().to_string()));
    relative.map_or_else(|| file.clone(), Into::into)
}

/// What a frame's symbolized entry is, after the entry before it: the caller of nvcc's launch stub may be the
/// host wrapper nvcc writes for the kernel, named like it and placed at its line (CUDA's too). `wrapper` is the
/// kernel the entry before named a stub of, and becomes this entry's.
fn class_after(wrapper: &mut Option<String>, module: Option<&str>, entry: &Symbolized) -> FrameClass {
    let function = entry.function.as_deref();
    let class = match (&*wrapper, function) {
        (Some(wrapper), Some(function)) if same_function(wrapper, function) => FrameClass::Cuda,
        _ => classify(module, function, entry.file.as_deref()),
    };
    *wrapper = function.and_then(kernel_of_stub);
    class
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NativeModule;

    #[test]
    fn frames_without_a_readable_binary_fall_back_to_module_and_offset() {
        let module = Arc::new(NativeModule {
            path: "/nonexistent/build/app".into(),
            bias: 0x5555_0000_0000,
            start: 0x5555_0000_0000,
            size: 0x10000,
            build_id: None,
        });
        let site = NativeSite::new(vec![
            NativeFrame { address: 0x5555_0000_1234, module: Some(module.clone()) },
            NativeFrame { address: 0x7f00_0000_0010, module: None },
        ]);
        let mut symbolizer = Symbolizer::default();
        let located = symbolizer.locate(&site).expect("a frame");
        assert_eq!(located.to_string(), "app+0x1234");
        let counts = symbolizer.counts();
        assert_eq!(counts.unreadable_modules, 1);
        assert_eq!(counts.missing_binaries, vec![Arc::<str>::from("/nonexistent/build/app")]);
        let first = counts.first_unreadable.unwrap_or_default();
        assert!(first.contains("/nonexistent/build/app is not on this machine"), "{first}");
    }
    #[test]
    fn a_python_call_names_its_extension_frames_then_its_python_line() {
        let module = |path: &str, start: u64| {
            Arc::new(NativeModule { path: path.into(), bias: start, start, size: 0x10000, build_id: None })
        };
        let extension = module("/nonexistent/ext/libscale.so", 0x7000_0000_0000);
        let ffi = module("/usr/lib/x86_64-linux-gnu/libffi.so.8", 0x7100_0000_0000);
        let ctypes =
            module("/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so", 0x7200_0000_0000);
        let frame =
            |module: &Arc<NativeModule>| NativeFrame { address: module.start + 0x40, module: Some(module.clone()) };
        let line = SourceLocation::parse("train.py:12");
        let through_ctypes = vec![frame(&extension), frame(&ffi), frame(&ctypes)];
        let site = NativeSite::with_python_line(through_ctypes.clone(), Some(line.clone()));
        let mut symbolizer = Symbolizer::default();
        let shown: Vec<String> = symbolizer.stack(&site).iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["libscale.so+0x40", "train.py:12"], "the extension, not ctypes' glue, then the line");
        assert_eq!(symbolizer.locate(&site).map(|l| l.to_string()).as_deref(), Some("libscale.so+0x40"));
        // No frame of the program's own (a framework's extension module): the Python line alone names it.
        let framework = NativeSite::with_python_line(vec![frame(&ffi), frame(&ctypes)], Some(line.clone()));
        let shown: Vec<String> = symbolizer.stack(&framework).iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["train.py:12"]);
        assert_eq!(symbolizer.locate(&framework), Some(line.clone()));
        assert_eq!(symbolizer.locate_program(&framework), Some(line));
        // Without a line, as before.
        let native = NativeSite::new(through_ctypes);
        let shown: Vec<String> = symbolizer.stack(&native).iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["libscale.so+0x40"]);
    }
}
