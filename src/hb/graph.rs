//! CUDA graphs: a launch is one step of its stream, and inside it the node dependencies alone order the
//! nodes. Races between nodes follow from the graph's shape: they are found once per executable graph version
//! and launch site, and counted again at every launch. Event nodes act like their stream counterparts, at the
//! launch's place in its stream.
//!
//! It touches the graph memo and, through the stream step, the event rules and the access check, what those touch.

use std::sync::Arc;

use super::clock::Epoch;
use super::node_pairs::{unordered_node_pairs, NodePair, PairsOf};
use super::racing_accesses::{can_race, effective_accesses};
use super::shadow::Effect;
use super::sites::{SiteId, SiteName, SiteParts};
use super::state::{action_of, Engine, EngineError, GraphMemo};
use super::view_overlap::{accesses_meet, Budget, OVERLAP_STEP_CAP};
use crate::findings::{AccessExtent, Fix, GraphSite, OpClass, OpOccurrence, RaceFinding, RaceKey, RaceKind, Unordered};
use crate::model::{Access, AccessMode, GraphBuild, GraphExec, GraphNode, HostNodeRun, NodeKind, Operation, StreamId};

impl Engine {
    /// rule 9: the whole graph is one step of its stream, after the stream's earlier work and before its later
    /// work; its nodes share that step's epoch, and among themselves only their dependencies order them.
    pub(super) fn graph_launch(
        &mut self,
        op: &Operation,
        stream: StreamId,
        graph: &Arc<GraphExec>,
        host_runs: &[HostNodeRun],
    ) -> Result<(), EngineError> {
        // The graph's own races go to the findings here, after those of every check sent before.
        self.drain_checker();
        // An event wait node orders the nodes after it behind the event's record; taken for the whole launch,
        // which can only hide a race between the graph's earlier nodes and the recording stream.
        for node in &graph.nodes {
            if let NodeKind::EventWait(event) = node.kind {
                self.stream_wait(op, stream, event)?;
            }
        }
        let launch_site = self.site(OpClass::GraphLaunch, graph.name.as_str(), Some(stream), op);
        let epoch = self.tick(stream, launch_site, op, graph.has_addresses());
        let memo_key = (graph.key, launch_site);
        let generation = self.processes.get(op.process.index()).map_or(0, |p| p.allocations.generation());
        // Out of the map while the engine uses it, back in after.
        let memo = match self.graph_memos.remove(&memo_key) {
            None => self.learn_graph(op, stream, graph, epoch),
            Some(mut memo) => {
                for key in &memo.races {
                    self.stats.race_occurrences += 1;
                    let _ = self.collector.count_again(*key);
                }
                if memo.resolved_in != generation && graph.nodes.iter().any(|n| !n.pointers.is_empty()) {
                    let accesses = self.node_accesses(op, graph);
                    memo.footprint = footprint(&accesses, &memo.node_sites);
                    memo.resolved_in = generation;
                }
                memo
            }
        };
        // Every replay touches its footprint again at its own place in the stream: the accesses of other streams
        // since the last replay may race with this one.
        for (access, site) in &memo.footprint {
            self.access(op, epoch, *site, access, Effect::Access);
        }
        if !host_runs.is_empty() {
            self.host_node_runs(op, stream, graph, epoch, &memo, launch_site, host_runs);
        }
        self.graph_memos.insert(memo_key, memo);
        // An event record node snapshots the stream as of this launch: ordering a waiter after every node, which
        // can only hide a race with nodes that do not precede the record.
        for node in &graph.nodes {
            if let NodeKind::EventRecord(event) = node.kind {
                self.event_record(event, stream, op.origin)?;
            }
        }
        Ok(())
    }

