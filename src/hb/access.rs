//! Memory operations and the access check (as TSan's `tsan_rtl_access.cpp`): which ranges a kernel launch, a copy,
//! a set, an allocation or a free touches, kernel pointer arguments resolved to the allocations they fall in
//! (tier T1), and each access checked against the shadow memory of its process. It decides, never prints.
//!
//! It touches each process's shadow memory and allocation table and the access counters. It orders nothing
//! itself: the stream step (`tick`) and the device synchronization of a `cudaFree` are applied in `sync_rules`;
//! conflicts go to `race_report`.

use std::sync::Arc;

use streamtrace_format::host_func_object;

use super::clock::Epoch;
use super::racing_accesses::effective_accesses;
use super::shadow::{Effect, Stamp};
use super::sites::SiteId;
use super::state::{action_of, Engine, EngineError, Known, Later};
use crate::findings::{AccessAction, OpClass};
use crate::model::{
    Access, AccessMode, AccessRange, AllocId, AllocKind, Allocation, FreeKind, OpKind, Operation, PointerArg,
    ProcessId, StreamId,
};

impl Engine {
    /// A kernel launch accesses what its tier gives: exact ranges (tier T2, hand-written traces) and the blocks
    /// its pointer arguments fall in (tier T1).
    pub(super) fn kernel_launch(
        &mut self,
        op: &Operation,
        stream: StreamId,
        accesses: &[Access],
        pointers: &[PointerArg],
    ) {
        let site = self.hot_site(op);
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
            let blocks = &all[accesses.len()..];
            let known = self.whole_block_sites.get(&site);
            if blocks.iter().any(|block| !known.is_some_and(|k| k.holds(block.range))) {
                // A finding of the checks sent before names its extent by the marks of its moment.
                self.drain_checker();
                let marks = self.whole_block_sites.entry(site).or_default();
                blocks.iter().for_each(|block| marks.add(block.range));
            }
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

    /// rule 12: the host is an accessor too. Its own reads and writes of memory the GPU also touches happen at
    /// the host thread's clock: its lane (enqueued like a stream, so it runs after everything the host had
    /// observed complete) takes a step, the accesses are checked like a stream's, and the host thread then knows
    /// its own accesses, so that the work it issues afterwards is ordered after them.
    pub(super) fn host_access(
        &mut self,
        op: &Operation,
        host: usize,
        lane: StreamId,
        name: &Arc<str>,
        accesses: &[Access],
    ) {
        let site = self.site(OpClass::HostAccess, name, Some(lane), op);
        let epoch = self.tick(lane, site, op, !accesses.is_empty());
        for access in effective_accesses(accesses) {
            self.access(op, epoch, site, access, Effect::Access);
        }
        self.host_knows_its_lane(host, lane);
    }

    /// rule 13: a host function in a stream runs in stream order: its step comes after the stream's earlier
    /// work is complete, and the stream's later work waits for it (their steps come after). Its own loads and
    /// stores happen there, on a driver thread: at its step, checked like a stream's accesses, and not at the
    /// clock of the thread that enqueued it, which learns nothing from it. An access the capture learned from a
    /// fault inside it follows it in the trace and takes a step right after it, before anything else on the
    /// stream: part of the function's place.
    pub(super) fn host_func(&mut self, op: &Operation, stream: StreamId, name: &Arc<str>, accesses: &[Access]) {
        let class = match op.kind {
            OpKind::HostFuncAccess { .. } => OpClass::HostFuncAccess,
            _ => OpClass::HostFunc,
        };
        let site = self.site(class, name, Some(stream), op);
        let epoch = self.tick(stream, site, op, !accesses.is_empty());
        for access in effective_accesses(accesses) {
            self.access(op, epoch, site, access, Effect::Access);
        }
        // The driver's thread that runs it starts from this place of the stream: it acquires the function's
        // object when the function starts (a thread the function creates is then ordered after it).
        if let OpKind::HostFunc { id: Some(id), .. } = op.kind {
            let process = op.process;
            self.process_mut(process);
            let Engine { processes, streams, .. } = self;
            let place = streams[stream.index()].clock.clock.clone();
            processes[process.index()].host_objects.insert(host_func_object(id), place);
        }
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
        // Its native call site is numbered now, in operation order, rather than when a finding first names the
        // block: that moment comes later when the check runs on the checker's thread, and the numbers must not
        // depend on where the check ran.
        if let Some(native) = &allocation.native {
            self.sites.native(native);
        }
        if let Some(checker) = self.checker.as_mut() {
            checker.allocate(allocation.clone(), op.seq);
        }
        self.process_mut(op.process).allocations.insert(allocation, op.seq);
        let live = self.processes[op.process.index()].allocations.live();
        self.stats.peak_live_allocations = self.stats.peak_live_allocations.max(live);
        match (kind, stream) {
            // A pool block only names memory: the accesses made there before stay in the shadow, so that a block
            // handed out again while another stream still uses it is seen (CSAN forgets them).
            (AllocKind::PoolBlock, _) => {}
            (AllocKind::StreamOrdered, Some(stream)) => {
                let name = label.unwrap_or("cudaMallocAsync");
                self.stream_ordered_block_write(op, stream, OpClass::Alloc, name, range, Effect::Alloc);
            }
            _ => match self.checker.as_mut() {
                Some(checker) => checker.forget(op.process, range),
                None => self.processes[op.process.index()].shadow.forget(range),
            },
        }
    }

    /// A block ends. A stream-ordered free is an access on its stream; any other free happens on the host, at
    /// the host thread's clock, after the device synchronization a `cudaFree` implies (which the dispatch applies
    /// before).
    pub(super) fn free(
        &mut self,
        op: &Operation,
        host: usize,
        alloc: AllocId,
        kind: FreeKind,
        stream: Option<StreamId>,
    ) -> Result<(), EngineError> {
        let process = op.process;
        let Some(range) = self.process_mut(process).allocations.range_of(alloc) else {
            return Err(EngineError { origin: op.origin, message: format!("free of unknown allocation {}", alloc.0) });
        };
        match (kind, stream) {
            (FreeKind::PoolBlock, _) => {
                // Given back to the framework's pool: nothing happens on the device.
                self.processes[process.index()].allocations.free(alloc, true, op.source.as_ref());
                if let Some(checker) = self.checker.as_mut() {
                    checker.free(process, alloc, true, op.source.as_ref());
                }
            }
            (FreeKind::StreamOrdered, Some(stream)) => {
                self.stream_ordered_block_write(op, stream, OpClass::Free, "cudaFreeAsync", range, Effect::Free);
                self.processes[process.index()].allocations.free(alloc, true, None);
                if let Some(checker) = self.checker.as_mut() {
                    checker.free(process, alloc, true, None);
                }
            }
            _ => {
                let name = match kind {
                    FreeKind::VirtualUnmap => "cuMemUnmap",
                    FreeKind::Host => "cudaFreeHost",
                    _ => "cudaFree",
                };
                let site = self.site(OpClass::Free, name, None, op);
                let later = Later {
                    site,
                    seq: op.seq,
                    origin: op.origin,
                    position: None,
                    action: AccessAction::Free,
                    view: None,
                };
                match self.checker.as_mut() {
                    Some(checker) => {
                        checker.release(process, host, &self.host_clocks[host].clock, range, &later);
                        checker.free(process, alloc, false, None);
                    }
                    None => {
                        let Engine { processes, host_clocks, conflicts, .. } = self;
                        conflicts.clear();
                        processes[process.index()].shadow.release(range, &host_clocks[host].clock, conflicts);
                        self.report(process, &later, Known::Host(host));
                    }
                }
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
        class: OpClass,
        name: &str,
        range: AccessRange,
        effect: Effect,
    ) {
        let site = self.site(class, name, Some(stream), op);
        let epoch = self.tick(stream, site, op, true);
        self.access(op, epoch, site, &Access::plain(range, AccessMode::Write), effect);
    }

    /// The race check: one access of `op`, at `epoch`, against the shadow of its process. Inline in its callers'
    /// loops over a launch's accesses: the call's register saves and stamp copy were 1.9% of the engine thread's
    /// instructions (callgrind, 1 M synthetic operations).
    #[inline(always)]
    pub(super) fn access(&mut self, op: &Operation, epoch: Epoch, site: SiteId, access: &Access, effect: Effect) {
        self.stats.accesses += 1;
        let stamp = Stamp::new(epoch, op.seq, op.origin, site, access.mode, effect);
        let process = op.process;
        if let Some(checker) = self.checker.as_mut() {
            let clock = &self.streams[epoch.stream.index()].clock;
            checker.access(process, clock, access.range, access.view.clone(), stamp);
            if !checker.checked.is_empty() {
                self.report_checked();
            }
            return;
        }
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
