//! rule 10: how the host threads of a process are ordered among themselves. Host-side synchronization between
//! threads (a join, a lock, a queue) is invisible to CUDA tracing; what the engine assumes in its place is
//! decided here, and nothing else: each thread's own host clock, and in the default (global) order the clock the
//! threads of a process share.
//!
//! Every thread has its own host clock, which its host synchronizations and successful queries join and from
//! which its enqueues inherit (DESIGN.md, host synchronization and enqueue). In the global order, calls of different threads are taken in
//! their timestamp order through the process's shared clock, with one exception: a thread that has issued no
//! work yet (no launch, copy, set, event record or wait, host access or free) passes nothing it observes on.
//!
//! - A call that issues work first takes in the shared clock (it comes after every earlier call that published
//!   there), and once it is made publishes its thread's clock: the thread is a worker from then on.
//! - A worker's host synchronization or successful query publishes what it learned at once, so that a thread
//!   that synchronizes and then hands a buffer over through a host queue orders the receiver's later work.
//! - A thread that has only polled (PyTorch's NCCL watchdog calls `cudaEventQuery` in a loop) keeps what it
//!   learned to itself: its observations depend on when it happened to ask, and letting them order other
//!   threads' later work would make a race's report depend on the run's timing. Should it issue work later,
//!   its clock is published from that call on, like any worker's.
//!
//! In the per-thread order the shared clock does not exist: only CUDA synchronization orders threads, and the
//! host synchronization between threads that the trace records (`host_release`, `host_acquire`: the capture's
//! interposers see thread create and join, mutexes, condition variables, semaphores, and in Python the GIL's
//! hand-offs), as ThreadSanitizer orders threads: a release joins what the thread knows into the object's clock,
//! an acquire joins the object's clock into the thread's. Those edges are facts, so they apply in both orders.
//! The per-thread order is exact where the trace records them all (its header says so), and the default there.
//! docs/host-order.md says the same for users.

use super::state::{pair_mut, Engine, HostOrder, ThreadOrder};
use crate::model::{FreeKind, OpKind, Operation, ProcessId, ThreadId};

/// What a call does in the order among host threads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum HostRole {
    /// It issues work (enqueues on a stream, or the host itself touches memory the GPU touches): it comes after
    /// what other threads published, and publishes its thread's knowledge.
    Issues,
    /// It observes completed work (a host synchronization, a query): its thread learns; a worker publishes it.
    Observes,
    /// Neither (an allocation, a caching-allocator block handed out or taken back).
    Neither,
}

/// The role of an operation in the order among host threads.
pub(super) fn host_role(kind: &OpKind) -> HostRole {
    match kind {
        OpKind::HostSync(_) | OpKind::Query { .. } => HostRole::Observes,
        OpKind::Alloc { stream: None, .. } | OpKind::Free { free_kind: FreeKind::PoolBlock, .. } => HostRole::Neither,
        OpKind::Alloc { .. } => HostRole::Issues,
        OpKind::Free { .. } => HostRole::Issues,
        // A host function's access is the driver's thread's, inside the function's step: no host thread's call.
        OpKind::HostFuncAccess { .. } => HostRole::Neither,
        _ if kind.stream().is_some() => HostRole::Issues,
        OpKind::HostAccess { .. } => HostRole::Issues,
        _ => HostRole::Neither,
    }
}

impl Engine {
    /// A new thread's own host clock (an index into the host clocks); in the global order, the process's shared
    /// clock is made with its first thread.
    pub(super) fn host_clock_for_thread(&mut self, process: ProcessId) -> usize {
        if self.host_order() == HostOrder::Global && self.process_mut(process).shared_host_clock.is_none() {
            self.host_clocks.push(Default::default());
            let shared = self.host_clocks.len() - 1;
            self.process_mut(process).shared_host_clock = Some(shared);
        }
        self.host_clocks.push(Default::default());
        self.host_clocks.len() - 1
    }

    /// Before a call of `thread` that has `role`: a call that issues work comes after everything published in the
    /// process so far.
    pub(super) fn before_host_call(&mut self, thread: ThreadId, process: ProcessId, role: HostRole) {
        if role != HostRole::Issues {
            return;
        }
        let Some(shared) = self.shared_clock_of(process) else { return };
        let (own, order) = self.thread_order(thread);
        let version = self.host_clocks[shared].version;
        if order.shared_seen == Some(version) {
            return;
        }
        let (mine, theirs) = pair_mut(&mut self.host_clocks, own, shared);
        mine.join(&theirs.clock);
        self.threads[thread.index()].order.shared_seen = Some(version);
    }

    /// After a call of `thread` that has `role`: a worker publishes what its thread knows (an observing call of a
    /// thread that has issued nothing is kept to itself).
    pub(super) fn after_host_call(&mut self, thread: ThreadId, process: ProcessId, role: HostRole) {
        let Some(shared) = self.shared_clock_of(process) else { return };
        let (own, order) = self.thread_order(thread);
        match role {
            HostRole::Neither => return,
            HostRole::Observes if !order.worker => {
                self.stats.unshared_observations += 1;
                return;
            }
            _ => {}
        }
        let version = self.host_clocks[own].version;
        let state = &mut self.threads[thread.index()].order;
        state.worker = true;
        if state.published == Some(version) {
            return;
        }
        state.published = Some(version);
        let (mine, theirs) = pair_mut(&mut self.host_clocks, own, shared);
        theirs.join(&mine.clock);
    }

    /// A host release: the object's clock takes in what the thread knows.
    pub(super) fn host_release(&mut self, op: &Operation, object: u64) {
        let own = self.threads[op.thread.index()].host_clock;
        self.process_mut(op.process);
        let Engine { processes, host_clocks, stats, .. } = self;
        processes[op.process.index()].host_objects.entry(object).or_default().join(&host_clocks[own].clock);
        stats.host_releases += 1;
    }

    /// A host acquire: the thread takes in what was released into the object (nothing, before any release).
    pub(super) fn host_acquire(&mut self, op: &Operation, object: u64) {
        let own = self.threads[op.thread.index()].host_clock;
        self.process_mut(op.process);
        let Engine { processes, host_clocks, stats, .. } = self;
        match processes[op.process.index()].host_objects.get(&object) {
            Some(released) => {
                host_clocks[own].join(released);
                stats.host_acquires += 1;
            }
            None => stats.host_acquires_of_nothing += 1,
        }
    }

    fn shared_clock_of(&self, process: ProcessId) -> Option<usize> {
        self.processes.get(process.index()).and_then(|p| p.shared_host_clock)
    }

    fn thread_order(&self, thread: ThreadId) -> (usize, ThreadOrder) {
        let state = &self.threads[thread.index()];
        (state.host_clock, state.order)
    }
}
