//! The host watch's SIGSEGV handler, kept first whatever the program installs, and handing every fault that is
//! not a guard's to the program's own disposition as if the capture were not there.
//!
//! The capture library exports `sigaction`, `signal`, `bsd_signal`, `sysv_signal`, `sigprocmask` and
//! `pthread_sigmask`; preloaded, they stand in front of libc's for the whole program. Until the handler is
//! installed they only pass through. Once it is:
//! - a SIGSEGV disposition the program sets is kept here (and reported back as the old one) instead of
//!   replacing the handler;
//! - SIGSEGV is never really blocked (a fault while it is blocked kills the process, and a guard fault must
//!   not): masks the program sets are passed on without it, handlers of other signals run without it in their
//!   mask, and each thread's belief that it blocked SIGSEGV is reported back to it;
//! - a fault that is not a guard's goes to the program's disposition: its handler runs with the mask and flags
//!   it asked for (SA_SIGINFO, SA_RESETHAND, SA_NODEFER, its mask); for the default action or SIG_IGN the
//!   handler puts the program's disposition in place and lets the fault happen again, so that the kernel acts
//!   on it as it would have (a core dump, the signal as exit status), and a SIGSEGV sent by kill() is raised
//!   again the same way.
//!
//! Touches signal dispositions and masks, the guard table (guards.rs) and the fault queue (faults.rs).

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::faults;
use super::guards::{self, Claim};

type SigactionFn = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
type MaskFn = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;

/// `si_code` of a fault on a page whose protection forbids the access.
const SEGV_ACCERR: c_int = 2;

/// Whether the handler is installed: from then on the exported functions keep it first.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// libc's functions behind the exported ones, looked up once (`dlsym(RTLD_NEXT)`).
static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);
static REAL_SIGNAL: AtomicUsize = AtomicUsize::new(0);
static REAL_BSD_SIGNAL: AtomicUsize = AtomicUsize::new(0);
static REAL_SYSV_SIGNAL: AtomicUsize = AtomicUsize::new(0);
static REAL_SIGPROCMASK: AtomicUsize = AtomicUsize::new(0);
static REAL_PTHREAD_SIGMASK: AtomicUsize = AtomicUsize::new(0);

/// The address of libc's `name`, behind this library's, looked up on first use and kept in `cache`; 0 when
/// none is found.
fn real(cache: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let known = cache.load(Ordering::Acquire);
    if known != 0 {
        return known;
    }
    let found = crate::next_symbol::resolve(name, None);
    cache.store(found, Ordering::Release);
    found
}

/// libc's sigaction.
///
/// # Safety
/// As sigaction(2): `act` is null or a valid action, `old` null or writable.
unsafe fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    match real(&REAL_SIGACTION, c"sigaction") {
        0 => -1,
        // Safety: the address dlsym gave for sigaction, which has this signature; arguments passed on.
        f => unsafe { std::mem::transmute::<usize, SigactionFn>(f)(sig, act, old) },
    }
}

/// The program's SIGSEGV disposition as it set it. Two copies: a change writes the one not in use and then
/// names it, so that a handler that runs meanwhile (on any thread, also one interrupted while making the
/// change) reads a whole one without a lock.
struct ProgramAction {
    copies: [UnsafeCell<libc::sigaction>; 2],
    current: AtomicUsize,
    /// One change at a time, in normal context.
    change: Mutex<()>,
    /// Set by the handler for SA_RESETHAND (it cannot take the lock): the disposition is the default since.
    reset: AtomicBool,
}

// Safety: the copies are written only under `change`, into the one `current` does not name, and read whole.
unsafe impl Sync for ProgramAction {}

static PROGRAM: ProgramAction = ProgramAction {
    // Safety: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
    copies: [UnsafeCell::new(unsafe { std::mem::zeroed() }), UnsafeCell::new(unsafe { std::mem::zeroed() })],
    current: AtomicUsize::new(0),
    change: Mutex::new(()),
    reset: AtomicBool::new(false),
};

impl ProgramAction {
    fn get(&self) -> libc::sigaction {
        let index = self.current.load(Ordering::Acquire) & 1;
        // Safety: the copy `current` names is not written while it is current (see the type).
        let mut action = unsafe { std::ptr::read_volatile(self.copies[index].get()) };
        if self.reset.load(Ordering::Acquire) {
            action.sa_sigaction = libc::SIG_DFL;
            action.sa_flags = 0;
        }
        action
    }

