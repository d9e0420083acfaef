//! The real definitions of the functions this library stands in front of when preloaded: the next definition
//! after this library (the C library's, or another preloaded library's that stands in front of it), found
//! with `dlsym(RTLD_NEXT)` on first use and kept; for a library that may be loaded outside the global scope
//! (NCCL), else any loaded object's; for one of which several copies may be loaded outside it (libgomp), the
//! caller's own. dlsym takes only the loader's own lock and allocates nothing on success. Used by the
//! host-synchronization interposers (host_sync/real.rs, interpose/openmp.rs), the host watch's I/O calls and
//! signal functions (host_watch/io_calls.rs, signals.rs), NCCL's stand-ins (nccl.rs) and CUPTI's
//! (cupti_owner.rs). Touches the dynamic loader's functions (and the unwinder's stack walk) only.

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Looks `name` up after this library; 0 when nothing defines it (a C library older than the function).
pub fn resolve(name: &CStr, version: Option<&CStr>) -> usize {
    let found = match version {
        // Safety: both are NUL-terminated; RTLD_NEXT searches the libraries after this one.
        Some(version) => unsafe { libc::dlvsym(libc::RTLD_NEXT, name.as_ptr(), version.as_ptr()) },
        None => std::ptr::null_mut(),
    };
    if !found.is_null() {
        return found as usize;
    }
    // Safety: as above.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// [`resolve`], else a definition of `name` in any loaded object but this library: a library loaded without
/// RTLD_GLOBAL (a Python extension's dependency, or an extension with NCCL built in) is not in the global scope
/// that RTLD_NEXT searches, while its callers' calls come here. 0 when there is none.
pub fn resolve_anywhere(name: &CStr, version: Option<&CStr>) -> usize {
    match resolve(name, version) {
        0 => in_loaded_objects(name, |_| true),
        found => found,
    }
}

/// `name` as the first loaded object whose path `object` accepts defines it, looked up through that object's
/// own handle (its definition, or its dependencies'), this library's own left out; 0 when none does.
pub fn in_loaded_objects(name: &CStr, object: impl Fn(&CStr) -> bool) -> usize {
    let mut first = 0;
    each_definition(name, object, |found| {
        first = found;
        false
    });
    first
}

/// Calls `found` with each definition of `name` that a loaded object whose path `object` accepts sees (through
/// its own handle), this library's own left out, until it returns false.
fn each_definition(name: &CStr, object: impl Fn(&CStr) -> bool, mut found: impl FnMut(usize) -> bool) {
    // The walk holds the loader's write lock, and dlopen and dlclose take its load lock, which another thread's
    // dlopen holds while it waits for the write lock: paths are only copied during the walk, opened after it.
    extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, paths: *mut c_void) -> c_int {
        // Safety: the loader's description of one loaded object, and the list passed below.
        let (info, paths) = unsafe { (&*info, &mut *paths.cast::<Vec<CString>>()) };
        if !info.dlpi_name.is_null() {
            // Safety: the object's NUL-terminated path, as the loader keeps it.
            let path = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !path.is_empty() {
                paths.push(path.to_owned());
            }
        }
        0
    }
    let mut paths: Vec<CString> = Vec::new();
    // Safety: walks the loaded objects with a callback that only copies paths; `paths` outlives the walk.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut paths as *mut Vec<CString>).cast()) };
    let own = base_of(base_of as *const () as usize);
    for path in paths.iter().filter(|path| object(path)) {
        let definition = in_object(path, name);
        if definition != 0 && base_of(definition) != own && !found(definition) {
            return;
        }
    }
}

/// `name` as the loaded object at `path` and its dependencies define it (0 when they do not, or when nothing is
/// loaded from `path`).
fn in_object(path: &CStr, name: &CStr) -> usize {
    // Safety: RTLD_NOLOAD opens nothing new; the handle is only looked into, then closed.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if handle.is_null() {
            return 0;
        }
        let found = libc::dlsym(handle, name.as_ptr());
        libc::dlclose(handle);
        found as usize
    }
}

/// What a function looked for by caller was found to be, as of a number of loads: while no object was loaded
/// since, the only definition among the loaded objects stays the only one, and several stay several.
pub struct OnlyDefinition {
    /// The loader's count of loads when the definitions were counted (`u64::MAX`: never).
    loads: AtomicU64,
    /// The only definition; 0 when there were several (or none).
    address: AtomicUsize,
}

