//! The progress line of a long load: rows read so far, on standard error, only when it is a terminal and the load
//! has taken more than two seconds.

use std::path::Path;

/// Rows read since the load began; `shown` once a line was printed (it then needs its end of line).
pub(super) struct Progress {
    started: std::time::Instant,
    rows: u64,
    next_check: u64,
    shown: bool,
}

impl Progress {
    pub(super) fn new() -> Progress {
        Progress { started: std::time::Instant::now(), rows: 0, next_check: 1 << 18, shown: false }
    }

    /// Counts `n` more rows, looking at the clock only every 2^18 rows.
    pub(super) fn rows(&mut self, n: u64, path: &Path) {
        use std::io::IsTerminal;
        self.rows += n;
        if self.rows < self.next_check {
            return;
        }
        self.next_check = self.rows + (1 << 18);
        if self.started.elapsed().as_secs() >= 2 && std::io::stderr().is_terminal() {
            eprint!(
                "\rstreamtrace: {}: {} rows read in {:.0} s",
                path.display(),
                self.rows,
                self.started.elapsed().as_secs_f64()
            );
            self.shown = true;
        }
    }

    pub(super) fn done(&self) {
        if self.shown {
            eprintln!();
        }
    }
}