    /// The first launch of a graph version from a launch site: its nodes' sites, and the races between nodes
    /// that no dependency path orders, whatever the stream order around the launch.
    fn learn_graph(&mut self, op: &Operation, stream: StreamId, graph: &GraphExec, epoch: Epoch) -> GraphMemo {
        let place = Arc::new(GraphSite {
            graph: graph.name.clone(),
            build: graph.build,
            launched_at: op.source.clone(),
            launched_native: op.native.as_ref().map(|native| self.sites.native(native)),
        });
        let node_sites: Vec<SiteId> = graph.nodes.iter().map(|node| self.node_site(op, stream, node, &place)).collect();
        // Every node's accesses, pointer arguments matched to the blocks live now.
        let accesses = self.node_accesses(op, graph);
        let pairs = unordered_node_pairs(&graph.nodes, &accesses, PairsOf::AllNodes);
        let races = self.node_races(op, graph, epoch, &accesses, &node_sites, pairs);
        let generation = self.processes.get(op.process.index()).map_or(0, |p| p.allocations.generation());
        GraphMemo { footprint: footprint(&accesses, &node_sites), place, node_sites, races, resolved_in: generation }
    }

    /// Host functions inside graphs: what a graph's host nodes touched in this launch (the capture saw it as faults,
    /// so it differs from launch to launch) is the launch's too, at its place in its stream, and races with the
    /// graph's other nodes that no dependency path orders with the host node. A run whose node the trace does not
    /// name (a captured host node) is the launch's alone.
    #[allow(clippy::too_many_arguments)]
    fn host_node_runs(
        &mut self,
        op: &Operation,
        stream: StreamId,
        graph: &GraphExec,
        epoch: Epoch,
        memo: &GraphMemo,
        launch_site: SiteId,
        runs: &[HostNodeRun],
    ) {
        let mut node_sites = memo.node_sites.clone();
        for run in runs {
            let site = match run.node {
                Some(node) => {
                    // Named by its function, which the graph's node record does not say.
                    let named = GraphNode { name: run.name.to_string(), ..graph.nodes[node].clone() };
                    node_sites[node] = self.node_site(op, stream, &named, &memo.place);
                    node_sites[node]
                }
                None => launch_site,
            };
            for access in effective_accesses(&run.accesses) {
                self.access(op, epoch, site, access, Effect::Access);
            }
        }
        let ran: Vec<usize> = runs.iter().filter(|r| !r.accesses.is_empty()).filter_map(|r| r.node).collect();
        if ran.is_empty() {
            return;
        }
        let mut accesses = self.node_accesses(op, graph);
        for run in runs {
            if let Some(node) = run.node {
                accesses[node].extend(run.accesses.iter().cloned());
            }
        }
        let pairs = unordered_node_pairs(&graph.nodes, &accesses, PairsOf::AnyOf(&ran));
        self.node_races(op, graph, epoch, &accesses, &node_sites, pairs);
    }

    /// Files the races of `pairs` (from [`unordered_node_pairs`]) between the nodes of one launch; their keys.
    fn node_races(
        &mut self,
        op: &Operation,
        graph: &GraphExec,
        epoch: Epoch,
        accesses: &[Vec<Access>],
        node_sites: &[SiteId],
        pairs: Vec<NodePair>,
    ) -> Vec<RaceKey> {
        let nodes = &graph.nodes;
        let mut races = Vec::new();
        for (i, x, j, y) in pairs {
            let (a, b) = (&accesses[i][x], &accesses[j][y]);
            let Some(range) = a.range.intersection(b.range) else { continue };
            // Strided accesses (a sub-matrix's columns, a tensor view) meet only where their bytes do.
            if a.view.is_some() || b.view.is_some() {
                let mut budget = Budget::new(OVERLAP_STEP_CAP);
                let meet = accesses_meet(a, b, &mut budget);
                self.stats.assumed_view_overlaps += u64::from(budget.exhausted);
                if !meet {
                    continue;
                }
            }
            let kind = match (a.mode, b.mode) {
                (AccessMode::Read, AccessMode::Read) => continue,
                (AccessMode::Write, AccessMode::Read) => RaceKind::ReadAfterWrite,
                (AccessMode::Read, AccessMode::Write) => RaceKind::WriteAfterRead,
                (AccessMode::Write, AccessMode::Write) => RaceKind::WriteAfterWrite,
            };
            let key = (kind, node_sites[i].0, node_sites[j].0);
            races.push(key);
            self.stats.race_occurrences += 1;
            // Both ran in this launch: the occurrence is the launch's, the site says where each node was made.
            let occurrence = |node: usize, mode: AccessMode| OpOccurrence {
                site: node_sites[node],
                action: action_of(Effect::Access, mode),
                seq: op.seq,
                origin: op.origin,
                stream_position: Some(epoch.tick),
                node: u32::try_from(node).ok(),
            };
            let earlier = occurrence(i, a.mode);
            let later = occurrence(j, b.mode);
            let fix = self.node_fix(graph, &nodes[i], &nodes[j]);
            let sites = &mut self.sites;
            let allocation = (self.processes[op.process.index()].allocations)
                .describe(range, None, |native| sites.native(native))
                .map(Box::new);
            // An access a node's pointer argument stood for (its whole block, tier T1, as a launch's do): those
            // follow the node's own accesses in its list (a host node has none; its run's accesses follow).
            let from_pointer =
                |node: usize, index: usize| !nodes[node].pointers.is_empty() && index >= nodes[node].accesses.len();
            let extent = if from_pointer(i, x) || from_pointer(j, y) {
                AccessExtent::WholeBlockArguments
            } else {
                AccessExtent::Known
            };
            self.collector.race(key, || RaceFinding {
                kind,
                range,
                allocation,
                why: Unordered::GraphNodes { graph: graph.name.clone() },
                fix,
                count: 1,
                earlier,
                later,
                earlier_view: a.view.as_ref().map(|v| v.to_string()),
                later_view: b.view.as_ref().map(|v| v.to_string()),
                extent,
            });
        }
        races
    }

