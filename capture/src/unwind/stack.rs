//! The calling thread's stack: where an unwind starts (its registers) and what it may read (from the current
//! stack pointer up to the stack's top, asked once per thread, or a copy of a stack taken earlier). Reads never
//! leave those bounds, so a wrong unwind rule yields wrong frames, never a fault in the program. Touches libc's
//! thread attributes only.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// This thread's stack, lowest address and top (exclusive); (0, 0) when the system could not say.
    static BOUNDS: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// The calling thread's stack, asked of the system the first time.
fn bounds() -> (u64, u64) {
    BOUNDS.with(|bounds| match bounds.get() {
        Some(known) => known,
        None => {
            let known = ask_bounds();
            bounds.set(Some(known));
            known
        }
    })
}

fn ask_bounds() -> (u64, u64) {
    // Safety: `attr` is filled by pthread_getattr_np before it is read and destroyed once; the out-pointers are
    // locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut low: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let known = libc::pthread_attr_getstack(&attr, &mut low, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if known {
            (low as u64, (low as u64).saturating_add(size as u64))
        } else {
            (0, 0)
        }
    }
}

/// The stack words a walk may read: the live part of the calling thread's stack (from the stack pointer where
/// the unwind started to the top; everything in it is mapped, the stack grows down from the top), or a copy of
/// a stack's words from a stack pointer up, taken where the walk could not run (a signal handler).
pub struct StackWords<'a> {
    low: u64,
    high: u64,
    /// Where the word at `low` is read from: `low` itself for the live stack, the copy's first byte otherwise.
    base: *const u8,
    copy: PhantomData<&'a [u8]>,
}

impl StackWords<'static> {
    /// The live stack above `sp`; None when `sp` is not on this thread's stack as the system knows it (an
    /// alternate signal stack, a coroutine's own stack), where no read would be known to be safe.
    pub fn above(sp: u64) -> Option<StackWords<'static>> {
        let (low, high) = bounds();
        (low != 0 && low <= sp && sp < high).then_some(StackWords {
            low: sp,
            high,
            base: sp as *const u8,
            copy: PhantomData,
        })
    }
}

impl<'a> StackWords<'a> {
    /// The words of a stack copied from `sp` up: `words[0]` held the byte at `sp`.
    pub fn copied(sp: u64, words: &'a [u8]) -> StackWords<'a> {
        let high = sp.saturating_add(words.len() as u64);
        StackWords { low: sp, high, base: words.as_ptr(), copy: PhantomData }
    }

    /// The word at `address`, if it lies in the stack.
    #[inline]
    pub fn read(&self, address: u64) -> Option<u64> {
        if address < self.low || address.checked_add(8)? > self.high {
            return None;
        }
        // Safety: [low, high) is this thread's mapped stack above the current stack pointer (`above`), read in
        // place, or the copy's `high - low` bytes starting at `base` (`copied`).
        Some(unsafe { self.base.add((address - self.low) as usize).cast::<u64>().read_unaligned() })
    }
}

/// Where a walk starts: a point in a function whose frame is still live when the walk runs (the CUPTI
/// callback's own frame, so that the capture's deeper frames are not walked at all), with the stack pointer
/// and frame pointer there.
#[derive(Copy, Clone, Debug)]
pub struct Start {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
}

impl Start {
    /// Here, in the calling function (inlined into it).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub fn here() -> Start {
        let (pc, sp, bp) = registers();
        Start { pc, sp, bp }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    pub fn here() -> Start {
        Start { pc: 0, sp: 0, bp: 0 }
    }
}

/// The registers an unwind starts from: where the caller is (pc), its stack pointer and frame pointer.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn registers() -> (u64, u64, u64) {
    let (pc, sp, bp): (u64, u64, u64);
    // Safety: reads three registers into outputs; touches no memory and no flags.
    unsafe {
        std::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    (pc, sp, bp)
}

/// This thread's stack bounds, for tests that copy it.
#[cfg(test)]
pub fn tests_bounds() -> (u64, u64) {
    bounds()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stay_inside_the_live_stack() {
        let local = 0x5eed_u64;
        let address = &local as *const u64 as u64;
        let stack = StackWords::above(address).expect("a test thread's stack is known");
        assert_eq!(stack.read(address), Some(0x5eed));
        assert_eq!(stack.read(address - 8), None, "below the stack pointer");
        let (low, high) = bounds();
        assert_eq!(stack.read(high - 4), None, "past the top");
        assert!(StackWords::above(0).is_none());
        assert!(StackWords::above(high).is_none());
        assert!(StackWords::above(low - 8).is_none(), "below the stack: another stack");
    }

    #[test]
    fn a_copied_stack_reads_its_copy_at_the_original_addresses() {
        let words: Vec<u8> = [7u64, 8, 9].iter().flat_map(|w| w.to_ne_bytes()).collect();
        let stack = StackWords::copied(0x1000, &words);
        assert_eq!(stack.read(0x1000), Some(7));
        assert_eq!(stack.read(0x1010), Some(9));
        assert_eq!(stack.read(0x1011), None, "past the copy");
        assert_eq!(stack.read(0xff8), None, "below it");
    }
}
