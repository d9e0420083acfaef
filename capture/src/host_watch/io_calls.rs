//! The C library's I/O calls that hand a buffer to the kernel (`read`, `write`, `fread`, `fwrite`, `recv`,
//! `send` and their kin), stood in front of when the capture library is preloaded. The kernel copies to and from
//! the buffer itself, and a guarded page does not fault there: the system call fails with EFAULT, so that a
//! program writing a pinned buffer to a file while a copy into it is still in flight would lose its data under
//! capture, and the race would go unseen. Each call first touches, in user space, the first byte of every
//! guarded range its buffer overlaps, as the kernel is about to: a load where the kernel reads the buffer, an
//! atomic store of the byte's own value where it writes it. The touch faults like any of the program's
//! accesses, the handler lifts the range and records the access (its site is the program's call: the
//! capture's own frames are left out of the walk), and the call then runs on unguarded pages. Another thread may
//! guard the buffer again between the touch and the system call (a copy into it issued meanwhile): a system call
//! that then fails with EFAULT while a guarded range overlaps its buffer is touched and made again, a few times
//! at most (such a call failed before it read or wrote anything, so making it again is what the program would
//! have seen; the C library's buffered fread and fwrite are not made again). A process that never guarded a
//! range pays one atomic load a call. Touches the guard table and the real functions only.
//!
//! These are cancellation points: the types say "C-unwind", and nothing here needs dropping across the call.

use std::ffi::{c_int, c_void};

use libc::{iovec, size_t, sockaddr, socklen_t, ssize_t, FILE};

use super::guards;

/// How the kernel will access a buffer.
#[derive(Copy, Clone)]
enum KernelAccess {
    /// It reads it (a write to a file or socket).
    Reads,
    /// It writes it (a read from a file or socket).
    Writes,
}

/// Touches the first byte of `[address, address + len)` inside each guarded range, as the kernel will access
/// the buffer; whether any was guarded.
fn touch(address: *const c_void, len: usize, access: KernelAccess) -> bool {
    let start = address as u64;
    if len == 0 || start == 0 {
        return false;
    }
    let mut touched = false;
    guards::armed_overlaps(start, start.saturating_add(len as u64), |byte| {
        touched = true;
        match access {
            // Safety: `byte` is inside the buffer the program hands the kernel, which the program must have
            // mapped; it is read once (a guarded page faults, and the handler lets the load run again once lifted).
            KernelAccess::Reads => unsafe {
                std::ptr::read_volatile(byte as *const u8);
            },
            KernelAccess::Writes => store_own_value(byte),
        }
    });
    touched
}

/// How many times a system call that met a guard armed after its touch is made again.
const TRIES_AGAIN: u32 = 4;

/// Whether a call's result says its system call failed with EFAULT, before reading or writing anything: a
/// system call's -1. The C library's buffered calls (their item counts) are never made again.
trait FailedOnAFault {
    fn failed_on_a_fault(&self) -> bool;
}

impl FailedOnAFault for ssize_t {
    fn failed_on_a_fault(&self) -> bool {
        // Safety: the calling thread's errno.
        *self == -1 && unsafe { *libc::__errno_location() } == libc::EFAULT
    }
}

impl FailedOnAFault for size_t {
    fn failed_on_a_fault(&self) -> bool {
        false
    }
}

