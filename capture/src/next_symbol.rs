//! The real definitions of the functions this library stands in front of when preloaded: the next definition
//! after this library (the C library's, or another preloaded library's that stands in front of it), found
//! with `dlsym(RTLD_NEXT)` on first use and kept; for a library that may be loaded outside the global scope
//! (NCCL), else any loaded object's. dlsym takes only the loader's own lock and allocates nothing on success.
//! Used by the host-synchronization interposers (host_sync/real.rs), the host watch's I/O calls and signal
//! functions (host_watch/io_calls.rs, signals.rs), NCCL's stand-ins (nccl.rs) and CUPTI's (cupti_owner.rs).
//! Touches the dynamic loader's functions only.

use std::ffi::{c_int, c_void, CStr, CString};

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
    paths
        .iter()
        .filter(|path| object(path))
        .map(|path| in_object(path, name, None))
        .find(|&found| found != 0)
        .unwrap_or(0)
}

/// A loaded object: its place in the loader's list (the order objects were loaded in) and its path (empty for
/// the executable).
pub struct LoadedObject {
    pub index: usize,
    pub path: CString,
}

/// The loaded object whose segments hold `address`. The walk takes only the loader's list lock, which a thread
/// inside dlopen does not hold while the objects it loaded run their constructors (a constructor may start
/// threads that come here while it waits for them).
pub fn object_at(address: usize) -> Option<LoadedObject> {
    struct Search {
        address: usize,
        index: usize,
        found: Option<LoadedObject>,
    }
    extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, search: *mut c_void) -> c_int {
        // Safety: the loader's description of one loaded object (its program headers, dlpi_phnum of them), and
        // the search passed below.
        let (info, search) = unsafe { (&*info, &mut *search.cast::<Search>()) };
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let holds = headers.iter().filter(|h| h.p_type == libc::PT_LOAD).any(|h| {
            let start = (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize);
            (start..start.saturating_add(h.p_memsz as usize)).contains(&search.address)
        });
        if holds {
            // Safety: the object's NUL-terminated path, as the loader keeps it.
            let path = if info.dlpi_name.is_null() {
                CString::default()
            } else {
                unsafe { CStr::from_ptr(info.dlpi_name) }.to_owned()
            };
            search.found = Some(LoadedObject { index: search.index, path });
            return 1;
        }
        search.index += 1;
        0
    }
    let mut search = Search { address, index: 0, found: None };
    // Safety: walks the loaded objects with a callback that only reads their headers; `search` outlives it.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut search as *mut Search).cast()) };
    search.found
}

/// `name` as the loaded object at `path` and its dependencies define it (a lookup through its own handle), this
/// library's own left out; 0 when they do not, or when nothing is loaded from `path`.
pub fn in_object(path: &CStr, name: &CStr, version: Option<&CStr>) -> usize {
    // Safety: RTLD_NOLOAD opens nothing new; the handle is only looked into, then closed.
    let found = unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if handle.is_null() {
            return 0;
        }
        let versioned = version.map_or(std::ptr::null_mut(), |v| libc::dlvsym(handle, name.as_ptr(), v.as_ptr()));
        let found = if versioned.is_null() { libc::dlsym(handle, name.as_ptr()) } else { versioned };
        libc::dlclose(handle);
        found as usize
    };
    if found == 0 || base_of(found) == base_of(base_of as *const () as usize) {
        return 0;
    }
    found
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
/// [`resolve_anywhere`] after `found anywhere:`), and its address in `address`.
macro_rules! real_functions {
    (@by $resolve:path; $($name:ident $([$version:expr])?: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// Where each real function is, 0 until its first call resolves it (host_sync's shims jump there
        /// straight once it is known).
        #[allow(non_upper_case_globals)]
        pub mod address {
            use std::sync::atomic::AtomicUsize;
            $(pub static $name: AtomicUsize = AtomicUsize::new(0);)*
        }

        /// Looks every function up now: the library's constructor does, since a first call made later on a
        /// thread that a library's constructor waits for (the loader's lock held meanwhile) would wait for that
        /// lock in dlsym, and one in a signal handler would need dlsym's stack.
        #[allow(dead_code)] // where a module's functions are looked up on first use only
        pub fn resolve_all() {
            $(let _ = $name();)*
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
                    address = name.map_or(0, |name| $resolve(name, version));
                    address::$name.store(address, std::sync::atomic::Ordering::Relaxed);
                }
                // Safety: the address the loader gave for this symbol, a function of this type.
                (address != 0).then(|| unsafe {
                    std::mem::transmute::<usize, unsafe extern "C-unwind" fn($($arg),*) -> $ret>(address)
                })
            }
        )*
    };
    (found anywhere: $($items:tt)*) => {
        $crate::next_symbol::real_functions!(@by $crate::next_symbol::resolve_anywhere; $($items)*);
    };
    ($($items:tt)*) => {
        $crate::next_symbol::real_functions!(@by $crate::next_symbol::resolve; $($items)*);
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
    fn an_address_is_placed_in_its_object_in_load_order() {
        let executable = object_at(an_address_is_placed_in_its_object_in_load_order as *const () as usize);
        let executable = executable.expect("this test's own code");
        assert_eq!((executable.index, executable.path.as_bytes()), (0, &b""[..]), "the executable comes first");
        let libc = object_at(libc::strlen as *const () as usize).expect("the C library");
        assert!(libc.index > 0 && libc.path.to_string_lossy().contains("libc"), "{:?}", libc.path);
        assert_eq!(in_object(&libc.path, c"strlen", None), libc::strlen as *const () as usize);
        assert_eq!(in_object(&libc.path, c"no_such_function_anywhere", None), 0);
        assert!(object_at(0).is_none());
    }
}
