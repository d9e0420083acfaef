//! libstdc++'s futures: `std::promise`, `std::packaged_task` and `std::async` make a shared state ready with an
//! atomic store, and `std::future::get` and `wait` read it; a waiter that finds it not ready sleeps on a futex
//! through `__atomic_futex_unsigned_base::_M_futex_wait_until` (or `_until_steady`), and the store wakes it
//! through `_M_futex_notify_all`, both functions of libstdc++.so that the program's inlined code calls. These
//! stand in front of them: the wake releases what the setting thread knows into the futex word, and the waiter
//! acquires it when its wait returns.
//!
//! Only a waiter that slept is seen: one that finds the state ready calls nothing, and its hand-over stays
//! ordered only by timing (docs/host-order.md), as does a waiter whose wait returned between the store and the
//! wake. The word's memory, used again for another object once the state is freed, keeps what was released
//! into it, as a mutex's does.

use std::ffi::{c_uint, c_void};

use crate::host_sync::objects::Release;
use crate::host_sync::{acquire, release};

mod real {
    use std::ffi::{c_uint, c_void};

    const GLIBCXX_3_4_21: Option<&std::ffi::CStr> = Some(c"GLIBCXX_3.4.21");
    const GLIBCXX_3_4_29: Option<&std::ffi::CStr> = Some(c"GLIBCXX_3.4.29");

    // libstdc++ is loaded outside the global scope where only a Python extension needs it (one copy: every
    // extension's needs libstdc++.so.6, and the loader loads a name once).
    crate::next_symbol::real_functions! { found anywhere:
        _ZNSt28__atomic_futex_unsigned_base19_M_futex_notify_allEPj [GLIBCXX_3_4_21]: fn(*mut c_uint) -> ();
        _ZNSt28__atomic_futex_unsigned_base19_M_futex_wait_untilEPjjbNSt6chrono8durationIlSt5ratioILl1ELl1EEEENS2_IlS3_ILl1ELl1000000000EEEE
            [GLIBCXX_3_4_21]: fn(*mut c_void, *mut c_uint, c_uint, bool, i64, i64) -> bool;
        _ZNSt28__atomic_futex_unsigned_base26_M_futex_wait_until_steadyEPjjbNSt6chrono8durationIlSt5ratioILl1ELl1EEEENS2_IlS3_ILl1ELl1000000000EEEE
            [GLIBCXX_3_4_29]: fn(*mut c_void, *mut c_uint, c_uint, bool, i64, i64) -> bool;
    }
}

/// `std::__atomic_futex_unsigned_base::_M_futex_notify_all(unsigned*)`, in front of libstdc++'s.
#[export_name = "_ZNSt28__atomic_futex_unsigned_base19_M_futex_notify_allEPj"]
pub extern "C-unwind" fn futex_notify_all(word: *mut c_uint) {
    release(word as usize, Release::Store, "std::promise", 0);
    if let Some(real) = real::_ZNSt28__atomic_futex_unsigned_base19_M_futex_notify_allEPj() {
        // Safety: libstdc++'s function, given the program's argument.
        unsafe { real(word) }
    }
}

/// Defines each wait: `$name` in front of libstdc++'s `$symbol`, a member function (of an empty base: `this`
/// is passed and unused, unlike the static `_M_futex_notify_all`'s), true when woken (or the word changed),
/// false when the time ran out.
macro_rules! futex_waits {
    ($($name:ident = $symbol:ident: $doc:literal;)*) => {$(
        #[doc = $doc]
        #[export_name = stringify!($symbol)]
        pub extern "C-unwind" fn $name(
            this: *mut c_void,
            word: *mut c_uint,
            value: c_uint,
            timed: bool,
            s: i64,
            ns: i64,
        ) -> bool {
            wait_then_acquire(word, real::$symbol().map(|real| {
                // Safety: libstdc++'s function, given the program's arguments.
                move || unsafe { real(this, word, value, timed, s, ns) }
            }))
        }
    )*};
}

futex_waits! {
    futex_wait_until = _ZNSt28__atomic_futex_unsigned_base19_M_futex_wait_untilEPjjbNSt6chrono8durationIlSt5ratioILl1ELl1EEEENS2_IlS3_ILl1ELl1000000000EEEE:
        "`_M_futex_wait_until(unsigned*, unsigned, bool, seconds, nanoseconds)`: a deadline on the system clock.";
    futex_wait_until_steady = _ZNSt28__atomic_futex_unsigned_base26_M_futex_wait_until_steadyEPjjbNSt6chrono8durationIlSt5ratioILl1ELl1EEEENS2_IlS3_ILl1ELl1000000000EEEE:
        "`_M_futex_wait_until_steady(...)`: a deadline on the steady clock.";
}

/// Runs a wait on `word` and acquires what was released into it. Without libstdc++'s function there is nothing
/// to sleep with: "woken", and the caller looks at the word again.
fn wait_then_acquire(word: *mut c_uint, wait: Option<impl FnOnce() -> bool>) -> bool {
    let woken = match wait {
        Some(wait) => wait(),
        None => true,
    };
    acquire(word as usize, "std::future", 0);
    woken
}
