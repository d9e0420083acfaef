//! One binary's symbols, loaded once: its DWARF line tables (from the file itself, or from a separate debug
//! file found by build id or `.gnu_debuglink`) and its function symbols, asked for code addresses as the file
//! states them. A file whose build id is not the one the capture recorded is refused: its lines would be
//! another build's.
//!
//! Two readers share it: the analyzer's symbolizer (src/symbols/), for call sites whose lines the trace does
//! not carry, and the capture library at the program's exit (capture/src/frame_lines.rs), which writes the
//! lines of its call sites into the trace while the binaries are there. Nothing here panics on a file's
//! contents: a file that cannot be read is an `Err`, an address it does not cover an empty answer.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Where separate debug files are installed (`.build-id/xx/rest.debug`, and the binary's folder below it).
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The largest module or debug file read: libtorch_cuda.so with its debug info is under 2 GiB. A trace names
/// these paths, so a path to something larger (or endless) is not read at all.
const MAX_MODULE_BYTES: u64 = 4 << 30;

/// The first bytes of an ELF file.
const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

pub struct Binary {
    lines: Option<addr2line::Context<Reader>>,
    /// Function symbols: start address, size (0: unknown) and name as the file spells it (demangled only
    /// when asked for: a large library has hundreds of thousands), by start address.
    functions: Vec<(u64, u64, Arc<str>)>,
}

/// What a binary says about one code address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Symbolized {
    /// The function, demangled, from the line tables or the symbol table.
    pub function: Option<Arc<str>>,
    /// From the symbol table: how far past the function's start the address is.
    pub offset: Option<u64>,
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
}

impl Binary {
    /// Reads the binary at `path`; `build_id` is the one the capture recorded (hex), checked when given.
    pub fn open(path: &Path, build_id: Option<&str>) -> Result<Binary, String> {
        let data = read_module_file(path)?;
        let file = object::File::parse(&*data).map_err(|e| format!("{}: not an ELF file ({e})", path.display()))?;
        let found = file.build_id().ok().flatten().map(hex);
        if let (Some(expected), Some(found)) = (build_id, found.as_deref()) {
            if !expected.eq_ignore_ascii_case(found) {
                return Err(format!(
                    "{} is another build than the one that ran (build id {found}, the trace says {expected})",
                    path.display()
                ));
            }
        }
        let lines = if has_line_tables(&file) {
            line_tables(&file)
        } else {
            separate_debug_file(path, &file, found.as_deref())
        };
        Ok(Binary { lines, functions: function_symbols(&file) })
    }

    /// What the binary says about the call that returns to `return_address` (an address as the file states it):
    /// with line tables, one entry per function the call sits in, innermost first (a call inside inlined code
    /// sits in the inlined function, at its line, and in each function it was inlined into, at the line of that
    /// inlining); otherwise the function from the symbol table with the offset. Never empty.
    pub fn symbolize(&self, return_address: u64) -> Vec<Symbolized> {
        // The call instruction ends just before the return address; its line is the call's.
        let call = return_address.saturating_sub(1);
        let mut from_symbols = Symbolized::default();
        if let Some((start, name)) = self.function_at(call) {
            from_symbols.function = Some(name);
            from_symbols.offset = Some(return_address - start);
        }
        let mut entries = Vec::new();
        if let Some(Ok(mut frames)) = self.lines.as_ref().map(|lines| lines.find_frames(call).skip_all_loads()) {
            while let Ok(Some(frame)) = frames.next() {
                let function =
                    frame.function.as_ref().and_then(|f| f.demangle().ok()).map(|name| Arc::<str>::from(&*name));
                let (file, line) = match frame.location {
                    Some(location) => (location.file.map(Arc::from), location.line),
                    None => (None, None),
                };
                entries.push(Symbolized { function, offset: None, file, line });
            }
        }
        if entries.iter().all(|entry| entry.line.is_none()) {
            return vec![from_symbols];
        }
        if let Some(outermost) = entries.last_mut() {
            outermost.function = outermost.function.take().or(from_symbols.function);
        }
        entries
    }

