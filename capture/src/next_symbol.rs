//! The C library's definitions of the functions this library stands in front of when preloaded: the next
//! definition after this library (the C library's, or another preloaded library's that stands in front of it),
//! found with `dlsym(RTLD_NEXT)` on first use and kept. dlsym takes only the loader's own lock and allocates
//! nothing on success. Used by the host-synchronization interposers (host_sync/real.rs) and the host watch's
//! I/O calls (host_watch/io_calls.rs). Touches libc's dlsym and dlvsym only.

use std::ffi::CStr;

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

/// Declares, for each function, an accessor of the next definition after this library, resolved on first
/// use, and its address in `address`.
macro_rules! real_functions {
    ($($name:ident $([$version:expr])?: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// Where each real function is, 0 until its first call resolves it (host_sync's shims jump there
        /// straight once it is known).
        #[allow(non_upper_case_globals)]
        pub mod address {
            use std::sync::atomic::AtomicUsize;
            $(pub static $name: AtomicUsize = AtomicUsize::new(0);)*
        }

        $(
            /// The real function, or None where nothing after this library defines it.
            pub fn $name() -> Option<unsafe extern "C-unwind" fn($($arg),*) -> $ret> {
                let mut address = address::$name.load(std::sync::atomic::Ordering::Relaxed);
                if address == 0 {
                    let name = std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes());
                    #[allow(unused_mut, unused_assignments)]
                    let mut version: Option<&std::ffi::CStr> = None;
                    $(version = $version;)?
                    address = name.map_or(0, |name| $crate::next_symbol::resolve(name, version));
                    address::$name.store(address, std::sync::atomic::Ordering::Relaxed);
                }
                // Safety: the address dlsym gave for this symbol, the C library's function of this type.
                (address != 0).then(|| unsafe {
                    std::mem::transmute::<usize, unsafe extern "C-unwind" fn($($arg),*) -> $ret>(address)
                })
            }
        )*
    };
}

pub(crate) use real_functions;
