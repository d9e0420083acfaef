//! Byte ranges of device memory: what an access, an allocation or a copy covers. Plain values, no I/O; the model's
//! other files build on it and it depends on none of them.

use std::fmt;

use serde::Serialize;
use thiserror::Error;

/// A half-open byte range `[start, start + len)` of device memory in one process's address space.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct AccessRange {
    pub start: u64,
    pub len: u64,
}

/// Why a range could not be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RangeError {
    #[error("range starting at {start:#x} with {len} bytes runs past the end of the address space")]
    Overflow { start: u64, len: u64 },
}

impl AccessRange {
    /// A range, refusing one that runs past the end of the 64-bit address space (its end, `start + len`, is
    /// above 2^64). A range that ends exactly at 2^64 is taken without its last byte, the one at 2^64 - 1: ends
    /// are kept in 64 bits, and that byte is never device memory (the top of the address space is the kernel's).
    pub fn new(start: u64, len: u64) -> Result<AccessRange, RangeError> {
        match start.checked_add(len) {
            Some(_) => Ok(AccessRange { start, len }),
            None if start.wrapping_add(len) == 0 => Ok(AccessRange { start, len: len - 1 }),
            None => Err(RangeError::Overflow { start, len }),
        }
    }

    /// One past the last byte. Cannot overflow: [`AccessRange::new`] checked it.
    pub fn end(self) -> u64 {
        self.start + self.len
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The bytes both ranges cover, if any.
    pub fn intersection(self, other: AccessRange) -> Option<AccessRange> {
        let start = self.start.max(other.start);
        let end = self.end().min(other.end());
        (start < end).then(|| AccessRange { start, len: end - start })
    }

    pub fn contains(self, other: AccessRange) -> bool {
        other.start >= self.start && other.end() <= self.end()
    }
}

impl fmt::Display for AccessRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:#x}, {:#x})", self.start, self.end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_rejects_overflow() {
        assert!(AccessRange::new(u64::MAX, 2).is_err());
        assert!(AccessRange::new(1 << 63, 1 << 63 | 1).is_err());
        assert!(AccessRange::new(u64::MAX - 1, 1).is_ok());
    }

    #[test]
    fn a_range_ending_exactly_at_two_to_the_64_is_taken_without_its_last_byte() {
        assert_eq!(AccessRange::new(u64::MAX - 15, 16), Ok(AccessRange { start: u64::MAX - 15, len: 15 }));
        assert_eq!(AccessRange::new(1 << 63, 1 << 63).map(AccessRange::end), Ok(u64::MAX));
        assert_eq!(AccessRange::new(u64::MAX, 1).map(AccessRange::is_empty), Ok(true));
    }

    #[test]
    fn intersection_is_half_open() {
        let a = AccessRange::new(0, 10).unwrap();
        let b = AccessRange::new(10, 5).unwrap();
        assert_eq!(a.intersection(b), None);
        let c = AccessRange::new(8, 5).unwrap();
        assert_eq!(a.intersection(c), Some(AccessRange { start: 8, len: 2 }));
    }
}
