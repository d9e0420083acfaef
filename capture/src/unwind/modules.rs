//! The loaded modules (the executable and its shared libraries), asked of the dynamic loader the first time an
//! address is met: which module holds it, what the trace says of that module (path, load bias, mapped range,
//! build id), and the unwind rule at the address. The rule is read inside the loader's callback, while its
//! lock keeps the module mapped; only segments the module maps are read. Touches libc's `dl_iterate_phdr`.

use std::ffi::{c_int, c_void, CStr};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use gimli::UnwindContext;

use super::rules::{eh_frame_address, rule_at, Rule, UnwindTables};

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
const PF_X: u32 = 1;
const NT_GNU_BUILD_ID: u32 = 3;

/// A loaded module as the trace describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    pub path: Arc<str>,
    /// What the loader added to the addresses the file states (0 for an executable linked at a fixed address).
    pub bias: u64,
    /// The mapped range, from the lowest loaded segment to the end of the highest.
    pub start: u64,
    pub end: u64,
    /// The GNU build id, in hex.
    pub build_id: Option<Arc<str>>,
}

/// What the loader said about one code address.
pub struct Found {
    pub module: ModuleInfo,
    pub rule: Rule,
}

/// The module holding code address `address` and the unwind rule there; None when no loaded module maps code
/// there (generated code, or an address that is not code).
pub fn look_up(address: u64, context: &mut UnwindContext<usize>) -> Option<Found> {
    let mut query = Query { address, context, found: None };
    // Safety: `visit` matches the callback type and reads `data` as the `Query` passed here, which outlives the
    // call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut query as *mut Query).cast()) };
    query.found
}

struct Query<'a> {
    address: u64,
    context: &'a mut UnwindContext<usize>,
    found: Option<Found>,
}

/// One loaded module, from the loader: stops (returns 1) at the one that maps `query.address` as code.
unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    // Nothing may unwind into the loader.
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // Safety: the loader passes a valid `info` for this call; `data` is the `Query` of `look_up`.
        let (info, query) = unsafe { (&*info, &mut *(data as *mut Query)) };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // Safety: the loader's program headers of this module, `dlpi_phnum` of them.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
        };
        let segments = Segments { headers, bias: info.dlpi_addr };
        if !segments.maps_code_at(query.address) {
            return 0;
        }
        // Safety: the loader's name of this module: null or a C string.
        let name = (!info.dlpi_name.is_null()).then(|| unsafe { CStr::from_ptr(info.dlpi_name) });
        query.found =
            Some(Found { module: segments.describe(name), rule: segments.rule_at(query.address, query.context) });
        1
    }));
    outcome.unwrap_or(1)
}

/// A module's program headers and load bias.
struct Segments<'a> {
    headers: &'a [libc::Elf64_Phdr],
    bias: u64,
}

