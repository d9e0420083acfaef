//! Declared streams that have run nothing cost nothing per operation. PyTorch declares a pool of streams per
//! device and priority at start-up and uses a few, and long jobs create streams as they go: 100,000 declared
//! streams with 100 in use must cost what 100 cost.
//!
//! Until something is enqueued on it, a stream holds the clock it was created with: a snapshot of its creator's
//! host clock, shared by every stream created while that host clock stood still, which its first operation
//! starts from (its work comes after what its creator knew). A stream that ran nothing has no work to wait for:
//! a synchronization of every stream of a device, context or process (`cudaDeviceSynchronize`,
//! `cuCtxSynchronize`, `cudaFree`) visits only the streams that woke up, and teaches nothing of what the others
//! were created with (it would order the synchronizing thread after another thread's knowledge, which only host
//! synchronization between them does). The happens-before edge each idle stream would have counted at each such
//! synchronization is counted when it wakes, or at the end, from how many happened since it was created. Which
//! streams the legacy default stream's barrier visits (those that ran work since it last did) is kept in
//! `sync_rules`, next to the rule. The rules themselves are applied there; this file only keeps the books.

use std::sync::Arc;

use super::clock::VectorClock;
use super::state::{ContextState, Engine, Scope, SyncScope};
use crate::findings::EdgeKind;
use crate::model::{StreamId, StreamInfo, StreamKind};

/// The scopes a stream belongs to. A host thread's lane of host accesses belongs to none: synchronizing a device
/// waits for its streams' work, not for what another thread's loads and stores did (only host synchronization
/// between the threads orders them).
fn scopes_of(info: &StreamInfo) -> impl Iterator<Item = Scope> {
    let scopes = [Scope::Device(info.device), Scope::Context(info.context), Scope::Process(info.process)];
    let count = if info.kind == StreamKind::HostThread { 0 } else { scopes.len() };
    scopes.into_iter().take(count)
}

impl Engine {
    fn scope_mut(&mut self, scope: Scope) -> &mut SyncScope {
        match scope {
            Scope::Device(d) => {
                if d.index() >= self.devices.len() {
                    self.devices.resize_with(d.index() + 1, SyncScope::default);
                }
                &mut self.devices[d.index()]
            }
            Scope::Context(c) => {
                if c.index() >= self.contexts.len() {
                    self.contexts.resize_with(c.index() + 1, ContextState::default);
                }
                &mut self.contexts[c.index()].scope
            }
            Scope::Process(p) => &mut self.process_mut(p).scope,
        }
    }

    /// Synchronizations of `scope` so far (a scope never registered has had none that concern any stream).
    fn syncs_of(&self, scope: Scope) -> u64 {
        match scope {
            Scope::Device(d) => self.devices.get(d.index()).map_or(0, |s| s.syncs),
            Scope::Context(c) => self.contexts.get(c.index()).map_or(0, |s| s.scope.syncs),
            Scope::Process(p) => self.processes.get(p.index()).map_or(0, |s| s.scope.syncs),
        }
    }

    /// The clock a stream created now by a thread of host clock `host` starts from, shared with the streams
    /// created while that clock stood still; `None` when it covers nothing.
    pub(super) fn creation_snapshot(&mut self, host: usize) -> Option<Arc<VectorClock>> {
        let current = &self.host_clocks[host];
        if host >= self.creation_snapshots.len() {
            self.creation_snapshots.resize(host + 1, None);
        }
        match &self.creation_snapshots[host] {
            Some((version, snapshot)) if *version == current.version => snapshot.clone(),
            _ => {
                let snapshot = (!current.clock.is_empty()).then(|| Arc::new(current.clock.clone()));
                self.creation_snapshots[host] = Some((current.version, snapshot.clone()));
                snapshot
            }
        }
    }

    /// Files a new stream in its scopes. Returns how many synchronizations of them came before it (its idle
    /// edges are counted from there).
    pub(super) fn register_idle_stream(&mut self, info: &StreamInfo) -> u64 {
        scopes_of(info).map(|scope| self.scope_mut(scope).syncs).sum()
    }

    /// The stream's first enqueue: its clock becomes its own, and synchronizations visit it from now on.
    pub(super) fn wake(&mut self, stream: StreamId) {
        self.count_idle_edges_of(stream);
        let state = &mut self.streams[stream.index()];
        state.awake = true;
        if let Some(creation) = state.creation.take() {
            state.clock.adopt(Arc::unwrap_or_clone(creation));
        }
        for scope in scopes_of(&state.info) {
            self.scope_mut(scope).awake.push(stream);
        }
    }

    /// The host thread of `host` observes every stream of `scope`, at the operation `at_seq`.
    pub(super) fn host_joins_scope(&mut self, host: usize, scope: Scope, at_seq: u64) {
        let state = self.scope_mut(scope);
        state.syncs += 1;
        let awake = std::mem::take(&mut state.awake);
        // Every awake stream is joined here: the legacy default stream's own barrier would add nothing. A stream
        // that ran nothing has no work to wait for.
        for &stream in &awake {
            self.host_joins_stream_alone(host, stream, at_seq);
        }
        self.scope_mut(scope).awake = awake;
    }

    /// The edges from `stream` to the host that the synchronizations of its scopes made while it was idle.
    fn count_idle_edges_of(&mut self, stream: StreamId) {
        let state = &self.streams[stream.index()];
        let syncs: u64 = scopes_of(&state.info).map(|scope| self.syncs_of(scope)).sum();
        let edges = syncs - state.idle_edge_base;
        if edges > 0 {
            self.collector.edges(EdgeKind::HostSync, stream, None, edges);
        }
    }

    /// At the end: the edges of the streams that never woke.
    pub(super) fn count_idle_edges(&mut self) {
        for s in 0..self.streams.len() {
            if !self.streams[s].awake {
                self.count_idle_edges_of(StreamId(s as u32));
            }
        }
    }
}