    fn set(&self, action: libc::sigaction) {
        let _one = self.change.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = (self.current.load(Ordering::Acquire) + 1) & 1;
        // Safety: the copy not named by `current`, written under `change` only.
        unsafe { std::ptr::write_volatile(self.copies[next].get(), action) };
        self.reset.store(false, Ordering::Release);
        self.current.store(next, Ordering::Release);
    }
}

/// Signals (1 to 64, one bit each) whose handler's mask the program gave with SIGSEGV in it, taken out here.
static MASKS_WITH_SEGV: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread believes it blocked SIGSEGV (it is not really blocked: see the module).
    static BELIEVES_BLOCKED: Cell<bool> = const { Cell::new(false) };
}

/// Installs the handler, keeping the disposition in place as the program's. Called once, at load, before the
/// program's own code runs (mod.rs says when).
pub fn install() -> Result<(), String> {
    for (cache, name) in [
        (&REAL_SIGACTION, c"sigaction"),
        (&REAL_SIGNAL, c"signal"),
        (&REAL_BSD_SIGNAL, c"bsd_signal"),
        (&REAL_SYSV_SIGNAL, c"sysv_signal"),
        (&REAL_SIGPROCMASK, c"sigprocmask"),
        (&REAL_PTHREAD_SIGMASK, c"pthread_sigmask"),
    ] {
        real(cache, name);
    }
    // Safety: a zeroed sigaction is a valid out-parameter.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // Safety: asks for the current SIGSEGV disposition into a local.
    if unsafe { real_sigaction(libc::SIGSEGV, std::ptr::null(), &mut previous) } != 0 {
        return Err("cannot read the SIGSEGV disposition".into());
    }
    PROGRAM.set(previous);
    // Safety: a zeroed sigaction, then its handler, flags and an empty mask set.
    let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
    ours.sa_sigaction = on_fault as *const () as libc::sighandler_t;
    // SA_ONSTACK: where the program gave a thread an alternate stack (for stack overflows), the program's
    // handler runs there as it would have. SA_NODEFER: the handler sets the mask the program's asks for.
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER | libc::SA_RESTART;
    INSTALLED.store(true, Ordering::SeqCst);
    // Safety: installs a handler with the signature SA_SIGINFO asks for.
    if unsafe { real_sigaction(libc::SIGSEGV, &ours, std::ptr::null_mut()) } != 0 {
        INSTALLED.store(false, Ordering::SeqCst);
        return Err("cannot install a SIGSEGV handler".into());
    }
    Ok(())
}

/// Whether this library's `sigaction` is the one the program calls: it was preloaded, in front of libc.
pub fn interposed() -> bool {
    // Safety: looks a symbol up by a NUL-terminated name.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"sigaction".as_ptr()) };
    std::ptr::eq(found as *const (), sigaction as *const ())
}

/// The handler. Async-signal-safe: atomics, system calls and the fixed fault queue.
extern "C" fn on_fault(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if info.is_null() {
        chain(sig, info, context);
        return;
    }
    // Safety: the kernel passes the fault's siginfo (SA_SIGINFO).
    let (code, address) = unsafe { ((*info).si_code, (*info).si_addr() as u64) };
    if code == SEGV_ACCERR {
        match guards::claim(address) {
            Claim::Lifted { start, end } => {
                faults::note(address, context, start, end);
                return;
            }
            Claim::Busy => return,
            Claim::NotOurs => {}
        }
    }
    chain(sig, info, context);
}