    /// Every node's accesses, pointer arguments matched to the blocks live now.
    fn node_accesses(&mut self, op: &Operation, graph: &GraphExec) -> Vec<Vec<Access>> {
        graph
            .nodes
            .iter()
            .map(|node| {
                let mut all = node.accesses.clone();
                if !node.pointers.is_empty() {
                    self.stats.kernels_with_pointers += 1;
                    self.stats.exact_kernels.graph_nodes_with_arguments += 1;
                    self.resolve_pointers(op.process, &node.pointers, &mut all);
                }
                all
            })
            .collect()
    }

    /// A node's site: what it is and where it was captured or added, in the launch that ran it.
    fn node_site(&mut self, op: &Operation, stream: StreamId, node: &GraphNode, place: &Arc<GraphSite>) -> SiteId {
        let made_at = node.made_at.as_ref();
        self.sites.intern(SiteParts {
            class: OpClass::GraphNode,
            name: SiteName::Text(&node.name),
            stream: Some(stream),
            thread: op.thread,
            source: made_at.and_then(|m| m.source.as_ref()),
            native: made_at.and_then(|m| m.native.as_ref()),
            region: made_at.and_then(|m| m.region.as_ref()),
            graph: Some(place),
        })
    }

    /// How to order two nodes of one graph: inside a capture, the stream of the later node waits for an event
    /// recorded after the earlier one; in a graph built node by node, an edge between them.
    fn node_fix(&self, graph: &GraphExec, earlier: &GraphNode, later: &GraphNode) -> Fix {
        let captured_on = |node: &GraphNode| node.made_at.as_ref().and_then(|m| m.stream);
        if let (GraphBuild::Captured, Some(from), Some(to)) = (graph.build, captured_on(earlier), captured_on(later)) {
            return Fix::CaptureJoin {
                graph: graph.name.clone(),
                record_on: from,
                wait_on: to,
                framework: [earlier, later].iter().any(|n| n.made_at.as_ref().is_some_and(|m| m.region.is_some())),
            };
        }
        Fix::GraphDependency { graph: graph.name.clone(), explicit: graph.build == GraphBuild::Explicit }
    }
}

/// A launch's accesses as one operation's (memory operations, DESIGN.md): a read inside a range some node of the launch writes adds
/// nothing against other streams, since the write conflicts with everything the read would.
fn footprint(accesses: &[Vec<Access>], sites: &[SiteId]) -> Vec<(Access, SiteId)> {
    let all: Vec<Access> = accesses.iter().flatten().cloned().collect();
    let site_of = accesses.iter().zip(sites).flat_map(|(list, &site)| std::iter::repeat(site).take(list.len()));
    let keep: Vec<bool> = can_race(&all).collect();
    all.into_iter().zip(site_of).zip(keep).filter_map(|(entry, keep)| keep.then_some(entry)).collect()
}
