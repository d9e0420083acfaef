//! Native call sites in words: each frame the capture recorded becomes `file:line in function` from the
//! binary's line tables, `module in function+0x2c` from its symbol table when it has no line tables, and
//! `module+0x1234` when it has neither (or is not the file that ran), and the program's own frame among them is
//! the one a report names (frames.rs). Streams and events are named from their creation's program frame
//! (`locate_program`, for crate::names).
//!
//! Lazy: only the call sites that findings hold are symbolized, once each, after the analysis; each binary is
//! read once, the first time one of its frames is asked for (binary.rs). The results go where reports already
//! look: an operation's `source` when the trace gave it no line (a Python line stays first), an allocation's
//! `source`, and the fix hints built from them.

mod binary;
mod frames;

use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::findings::{Findings, Fix, OpOccurrence, Site, Unordered};
use crate::ingest::{Counter, ImportCounters};
use crate::model::{NativeFrame, NativeSite, SourceLocation};
pub use binary::demangle;
use binary::{Binary, Symbolized};
use frames::{classify, is_startup_code, kernel_of_stub, module_class, same_function, FrameClass};

/// Reads binaries as their frames are asked for, and remembers what each call site came to.
#[derive(Default)]
pub struct Symbolizer {
    /// Each module file read (or why it could not be).
    binaries: HashMap<Arc<str>, Result<Binary, String>>,
    sites: HashMap<NativeSite, Option<SourceLocation>>,
}

impl Symbolizer {
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// Where a call site is in the program's words: its program frame, else its first library frame; None
    /// when every frame is CUDA's own.
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
                let function = entry.function.as_deref();
                let class = match (&wrapper, function) {
                    (Some(wrapper), Some(function)) if same_function(wrapper, function) => FrameClass::Cuda,
                    _ => classify(module, function, entry.file.as_deref()),
                };
                wrapper = function.and_then(kernel_of_stub);
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
        let located = program.or(library);
        self.sites.insert(site.clone(), located.clone());
        located
    }

    /// Where a call site is in the program's own code, for naming what it created: its program frame only.
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
            return None;
        }
        // The C runtime's start code in the executable is no place the program wrote.
        self.locate(&NativeSite::new(program_frames))
            .filter(|place| !place.function.as_deref().is_some_and(is_startup_code))
    }

    /// What the frame's binary says about it, innermost inlined function first (one empty entry when the trace
    /// names no module for it or its file cannot be read).
    fn symbolize(&mut self, frame: &NativeFrame) -> Vec<Symbolized> {
        let Some(module) = &frame.module else { return vec![Symbolized::default()] };
        let binary = self
            .binaries
            .entry(module.path.clone())
            .or_insert_with(|| Binary::open(Path::new(&*module.path), module.build_id.as_deref()));
        match binary {
            Ok(binary) => binary.symbolize(frame.address.wrapping_sub(module.bias)),
            Err(_) => vec![Symbolized::default()],
        }
    }

    /// Fills in what reports show of every call site the findings hold, and rebuilds the fix hints that name
    /// them. Binaries that could not be read are counted in `counters`, with the first reason.
    pub fn resolve(&mut self, findings: &mut Findings, counters: &mut ImportCounters) {
        for race in findings.races.iter_mut().chain(findings.timing_only_races.iter_mut()) {
            let mut changed = self.fill_occurrence(&mut race.earlier);
            changed |= self.fill_occurrence(&mut race.later);
            if let Some(allocation) = &mut race.allocation {
                if allocation.source.is_none() {
                    allocation.source = allocation.native.clone().and_then(|site| self.locate(&site));
                }
            }
            if changed {
                match race.why {
                    // Two nodes of one graph: the graph's own fix, with the nodes' lines now known.
                    Unordered::GraphNodes { .. } => {
                        let place = |op: &OpOccurrence| op.site.source.as_ref().map(ToString::to_string);
                        race.fix.place_graph_nodes(place(&race.earlier), place(&race.later));
                    }
                    Unordered::CrossStream { .. } => {
                        if let Some(fix) = Fix::for_race(&race.earlier, &race.later) {
                            race.fix = fix;
                        }
                    }
                }
            }
        }
        for wait in findings.unrecorded_waits.iter_mut().chain(&mut findings.waits_with_unknown_record) {
            self.fill_occurrence(&mut wait.wait);
        }
        for group in &mut findings.unordered_pairs {
            self.fill_site(&mut group.earlier);
            self.fill_site(&mut group.later);
        }
        let unreadable: Vec<&String> = self.binaries.values().filter_map(|b| b.as_ref().err()).collect();
        if let Some(first) = unreadable.first() {
            counters.bump_noting(Counter::SymbolsUnreadableModules, unreadable.len() as u64, || first.to_string());
        }
    }

    /// Whether the occurrence's source changed.
    fn fill_occurrence(&mut self, occurrence: &mut OpOccurrence) -> bool {
        self.fill_site(&mut occurrence.site)
    }

    fn fill_site(&mut self, site: &mut Site) -> bool {
        if let Some(graph) = &mut site.graph {
            if graph.launched_at.is_none() {
                if let Some(launched_at) = graph.launched_native.clone().and_then(|native| self.locate(&native)) {
                    std::sync::Arc::make_mut(graph).launched_at = Some(launched_at);
                }
            }
        }
        if site.source.is_some() {
            return false;
        }
        site.source = site.native.clone().and_then(|native| self.locate(&native));
        site.source.is_some()
    }
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
        let mut symbolizer = Symbolizer::new();
        let located = symbolizer.locate(&site).expect("a frame");
        assert_eq!(located.to_string(), "app+0x1234");
        let mut counters = ImportCounters::default();
        symbolizer.resolve(&mut Findings::default(), &mut counters);
        let text = serde_json::to_string(&counters).expect("counters serialize");
        assert!(
            text.contains("symbols.unreadable_modules") && text.contains("cannot read /nonexistent/build/app"),
            "{text}"
        );
    }
}
