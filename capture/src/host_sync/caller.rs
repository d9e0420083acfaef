//! Whose call an interposed one is, by its return address: the program's (its own code, the C++ library,
//! Python, PyTorch: their locks order the program's threads), or the CUDA stack's and the capture's own. The
//! driver, the CUDA runtime (shared, or linked into the executable as `cudart_static`), CUPTI, Compute Sanitizer
//! (the `--exact` backend's) and NVIDIA's libraries lock their own bookkeeping inside every call, on every thread that calls them: taken as
//! synchronization, those locks would order the program's threads by the timing of their CUDA calls, which is
//! what the per-thread order must not do; and the capture's own locks are taken while it records. Memory
//! allocators that lock with pthread mutexes are left out too: the capture allocates while it holds its state
//! lock, and a release written from inside their unlock would wait for that lock.
//!
//! Each return address is decided once and kept in a small table. A new one is placed among the executable
//! mappings of /proc/self/maps (read again when it falls outside all of them: a library loaded since), never
//! through the loader, whose lock a thread loading a library may hold while it waits for a lock of the
//! program. Touches /proc/self and its own statics; a forked child starts on new mappings (`start_anew`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::cudart_static::CudartStatic;
use super::renewed::RenewedInChild;

/// Decided return addresses: `address << 1 | programs`, 0 for an empty slot. A C++ program inlines its lock
/// calls everywhere (PyTorch has thousands of call sites of `pthread_mutex_lock`), so the table is large enough
/// that they rarely push each other out.
pub(super) const SLOTS: usize = 8192;
/// Read by the shims' fast path too (interpose/mod.rs), which finds the slot as [`slot_of`] does.
pub(super) static DECIDED: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

/// Libraries whose own locks are not the program's synchronization (by file name prefix).
const NOT_THE_PROGRAMS: &[&str] = &[
    "libcuda.so",
    "libcudart.so",
    "libcupti.so",
    "libnvperf",
    "libpcsamplingutil",
    "libsanitizer",
    "libnvidia-",
    "libnvrtc",
    "libnvJitLink",
    "libnvjitlink",
    "libcublas",
    "libcudnn",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libnccl",
    "libnvToolsExt",
    "libstreamtrace_capture",
    // The capture's native PyTorch observer (capture/python/): its lock of the allocator's blocks is taken on
    // every thread that allocates, and would order them by the timing of their allocations.
    "torch_observer.so",
    "libjemalloc",
    "libtcmalloc",
];

/// Decides `return_address` as given, where [`is_programs`] would have decided otherwise or not yet: the futex
/// stand-in's decision for this library's own code, and a test's stand-in for a library's call site.
pub fn decide_as(return_address: usize, programs: bool) {
    slot_of(return_address).store(decision(return_address, programs), Ordering::Relaxed);
}

/// Whether the call that returns to `return_address` is the program's own.
pub fn is_programs(return_address: usize) -> bool {
    if return_address == 0 {
        return true;
    }
    let slot = slot_of(return_address);
    if let Some(programs) = decided(slot, return_address) {
        return programs;
    }
    crate::cost::host_sync_event(crate::cost::HostSyncEvent::CallerPlaced);
    let programs = decide(return_address);
    slot.store(decision(return_address, programs), Ordering::Relaxed);
    programs
}

/// Whether the call that returns to `return_address` was decided already not to be the program's: a table
/// lookup, nothing more (for the interposers' fast paths, which must not place an address).
pub fn known_not_programs(return_address: usize) -> bool {
    decided_already(return_address) == Some(false)
}

/// What the table decided already of the call that returns to `return_address`, without placing it.
pub fn decided_already(return_address: usize) -> Option<bool> {
    if return_address == 0 {
        return Some(true);
    }
    decided(slot_of(return_address), return_address)
}

/// Whether `address` lies in the code of the object this library's code is linked into (the capture library,
/// or a test binary), read from its own program headers: no lock and no loader call, since the futex calls
/// this decides include those of the locks that reading /proc/self/maps takes.
pub fn in_this_object(address: usize) -> bool {
    static START: AtomicUsize = AtomicUsize::new(0);
    static END: AtomicUsize = AtomicUsize::new(0);
    let mut end = END.load(Ordering::Acquire);
    if end == 0 {
        // Two threads may both read the headers: they find the same range.
        let (start, this_end) = own_code().unwrap_or((usize::MAX, usize::MAX));
        START.store(start, Ordering::Relaxed);
        END.store(this_end, Ordering::Release);
        end = this_end;
    }
    (START.load(Ordering::Relaxed)..end).contains(&address)
}

