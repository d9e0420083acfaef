//! Native call sites in a JSON trace: `module` records (a loaded binary's path, load bias, mapped range and build
//! id), `callsite` records (return addresses, innermost first, each tied to the module that maps it), and the
//! ids that operation, stream and event records name in their `site` field. Per process, like every handle.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::problem::Problem;
use super::raw::RawRecord;
use crate::model::{NativeFrame, NativeModule, NativeSite, ProcessId, SourceLocation};

/// Frames a call site may list; the capture writes at most 16.
const MAX_FRAMES: usize = 256;

#[derive(Default)]
pub(super) struct NativeSites {
    /// Each process's modules, in the order declared.
    modules: HashMap<ProcessId, Vec<Arc<NativeModule>>>,
    sites: HashMap<(ProcessId, u64), NativeSite>,
}

impl NativeSites {
    /// A `module` record.
    pub fn module(&mut self, process: ProcessId, raw: &RawRecord) -> Result<(), Problem> {
        let path = raw.path.as_deref().ok_or_else(|| Problem::malformed("module without `path`"))?;
        let bias = raw.base.ok_or_else(|| Problem::malformed("module without `base` (its load bias)"))?.0;
        let start = raw.addr.ok_or_else(|| Problem::malformed("module without `addr` (where it is mapped)"))?.0;
        let size = raw.size.ok_or_else(|| Problem::malformed("module without `size`"))?.0;
        if start.checked_add(size).is_none() {
            return Err(Problem::malformed(format!(
                "module {path} at {start:#x} with {size} bytes runs past the address space"
            )));
        }
        if let Some(id) =
            raw.build_id.as_deref().filter(|id| id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Problem::malformed(format!("module {path}: build_id `{id}` is not hex digits")));
        }
        let module =
            NativeModule { path: path.into(), bias, start, size, build_id: raw.build_id.as_deref().map(Into::into) };
        let modules = self.modules.entry(process).or_default();
        if let Some(other) =
            modules.iter().find(|m| m.start < start.saturating_add(size) && start < m.start.saturating_add(m.size))
        {
            return Err(Problem::inconsistent(format!(
                "module {path} overlaps module {}, declared before",
                other.path
            )));
        }
        modules.push(Arc::new(module));
        Ok(())
    }

    /// A `callsite` record.
    pub fn call_site(&mut self, process: ProcessId, raw: &RawRecord) -> Result<(), Problem> {
        let id = raw.id.ok_or_else(|| Problem::malformed("callsite without `id`"))?;
        let addresses = raw.frames.as_deref().ok_or_else(|| Problem::malformed("callsite without `frames`"))?;
        if addresses.is_empty() || addresses.len() > MAX_FRAMES {
            return Err(Problem::malformed(format!(
                "callsite {id} has {} frames (1 to {MAX_FRAMES})",
                addresses.len()
            )));
        }
        if self.sites.contains_key(&(process, id)) {
            return Err(Problem::inconsistent(format!("callsite {id} declared twice")));
        }
        let modules = self.modules.get(&process).map_or(&[][..], Vec::as_slice);
        let frames = addresses
            .iter()
            .map(|address| NativeFrame {
                address: address.0,
                module: modules.iter().find(|m| m.contains(address.0)).cloned(),
            })
            .collect();
        // A Python program's call outside any op: the line it was made from, above the native frames.
        let python_line = raw.src.as_deref().map(SourceLocation::parse);
        self.sites.insert((process, id), NativeSite::with_python_line(frames, python_line));
        Ok(())
    }

    /// The call site a record's `site` names.
    pub fn site(&self, process: ProcessId, id: u64) -> Result<NativeSite, Problem> {
        self.sites.get(&(process, id)).cloned().ok_or_else(|| {
            Problem::inconsistent(format!(
                "call site {id} used before its record {{\"type\": \"callsite\", \"id\": {id}, \"frames\": [...]}}"
            ))
        })
    }
}