impl Segments<'_> {
    fn loads(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.headers.iter().filter(|h| h.p_type == PT_LOAD).map(|h| (self.bias.wrapping_add(h.p_vaddr), h.p_memsz))
    }

    fn maps_code_at(&self, address: u64) -> bool {
        self.headers.iter().any(|h| {
            let start = self.bias.wrapping_add(h.p_vaddr);
            h.p_type == PT_LOAD && h.p_flags & PF_X != 0 && address >= start && address - start < h.p_memsz
        })
    }

    /// The bytes at `[address, address + len)`, when a loaded segment's file-backed part holds them all.
    fn mapped(&self, address: u64, len: u64) -> Option<&[u8]> {
        let inside = self.headers.iter().any(|h| {
            let start = self.bias.wrapping_add(h.p_vaddr);
            h.p_type == PT_LOAD
                && address >= start
                && address - start <= h.p_filesz
                && len <= h.p_filesz - (address - start)
        });
        // Safety: the range lies in a segment the loader mapped from the file, mapped while the module is
        // loaded (the loader's lock is held during this callback).
        inside.then(|| unsafe { std::slice::from_raw_parts(address as *const u8, len as usize) })
    }

    /// The bytes from `address` to the end of the loaded segment holding it.
    fn rest_of_segment(&self, address: u64) -> Option<&[u8]> {
        let header = self.headers.iter().find(|h| {
            let start = self.bias.wrapping_add(h.p_vaddr);
            h.p_type == PT_LOAD && address >= start && address - start < h.p_filesz
        })?;
        let end = self.bias.wrapping_add(header.p_vaddr) + header.p_filesz;
        self.mapped(address, end - address)
    }

    fn describe(&self, name: Option<&CStr>) -> ModuleInfo {
        let start = self.loads().map(|(start, _)| start).min().unwrap_or(0);
        let end = self.loads().map(|(start, size)| start.saturating_add(size)).max().unwrap_or(0);
        let path = match name.map(CStr::to_string_lossy) {
            Some(name) if !name.is_empty() => name.into_owned(),
            // The loader names the executable "".
            _ => std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        };
        ModuleInfo { path: path.into(), bias: self.bias, start, end, build_id: self.build_id().map(Into::into) }
    }

    /// The GNU build id from the module's notes, in hex.
    fn build_id(&self) -> Option<String> {
        for header in self.headers.iter().filter(|h| h.p_type == PT_NOTE) {
            let notes = self.mapped(self.bias.wrapping_add(header.p_vaddr), header.p_filesz)?;
            if let Some(id) = build_id_note(notes) {
                return Some(id.iter().map(|b| format!("{b:02x}")).collect());
            }
        }
        None
    }

    fn rule_at(&self, address: u64, context: &mut UnwindContext<usize>) -> Rule {
        let Some(header) = self.headers.iter().find(|h| h.p_type == PT_GNU_EH_FRAME) else { return Rule::Unknown };
        let hdr_address = self.bias.wrapping_add(header.p_vaddr);
        let Some(eh_frame_hdr) = self.mapped(hdr_address, header.p_filesz) else { return Rule::Unknown };
        let Some(eh_frame_address) = eh_frame_address(eh_frame_hdr, hdr_address) else { return Rule::Unknown };
        let Some(eh_frame) = self.rest_of_segment(eh_frame_address) else { return Rule::Unknown };
        let tables = UnwindTables { eh_frame_hdr, eh_frame_hdr_address: hdr_address, eh_frame, eh_frame_address };
        rule_at(&tables, address, context)
    }
}

/// The descriptor of the NT_GNU_BUILD_ID note among `notes` (ELF note entries, each 4-byte aligned).
fn build_id_note(mut notes: &[u8]) -> Option<&[u8]> {
    let word =
        |bytes: &[u8], at: usize| -> Option<u32> { Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?)) };
    let padded = |n: u32| (n as usize).div_ceil(4) * 4;
    while notes.len() >= 12 {
        let (name_size, desc_size, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name = notes.get(12..12 + name_size as usize)?;
        let desc_start = 12 + padded(name_size);
        let desc = notes.get(desc_start..desc_start + desc_size as usize)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return Some(desc);
        }
        notes = notes.get(desc_start + padded(desc_size)..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_test_binary_and_its_rule() {
        let here = finds_this_test_binary_and_its_rule as fn() as usize as u64;
        let mut context = UnwindContext::new();
        let found = look_up(here + 4, &mut context).expect("the test binary maps its own code");
        assert!(found.module.start <= here && here < found.module.end);
        assert!(!found.module.path.is_empty());
        assert!(matches!(found.rule, Rule::Step { .. }), "{:?}", found.rule);
        assert!(look_up(8, &mut context).is_none(), "no module maps code at 8");
    }

    #[test]
    fn build_id_note_is_read_among_other_notes() {
        let mut notes = Vec::new();
        for (kind, name, desc) in [(1u32, &b"GNU\0"[..], &[9u8; 16][..]), (3, b"GNU\0", &[0xab, 0xcd, 0xef])] {
            notes.extend((name.len() as u32).to_ne_bytes());
            notes.extend((desc.len() as u32).to_ne_bytes());
            notes.extend(kind.to_ne_bytes());
            notes.extend(name);
            notes.extend(desc);
            notes.resize(notes.len().div_ceil(4) * 4, 0);
        }
        assert_eq!(build_id_note(&notes), Some(&[0xab, 0xcd, 0xef][..]));
        assert_eq!(build_id_note(&notes[..20]), None);
    }
}
