//! Whether one of the host watches runs, as a process-wide cell that callbacks and the signal handler read
//! without a lock. A cell nobody set reads `Off`: a watch runs only where its set-up said so (a Python
//! program, whose set-up returns early, must never find pinned pages guarded without a handler to lift them).

use std::sync::atomic::{AtomicU8, Ordering};

use streamtrace_format::WatchState;

pub struct WatchCell(AtomicU8);

// The encoding is written out, not taken from the enum's order: 0, the cell's start, must be Off.
const OFF: u8 = 0;
const ON: u8 = 1;
const UNSUPPORTED: u8 = 2;

impl WatchCell {
    pub const fn off() -> WatchCell {
        WatchCell(AtomicU8::new(OFF))
    }

    pub fn get(&self) -> WatchState {
        match self.0.load(Ordering::Relaxed) {
            ON => WatchState::On,
            UNSUPPORTED => WatchState::Unsupported,
            _ => WatchState::Off,
        }
    }

    pub fn set(&self, state: WatchState) {
        let value = match state {
            WatchState::On => ON,
            WatchState::Off => OFF,
            WatchState::Unsupported => UNSUPPORTED,
        };
        self.0.store(value, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_nobody_set_is_off_and_keeps_what_it_is_told() {
        let cell = WatchCell::off();
        assert_eq!(cell.get(), WatchState::Off);
        for state in WatchState::ALL {
            cell.set(*state);
            assert_eq!(cell.get(), *state);
        }
    }
}