/// Writes the byte at `address` back unchanged, as one locked instruction: a DMA engine may be reading or
/// writing the same buffer meanwhile, and a load then a store could put back a value it had replaced. An
/// atomic add of zero would do, but the compiler may turn an idempotent one into a load.
fn store_own_value(address: u64) {
    #[cfg(target_arch = "x86_64")]
    // Safety: a byte of the buffer the program hands the kernel to write, so writable by the program; the value
    // stays what it was.
    unsafe {
        std::arch::asm!("lock or byte ptr [{0}], 0", in(reg) address, options(nostack));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address; // the host watch guards nothing elsewhere
}

/// Makes a call with `call` and, while it fails on a fault and `touch` finds its buffer guarded again (and
/// lifts the guard), again, at most `TRIES_AGAIN` more times.
fn made_again_while_guarded<R: FailedOnAFault>(mut call: impl FnMut() -> R, touch: impl Fn() -> bool) -> R {
    let mut result = call();
    for _ in 0..TRIES_AGAIN {
        if !result.failed_on_a_fault() || !touch() {
            break;
        }
        result = call();
    }
    result
}

/// Touches each buffer of an iovec array (readv, writev), as many as the call may take; whether any was guarded.
fn touch_vector(vector: *const iovec, count: c_int, access: KernelAccess) -> bool {
    const MOST: usize = 1024; // IOV_MAX: a longer array is refused by the kernel
    if vector.is_null() || count <= 0 {
        return false;
    }
    // Safety: the program's own array of `count` entries, which it hands to the kernel.
    let buffers = unsafe { std::slice::from_raw_parts(vector, (count as usize).min(MOST)) };
    buffers.iter().fold(false, |touched, buffer| touch(buffer.iov_base, buffer.iov_len, access) | touched)
}

/// Exports each function in front of the C library's: it runs its touch (the expression after `first`), then
/// passes the call on to the C library's function of the same name (again, after another touch, while it fails
/// on a guarded page), or fails it (the value after `failing`, errno ENOSYS) where the C library has none. The
/// C library's functions are `real::NAME`.
macro_rules! stand_in_front {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty, first $touch:expr, failing $failed:expr;)*) => {
        mod real {
            use super::*;
            crate::next_symbol::real_functions! { $($name: fn($($ty),*) -> $ret;)* }
        }
        $(
            #[doc = concat!("`", stringify!($name), "`, in front of the C library's.")]
            #[no_mangle]
            pub extern "C-unwind" fn $name($($arg: $ty),*) -> $ret {
                $touch;
                let Some(real) = real::$name() else {
                    // Safety: the calling thread's errno.
                    unsafe { *libc::__errno_location() = libc::ENOSYS };
                    return $failed;
                };
                // Safety: the C library's function of this name, given the program's own arguments.
                made_again_while_guarded(|| unsafe { real($($arg),*) }, || $touch)
            }
        )*
    };
}

type Buffer = *mut c_void;
type Data = *const c_void;
type Offset = libc::off_t;
type Offset64 = libc::off64_t;
use KernelAccess::{Reads, Writes};