/// The range of this object's executable segments, from the ELF header the linker places `__ehdr_start` at.
#[cfg(target_pointer_width = "64")]
fn own_code() -> Option<(usize, usize)> {
    extern "C" {
        /// Defined by the linker (GNU ld and lld) at the ELF header of the object being linked, hidden.
        static __ehdr_start: libc::Elf64_Ehdr;
    }
    // Safety: the linker's symbol for this object's own header, mapped with its first segment.
    let header = unsafe { &*std::ptr::addr_of!(__ehdr_start) };
    let base = header as *const libc::Elf64_Ehdr as usize;
    // Safety: the program headers lie where the header says, inside the first loaded segment as linkers place
    // them, mapped for the life of the object.
    let headers = unsafe {
        std::slice::from_raw_parts(
            (base + usize::try_from(header.e_phoff).ok()?) as *const libc::Elf64_Phdr,
            usize::from(header.e_phnum),
        )
    };
    let loaded = |h: &&libc::Elf64_Phdr| h.p_type == libc::PT_LOAD;
    // The load bias: where the segment that maps the file's start (and so the header) was put.
    let first = headers.iter().filter(loaded).find(|h| h.p_offset == 0)?;
    let bias = base.checked_sub(usize::try_from(first.p_vaddr).ok()?)?;
    let code = headers.iter().filter(loaded).filter(|h| h.p_flags & libc::PF_X != 0);
    code.map(|h| Some((bias + usize::try_from(h.p_vaddr).ok()?, bias + usize::try_from(h.p_vaddr + h.p_memsz).ok()?)))
        .try_fold(None, |range: Option<(usize, usize)>, segment| {
            let (start, end) = segment?;
            Some(Some(range.map_or((start, end), |(s, e)| (s.min(start), e.max(end)))))
        })
        .flatten()
}

#[cfg(not(target_pointer_width = "64"))]
fn own_code() -> Option<(usize, usize)> {
    None
}

/// The slot of a return address: the shims' fast path computes it alike, in assembly (interpose/mod.rs).
fn slot_of(return_address: usize) -> &'static AtomicUsize {
    &DECIDED[(return_address ^ return_address >> SLOT_MIX_SHIFT) % SLOTS]
}

/// How far the return address is shifted to be mixed into its slot's index.
pub(super) const SLOT_MIX_SHIFT: u32 = 10;
const _: () = assert!(SLOTS.is_power_of_two(), "the fast path masks the index");

/// What a slot holds for `return_address` decided (the shims' fast path compares with `address << 1` alike).
fn decision(return_address: usize, programs: bool) -> usize {
    return_address << 1 | usize::from(programs)
}

/// What `slot` says of `return_address`, if it holds it.
fn decided(slot: &AtomicUsize, return_address: usize) -> Option<bool> {
    let decided = slot.load(Ordering::Relaxed);
    (decided >> 1 == return_address).then_some(decided & 1 == 1)
}

/// An executable mapping and whose code it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    owner: Owner,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Owner {
    Program,
    /// The executable: the program's, but the CUDA runtime may be linked into it.
    Executable,
    NotTheProgram,
}

struct Known {
    mappings: Vec<Mapping>,
    cudart: Option<CudartStatic>,
}

impl Known {
    const EMPTY: Known = Known { mappings: Vec::new(), cudart: None };
}

/// Renewed in a forked child: a thread the child does not have may have held it, reading /proc/self/maps.
static KNOWN: RenewedInChild<Mutex<Known>> = RenewedInChild::new(Mutex::new(Known::EMPTY));

/// In the child of a fork: the mappings are read again (the decided addresses stay: the child has the same code).
pub fn start_anew() {
    KNOWN.renew(|_| {});
}

/// Runs `work` while this thread holds the table of mappings (a test's stand-in for a thread reading them).
#[cfg(test)]
pub fn while_mappings_held(work: impl FnOnce()) {
    KNOWN.keep_spare(|| Mutex::new(Known::EMPTY));
    let _held = KNOWN.get().lock().unwrap_or_else(PoisonError::into_inner);
    work();
}

fn decide(address: usize) -> bool {
    KNOWN.keep_spare(|| Mutex::new(Known::EMPTY));
    let mut known = KNOWN.get().lock().unwrap_or_else(PoisonError::into_inner);
    let mut owner = owner_of(&known.mappings, address);
    if owner.is_none() {
        known.mappings = executable_mappings();
        owner = owner_of(&known.mappings, address);
    }
    match owner {
        // Code no file maps (generated code): the program's.
        None | Some(Owner::Program) => true,
        Some(Owner::NotTheProgram) => false,
        Some(Owner::Executable) => !known.cudart.get_or_insert_with(CudartStatic::of_executable).holds(address),
    }
}

