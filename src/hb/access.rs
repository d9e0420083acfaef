//! Memory operations and the access check (as TSan's `tsan_rtl_access.cpp`): which ranges a kernel launch, a copy,
//! a set, an allocation or a free touches, kernel pointer arguments resolved to the allocations they fall in
//! (tier T1), and each access checked against the shadow memory of its process. It decides, never prints.
//!
//! It touches each process's shadow memory and allocation table and the access counters. It orders nothing
//! itself: the stream step (`tick`) and the device synchronization of a `cudaFree` are applied in `sync_rules`;
//! conflicts go to `race_report`.

use super::clock::Epoch;
use super::engine::{Engine, EngineError};
use super::race_report::{action_of, Known, Later};
use super::shadow::{Effect, Stamp};
use super::sites::SiteId;
use super::sync_rules::{host_wait, HostWait};
use crate::findings::AccessAction;
use crate::model::{
    Access, AccessMode, AccessRange, AllocId, AllocKind, Allocation, FreeKind, Operation, PointerArg, ProcessId,
    StreamId,
};

impl Engine {
    /// A kernel launch accesses what its tier gives: exact ranges (tier T2, hand-written traces) and the blocks
    /// its pointer arguments fall in (tier T1).
    pub(super) fn kernel_launch(
        &mut self,
        op: &Operation,
        stream: StreamId,
        name: &str,
        accesses: &[Access],
        pointers: &[PointerArg],
    ) {
        let site = self.site("kernel", name, Some(stream), op);
        let epoch = self.tick(stream, site, op, !accesses.is_empty() || !pointers.is_empty());
        // Pointer arguments (tier T1) become block accesses in a scratch list; exact accesses are used as they
        // are, without a copy per launch.
        let resolved = if pointers.is_empty() {
            None
        } else {
            self.stats.kernels_with_pointers += 1;
            let mut all = std::mem::take(&mut self.pointer_scratch);
            all.clear();
            all.extend_from_slice(accesses);
            self.resolve_pointers(op.process, pointers, &mut all);
            Some(all)
        };
        for access in effective_accesses(resolved.as_deref().unwrap_or(accesses)) {
            self.access(op, epoch, site, access, Effect::Access);
        }
        if let Some(all) = resolved {
            self.pointer_scratch = all;
        }
    }

    /// Tier T1: a pointer argument that falls in a live allocation accesses that whole block. Words that point
    /// nowhere (sizes, flags, host pointers, freed memory) are ignored and counted.
    pub(super) fn resolve_pointers(&mut self, process: ProcessId, pointers: &[PointerArg], out: &mut Vec<Access>) {
        let Some(state) = self.processes.get(process.index()) else { return };
        for pointer in pointers {
            match state.allocations.live_block_at(pointer.address) {
                Some(range) => {
                    if !out.iter().any(|a| a.range == range && a.mode == pointer.mode) {
                        out.push(Access::plain(range, pointer.mode));
                    }
                }
                None => self.stats.unresolved_pointers += 1,
            }
        }
    }

    /// rule 11: a copy reads its source range and writes its destination range; a set (no source) writes its
    /// range. Kernels access what their tier gives ([`Engine::kernel_launch`]).
    pub(super) fn copy_or_set(
        &mut self,
        op: &Operation,
        stream: StreamId,
        site: SiteId,
        src: Option<AccessRange>,
        dst: Option<AccessRange>,
    ) {
        let epoch = self.tick(stream, site, op, src.is_some() || dst.is_some());
        if let Some(range) = src {
            self.access(op, epoch, site, &Access::plain(range, AccessMode::Read), Effect::Access);
        }
        if let Some(range) = dst {
            self.access(op, epoch, site, &Access::plain(range, AccessMode::Write), Effect::Access);
        }
    }

    /// A copy or set, with what its call makes the host wait for: its stream's earlier work (joined before the
    /// copy's own step) or its own work (after).
    pub(super) fn copy_or_set_waited(
        &mut self,
        op: &Operation,
        host: usize,
        stream: StreamId,
        site: SiteId,
        src: Option<AccessRange>,
        dst: Option<AccessRange>,
    ) {
        let wait = host_wait(&op.kind);
        if wait == HostWait::EarlierWork {
            self.host_waited(host, wait, Some(stream), op.process, op.seq);
        }
        self.copy_or_set(op, stream, site, src, dst);
        if wait == HostWait::OwnWork {
            self.host_waited(host, wait, Some(stream), op.process, op.seq);
        }
    }

