//! The host watch: the host's own loads and stores of memory the GPU also touches, seen in native programs
//! without recompiling them (DESIGN.md, the host as an accessor), and the host functions streams run.
//!
//! - Pinned and registered buffers: while an asynchronous copy or a kernel that touches one is in flight
//!   (inflight.rs), the pages entirely inside it are protected (guards.rs; DMA ignores page protection). The
//!   first host load or store faults; the SIGSEGV handler (signals.rs, kept first by interposing the signal
//!   functions) lifts the protection, queues the fault with a copy of the stack (faults.rs) and lets the
//!   program go on; the next thread to take the state lock makes it a `host_access` record with its native
//!   call site (fault_records.rs). One fault per buffer per in-flight window.
//! - Managed memory: CUPTI's CPU page faults (managed_faults.rs).
//! - Host functions (host_funcs.rs): wrapped by a trampoline, so that a fault knows which one ran it; their
//!   accesses, and managed faults, are learned late and put in place by hold.rs.
//!
//! Guards are on by default in native programs and off in Python (whose observers report host accesses at
//! tier T2); `--no-host-watch` turns everything off; docs/capture.md says what this can and cannot see and what
//! it costs. The rest of the capture calls the hooks here: [`passing`] at every driver callback, [`recorded`]
//! after a call's records, [`collect`] under the state lock, `hold::pass` in the drain (state.rs), [`at_exit`].

pub mod counters;
mod driver_code;
mod fault_records;
pub mod faults;
pub mod graph_host_nodes;
mod graph_touches;
pub mod guards;
pub mod hold;
pub mod host_funcs;
pub mod inflight;
mod io_calls;
pub(crate) mod managed_faults;
pub mod signals;

use std::sync::atomic::Ordering;

use streamtrace_format::{launch, WatchState};

use crate::process_state::ProcessState;
use crate::record::Record;
use crate::watch_state::WatchCell;

/// Whether pinned buffers are guarded: off until the set-up at load says otherwise.
static GUARD: WatchCell = WatchCell::off();

fn set_guard(state: WatchState) {
    GUARD.set(state);
}

pub fn guard_state() -> WatchState {
    GUARD.get()
}

fn guarding() -> bool {
    guard_state() == WatchState::On
}

/// Whether the host watch was asked for: `streamtrace capture` sets it, and the process is not Python's.
pub fn asked_for() -> bool {
    std::env::var_os(launch::ENV_HOST_WATCH).is_some()
        && std::env::var_os(launch::ENV_DISABLE).is_none()
        && !is_python()
}

/// A Python interpreter (or a program embedding one): its observers report host accesses (tier T2).
fn is_python() -> bool {
    // Safety: looks a symbol up by a NUL-terminated name.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"Py_IsInitialized".as_ptr()) }.is_null()
}

/// The running kernel's version as (major, minor), from uname.
fn kernel_version() -> Option<(u32, u32)> {
    // Safety: a zeroed utsname is a valid out-parameter.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // Safety: fills `name`.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    // Safety: uname wrote a NUL-terminated release string.
    let release = unsafe { std::ffi::CStr::from_ptr(name.release.as_ptr()) }.to_string_lossy().into_owned();
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Says once why the host watch does not run.
fn say(reason: &str) {
    eprintln!("streamtrace: {reason}");
}

/// At load, before the program's code runs (the library is preloaded): installs the SIGSEGV handler when the
/// host watch is asked for and can be kept first.
extern "C" fn at_load() {
    let _ = std::panic::catch_unwind(|| {
        if !asked_for() {
            return;
        }
        if !signals::interposed() {
            set_guard(WatchState::Unsupported);
            say("host watch: pinned buffers are not guarded: the capture library was not preloaded, so its signal handler could not stay first");
            return;
        }
        match signals::install() {
            Ok(()) => set_guard(WatchState::On),
            Err(e) => {
                set_guard(WatchState::Unsupported);
                say(&format!("host watch: pinned buffers are not guarded: {e}"));
            }
        }
        // Before Linux 5.19 a write fault on a pinned anonymous page that was write-protected could copy the
        // page, leaving the GPU with the old one: registered (program-allocated) memory is then not guarded.
        let registered_ok = kernel_version().is_some_and(|v| v >= (5, 19));
        inflight::allow_registered(registered_ok);
    });
}

#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

/// When CUPTI is set up (the driver initializes the injection): notes where the driver is, and arms the
/// managed-fault watch when the host watch is asked for (it starts at the first managed allocation).
pub fn start() {
    driver_code::find();
    // The exact-access backend subscribes the Compute Sanitizer API, and CUPTI cannot subscribe beside it.
    if asked_for() && !crate::control::EXACT.load(Ordering::Relaxed) {
        managed_faults::ask();
    }
}

/// Every driver callback, at entry and at exit (cheap when the watch is off).
#[inline]
pub fn passing(at_exit: bool) {
    if guarding() {
        inflight::passing(at_exit);
    }
}

/// After a call's records were made (`state.pending.entries[first..]`), under the state lock.
#[inline]
pub fn recorded(state: &ProcessState, first: usize) {
    if guarding() {
        inflight::recorded(&state.pending, first);
    }
    if managed_faults::asked() {
        managed_faults::recorded(&state.pending, first);
    }
}

/// Under the state lock, before records are added or taken: the faults queued since become records.
#[inline]
pub fn collect(state: &mut ProcessState) {
    if guarding() {
        fault_records::take(state);
    }
    if managed_faults::watching() {
        managed_faults::take(state);
    }
}

/// Whether host functions are wrapped (the guards are on, and the driver runs what the block holds).
pub fn wrap_host_funcs() -> bool {
    guarding() && host_funcs::wrapping_works()
}

/// At exit, under the state lock: the `host_watch` record, and everything held is written next.
pub fn at_exit(state: &mut ProcessState, call: crate::record::Call) {
    collect(state);
    hold::release_all();
    let managed = managed_faults::state();
    if guard_state() == WatchState::Off && managed == WatchState::Off {
        return;
    }
    managed_faults::say_if_silent();
    let (faults, dropped, ignored) = (
        counters::FAULTS.load(Ordering::Relaxed) + managed_faults::recorded_faults(),
        counters::DROPPED.load(Ordering::Relaxed),
        counters::IGNORED.load(Ordering::Relaxed) + managed_faults::ignored_faults(),
    );
    let windows = counters::WINDOWS.load(Ordering::Relaxed);
    if std::env::var_os("STREAMTRACE_HOST_WATCH_STATS").is_some() {
        eprintln!(
            "streamtrace: host watch: guard {}, managed {}; {windows} windows guarded, {} ranges not guarded (table full or refused), {} guard faults recorded, {dropped} dropped, {} the driver's; host functions went through the trampoline: {}",
            guard_state(),
            managed,
            counters::UNWATCHED.load(Ordering::Relaxed),
            counters::FAULTS.load(Ordering::Relaxed),
            counters::IGNORED.load(Ordering::Relaxed),
            host_funcs::trampolines_run(),
        );
    }
    state.emit(call, Record::HostWatch { guard: guard_state(), managed, windows, faults, dropped, ignored });
}