/// Hands a fault that is not a guard's to the program's SIGSEGV disposition.
fn chain(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let action = PROGRAM.get();
    let handler = action.sa_sigaction;
    // Safety: reads the code of the siginfo the kernel passed, when it passed one.
    let from_fault = !info.is_null() && unsafe { (*info).si_code } > 0;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        if handler == libc::SIG_IGN && !from_fault {
            // An ignored SIGSEGV from kill(): nothing happens.
            return;
        }
        // A fault with the default action, or SIG_IGN (which the kernel resets to the default for a fault):
        // the kernel's own action. The default is put in place and the instruction runs again, or the signal
        // is sent again.
        // Safety: a zeroed sigaction is SIG_DFL.
        let default: libc::sigaction = unsafe { std::mem::zeroed() };
        // Safety: installs the default disposition.
        unsafe { real_sigaction(sig, &default, std::ptr::null_mut()) };
        INSTALLED.store(false, Ordering::SeqCst);
        if !from_fault {
            // Safety: sends the signal to this thread again; it is not blocked (SA_NODEFER), so it arrives now.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), sig) };
        }
        return;
    }
    if action.sa_flags & libc::SA_RESETHAND != 0 {
        PROGRAM.reset.store(true, Ordering::Release);
    }
    // The mask the kernel would have set for the program's handler, but SIGSEGV (see the module): a fault
    // inside the program's handler comes here again rather than ending the process (natively a second fault
    // there kills it; a handler that leaves by siglongjmp, the usual way, never returns here to unblock).
    let mut mask = action.sa_mask;
    let mut old: libc::sigset_t = action.sa_mask;
    // Safety: sigdelset on a local set; the system call changes this thread's mask and writes the old one into a
    // local of the kernel's sigset size (8 bytes on Linux).
    unsafe {
        libc::sigdelset(&mut mask, libc::SIGSEGV);
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &mask as *const _, &mut old as *mut _, 8usize);
    }
    if action.sa_flags & libc::SA_SIGINFO != 0 {
        // Safety: the program installed this address as an SA_SIGINFO handler; it gets the kernel's arguments.
        let f =
            unsafe { std::mem::transmute::<usize, extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)>(handler) };
        f(sig, info, context);
    } else {
        // Safety: the program installed this address as a plain handler.
        let f = unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(handler) };
        f(sig);
    }
    // Safety: gives this thread its mask back.
    unsafe {
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &old as *const _, std::ptr::null_mut::<u8>(), 8usize)
    };
}

/// The program sets (or asks for) its SIGSEGV disposition while the handler is installed.
///
/// # Safety
/// `act` is null or a valid action, `old` null or writable.
unsafe fn program_sigaction(act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let previous = PROGRAM.get();
    // Safety: the caller's pointers, as sigaction(2) takes them.
    unsafe {
        if let Some(act) = act.as_ref() {
            PROGRAM.set(*act);
        }
        if let Some(old) = old.as_mut() {
            *old = previous;
        }
    }
    0
}

/// Interposes sigaction(2) (see the module).
///
/// # Safety
/// As sigaction(2).
#[no_mangle]
pub unsafe extern "C" fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    if !INSTALLED.load(Ordering::Acquire) {
        // Safety: passed on as given.
        return unsafe { real_sigaction(sig, act, old) };
    }
    if sig == libc::SIGSEGV {
        // Safety: passed on as given.
        return unsafe { program_sigaction(act, old) };
    }
    let bit = if (1..=64).contains(&sig) { 1u64 << (sig - 1) } else { 0 };
    let had_segv = MASKS_WITH_SEGV.load(Ordering::Acquire) & bit != 0;
    // Safety: `act` is null or valid (the caller); a copy without SIGSEGV in its mask is passed on instead.
    let result = unsafe {
        match act.as_ref() {
            Some(given) => {
                let mut stripped = *given;
                let segv = libc::sigismember(&given.sa_mask, libc::SIGSEGV) == 1;
                libc::sigdelset(&mut stripped.sa_mask, libc::SIGSEGV);
                let result = real_sigaction(sig, &stripped, old);
                if result == 0 {
                    if segv {
                        MASKS_WITH_SEGV.fetch_or(bit, Ordering::AcqRel);
                    } else {
                        MASKS_WITH_SEGV.fetch_and(!bit, Ordering::AcqRel);
                    }
                }
                result
            }
            None => real_sigaction(sig, act, old),
        }
    };
    if result == 0 && had_segv {
        // Safety: `old` is null or writable, and was just filled.
        if let Some(old) = unsafe { old.as_mut() } {
            // Safety: a set the kernel filled.
            unsafe { libc::sigaddset(&mut old.sa_mask, libc::SIGSEGV) };
        }
    }
    result
}

/// A `signal`-style call for SIGSEGV while the handler is installed, with the flags the libc function uses.
///
/// # Safety
/// `handler` is SIG_DFL, SIG_IGN or a function taking the signal number.
unsafe fn program_signal(handler: libc::sighandler_t, flags: c_int, defer: bool) -> libc::sighandler_t {
    // Safety: a zeroed sigaction, filled as libc's signal functions fill theirs.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    if defer {
        // Safety: a local set.
        unsafe { libc::sigaddset(&mut act.sa_mask, libc::SIGSEGV) };
    }
    // Safety: a zeroed out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // Safety: local action and out-parameter.
    unsafe { program_sigaction(&act, &mut old) };
    old.sa_sigaction
}

