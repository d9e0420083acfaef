//! The guard path end to end in one process, without a GPU: the host watch's handler installed, a page armed
//! as a copy's exit arms it, and then the program's own accesses: the first one faults, is queued with its
//! registers and stack, and goes through; a fault that is not a guard's reaches the program's own handler,
//! installed after the capture's; a thread that believes it blocked SIGSEGV still gets through a guard.
//! One test: signal dispositions are the process's.

use std::sync::atomic::{AtomicU32, Ordering};

use streamtrace_capture::host_watch::{faults, guards, signals};

const PAGE: usize = 4096;

fn map_page(prot: i32) -> u64 {
    // Safety: a fresh anonymous page.
    let page = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    assert_ne!(page, libc::MAP_FAILED);
    page as u64
}

static PROGRAM_HANDLED: AtomicU32 = AtomicU32::new(0);

/// The program's own handler: makes the faulting page writable and returns, so the store runs again.
extern "C" fn program_handler(_sig: i32, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    PROGRAM_HANDLED.fetch_add(1, Ordering::SeqCst);
    // Safety: the kernel's siginfo; the page is the test's own.
    unsafe {
        let page = (*info).si_addr() as usize & !(PAGE - 1);
        libc::syscall(libc::SYS_mprotect, page, PAGE, libc::PROT_READ | libc::PROT_WRITE);
    }
}

fn store(address: u64, value: u8) {
    // Safety: a page of this test, writable or guarded.
    unsafe { std::ptr::write_volatile(address as *mut u8, value) };
}

#[test]
fn guards_fault_once_and_the_programs_own_faults_reach_its_handler() {
    signals::install().expect("the handler installs");

    let buffer = map_page(guards::UNGUARDED);
    let slot = guards::arm(buffer, buffer + PAGE as u64, libc::PROT_NONE).expect("armed");
    store(buffer + 8, 5);
    // Safety: lifted by the fault.
    assert_eq!(unsafe { std::ptr::read_volatile((buffer + 8) as *const u8) }, 5, "the store went through");
    assert!(guards::lifted(slot), "the window saw its access");
    assert_eq!(faults::queued(), 1, "queued for the state lock");
    store(buffer + 9, 6);
    assert_eq!(faults::queued(), 1, "one fault per window");
    guards::lift(slot);

    // The program installs its own handler after the capture's.
    // Safety: a zeroed sigaction, filled with a handler of the SA_SIGINFO shape.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = program_handler as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO;
    // Safety: valid action; the interposer keeps it as the program's.
    assert_eq!(unsafe { signals::sigaction(libc::SIGSEGV, &act, std::ptr::null_mut()) }, 0);
    // Safety: zeroed out-parameter.
    let mut asked: libc::sigaction = unsafe { std::mem::zeroed() };
    // Safety: as above.
    unsafe { signals::sigaction(libc::SIGSEGV, std::ptr::null(), &mut asked) };
    assert_eq!(asked.sa_sigaction, program_handler as *const () as usize, "the program's handler is reported back");

    let own = map_page(libc::PROT_NONE);
    store(own, 1);
    assert_eq!(PROGRAM_HANDLED.load(Ordering::SeqCst), 1, "its own fault reached its handler");

    let again = guards::arm(buffer, buffer + PAGE as u64, libc::PROT_READ).expect("armed again");
    // A read of a write-guarded page is no fault; a store is.
    // Safety: readable.
    assert_eq!(unsafe { std::ptr::read_volatile(buffer as *const u8) }, 0);
    assert!(!guards::lifted(again));
    // A thread that believes SIGSEGV blocked still passes the guard (a blocked fault would kill it).
    // Safety: local sets; the interposer keeps SIGSEGV unblocked and remembers the thread asked.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGSEGV);
        signals::pthread_sigmask(libc::SIG_BLOCK, &block, std::ptr::null_mut());
        let mut now: libc::sigset_t = std::mem::zeroed();
        signals::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
        assert_eq!(libc::sigismember(&now, libc::SIGSEGV), 1, "reported blocked, as asked");
    }
    store(buffer + 16, 7);
    assert!(guards::lifted(again));
    assert_eq!(faults::queued(), 2);
    assert_eq!(PROGRAM_HANDLED.load(Ordering::SeqCst), 1, "a guard's fault is not the program's");
    guards::lift(again);
}
