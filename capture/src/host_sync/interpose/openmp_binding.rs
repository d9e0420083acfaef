//! Which copy of libgomp a caller's calls go to. A process may hold several: a `-fopenmp` program's, and one in
//! each Python wheel that carries its own under another name (PyTorch's, scikit-learn's), loaded outside the
//! global scope with the extension that needs it. An object's calls of libgomp were bound when it was loaded
//! (Python loads extensions with RTLD_NOW): to the global scope's copy if there was one then, else to the copy
//! among its own dependencies. The stand-ins must send each call where the caller's own other calls
//! (`omp_get_thread_num`, the loop functions) go, or a region would run on one copy's team while its threads ask
//! another copy who they are.
//!
//! So a parallel region's binding is worked out from its outlined body, which lies in the caller's object: the
//! global copy if it was loaded before that object (or the object is the executable), else what the object's
//! own handle finds, else the global copy, else any loaded copy. Worked out once per object, on the thread that
//! starts the region (it may hold the loader's lock, inside a library's constructor: the lock is recursive), and
//! kept; the team's threads take it from their region, and never ask the loader (the thread that started the
//! region may be waiting for them at a barrier while it holds the loader's lock). Calls made outside any region
//! this library started (a lock, a critical section, a barrier of a team of one) go to the global copy, else the
//! first loaded one: libgomp's lock layout is the same in every copy.

use std::ffi::{c_int, c_long, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashMap;

use crate::next_symbol::{in_loaded_objects, in_object, object_at, resolve};

/// A parallel region's outlined body, as libgomp calls it on each thread of the team.
pub type Body = unsafe extern "C-unwind" fn(*mut c_void);

/// The version libgomp gives its current lock functions.
const LOCKS: Option<&CStr> = Some(c"OMP_3.0");

/// Declares `Binding`, libgomp's functions as one copy defines them, and how it is filled.
macro_rules! binding {
    ($($field:ident $([$version:expr])?: fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// libgomp's entry points, as one copy of it defines them (None: that copy has no such function).
        #[allow(non_snake_case)] // the C names
        pub struct Binding {
            $(pub $field: Option<unsafe extern "C-unwind" fn($($arg),*) -> $ret>,)*
        }

        impl Binding {
            /// No copy: every function missing.
            const NONE: Binding = Binding { $($field: None,)* };

            /// Whether no function was found.
            fn is_empty(&self) -> bool {
                true $(&& self.$field.is_none())*
            }

            /// Each function as `find` finds it by name and version (0: not found).
            fn found_by(find: impl Fn(&CStr, Option<&CStr>) -> usize) -> Binding {
                Binding {$(
                    $field: {
                        #[allow(unused_mut, unused_assignments)]
                        let mut version: Option<&CStr> = None;
                        $(version = $version;)?
                        let name = CStr::from_bytes_with_nul(concat!(stringify!($field), "\0").as_bytes());
                        let address = name.map_or(0, |name| find(name, version));
                        // Safety: the address the loader gave for this symbol, a function of this type.
                        (address != 0).then(|| unsafe {
                            std::mem::transmute::<usize, unsafe extern "C-unwind" fn($($arg),*) -> $ret>(address)
                        })
                    },
                )*}
            }
        }
    };
}

binding! {
    GOMP_parallel: fn(Body, *mut c_void, c_uint, c_uint) -> ();
    GOMP_parallel_reductions: fn(Body, *mut c_void, c_uint, c_uint) -> c_uint;
    GOMP_parallel_sections: fn(Body, *mut c_void, c_uint, c_uint, c_uint) -> ();
    GOMP_parallel_loop_static: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_dynamic: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_guided: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_nonmonotonic_dynamic: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_nonmonotonic_guided: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_runtime: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_nonmonotonic_runtime: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_uint) -> ();
    GOMP_parallel_loop_maybe_nonmonotonic_runtime: fn(Body, *mut c_void, c_uint, c_long, c_long, c_long, c_uint) -> ();
    GOMP_barrier: fn() -> ();
    GOMP_barrier_cancel: fn() -> bool;
    GOMP_loop_end: fn() -> ();
    GOMP_loop_end_cancel: fn() -> bool;
    GOMP_sections_end: fn() -> ();
    GOMP_sections_end_cancel: fn() -> bool;
    GOMP_single_copy_start: fn() -> *mut c_void;
    GOMP_single_copy_end: fn(*mut c_void) -> ();
    GOMP_critical_start: fn() -> ();
    GOMP_critical_end: fn() -> ();
    GOMP_critical_name_start: fn(*mut *mut c_void) -> ();
    GOMP_critical_name_end: fn(*mut *mut c_void) -> ();
    GOMP_atomic_start: fn() -> ();
    GOMP_atomic_end: fn() -> ();
    omp_init_lock [LOCKS]: fn(*mut c_void) -> ();
    omp_destroy_lock [LOCKS]: fn(*mut c_void) -> ();
    omp_set_lock [LOCKS]: fn(*mut c_void) -> ();
    omp_unset_lock [LOCKS]: fn(*mut c_void) -> ();
    omp_test_lock [LOCKS]: fn(*mut c_void) -> c_int;
}

/// The bindings worked out so far: by the address of a region's body, and by the path of its object (shared by
/// the object's bodies). Kept for the process: a copy of libgomp is not unloaded while its threads live (a
/// program that closes a library whose libgomp then goes crashes without the capture too).
struct Known {
    of_bodies: FxHashMap<usize, &'static Binding>,
    of_objects: FxHashMap<Vec<u8>, &'static Binding>,
}

static KNOWN: Mutex<Option<Known>> = Mutex::new(None);
/// The binding of calls outside regions (null: not worked out yet).
static OUTSIDE: AtomicPtr<Binding> = AtomicPtr::new(std::ptr::null_mut());

/// Runs `work` on what is known. The lock is never held while the loader is asked.
fn known<T>(work: impl FnOnce(&mut Known) -> T) -> T {
    let mut guard = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    work(guard.get_or_insert_with(|| Known { of_bodies: FxHashMap::default(), of_objects: FxHashMap::default() }))
}

/// The copy a region whose outlined body is `body` goes to.
pub fn of_region(body: Body) -> &'static Binding {
    let code = body as usize;
    if let Some(binding) = known(|known| known.of_bodies.get(&code).copied()) {
        return binding;
    }
    let binding = object_binding(code);
    known(|known| known.of_bodies.insert(code, binding));
    binding
}