/// The owner of the mapping that holds `address`; `mappings` are sorted by start and do not overlap (a
/// process with PyTorch has hundreds of them).
fn owner_of(mappings: &[Mapping], address: usize) -> Option<Owner> {
    let after = mappings.partition_point(|m| m.start <= address);
    mappings[..after].last().filter(|m| address < m.end).map(|m| m.owner)
}

/// The executable, file-backed mappings of this process, by start.
fn executable_mappings() -> Vec<Mapping> {
    let executable = std::fs::read_link("/proc/self/exe").ok();
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    let mut mappings: Vec<Mapping> =
        maps.lines().filter_map(|line| parse_mapping(line, executable.as_deref())).collect();
    // The kernel lists them in address order; sorted anyway, so that the search never depends on it.
    mappings.sort_unstable_by_key(|m| m.start);
    mappings
}

/// One line of /proc/self/maps (`start-end perms offset dev inode path`), when it maps a file's code.
fn parse_mapping(line: &str, executable: Option<&std::path::Path>) -> Option<Mapping> {
    let mut fields = line.split_ascii_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    let path = fields.nth(3)?;
    if !perms.contains('x') || !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let (start, end) = (usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?);
    let file = path.rsplit('/').next().unwrap_or(path);
    let owner = if NOT_THE_PROGRAMS.iter().any(|prefix| file.starts_with(prefix)) {
        Owner::NotTheProgram
    } else if executable.is_some_and(|exe| exe.as_os_str() == path) {
        Owner::Executable
    } else {
        Owner::Program
    };
    Some(Mapping { start, end, owner })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_owned_by_their_file() {
        let exe = std::path::Path::new("/opt/app/run");
        let line = |path: &str, perms: &str| format!("7f0000001000-7f0000003000 {perms} 00001000 08:01 42    {path}");
        let owner = |path: &str| parse_mapping(&line(path, "r-xp"), Some(exe)).map(|m| m.owner);
        assert_eq!(owner("/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06"), Some(Owner::NotTheProgram));
        assert_eq!(
            owner("/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13"),
            Some(Owner::NotTheProgram)
        );
        assert_eq!(owner("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33"), Some(Owner::Program));
        assert_eq!(owner("/root/.cache/streamtrace/observer/3f2a/torch_observer.so"), Some(Owner::NotTheProgram));
        assert_eq!(owner("/opt/app/run"), Some(Owner::Executable));
        assert_eq!(owner("/home/me/libcudart_helpers.so"), Some(Owner::Program), "not the CUDA runtime");
        assert_eq!(parse_mapping(&line("/usr/lib/libc.so.6", "r--p"), Some(exe)), None, "not code");
        assert_eq!(parse_mapping("7f0000001000-7f0000003000 r-xp 00000000 00:00 0 ", Some(exe)), None);
        let mapping = parse_mapping(&line("/usr/lib/libc.so.6", "r-xp"), None).expect("code");
        assert_eq!((mapping.start, mapping.end), (0x7f00_0000_1000, 0x7f00_0000_3000));
    }

    #[test]
    fn an_address_is_owned_by_the_mapping_around_it() {
        let mapping = |start, end, owner| Mapping { start, end, owner };
        let mappings = [
            mapping(0x1000, 0x2000, Owner::Program),
            mapping(0x3000, 0x4000, Owner::NotTheProgram),
            mapping(0x4000, 0x5000, Owner::Executable),
        ];
        assert_eq!(owner_of(&mappings, 0x0fff), None);
        assert_eq!(owner_of(&mappings, 0x1000), Some(Owner::Program));
        assert_eq!(owner_of(&mappings, 0x1fff), Some(Owner::Program));
        assert_eq!(owner_of(&mappings, 0x2000), None, "between mappings");
        assert_eq!(owner_of(&mappings, 0x3fff), Some(Owner::NotTheProgram));
        assert_eq!(owner_of(&mappings, 0x4000), Some(Owner::Executable));
        assert_eq!(owner_of(&mappings, 0x5000), None, "past the last");
        assert_eq!(owner_of(&[], 0x1000), None);
    }

    #[test]
    fn this_objects_own_code_is_found_from_its_headers() {
        let here = this_objects_own_code_is_found_from_its_headers as fn() as usize;
        assert!(in_this_object(here));
        assert!(in_this_object(in_this_object as fn(usize) -> bool as usize));
        assert!(!in_this_object(libc::strlen as *const () as usize), "the C library's code");
        let on_the_stack = 0u8;
        assert!(!in_this_object(&on_the_stack as *const u8 as usize));
        assert!(!in_this_object(0));
    }

    #[test]
    fn this_binarys_code_is_the_programs_and_decided_once() {
        let here = this_binarys_code_is_the_programs_and_decided_once as fn() as usize;
        assert!(is_programs(here + 1));
        assert!(is_programs(here + 1), "from the table");
        assert!(is_programs(0));
    }
}
