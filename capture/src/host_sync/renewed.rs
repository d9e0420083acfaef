//! A static that a forked child must not use as it inherited it: a lock a thread the child does not have may
//! hold, or a map halfway through a change. The child (one thread) moves to a new value and leaves the
//! inherited one as it is, leaked: nothing it holds is freed, so references taken from it stay valid. Touches
//! only the value it wraps.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

pub struct RenewedInChild<T: 'static> {
    first: T,
    /// The value since the last fork, or null: `first` still.
    renewed: AtomicPtr<T>,
}

impl<T> RenewedInChild<T> {
    pub const fn new(first: T) -> RenewedInChild<T> {
        RenewedInChild { first, renewed: AtomicPtr::new(null_mut()) }
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

    /// In the child of a fork, before anything else uses the value: `fresh` from now on.
    pub fn renew(&'static self, fresh: T) {
        self.renewed.store(Box::leak(Box::new(fresh)), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewed_value_replaces_the_first_and_the_first_stays_readable() {
        static VALUE: RenewedInChild<std::sync::Mutex<u32>> = RenewedInChild::new(std::sync::Mutex::new(1));
        let first = VALUE.get();
        let held = first.lock().unwrap();
        VALUE.renew(std::sync::Mutex::new(2));
        assert_eq!(*VALUE.get().try_lock().expect("the new lock is free"), 2);
        assert_eq!(*held, 1, "the inherited value is left as it was");
    }
}