/// Calls libc's signal-style function `name` (cached in `cache`).
///
/// # Safety
/// As signal(2).
unsafe fn real_signal(
    cache: &AtomicUsize,
    name: &std::ffi::CStr,
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    match real(cache, name) {
        0 => libc::SIG_ERR,
        // Safety: the address dlsym gave for a function of signal's signature; arguments passed on.
        f => unsafe { std::mem::transmute::<usize, SignalFn>(f)(sig, handler) },
    }
}

/// Interposes signal(2): BSD semantics, as glibc's.
///
/// # Safety
/// As signal(2).
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGSEGV && INSTALLED.load(Ordering::Acquire) {
        // Safety: the caller's handler.
        return unsafe { program_signal(handler, libc::SA_RESTART, true) };
    }
    // Safety: passed on as given.
    unsafe { real_signal(&REAL_SIGNAL, c"signal", sig, handler) }
}

/// Interposes bsd_signal(3), which is signal(2).
///
/// # Safety
/// As signal(2).
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGSEGV && INSTALLED.load(Ordering::Acquire) {
        // Safety: the caller's handler.
        return unsafe { program_signal(handler, libc::SA_RESTART, true) };
    }
    // Safety: passed on as given.
    unsafe { real_signal(&REAL_BSD_SIGNAL, c"bsd_signal", sig, handler) }
}

/// Interposes sysv_signal(3): the handler is reset before it runs and the signal not blocked in it.
///
/// # Safety
/// As signal(2).
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGSEGV && INSTALLED.load(Ordering::Acquire) {
        // Safety: the caller's handler.
        return unsafe { program_signal(handler, libc::SA_RESETHAND | libc::SA_NODEFER, false) };
    }
    // Safety: passed on as given.
    unsafe { real_signal(&REAL_SYSV_SIGNAL, c"sysv_signal", sig, handler) }
}

/// A mask change for this thread while the handler is installed: passed on without SIGSEGV, and this thread's
/// belief about SIGSEGV kept and reported back in `old`.
///
/// # Safety
/// As sigprocmask(2).
unsafe fn mask_without_segv(real_fn: usize, how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    if real_fn == 0 {
        return -1;
    }
    // Safety: the address dlsym gave for a function of sigprocmask's signature.
    let real_fn = unsafe { std::mem::transmute::<usize, MaskFn>(real_fn) };
    let believed = BELIEVES_BLOCKED.with(Cell::get);
    // Safety: `set` is null or valid (the caller); a copy without SIGSEGV is passed on.
    let result = unsafe {
        match set.as_ref() {
            Some(given) => {
                let segv = libc::sigismember(given, libc::SIGSEGV) == 1;
                let mut stripped = *given;
                libc::sigdelset(&mut stripped, libc::SIGSEGV);
                let result = real_fn(how, &stripped, old);
                if result == 0 {
                    let now = match how {
                        libc::SIG_BLOCK => believed || segv,
                        libc::SIG_UNBLOCK => believed && !segv,
                        _ => segv,
                    };
                    BELIEVES_BLOCKED.with(|b| b.set(now));
                }
                result
            }
            None => real_fn(how, set, old),
        }
    };
    if result == 0 && believed {
        // Safety: `old` is null or writable, and was just filled.
        if let Some(old) = unsafe { old.as_mut() } {
            // Safety: a set the kernel filled.
            unsafe { libc::sigaddset(old, libc::SIGSEGV) };
        }
    }
    result
}

/// Interposes pthread_sigmask(3).
///
/// # Safety
/// As pthread_sigmask(3).
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    let real_fn = real(&REAL_PTHREAD_SIGMASK, c"pthread_sigmask");
    if !INSTALLED.load(Ordering::Acquire) {
        if real_fn == 0 {
            return libc::ENOSYS;
        }
        // Safety: the address dlsym gave for pthread_sigmask; arguments passed on.
        return unsafe { std::mem::transmute::<usize, MaskFn>(real_fn)(how, set, old) };
    }
    // Safety: passed on as given.
    unsafe { mask_without_segv(real_fn, how, set, old) }
}

/// Interposes sigprocmask(2).
///
/// # Safety
/// As sigprocmask(2).
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int {
    let real_fn = real(&REAL_SIGPROCMASK, c"sigprocmask");
    if !INSTALLED.load(Ordering::Acquire) {
        if real_fn == 0 {
            return -1;
        }
        // Safety: the address dlsym gave for sigprocmask; arguments passed on.
        return unsafe { std::mem::transmute::<usize, MaskFn>(real_fn)(how, set, old) };
    }
    // Safety: passed on as given.
    unsafe { mask_without_segv(real_fn, how, set, old) }
}
