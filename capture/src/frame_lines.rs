//! At exit, while the program's binaries are where they ran: the source line of every return address the
//! declared call sites hold, as `frame_line` records, so that a trace analyzed on another machine names
//! `file:line in function` without the binaries (docs/trace-format.md, native call sites). One record per
//! function an address sits in (inlined ones first); from a symbol table alone, the function and offset.
//!
//! Reads each module once with the streamtrace-symbols crate, the analyzer's own reader, so both sides name a
//! frame alike. Only at exit, never on a recorded call: the cost is the program's exit time, not its calls'.
//! Modules larger than [`MAX_MODULE_BYTES`] (libtorch_cuda is about 1 GB, and PyTorch findings name Python
//! lines) and files that cannot be read are left to the analyzer, which reads them if they are there. Nothing
//! here panics on a file's contents; at_exit.rs catches what would.

use std::path::Path;

use streamtrace_format::MAX_FRAME_LINE_DEPTH;
use streamtrace_symbols::Binary;

use crate::record::Record;
use crate::sites::CallSites;

/// The largest module file read at exit.
pub const MAX_MODULE_BYTES: u64 = 128 << 20;

/// The `frame_line` records of every declared call site's frames, handed to `emit` module by module.
pub fn frame_lines(sites: &CallSites, mut emit: impl FnMut(Record)) {
    for (module, addresses) in sites.declared_frames() {
        if addresses.is_empty() {
            continue;
        }
        let path = Path::new(&*module.path);
        if std::fs::metadata(path).map_or(true, |m| m.len() > MAX_MODULE_BYTES) {
            continue;
        }
        let Ok(binary) = Binary::open(path, module.build_id.as_deref()) else { continue };
        for address in addresses {
            let file_address = address.wrapping_sub(module.bias);
            let inlined = binary.symbolize(file_address).into_iter().take(MAX_FRAME_LINE_DEPTH as usize + 1);
            for (depth, entry) in inlined.enumerate() {
                if entry.function.is_none() && entry.file.is_none() {
                    continue;
                }
                let source = entry.file.as_ref().map(|file| match entry.line {
                    Some(line) => format!("{file}:{line}"),
                    None => file.to_string(),
                });
                emit(Record::FrameLine {
                    path: module.path.clone(),
                    address: file_address,
                    depth: depth as u32,
                    function: entry.function,
                    source,
                    offset: entry.offset,
                });
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::unwind::Start;

    #[inline(never)]
    fn a_call_from_here(sites: &mut CallSites) -> u32 {
        let id = sites.site_of_this_call(Start::here(), None, |_| {});
        std::hint::black_box(id)
    }

    #[test]
    fn every_frame_of_a_declared_site_gets_its_function_and_line() {
        let mut sites = CallSites::keeping_own_frames();
        assert_ne!(a_call_from_here(&mut sites), 0, "the test thread's frames are found");
        let mut records = Vec::new();
        frame_lines(&sites, |record| records.push(record));
        let named: Vec<(String, Option<String>)> = records
            .iter()
            .filter_map(|record| match record {
                Record::FrameLine { function: Some(function), source, .. } => {
                    Some((function.to_string(), source.clone()))
                }
                _ => None,
            })
            .collect();
        // The site is where `a_call_from_here` was called from: this test.
        let here = named.iter().find(|(function, _)| function.contains("every_frame_of_a_declared_site"));
        let (_, source) = here.unwrap_or_else(|| panic!("the calling function is named: {named:?}"));
        // The test binary's line tables (the dev profile has them; `cargo test --release` has only symbols).
        if let Some(source) = source {
            assert!(source.contains("frame_lines.rs:"), "{source}");
        }
    }
}
