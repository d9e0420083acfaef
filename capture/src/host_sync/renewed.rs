//! A static that a forked child must not use as it inherited it: a lock a thread the child does not have may
//! hold, or a map halfway through a change. The child (one thread) moves to a spare made ahead and leaves the
//! inherited value as it is, leaked: nothing it holds is freed, so references taken from it stay valid. The
//! spare is made in normal operation, never in the child's fork handler: an allocator whose own child handler
//! runs after ours (jemalloc, tcmalloc) still holds its locks there. Touches only the value it wraps.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

pub struct RenewedInChild<T: 'static> {
    first: T,
    /// The value since the last fork, or null: `first` still.
    renewed: AtomicPtr<T>,
    /// What the next forked child moves to, or null: none made yet.
    spare: AtomicPtr<T>,
}

impl<T> RenewedInChild<T> {
    pub const fn new(first: T) -> RenewedInChild<T> {
        RenewedInChild { first, renewed: AtomicPtr::new(null_mut()), spare: AtomicPtr::new(null_mut()) }
    }

    pub fn get(&'static self) -> &'static T {
        let renewed = self.renewed.load(Ordering::Acquire);
        if renewed.is_null() {
            &self.first
        } else {
            // Safety: set only from a leaked box, never freed.
            unsafe { &*renewed }
        }
    }

    /// Makes the spare with `make` unless there is one: call it before the value's locks can be taken.
    pub fn keep_spare(&'static self, make: impl FnOnce() -> T) {
        if !self.spare.load(Ordering::Acquire).is_null() {
            return;
        }
        let made = Box::into_raw(Box::new(make()));
        if self.spare.compare_exchange(null_mut(), made, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // Safety: `made` was never shared: another thread's spare came first.
            drop(unsafe { Box::from_raw(made) });
        }
    }

    /// In the child of a fork, before anything else uses the value: the spare from now on, after `prepare`
    /// (without allocating); none when no spare was made (then no lock of the value was ever taken).
    pub fn renew(&'static self, prepare: impl FnOnce(&T)) {
        let spare = self.spare.swap(null_mut(), Ordering::AcqRel);
        if !spare.is_null() {
            // Safety: made by `keep_spare` from a box, owned by nobody else since the swap.
            prepare(unsafe { &*spare });
            self.renewed.store(spare, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewed_value_replaces_the_first_and_the_first_stays_readable() {
        static VALUE: RenewedInChild<std::sync::Mutex<u32>> = RenewedInChild::new(std::sync::Mutex::new(1));
        VALUE.renew(|_| panic!("no spare yet"));
        VALUE.keep_spare(|| std::sync::Mutex::new(2));
        VALUE.keep_spare(|| panic!("one spare is enough"));
        let first = VALUE.get();
        let held = first.lock().unwrap();
        VALUE.renew(|spare| *spare.lock().unwrap() += 1);
        assert_eq!(*VALUE.get().try_lock().expect("the new lock is free"), 3);
        assert_eq!(*held, 1, "the inherited value is left as it was");
    }
}