// Programs built with _FORTIFY_SOURCE (Ubuntu's compilers define it when optimizing) call the `__*_chk` forms of
// the calls that fill a buffer, with the buffer's size as the compiler knows it; fread and fwrite do their own
// reads and writes inside the C library, not through `read` and `write`.
stand_in_front! {
    read(fd: c_int, buffer: Buffer, len: size_t) -> ssize_t, first touch(buffer, len, Writes), failing -1;
    __read_chk(fd: c_int, buffer: Buffer, len: size_t, room: size_t) -> ssize_t,
        first touch(buffer, len, Writes), failing -1;
    pread(fd: c_int, buffer: Buffer, len: size_t, at: Offset) -> ssize_t, first touch(buffer, len, Writes), failing -1;
    __pread_chk(fd: c_int, buffer: Buffer, len: size_t, at: Offset, room: size_t) -> ssize_t,
        first touch(buffer, len, Writes), failing -1;
    pread64(fd: c_int, buffer: Buffer, len: size_t, at: Offset64) -> ssize_t,
        first touch(buffer, len, Writes), failing -1;
    __pread64_chk(fd: c_int, buffer: Buffer, len: size_t, at: Offset64, room: size_t) -> ssize_t,
        first touch(buffer, len, Writes), failing -1;
    readv(fd: c_int, vector: *const iovec, count: c_int) -> ssize_t,
        first touch_vector(vector, count, Writes), failing -1;
    recv(fd: c_int, buffer: Buffer, len: size_t, flags: c_int) -> ssize_t,
        first touch(buffer, len, Writes), failing -1;
    __recv_chk(fd: c_int, buffer: Buffer, len: size_t, room: size_t, flags: c_int) -> ssize_t,
        first touch(buffer, len, Writes), failing -1;
    recvfrom(fd: c_int, buffer: Buffer, len: size_t, flags: c_int, from: *mut sockaddr, from_len: *mut socklen_t)
        -> ssize_t, first touch(buffer, len, Writes), failing -1;
    __recvfrom_chk(fd: c_int, buffer: Buffer, len: size_t, room: size_t, flags: c_int, from: *mut sockaddr,
        from_len: *mut socklen_t) -> ssize_t, first touch(buffer, len, Writes), failing -1;
    fread(buffer: Buffer, size: size_t, count: size_t, stream: *mut FILE) -> size_t,
        first touch(buffer, size.saturating_mul(count), Writes), failing 0;
    __fread_chk(buffer: Buffer, room: size_t, size: size_t, count: size_t, stream: *mut FILE) -> size_t,
        first touch(buffer, size.saturating_mul(count), Writes), failing 0;
    fread_unlocked(buffer: Buffer, size: size_t, count: size_t, stream: *mut FILE) -> size_t,
        first touch(buffer, size.saturating_mul(count), Writes), failing 0;
    __fread_unlocked_chk(buffer: Buffer, room: size_t, size: size_t, count: size_t, stream: *mut FILE) -> size_t,
        first touch(buffer, size.saturating_mul(count), Writes), failing 0;
    write(fd: c_int, buffer: Data, len: size_t) -> ssize_t, first touch(buffer, len, Reads), failing -1;
    pwrite(fd: c_int, buffer: Data, len: size_t, at: Offset) -> ssize_t, first touch(buffer, len, Reads), failing -1;
    pwrite64(fd: c_int, buffer: Data, len: size_t, at: Offset64) -> ssize_t,
        first touch(buffer, len, Reads), failing -1;
    writev(fd: c_int, vector: *const iovec, count: c_int) -> ssize_t,
        first touch_vector(vector, count, Reads), failing -1;
    send(fd: c_int, buffer: Data, len: size_t, flags: c_int) -> ssize_t, first touch(buffer, len, Reads), failing -1;
    sendto(fd: c_int, buffer: Data, len: size_t, flags: c_int, to: *const sockaddr, to_len: socklen_t) -> ssize_t,
        first touch(buffer, len, Reads), failing -1;
    fwrite(buffer: Data, size: size_t, count: size_t, stream: *mut FILE) -> size_t,
        first touch(buffer, size.saturating_mul(count), Reads), failing 0;
    fwrite_unlocked(buffer: Data, size: size_t, count: size_t, stream: *mut FILE) -> size_t,
        first touch(buffer, size.saturating_mul(count), Reads), failing 0;
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::super::fault_records::take;
    use super::super::{guards, signals};
    use crate::live_capture_tests::{capture_on, trace_lines_of, with_state};
    use crate::origin::thread_id;

    const PAGE: usize = 4096;

    /// The capture and the guard faults' handler on, and a fresh page holding `fill`.
    fn capture_and_a_page(fill: u8) -> u64 {
        capture_on();
        signals::install().expect("the handler installs");
        // Safety: a fresh anonymous page, written before any guard.
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                guards::UNGUARDED,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(page, libc::MAP_FAILED);
            std::ptr::write_bytes(page.cast::<u8>(), fill, PAGE);
            page as u64
        }
    }

    fn open(path: &std::ffi::CStr, flags: i32) -> i32 {
        // Safety: a NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), flags) };
        assert!(fd >= 0, "{path:?}");
        fd
    }

    /// Runs `io` on a thread of its own while `[page, page + PAGE)` is guarded with `prot`; the host accesses it
    /// recorded, and what `io` returned.
    fn guarded_io(page: u64, prot: i32, io: fn(u64) -> isize) -> (Vec<serde_json::Value>, isize) {
        let slot = guards::arm(page, page + PAGE as u64, prot).expect("armed");
        let (tid, returned) = std::thread::spawn(move || (thread_id(), io(page))).join().expect("the thread");
        let lifted = guards::lifted(slot);
        with_state(|state, _| take(state));
        guards::lift(slot);
        assert!(lifted, "the call's touch faulted and lifted the guard");
        let accesses = trace_lines_of(&[tid]).into_iter().filter(|v| v["type"] == "host_access").collect();
        (accesses, returned)
    }

    #[test]
    fn a_write_of_a_buffer_a_copy_is_filling_is_seen_and_succeeds() {
        let page = capture_and_a_page(7);
        // A D2H copy's destination: guarded against reads and writes. The kernel reading it would fail the call
        // with EFAULT; the touch makes it the host's read, and the call writes every byte.
        let (accesses, written) = guarded_io(page, libc::PROT_NONE, |page| {
            let fd = open(c"/dev/null", libc::O_WRONLY);
            // Safety: the test's page, PAGE bytes.
            let written = unsafe { libc::write(fd, page as *const libc::c_void, PAGE) };
            // Safety: the descriptor opened above.
            unsafe { libc::close(fd) };
            written
        });
        assert_eq!(written, PAGE as isize, "errno {}", std::io::Error::last_os_error());
        assert_eq!(accesses.len(), 1, "{accesses:?}");
        assert_eq!(accesses[0]["reads"], serde_json::json!([[format!("{page:#x}"), 1]]));
    }

    #[test]
    fn a_read_into_a_buffer_a_copy_is_reading_is_seen_as_a_write_and_succeeds() {
        let page = capture_and_a_page(7);
        // An H2D copy's source: guarded against writes only. A read from a file into it is the host's write.
        let (accesses, read) = guarded_io(page, libc::PROT_READ, |page| {
            let fd = open(c"/dev/zero", libc::O_RDONLY);
            // Safety: the test's page, PAGE bytes.
            let read = unsafe { libc::read(fd, page as *mut libc::c_void, PAGE) };
            // Safety: the descriptor opened above.
            unsafe { libc::close(fd) };
            read
        });
        assert_eq!(read, PAGE as isize, "errno {}", std::io::Error::last_os_error());
        assert_eq!(accesses.len(), 1, "{accesses:?}");
        assert_eq!(accesses[0]["writes"], serde_json::json!([[format!("{page:#x}"), 1]]));
        // Safety: the test's page, unguarded again: the read from /dev/zero filled it.
        assert_eq!(unsafe { *(page as *const u8) }, 0);
    }

    #[test]
    fn a_system_call_that_met_a_guard_armed_after_its_touch_is_made_again_and_a_true_fault_is_not() {
        use super::{made_again_while_guarded, TRIES_AGAIN};
        let fail_on_a_fault = || {
            // Safety: the calling thread's errno.
            unsafe { *libc::__errno_location() = libc::EFAULT };
            -1isize
        };
        // Failed once on a range guarded meanwhile, which the touch lifts: made again, and it succeeds.
        let calls = std::cell::Cell::new(0);
        let call = || {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                fail_on_a_fault()
            } else {
                64
            }
        };
        assert_eq!(made_again_while_guarded(call, || true), 64);
        assert_eq!(calls.get(), 2);
        // A buffer nothing guards: the fault is the program's own, and its call is made once.
        calls.set(0);
        let always = || {
            calls.set(calls.get() + 1);
            fail_on_a_fault()
        };
        assert_eq!(made_again_while_guarded(always, || false), -1);
        assert_eq!(calls.get(), 1);
        // Guarded again every time: given up after a few tries.
        calls.set(0);
        assert_eq!(made_again_while_guarded(always, || true), -1);
        assert_eq!(calls.get(), 1 + TRIES_AGAIN);
        // The C library's buffered calls are not made again.
        calls.set(0);
        let fread_like = || {
            calls.set(calls.get() + 1);
            fail_on_a_fault();
            0usize
        };
        assert_eq!(made_again_while_guarded(fread_like, || true), 0);
        assert_eq!(calls.get(), 1);
        // The real write, on a page made unreadable behind the guard table's back: a true fault, once.
        let page = capture_and_a_page(1);
        // Safety: the test's own page.
        assert_eq!(unsafe { libc::mprotect(page as *mut libc::c_void, PAGE, libc::PROT_NONE) }, 0);
        // A pipe, whose write copies the buffer (/dev/null's reads nothing).
        let mut ends = [0; 2];
        // Safety: a pipe's two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
        // Safety: the test's page, PAGE bytes; the pipe's write end.
        let written = unsafe { libc::write(ends[1], page as *const libc::c_void, PAGE) };
        assert_eq!((written, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::EFAULT)));
        // Safety: the descriptors made above.
        unsafe {
            libc::close(ends[0]);
            libc::close(ends[1]);
        }
    }

    #[test]
    fn a_write_of_a_buffer_a_copy_only_reads_touches_nothing() {
        let page = capture_and_a_page(7);
        // Both only read an H2D copy's source: no fault, no access, the guard stays.
        let slot = guards::arm(page, page + PAGE as u64, libc::PROT_READ).expect("armed");
        let fd = open(c"/dev/null", libc::O_WRONLY);
        // Safety: the test's page, PAGE bytes; the descriptor opened above.
        let written = unsafe { libc::write(fd, page as *const libc::c_void, PAGE) };
        // Safety: the descriptor opened above.
        unsafe { libc::close(fd) };
        assert_eq!(written, PAGE as isize);
        assert!(!guards::lifted(slot), "a read of a write-guarded page does not fault");
        guards::lift(slot);
    }
}