impl OnlyDefinition {
    pub const fn new() -> OnlyDefinition {
        OnlyDefinition { loads: AtomicU64::new(u64::MAX), address: AtomicUsize::new(0) }
    }
}

/// `name` as the global scope defines it after this library ([`resolve`], for good), else as the object of the function
/// that called into this library defines it, or its dependencies (a lookup through that object's own handle,
/// which is what its calls bind to where the global scope has no definition):
/// two Python extensions may each load their own copy of a library outside the global scope (PyTorch's and
/// scikit-learn's wheels each carry a libgomp), and each must reach its own. Where the loaded objects hold only
/// one definition that is the caller's, found without a look at the caller, and kept in `only` until the next
/// load; where they hold several, the caller is the first frame on this thread's stack outside this library
/// (a stack walk and the loader's lock, every call). Where the caller's object and its dependencies define none
/// (a plugin that counts on its host process for the library), any loaded object's; 0 when there is none.
pub fn in_callers_object(name: &CStr, version: Option<&CStr>, only: &OnlyDefinition) -> Found {
    let loads = loads_so_far();
    if only.loads.load(Ordering::Acquire) != loads {
        // A definition in the global scope is what every caller binds to, from now on.
        let global = resolve(name, version);
        if global != 0 {
            return Found::ForGood(global);
        }
        let mut definitions = [0usize; 2];
        let mut count = 0;
        each_definition(
            name,
            |_| true,
            |found| {
                if !definitions[..count].contains(&found) {
                    definitions[count] = found;
                    count += 1;
                }
                count < definitions.len()
            },
        );
        only.address.store(if count == 1 { definitions[0] } else { 0 }, Ordering::Relaxed);
        only.loads.store(loads, Ordering::Release);
        if count == 0 {
            return Found::ForThisCall(0);
        }
    }
    Found::ForThisCall(match only.address.load(Ordering::Relaxed) {
        0 => match in_object_of_caller(name) {
            0 => in_loaded_objects(name, |_| true),
            found => found,
        },
        the_only => the_only,
    })
}

/// The loader's count of objects loaded so far (dlopen's and the start's), which a new load changes.
fn loads_so_far() -> u64 {
    extern "C" fn first(info: *mut libc::dl_phdr_info, _size: usize, loads: *mut c_void) -> c_int {
        // Safety: the loader's description of the first loaded object, and the count passed below.
        unsafe { *loads.cast::<u64>() = (*info).dlpi_adds };
        1
    }
    let mut loads = 0u64;
    // Safety: a walk stopped at its first object by a callback that only reads its count of loads.
    unsafe { libc::dl_iterate_phdr(Some(first), (&mut loads as *mut u64).cast()) };
    loads
}

/// `name` as the caller's object (the first frame on this thread's stack outside this library) and its
/// dependencies define it; 0 when they do not.
fn in_object_of_caller(name: &CStr) -> usize {
    let own = base_of(base_of as *const () as usize);
    let mut frames = [std::ptr::null_mut::<c_void>(); 16];
    // Safety: fills at most `frames.len()` return addresses of this thread's stack.
    let walked = unsafe { libc::backtrace(frames.as_mut_ptr(), frames.len() as c_int) };
    let walked = usize::try_from(walked).unwrap_or(0).min(frames.len());
    let Some(caller) = frames[..walked].iter().map(|&frame| frame as usize).find(|&frame| base_of(frame) != own) else {
        return 0;
    };
    // Safety: dladdr only reads the loader's tables and fills the local.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(caller as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return 0;
    }
    // Safety: the path the loader keeps for the caller's object, NUL-terminated.
    let found = in_object(unsafe { CStr::from_ptr(info.dli_fname) }, name);
    if base_of(found) == own {
        return 0;
    }
    found
}

/// A real function's definition as a look found it (0: none), and for how long it stands.
pub enum Found {
    /// Until the process ends: kept, and never looked for again.
    ForGood(usize),
    /// For this call: a load may change what the next call's caller finds.
    ForThisCall(usize),
}

/// The finder of the functions declared without a qualifier: [`resolve`], for good.
pub fn next_after_this(name: &CStr, version: Option<&CStr>, _: &OnlyDefinition) -> Found {
    Found::ForGood(resolve(name, version))
}

/// The finder of the functions declared `found anywhere`: [`resolve_anywhere`], for good.
pub fn anywhere(name: &CStr, version: Option<&CStr>, _: &OnlyDefinition) -> Found {
    Found::ForGood(resolve_anywhere(name, version))
}