fn object_binding(code: usize) -> &'static Binding {
    let Some(object) = object_at(code) else { return outside_regions() };
    let key = object.path.as_bytes().to_vec();
    if let Some(binding) = known(|known| known.of_objects.get(&key).copied()) {
        return binding;
    }
    let global = resolve(c"GOMP_parallel", None);
    let global_first =
        global != 0 && (object.path.is_empty() || object_at(global).is_some_and(|g| g.index < object.index));
    let binding: &'static Binding = if global_first || in_object(&object.path, c"GOMP_parallel", None) == 0 {
        outside_regions()
    } else {
        Box::leak(Box::new(Binding::found_by(|name, version| in_object(&object.path, name, version))))
    };
    known(|known| known.of_objects.insert(key, binding));
    binding
}

/// The copy calls made outside any region this library started go to, function by function: the global
/// scope's, else the first loaded object's (a library of OpenMP stubs defines the lock functions alone).
pub fn outside_regions() -> &'static Binding {
    let kept = OUTSIDE.load(Ordering::Acquire);
    if !kept.is_null() {
        // Safety: a leaked binding, never freed.
        return unsafe { &*kept };
    }
    let binding = Binding::found_by(|name, version| match resolve(name, version) {
        0 => in_loaded_objects(name, |_| true),
        global => global,
    });
    if binding.is_empty() {
        // No OpenMP library loaded yet: nothing to keep, look again next time.
        return &Binding::NONE;
    }
    let binding: &'static mut Binding = Box::leak(Box::new(binding));
    OUTSIDE.store(binding, Ordering::Release);
    binding
}