    /// Whether the binary (or its separate debug file) has line tables: without them it gives functions only.
    pub fn has_line_tables(&self) -> bool {
        self.lines.is_some()
    }

    /// The function symbol that holds `address`, with its start, demangled.
    fn function_at(&self, address: u64) -> Option<(u64, Arc<str>)> {
        let index = self.functions.partition_point(|(start, _, _)| *start <= address).checked_sub(1)?;
        let (start, size, name) = &self.functions[index];
        (*size == 0 || address - start < *size).then(|| (*start, demangle(name).into()))
    }
}

/// Reads a binary that a trace names, as little as a trace can make it read: only a regular file (opened without
/// blocking, so that a FIFO is refused rather than waited on; /dev/zero and other devices are refused), only one
/// that starts like an ELF file, and only up to [`MAX_MODULE_BYTES`].
fn read_module_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(cannot)?;
    let metadata = file.metadata().map_err(cannot)?;
    if !metadata.is_file() {
        return Err(format!("{} is not a regular file: not read", path.display()));
    }
    if metadata.len() > MAX_MODULE_BYTES {
        return Err(format!(
            "{} has {} bytes, more than the {} GiB a binary is read up to: not read",
            path.display(),
            metadata.len(),
            MAX_MODULE_BYTES >> 30
        ));
    }
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic).map_err(|_| format!("{}: not an ELF file (too short)", path.display()))?;
    if &magic != ELF_MAGIC {
        return Err(format!("{}: not an ELF file", path.display()));
    }
    let mut data = Vec::with_capacity(metadata.len() as usize);
    data.extend_from_slice(&magic);
    // The bound holds even for a file that grows while it is read.
    file.take(MAX_MODULE_BYTES - magic.len() as u64 + 1).read_to_end(&mut data).map_err(cannot)?;
    if data.len() as u64 > MAX_MODULE_BYTES {
        return Err(format!("{} grew past {} GiB while it was read: not read", path.display(), MAX_MODULE_BYTES >> 30));
    }
    Ok(data)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn has_line_tables(file: &object::File) -> bool {
    file.section_by_name(".debug_line").is_some_and(|s| s.size() > 0)
}

/// The line tables of `file`, each section copied out (so the context owns what it reads).
fn line_tables(file: &object::File) -> Option<addr2line::Context<Reader>> {
    let endian = if file.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data =
            file.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or(Cow::Borrowed(&[]));
        Ok(gimli::EndianArcSlice::new(Arc::from(&*data), endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// The line tables of a separate debug file: by build id under /usr/lib/debug, else by `.gnu_debuglink` beside
/// the binary, in its `.debug` folder, or under /usr/lib/debug.
fn separate_debug_file(path: &Path, file: &object::File, build_id: Option<&str>) -> Option<addr2line::Context<Reader>> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() > 2) {
        candidates.push(Path::new(DEBUG_ROOT).join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..])));
    }
    if let (Ok(Some((name, _))), Some(dir)) = (file.gnu_debuglink(), path.parent()) {
        let name = String::from_utf8_lossy(name).into_owned();
        candidates.push(dir.join(&name));
        candidates.push(dir.join(".debug").join(&name));
        candidates.push(Path::new(DEBUG_ROOT).join(dir.strip_prefix("/").unwrap_or(dir)).join(&name));
    }
    candidates.iter().filter(|candidate| candidate.as_path() != path).find_map(|candidate| {
        let data = read_module_file(candidate).ok()?;
        let debug = object::File::parse(&*data).ok()?;
        has_line_tables(&debug).then(|| line_tables(&debug)).flatten()
    })
}

/// The file's function symbols (its symbol table, else its dynamic symbols), by address.
fn function_symbols(file: &object::File) -> Vec<(u64, u64, Arc<str>)> {
    let collect = |symbols: &mut dyn Iterator<Item = object::Symbol>| -> Vec<(u64, u64, Arc<str>)> {
        symbols
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.into())))
            .collect()
    };
    let mut functions = collect(&mut file.symbols());
    if functions.is_empty() {
        functions = collect(&mut file.dynamic_symbols());
    }
    functions.sort_by_key(|(start, _, _)| *start);
    functions.dedup_by_key(|(start, _, _)| *start);
    functions
}