/// The load address of the object that holds `address` (0 when none does).
fn base_of(address: usize) -> usize {
    // Safety: dladdr only reads the loader's tables and fills the local.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(address as *const c_void, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

/// Declares, for each function, an accessor of its real definition, resolved on first use ([`resolve`], or
/// [`resolve_anywhere`] after `found anywhere:`), and its address in `address`. After `found by caller:` a
/// function the global scope does not define is looked for by each call, as its caller's object finds it
/// ([`in_callers_object`]).
macro_rules! real_functions {
    (@by $find:path; $($name:ident $([$version:expr])?: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// Where each real function is, 0 until a call finds it for good (host_sync's shims jump there straight
        /// once it is known).
        #[allow(non_upper_case_globals)]
        pub mod address {
            use std::sync::atomic::AtomicUsize;
            $(pub static $name: AtomicUsize = AtomicUsize::new(0);)*
        }

        /// What each function was found to be where the global scope has none (looked for by caller).
        #[allow(non_upper_case_globals)]
        mod only {
            $(pub static $name: $crate::next_symbol::OnlyDefinition = $crate::next_symbol::OnlyDefinition::new();)*
        }

        $(
            /// The real function, or None where nothing defines it.
            #[allow(non_snake_case)] // the C names (NCCL's are camel case)
            pub fn $name() -> Option<unsafe extern "C-unwind" fn($($arg),*) -> $ret> {
                let mut address = address::$name.load(std::sync::atomic::Ordering::Relaxed);
                if address == 0 {
                    let name = std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes());
                    #[allow(unused_mut, unused_assignments)]
                    let mut version: Option<&std::ffi::CStr> = None;
                    $(version = $version;)?
                    address = match name.ok().map(|name| $find(name, version, &only::$name)) {
                        Some($crate::next_symbol::Found::ForGood(found)) => {
                            address::$name.store(found, std::sync::atomic::Ordering::Relaxed);
                            found
                        }
                        Some($crate::next_symbol::Found::ForThisCall(found)) => found,
                        None => 0,
                    };
                }
                // Safety: the address the loader gave for this symbol, a function of this type.
                (address != 0).then(|| unsafe {
                    std::mem::transmute::<usize, unsafe extern "C-unwind" fn($($arg),*) -> $ret>(address)
                })
            }
        )*
    };
    (found by caller: $($items:tt)*) => {
        $crate::next_symbol::real_functions!(@by $crate::next_symbol::in_callers_object; $($items)*);
    };
    (found anywhere: $($items:tt)*) => {
        $crate::next_symbol::real_functions!(@by $crate::next_symbol::anywhere; $($items)*);
    };
    ($($items:tt)*) => {
        $crate::next_symbol::real_functions!(@by $crate::next_symbol::next_after_this; $($items)*);
    };
}

pub(crate) use real_functions;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_is_found_in_any_loaded_object_but_this_one() {
        // The C library's strlen, found by the walk over the loaded objects.
        assert_eq!(in_loaded_objects(c"strlen", |_| true), libc::strlen as *const () as usize);
        // Only the objects asked for are looked into.
        assert_eq!(in_loaded_objects(c"strlen", |path| path.to_bytes().ends_with(b"/no-such-object.so")), 0);
        // This test binary's own stand-in is no definition of NCCL's, and nothing else defines it here.
        assert_eq!(in_loaded_objects(c"ncclSend", |_| true), 0);
        assert_eq!(resolve_anywhere(c"ncclSend", None), 0);
    }

    #[test]
    fn a_callers_object_is_the_first_frame_outside_this_library() {
        // In this test binary the library's code is the executable's own: the first frame outside it is the C
        // library's thread start, whose object defines strlen.
        let strlen = OnlyDefinition::new();
        assert_eq!(in_object_of_caller(c"strlen"), libc::strlen as *const () as usize);
        // The global scope's, for good.
        let Found::ForGood(found) = in_callers_object(c"strlen", None, &strlen) else { panic!("not for good") };
        assert_eq!(found, libc::strlen as *const () as usize);
        let none = OnlyDefinition::new();
        assert!(matches!(in_callers_object(c"no_such_function_anywhere", None, &none), Found::ForThisCall(0)));
        assert_eq!(none.loads.load(Ordering::Relaxed), loads_so_far(), "counted, as of the loads so far");
    }
}