    /// rule 12: the host is an accessor too. Its own reads and writes of memory the GPU also touches happen at
    /// the host thread's clock: its lane (enqueued like a stream, so it runs after everything the host had
    /// observed complete) takes a step, the accesses are checked like a stream's, and the host thread then knows
    /// its own accesses, so that the work it issues afterwards is ordered after them.
    pub(super) fn host_access(&mut self, op: &Operation, host: usize, lane: StreamId, name: &str, accesses: &[Access]) {
        let site = self.site("host", name, Some(lane), op);
        let epoch = self.tick(lane, site, op, !accesses.is_empty());
        for access in effective_accesses(accesses) {
            self.access(op, epoch, site, access, Effect::Access);
        }
        self.host_knows_its_lane(host, lane);
    }

    /// A block comes to be: filed in its process's allocations, then what its kind does to memory. `label` is
    /// the trace's name for it, which names a stream-ordered allocation's site.
    pub(super) fn alloc(
        &mut self,
        op: &Operation,
        allocation: Allocation,
        stream: Option<StreamId>,
        label: Option<&str>,
    ) {
        let (range, kind) = (allocation.range, allocation.kind);
        self.process_mut(op.process).allocations.insert(allocation, op.seq);
        let live = self.processes[op.process.index()].allocations.live();
        self.stats.peak_live_allocations = self.stats.peak_live_allocations.max(live);
        match (kind, stream) {
            // A pool block only names memory: the accesses made there before stay in the shadow, so that a block
            // handed out again while another stream still uses it is seen (CSAN forgets them).
            (AllocKind::PoolBlock, _) => {}
            (AllocKind::StreamOrdered, Some(stream)) => {
                let name = label.unwrap_or("cudaMallocAsync");
                self.stream_ordered_block_write(op, stream, "alloc", name, range, Effect::Alloc);
            }
            _ => self.processes[op.process.index()].shadow.forget(range),
        }
    }

    /// A block ends. A stream-ordered free is an access on its stream; any other free happens on the host, at
    /// the host thread's clock, after the device synchronization a `cudaFree` implies.
    pub(super) fn free(
        &mut self,
        op: &Operation,
        host: usize,
        alloc: AllocId,
        kind: FreeKind,
        stream: Option<StreamId>,
    ) -> Result<(), EngineError> {
        let process = op.process;
        let Some(range) = self.process_mut(process).allocations.get(alloc).map(|a| a.range) else {
            return Err(EngineError { origin: op.origin, message: format!("free of unknown allocation {}", alloc.0) });
        };
        match (kind, stream) {
            (FreeKind::PoolBlock, _) => {
                // Given back to the framework's pool: nothing happens on the device.
                self.processes[process.index()].allocations.free(alloc, true, op.source.as_ref());
            }
            (FreeKind::StreamOrdered, Some(stream)) => {
                self.stream_ordered_block_write(op, stream, "free", "cudaFreeAsync", range, Effect::Free);
                self.processes[process.index()].allocations.free(alloc, true, None);
            }
            _ => {
                self.host_waited(host, host_wait(&op.kind), None, process, op.seq);
                let name = match kind {
                    FreeKind::VirtualUnmap => "cuMemUnmap",
                    FreeKind::Host => "cudaFreeHost",
                    _ => "cudaFree",
                };
                let site = self.site("free", name, None, op);
                let Engine { processes, host_clocks, conflicts, .. } = self;
                conflicts.clear();
                processes[process.index()].shadow.release(range, &host_clocks[host].clock, conflicts);
                let later = Later {
                    site,
                    seq: op.seq,
                    origin: op.origin,
                    position: None,
                    action: AccessAction::Free,
                    view: None,
                };
                self.report(process, &later, Known::Host(host));
                self.processes[process.index()].allocations.free(alloc, false, None);
            }
        }
        Ok(())
    }

    /// rule 8: a stream-ordered allocation or free writes the whole block at its place in the stream, so an
    /// access unordered with the free is a use-after-free.
    fn stream_ordered_block_write(
        &mut self,
        op: &Operation,
        stream: StreamId,
        class: &'static str,
        name: &str,
        range: AccessRange,
        effect: Effect,
    ) {
        let site = self.site(class, name, Some(stream), op);
        let epoch = self.tick(stream, site, op, true);
        self.access(op, epoch, site, &Access::plain(range, AccessMode::Write), effect);
    }

    /// The race check: one access of `op`, at `epoch`, against the shadow of its process.
    pub(super) fn access(&mut self, op: &Operation, epoch: Epoch, site: SiteId, access: &Access, effect: Effect) {
        self.stats.accesses += 1;
        let stamp = Stamp { epoch, seq: op.seq, origin: op.origin, site, mode: access.mode, effect };
        let process = op.process;
        let Engine { processes, streams, conflicts, .. } = self;
        conflicts.clear();
        let clock = &streams[epoch.stream.index()].clock.clock;
        let shadow = &mut processes[process.index()].shadow;
        match &access.view {
            None => shadow.access(access.range, stamp, clock, conflicts),
            Some(view) => shadow.access_view(access.range.start, view, stamp, clock, conflicts),
        }
        if conflicts.is_empty() {
            return;
        }
        let action = action_of(effect, access.mode);
        let view = access.view.clone();
        let later = Later { site, seq: op.seq, origin: op.origin, position: Some(epoch.tick), action, view };
        self.report(process, &later, Known::Stream(epoch.stream));
    }
}

