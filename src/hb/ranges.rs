//! Capture ranges (`streamtrace capture --capture-range`, `--delay`, `--duration`): a trace recorded in ranges
//! holds the program's work only inside them, and outside them only the state a range needs (streams, events,
//! allocations, graphs: docs/capture.md). What ordered the work between two ranges (a synchronization, a wait)
//! is not in the trace, so at a range's start everything the process ran before it is taken as ordered before
//! everything in it: every host thread of the process observes every stream of it, as after a
//! `cudaDeviceSynchronize` on each thread, though no edge is counted (none was seen). Work issued before the
//! range that still ran in it is thereby not checked against the range's: the capture did not see it.
//! A range's end hands its findings over as its report's section ([`Engine::finish_range`]).
//!
//! Touches the process's host clocks and the collector; reads the stream clocks.

use super::clock::VectorClock;
use super::state::Engine;
use crate::findings::Findings;
use crate::model::ProcessId;

impl Engine {
    /// A capture range of `process` begins: what ran before it happens before what runs in it.
    pub(super) fn range_begins(&mut self, process: ProcessId) {
        let Some(state) = self.processes.get(process.index()) else { return };
        let mut before = VectorClock::default();
        for &stream in &state.scope.awake {
            before.join(&self.streams[stream.index()].clock.clock);
        }
        // And what each thread knew, its own host accesses among it.
        let shared = state.shared_host_clock;
        let hosts: Vec<usize> =
            self.threads.iter().filter(|t| t.process == process).map(|t| t.host_clock).chain(shared).collect();
        for &host in &hosts {
            before.join(&self.host_clocks[host].clock);
        }
        for host in hosts {
            self.host_clocks[host].join(&before);
        }
    }

    /// The findings made since the last range ended (or since the start), handed over when a range ends: the
    /// section of that range's report. The counts that sections do not share start again from zero.
    pub fn finish_range(&mut self) -> Findings {
        self.drain_checker();
        self.fold_unordered_pairs();
        self.restart_unordered_pairs();
        self.set_aside_harmless_waits();
        let (sites, natives, renumber) = self.sites.tables();
        let streams = &self.streams;
        let mut collector = std::mem::take(&mut self.collector);
        collector.renumber_sites(|id| renumber[id.index()].expect("a site a finding names is kept"));
        collector.into_findings(sites, natives, |id| streams[id.index()].info.handle)
    }
}