/// A C++ symbol demangled (`_Z4stepPfPKfi` -> `step(float*, float const*, int)`); other names as they are.
pub fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|symbol| symbol.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_names_are_demangled_and_others_kept() {
        assert_eq!(demangle("_Z4stepPfPKfi"), "step(float*, float const*, int)");
        assert_eq!(demangle("main"), "main");
    }

    #[test]
    fn only_regular_elf_files_are_read_and_nothing_blocks() {
        let dir = std::env::temp_dir().join(format!("streamtrace-binary-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success());
        let text = dir.join("notes.txt");
        std::fs::write(&text, "not a binary").expect("write");
        for (path, expected) in [
            (Path::new("/dev/zero"), "is not a regular file"),
            (Path::new("/dev/urandom"), "is not a regular file"),
            (fifo.as_path(), "is not a regular file"),
            (dir.as_path(), "is not a regular file"),
            (text.as_path(), "not an ELF file"),
        ] {
            let error = read_module_file(path).expect_err("refused");
            assert!(error.contains(expected), "{}: {error}", path.display());
        }
        let exe = std::env::current_exe().expect("the test binary");
        assert!(read_module_file(&exe).expect("an ELF file").starts_with(ELF_MAGIC));
    }

    #[test]
    fn a_missing_file_says_so() {
        let error = Binary::open(Path::new("/nonexistent/app"), None).err().expect("no such file");
        assert!(error.contains("cannot read /nonexistent/app"), "{error}");
    }

    /// Set to 1 where the test binaries are built with debug info (`cargo test`'s dev profile has it, and .ci/run
    /// sets it): there a test binary without line tables fails the tests that read them instead of skipping them.
    /// The release profile has none (`debug = false`), so `cargo test --release` skips them with a notice.
    const REQUIRE_DEBUG_INFO: &str = "STREAMTRACE_REQUIRE_DEBUG_INFO";

    /// Whether `binary` (this test binary) has line tables; false after a skip notice naming `test`, a panic where
    /// [`REQUIRE_DEBUG_INFO`] is 1.
    fn has_debug_info_or_skip(binary: &Binary, test: &str) -> bool {
        if binary.lines.is_some() {
            return true;
        }
        let why = "this test binary has no line tables (a profile with `debug = false`, as `cargo test --release`)";
        assert!(
            std::env::var(REQUIRE_DEBUG_INFO).ok().as_deref() != Some("1"),
            "{test}: {why}, and {REQUIRE_DEBUG_INFO}=1"
        );
        // Written to the process's standard error itself, which the test harness does not capture.
        use std::io::Write;
        let _ =
            writeln!(std::io::stderr(), "note: {test} skipped: {why}; set {REQUIRE_DEBUG_INFO}=1 to make it required");
        false
    }

    #[test]
    fn this_test_binary_symbolizes_its_own_code() {
        let exe = std::env::current_exe().expect("the test binary");
        let binary = Binary::open(&exe, None).expect("readable");
        let name_start = binary
            .functions
            .iter()
            .find(|(_, _, name)| demangle(name).contains("this_test_binary_symbolizes_its_own_code"));
        let (start, _, _) = name_start.expect("its own symbol");
        let symbolized = binary.symbolize(start + 5).pop().expect("an entry");
        assert!(
            symbolized.function.as_deref().is_some_and(|f| f.contains("this_test_binary_symbolizes_its_own_code")),
            "{symbolized:?}"
        );
        // The function comes from the symbol table, which every profile keeps; the file needs the line tables.
        if has_debug_info_or_skip(&binary, "this_test_binary_symbolizes_its_own_code (its file and line)") {
            assert!(symbolized.file.as_deref().is_some_and(|f| f.ends_with("lib.rs")), "{symbolized:?}");
        }
    }
}
