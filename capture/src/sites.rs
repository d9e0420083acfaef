//! Call sites as the trace names them: each distinct chain of kept frames (unwind/) gets an id the first time it
//! is seen, and its `callsite` record, preceded by a `module` record for each module it is the first to point
//! into. After that a call from the same place costs a walk along a known path, whose end holds the id. One
//! table per process, so that each trace file declares what it uses. A call a Python program made outside any
//! framework op gets a site of its own for each Python line it is made from: the native frames' with the line.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::record::Record;
use crate::unwind::{Frames, ModuleInfo, StackWords, Start, Unwinder, Walk, WalkStats};

pub struct CallSites {
    unwinder: Unwinder,
    frames: Frames,
    ids: HashMap<Box<[u64]>, u32>,
    /// By native site: the Python lines seen on top of it, and the id of each pair.
    python_sites: HashMap<u32, Vec<(Box<str>, u32)>>,
    next_id: u32,
    /// Whether each module of the unwinder has had its `module` record.
    declared: Vec<bool>,
}

/// The most Python lines one native site takes on: past them, a call keeps the native site alone (a
/// generated script calling one extension from thousands of lines is named by its native frames).
const PYTHON_LINES_PER_SITE: usize = 256;

impl Default for CallSites {
    fn default() -> Self {
        CallSites::new()
    }
}

impl CallSites {
    pub fn new() -> CallSites {
        CallSites::with(Unwinder::new())
    }

    /// Call sites that keep the capture library's own frames (tests: the test binary is the program there).
    #[cfg(test)]
    pub(crate) fn keeping_own_frames() -> CallSites {
        CallSites::with(Unwinder::keeping_own_frames())
    }

    fn with(unwinder: Unwinder) -> CallSites {
        CallSites {
            unwinder,
            frames: Frames::new(),
            ids: HashMap::default(),
            python_sites: HashMap::default(),
            next_id: 1,
            declared: Vec::new(),
        }
    }

    /// The id of the call site of the code that called `start`'s function (from 1), with the Python line
    /// `python_line` (escaped as in JSON) when given, or 0 when no frame of it could be found. Records needed to
    /// read the id (`module`, `callsite`) go to `emit` first.
    pub fn site_of_this_call(&mut self, start: Start, python_line: Option<&str>, mut emit: impl FnMut(Record)) -> u32 {
        let native = self.native_site_of_this_call(start, &mut emit);
        match python_line {
            Some(line) if native != 0 => self.with_python_line(native, line, &mut emit),
            _ => native,
        }
    }

    /// The native site of [`CallSites::site_of_this_call`].
    fn native_site_of_this_call(&mut self, start: Start, emit: &mut impl FnMut(Record)) -> u32 {
        let end = match self.unwinder.walk(start, &mut self.frames) {
            Walk::Known(id) => return id,
            Walk::Found { end } => end,
        };
        if self.frames.len == 0 {
            return 0;
        }
        let id = match self.ids.get(self.frames.addresses()) {
            Some(&id) => id,
            None => self.declare(emit),
        };
        if let Some(end) = end {
            self.unwinder.remember(end, id);
        }
        id
    }

    /// The site of native site `native` made from the Python line `line`, declared at its first sight.
    fn with_python_line(&mut self, native: u32, line: &str, emit: &mut impl FnMut(Record)) -> u32 {
        let lines = self.python_sites.entry(native).or_default();
        if let Some(&(_, id)) = lines.iter().find(|(known, _)| &**known == line) {
            return id;
        }
        if lines.len() == PYTHON_LINES_PER_SITE {
            return native;
        }
        // The native site's frames, which the new site repeats: looked up once per pair of site and line.
        let Some(frames) =
            self.ids.iter().find(|(_, &id)| id == native).map(|(frames, _)| Arc::<[u64]>::from(&**frames))
        else {
            return native;
        };
        let id = self.next_id;
        self.next_id += 1;
        lines.push((line.into(), id));
        emit(Record::Callsite { id, frames, python_line: Some(crate::python_line::unescaped(line).into()) });
        id
    }

    /// The id of a fault's site, walked from the faulting instruction's registers over the words copied from its
    /// stack, and whether the walk passed a frame of the driver. The faulting instruction's own frame is written
    /// as its address plus one, so that, like the return addresses after it, the byte before it lies in the
    /// instruction that a report names.
    pub fn site_of_fault(&mut self, start: Start, stack: &StackWords, mut emit: impl FnMut(Record)) -> (u32, bool) {
        let fault = self.unwinder.walk_fault(start, stack, &mut self.frames);
        let end = match fault.walk {
            Walk::Known(id) => return (id, fault.through_driver),
            Walk::Found { end } => end,
        };
        if self.frames.len == 0 {
            return (0, fault.through_driver);
        }
        if fault.first_is_fault {
            self.frames.addresses[0] = self.frames.addresses[0].wrapping_add(1);
        }
        let id = match self.ids.get(self.frames.addresses()) {
            Some(&id) => id,
            None => self.declare(&mut emit),
        };
        if let Some(end) = end {
            self.unwinder.remember_fault(end, id);
        }
        (id, fault.through_driver)
    }

    /// The id of the site that is one instruction at `pc` (a fault that CUPTI reported with only its program
    /// counter), written as `pc + 1` as [`CallSites::site_of_fault`] does; None when no loaded module maps `pc`
    /// or it is the CUDA stack's own code (the driver's access, not the program's).
    pub fn site_of_instruction(&mut self, pc: u64, mut emit: impl FnMut(Record)) -> Option<u32> {
        let (module, runtime) = self.unwinder.module_of(pc)?;
        if runtime {
            return None;
        }
        self.frames.addresses[0] = pc.wrapping_add(1);
        self.frames.modules[0] = module;
        self.frames.len = 1;
        Some(match self.ids.get(self.frames.addresses()) {
            Some(&id) => id,
            None => self.declare(&mut emit),
        })
    }

