//! CUDA graphs: a launch is one step of its stream, and inside it the node dependencies alone order the nodes.
//! Races between nodes are found from the graph's shape, once per graph, and counted again at every launch.
//!
//! It touches the graph memo and, through the stream step and the access check, what those touch.

use super::access::effective_accesses;
use super::clock::Epoch;
use super::engine::Engine;
use super::race_report::action_of;
use super::shadow::Effect;
use super::sites::SiteId;
use crate::findings::{Fix, OpOccurrence, RaceFinding, RaceKind, Unordered};
use crate::model::{AccessMode, GraphNode, Operation, StreamId};

impl Engine {
    /// rule 9: the whole graph is one step of its stream, after the stream's earlier work and before its later
    /// work; its nodes share that step's epoch, and among themselves only their dependencies order them.
    pub(super) fn graph_launch(&mut self, op: &Operation, stream: StreamId, name: &str, nodes: &[GraphNode]) {
        let launch_site = self.site("graph launch", name, Some(stream), op);
        let has_addresses = nodes.iter().any(|n| !n.accesses.is_empty());
        let epoch = self.tick(stream, launch_site, op, has_addresses);
        let mut node_sites = Vec::with_capacity(nodes.len());
        for node in nodes {
            let site = self.site("graph node", &format!("{name}/{}", node.name), Some(stream), op);
            node_sites.push(site);
            for access in effective_accesses(&node.accesses) {
                self.access(op, epoch, site, access, Effect::Access);
            }
        }
        self.check_graph(op, name, nodes, &node_sites, epoch);
    }

    /// Inside a graph, nodes with no dependency path between them run concurrently: their overlapping accesses
    /// race, whatever the stream order around the launch.
    fn check_graph(&mut self, op: &Operation, name: &str, nodes: &[GraphNode], node_sites: &[SiteId], epoch: Epoch) {
        let memo_key = (name.to_string(), nodes.len());
        if let Some(keys) = self.graph_races.get(&memo_key) {
            for key in keys {
                self.stats.race_occurrences += 1;
                self.collector.count_again(*key);
            }
            return;
        }
        // ancestors[i] holds every node that node i transitively depends on.
        let words = nodes.len().div_ceil(64);
        let mut ancestors = vec![vec![0u64; words]; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            for &dep in &node.depends_on {
                if dep < i {
                    let (before, rest) = ancestors.split_at_mut(i);
                    for (mine, theirs) in rest[0].iter_mut().zip(&before[dep]) {
                        *mine |= *theirs;
                    }
                    rest[0][dep / 64] |= 1 << (dep % 64);
                }
            }
        }
        let mut keys = Vec::new();
        for j in 0..nodes.len() {
            for i in 0..j {
                if ancestors[j][i / 64] & (1 << (i % 64)) != 0 {
                    continue;
                }
                for a in &nodes[i].accesses {
                    for b in &nodes[j].accesses {
                        let Some(range) = a.range.intersection(b.range) else { continue };
                        let kind = match (a.mode, b.mode) {
                            (AccessMode::Read, AccessMode::Read) => continue,
                            (AccessMode::Write, AccessMode::Read) => RaceKind::ReadAfterWrite,
                            (AccessMode::Read, AccessMode::Write) => RaceKind::WriteAfterRead,
                            (AccessMode::Write, AccessMode::Write) => RaceKind::WriteAfterWrite,
                        };
                        let key = (kind, node_sites[i].0, node_sites[j].0);
                        keys.push(key);
                        self.stats.race_occurrences += 1;
                        let occurrence = |site: SiteId, mode: AccessMode| OpOccurrence {
                            site: self.sites.get(site).clone(),
                            action: action_of(Effect::Access, mode),
                            seq: op.seq,
                            origin: op.origin,
                            stream_position: Some(epoch.tick),
                        };
                        let earlier = occurrence(node_sites[i], a.mode);
                        let later = occurrence(node_sites[j], b.mode);
                        let allocation =
                            self.processes[op.process.index()].allocations.describe(range, None);
                        self.collector.race(key, || RaceFinding {
                            kind,
                            range,
                            allocation,
                            why: Unordered::GraphNodes { graph: name.to_string() },
                            fix: Fix::GraphDependency {
                                graph: name.to_string(),
                                from: nodes[i].name.clone(),
                                to: nodes[j].name.clone(),
                            },
                            count: 1,
                            earlier,
                            later,
                            earlier_view: a.view.as_ref().map(|v| v.to_string()),
                            later_view: b.view.as_ref().map(|v| v.to_string()),
                        });
                    }
                }
            }
        }
        self.graph_races.insert(memo_key, keys);
    }
}