/// The accesses of one operation that can race: a read inside a range the same operation writes adds nothing
/// (the write conflicts with everything the read would), and would report one bug twice.
pub(super) fn effective_accesses(accesses: &[Access]) -> impl Iterator<Item = &Access> {
    accesses.iter().zip(can_race(accesses)).filter_map(|(access, races)| races.then_some(access))
}

/// For each access, in order, whether it can race (what [`effective_accesses`] keeps).
pub(super) fn can_race(accesses: &[Access]) -> impl Iterator<Item = bool> + '_ {
    let writes = Writes::of(accesses);
    accesses.iter().map(move |a| a.mode == AccessMode::Write || !writes.cover(a))
}

/// Whether the write `w` covers every byte the read `a` touches: a plain write covers its whole range, a strided
/// one only its own pattern (the same view read again).
fn covers(w: &Access, a: &Access) -> bool {
    w.mode == AccessMode::Write
        && w.range.contains(a.range)
        && (w.view.is_none() || (a.view.is_some() && a.view == w.view && a.range.start == w.range.start))
}

/// Accesses up to which comparing every read with every write is cheaper than sorting the writes.
const SCAN_AT_MOST: usize = 16;

/// The write ranges of one operation, asked whether one of them contains a range. A kernel may carry 100,000
/// ranges (a gather over a tensor's rows): comparing each read with each write would be quadratic.
enum Writes<'a> {
    /// Few accesses (a launch's usual two reads and a write): the list itself, scanned.
    Few(&'a [Access]),
    /// The plain writes' starts in order, and for each the furthest end among the writes starting there or
    /// before: a range is inside a plain write exactly when the writes starting at or before it reach its end.
    /// Strided writes (few) are asked one by one.
    Sorted { starts: Vec<u64>, reach: Vec<u64>, strided: Vec<&'a Access> },
}

impl<'a> Writes<'a> {
    fn of(accesses: &'a [Access]) -> Writes<'a> {
        if accesses.len() <= SCAN_AT_MOST {
            return Writes::Few(accesses);
        }
        let plain = |a: &&Access| a.mode == AccessMode::Write && a.view.is_none();
        let mut writes: Vec<(u64, u64)> =
            accesses.iter().filter(plain).map(|a| (a.range.start, a.range.end())).collect();
        let strided = accesses.iter().filter(|a| a.mode == AccessMode::Write && a.view.is_some()).collect();
        writes.sort_unstable();
        let mut furthest = 0;
        let reach = writes.iter().map(|&(_, end)| {
            furthest = furthest.max(end);
            furthest
        });
        let reach = reach.collect();
        Writes::Sorted { starts: writes.iter().map(|&(start, _)| start).collect(), reach, strided }
    }

    /// Whether one of the writes covers every byte the read `read` touches.
    fn cover(&self, read: &Access) -> bool {
        match self {
            Writes::Few(accesses) => accesses.iter().any(|w| covers(w, read)),
            Writes::Sorted { starts, reach, strided } => {
                let in_plain = match starts.partition_point(|&start| start <= read.range.start) {
                    0 => false,
                    before => reach[before - 1] >= read.range.end(),
                };
                in_plain || strided.iter().any(|w| covers(w, read))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(start: u64, len: u64, mode: AccessMode) -> Access {
        Access { range: AccessRange::new(start, len).unwrap(), mode, view: None }
    }

    /// The definition, read literally: a read is dropped when some write of the same operation contains it.
    fn by_definition(accesses: &[Access]) -> Vec<Access> {
        let inside_a_write = |a: &Access| accesses.iter().any(|w| covers(w, a));
        accesses.iter().filter(|a| a.mode == AccessMode::Write || !inside_a_write(a)).cloned().collect()
    }

    #[test]
    fn sorted_writes_drop_exactly_the_reads_inside_a_write() {
        // Small coordinates, so that containment, touching edges, empty ranges and nesting all occur.
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for len in [0, 1, 5, SCAN_AT_MOST, SCAN_AT_MOST + 1, 40, 300] {
            for _ in 0..50 {
                let accesses: Vec<Access> = (0..len)
                    .map(|_| {
                        let mode = if next(3) == 0 { AccessMode::Write } else { AccessMode::Read };
                        access(next(64), next(24), mode)
                    })
                    .collect();
                let kept: Vec<Access> = effective_accesses(&accesses).cloned().collect();
                assert_eq!(kept, by_definition(&accesses), "accesses {accesses:?}");
            }
        }
    }
}