    /// Each declared module with the distinct return addresses of the declared call sites that it maps, for
    /// the lines written at exit (frame_lines.rs).
    pub fn declared_frames(&self) -> Vec<(&ModuleInfo, Vec<u64>)> {
        let mut modules: Vec<(&ModuleInfo, Vec<u64>)> = (0..self.declared.len())
            .filter(|&index| self.declared[index])
            .filter_map(|index| self.unwinder.module(index as u16))
            .map(|module| (module, Vec::new()))
            .collect();
        for frames in self.ids.keys() {
            for &address in frames.iter() {
                if let Some((_, addresses)) = modules.iter_mut().find(|(m, _)| (m.start..m.end).contains(&address)) {
                    addresses.push(address);
                }
            }
        }
        for (_, addresses) in &mut modules {
            addresses.sort_unstable();
            addresses.dedup();
        }
        modules
    }

    pub fn stats(&self) -> WalkStats {
        self.unwinder.stats
    }

    /// A call site seen for the first time: its modules' records, then its own.
    #[cold]
    fn declare(&mut self, emit: &mut impl FnMut(Record)) -> u32 {
        for &index in &self.frames.modules[..self.frames.len] {
            let index = index as usize;
            if self.declared.len() <= index {
                self.declared.resize(index + 1, false);
            }
            if self.declared[index] {
                continue;
            }
            self.declared[index] = true;
            if let Some(module) = self.unwinder.module(index as u16) {
                emit(Record::Module {
                    path: module.path.clone(),
                    bias: module.bias,
                    start: module.start,
                    size: module.end.saturating_sub(module.start),
                    build_id: module.build_id.clone(),
                });
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let frames: Arc<[u64]> = self.frames.addresses().into();
        self.ids.insert(self.frames.addresses().into(), id);
        emit(Record::Callsite { id, frames, python_line: None });
        id
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[inline(never)]
    fn from_here(sites: &mut CallSites, records: &mut Vec<Record>) -> u32 {
        let id = sites.site_of_this_call(Start::here(), None, |r| records.push(r));
        std::hint::black_box(id)
    }

    #[inline(never)]
    fn from_there(sites: &mut CallSites, records: &mut Vec<Record>) -> u32 {
        let id = sites.site_of_this_call(Start::here(), None, |r| records.push(r));
        std::hint::black_box(id)
    }

    #[inline(never)]
    fn from_python(sites: &mut CallSites, line: Option<&str>, records: &mut Vec<Record>) -> u32 {
        let id = sites.site_of_this_call(Start::here(), line, |r| records.push(r));
        std::hint::black_box(id)
    }

    #[test]
    fn each_python_line_gets_a_site_of_its_own_on_the_same_frames() {
        let mut sites = CallSites::with(Unwinder::keeping_own_frames());
        let mut records = Vec::new();
        let mut ids = Vec::new();
        // An opaque list: one place of the call, not one per unrolled turn.
        let lines =
            std::hint::black_box(vec![None, Some("train.py:10"), Some("train.py:12"), Some("train.py:10"), None]);
        for line in lines {
            ids.push(from_python(&mut sites, line, &mut records));
        }
        assert_ne!(ids[0], 0, "the test thread's frames are found");
        assert_eq!(ids[4], ids[0], "no line: the native site, {ids:?}");
        assert_eq!(ids[3], ids[1], "the same line, the same site");
        let distinct: std::collections::HashSet<u32> = ids.iter().copied().collect();
        assert_eq!(distinct.len(), 3, "{ids:?}");
        let declared: Vec<(&Arc<[u64]>, Option<&str>)> = records
            .iter()
            .filter_map(|r| match r {
                Record::Callsite { frames, python_line, .. } => Some((frames, python_line.as_deref())),
                _ => None,
            })
            .collect();
        assert_eq!(declared.len(), 3, "each site declared once");
        assert_eq!(declared[1].1, Some("train.py:10"));
        assert_eq!(declared[2].1, Some("train.py:12"));
        assert!(declared.iter().all(|(frames, _)| *frames == declared[0].0), "one chain of frames");
        // A native site declared after them is numbered past them.
        let later = from_there(&mut sites, &mut records);
        assert!(later > ids[2], "{later} after {ids:?}");
    }

    #[test]
    fn a_call_site_is_declared_once() {
        // The test program's own frames are what tells the two places apart.
        let mut sites = CallSites::with(Unwinder::keeping_own_frames());
        let mut records = Vec::new();
        let mut ids = Vec::new();
        let mut declared = Vec::new();
        // An opaque count, so that an optimized build cannot unroll the loop into 2 places.
        for _ in 0..std::hint::black_box(2) {
            ids.push(from_here(&mut sites, &mut records));
            declared.push(records.len());
        }
        assert_ne!(ids[0], 0, "the test thread's frames are found");
        assert_eq!(ids[1], ids[0], "the same place, the same site");
        assert_eq!(declared[1], declared[0], "nothing declared again");
        assert!(matches!(records.last(), Some(Record::Callsite { id, .. }) if *id == ids[0]));
        assert!(records.iter().any(|r| matches!(r, Record::Module { .. })));
        let other = from_there(&mut sites, &mut records);
        assert_ne!(other, ids[0]);
        assert!(
            !records[declared[1]..].iter().any(|r| matches!(r, Record::Module { .. })),
            "its modules were declared"
        );
    }
}
