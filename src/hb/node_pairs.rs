//! The pairs of a graph's node accesses that race inside one launch: they overlap, one of them writes, and no
//! dependency path orders their nodes. `graph` files them as findings; this file only finds them.
//!
//! Both ways sweep the accesses in address order, so that only overlapping accesses are ever compared. They
//! differ in how they learn which of those are ordered:
//! - By chains (the usual way): the nodes are cut into chains (sequences of nodes each reaching the next, as a
//!   stream's work in a captured graph), and each node knows, for every chain, the last node of it that reaches
//!   the node and the first one the node reaches. The nodes of a chain that the node is unordered with then lie
//!   between those two, so the sweep keeps its open accesses by chain and position and visits only the
//!   unordered ones: a chain of 65,536 in-place updates of one buffer compares nothing, where comparing every
//!   pair took minutes.
//! - By walks (a graph whose tables would pass [`MAX_CHAIN_ENTRIES`] or [`MAX_CHAIN_WORK`], and the pairs of a
//!   launch's host nodes, asked at every launch): every overlapping pair with a wanted node is a candidate, and
//!   one walk back along the dependencies from each later node settles its candidates.
//!
//! Node indices are a topological order: a dependency on a later node (which a graph cannot have) is ignored.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::model::{Access, AccessMode, GraphNode};

/// One racing pair: (node, its access, node, its access), the lower node first.
pub(super) type NodePair = (usize, usize, usize, usize);

/// Whose pairs are wanted.
#[derive(Copy, Clone)]
pub(super) enum PairsOf<'a> {
    /// Every node's (a graph's first launch from a site).
    AllNodes,
    /// Those of these nodes with any other (the host nodes that ran in one launch): few, so no chain tables
    /// are built for them at every launch.
    AnyOf(&'a [usize]),
}

impl PairsOf<'_> {
    fn wants(self, node: usize) -> bool {
        match self {
            PairsOf::AllNodes => true,
            PairsOf::AnyOf(nodes) => nodes.contains(&node),
        }
    }
}

/// The pairs of accesses of two nodes of a graph that overlap, one of them a write, and that no dependency path
/// orders, sorted; only those of the nodes `of` says.
pub(super) fn unordered_node_pairs(nodes: &[GraphNode], accesses: &[Vec<Access>], of: PairsOf) -> Vec<NodePair> {
    debug_assert_eq!(nodes.len(), accesses.len(), "one access list a node");
    let chains = match of {
        PairsOf::AllNodes => NodeChains::of(nodes),
        PairsOf::AnyOf(_) => None,
    };
    let mut pairs = match chains {
        Some(chains) => pairs_by_chains(&chains, accesses),
        None => pairs_by_walks(nodes, accesses, of),
    };
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// The most entries (nodes times chains) the chain tables may hold, each: 16 MB.
const MAX_CHAIN_ENTRIES: usize = 1 << 22;
/// The most row entries building the tables may visit (nodes and dependencies, times chains): a graph of many
/// chains whose nodes each depend on many others goes the walks' way, which visits only what overlaps.
const MAX_CHAIN_WORK: usize = 1 << 26;

/// The nodes of a graph cut into chains, with what orders each node against every chain. A chain is a sequence
/// of nodes each reaching the next along dependencies (a stream's work in a captured graph), so the nodes of a
/// chain that reach a node are a prefix of it, and those the node reaches a suffix.
struct NodeChains {
    chains: usize,
    chain_of: Vec<u32>,
    position_of: Vec<u32>,
    /// Where each node's row of `reached_from` starts, and its length: the chains there were when the node was
    /// placed (a later chain holds only later nodes, none of which reaches it).
    rows: Vec<(usize, u32)>,
    /// A node's row, by chain: one past the last position of the chain whose node reaches the node (the node
    /// itself on its own chain), 0 when none does. Positions below it are ordered before the node.
    reached_from: Vec<u32>,
    /// `reaches[node * chains + c]`: the first position of chain `c` whose node `node` reaches (itself on its
    /// own chain), or `u32::MAX`. Positions from it on are ordered after `node`.
    reaches: Vec<u32>,
}

impl NodeChains {
    /// The chains of `nodes`, or None when their tables would pass [`MAX_CHAIN_ENTRIES`] or [`MAX_CHAIN_WORK`].
    fn of(nodes: &[GraphNode]) -> Option<NodeChains> {
        let deps = |node: usize| nodes[node].depends_on.iter().copied().filter(move |&dep| dep < node);
        let count = nodes.len();
        let (mut chain_of, mut position_of) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let (mut rows, mut reached_from) = (Vec::with_capacity(count), Vec::new());
        // Each chain's length: its last node reaches a node whose row says that length for it.
        let mut lengths: Vec<u32> = Vec::new();
        let (mut row, mut edges, mut work) = (Vec::new(), 0usize, 0usize);
        for node in 0..count {
            // What reaches a node: what reaches its dependencies, and itself.
            row.clear();
            row.resize(lengths.len(), 0u32);
            for dep in deps(node) {
                let (at, len) = rows[dep];
                for (mine, theirs) in row.iter_mut().zip(&reached_from[at..at + len as usize]) {
                    *mine = (*mine).max(*theirs);
                }
                edges += 1;
                work += len as usize;
            }
            // The first chain whose last node reaches this one goes on with it; else a new chain starts (a fork's
            // second branch continues a chain that ended before the fork, not a new one).
            let chain = match (0..lengths.len()).find(|&c| row[c] == lengths[c]) {
                Some(chain) => chain,
                None => {
                    lengths.push(0);
                    row.push(0);
                    lengths.len() - 1
                }
            };
            row[chain] = lengths[chain] + 1;
            chain_of.push(chain as u32);
            position_of.push(lengths[chain]);
            lengths[chain] += 1;
            rows.push((reached_from.len(), row.len() as u32));
            reached_from.extend_from_slice(&row);
            work += row.len();
            if reached_from.len() > MAX_CHAIN_ENTRIES || work > MAX_CHAIN_WORK {
                return None;
            }
        }
        let chains = lengths.len();
        if count.checked_mul(chains)? > MAX_CHAIN_ENTRIES || (count + edges).checked_mul(chains)? > MAX_CHAIN_WORK {
            return None;
        }
        // What a node reaches: itself, and what every node depending on it reaches (later nodes, settled first).
        let mut reaches = vec![u32::MAX; count * chains];
        for node in (0..count).rev() {
            reaches[node * chains + chain_of[node] as usize] = position_of[node];
            let (earlier, row) = reaches.split_at_mut(node * chains);
            let row = &row[..chains];
            for dep in deps(node) {
                for (theirs, mine) in earlier[dep * chains..(dep + 1) * chains].iter_mut().zip(row) {
                    *theirs = (*theirs).min(*mine);
                }
            }
        }
        Some(NodeChains { chains, chain_of, position_of, rows, reached_from, reaches })
    }

    /// The positions of chain `chain` whose nodes no dependency path orders with `node`.
    fn unordered(&self, node: usize, chain: usize) -> std::ops::Range<u32> {
        let (at, len) = self.rows[node];
        let before = if chain < len as usize { self.reached_from[at + chain] } else { 0 };
        // On the node's own chain the node itself ends the one and starts the other: nothing lies between.
        before..self.reaches[node * self.chains + chain].max(before)
    }
}

/// An open access: its node's position in its chain, its node, its index in the node's list.
type OpenAccess = (u32, usize, usize);

/// The sweep by chains: each access against the open accesses of every chain at the positions its node is
/// unordered with.
fn pairs_by_chains(chains: &NodeChains, accesses: &[Vec<Access>]) -> Vec<NodePair> {
    let by_start = in_address_order(accesses);
    // Open accesses by chain, reads and writes apart (a read is compared with writes only), and when each closes.
    let mut open_reads: BTreeMap<usize, BTreeSet<OpenAccess>> = BTreeMap::new();
    let mut open_writes: BTreeMap<usize, BTreeSet<OpenAccess>> = BTreeMap::new();
    let mut closing: BinaryHeap<Reverse<(u64, bool, usize, OpenAccess)>> = BinaryHeap::new();
    let no_open = BTreeMap::new();
    let mut pairs = Vec::new();
    for &(n, a) in &by_start {
        let this = &accesses[n][a];
        while let Some(&Reverse((end, write, chain, open))) = closing.peek() {
            if end > this.range.start {
                break;
            }
            closing.pop();
            let by_chain = if write { &mut open_writes } else { &mut open_reads };
            if let Some(set) = by_chain.get_mut(&chain) {
                set.remove(&open);
                if set.is_empty() {
                    by_chain.remove(&chain);
                }
            }
        }
        let compared: [&BTreeMap<usize, BTreeSet<OpenAccess>>; 2] = match this.mode {
            AccessMode::Read => [&open_writes, &no_open],
            AccessMode::Write => [&open_reads, &open_writes],
        };
        for (&chain, open) in compared.into_iter().flatten() {
            let positions = chains.unordered(n, chain);
            for &(_, m, b) in open.range((positions.start, 0, 0)..(positions.end, 0, 0)) {
                if m != n {
                    pairs.push(if m < n { (m, b, n, a) } else { (n, a, m, b) });
                }
            }
        }
        let (chain, write) = (chains.chain_of[n] as usize, this.mode == AccessMode::Write);
        let open = (chains.position_of[n], n, a);
        let by_chain = if write { &mut open_writes } else { &mut open_reads };
        by_chain.entry(chain).or_default().insert(open);
        closing.push(Reverse((this.range.end(), write, chain, open)));
    }
    pairs
}

/// Every access of every node as (node, index), by start address.
fn in_address_order(accesses: &[Vec<Access>]) -> Vec<(usize, usize)> {
    let mut by_start: Vec<(usize, usize)> =
        accesses.iter().enumerate().flat_map(|(n, list)| (0..list.len()).map(move |a| (n, a))).collect();
    by_start.sort_by_key(|&(n, a)| (accesses[n][a].range.start, n, a));
    by_start
}

/// The sweep by walks: every overlapping pair with a wanted node a candidate, settled by walks back along the
/// dependencies.
fn pairs_by_walks(nodes: &[GraphNode], accesses: &[Vec<Access>], of: PairsOf) -> Vec<NodePair> {
    let by_start = in_address_order(accesses);
    let mut pairs = Vec::new();
    let mut candidates = Vec::new();
    let mut paths = DependencyPaths::new(nodes.len());
    // Accesses still open: reads and writes apart (a read is compared with writes only, so that a thousand nodes
    // reading one buffer are not a million comparisons), and those of wanted nodes apart from the others (an
    // access of an unwanted node is compared with wanted ones only).
    let mut open: [[Vec<(usize, usize)>; 2]; 2] = Default::default(); // [wanted][write]
    for &(n, a) in &by_start {
        let this = &accesses[n][a];
        let still_open = |&(m, b): &(usize, usize)| accesses[m][b].range.end() > this.range.start;
        open.iter_mut().flatten().for_each(|list| list.retain(still_open));
        let (wanted, write) = (of.wants(n), this.mode == AccessMode::Write);
        for (other_wanted, other_write) in [(true, true), (true, false), (false, true), (false, false)] {
            if !(write || other_write) || !(wanted || other_wanted) {
                continue;
            }
            for &(m, b) in &open[usize::from(other_wanted)][usize::from(other_write)] {
                if m != n {
                    candidates.push(if m < n { (m, b, n, a) } else { (n, a, m, b) });
                }
            }
        }
        open[usize::from(wanted)][usize::from(write)].push((n, a));
        if candidates.len() >= CANDIDATES_AT_ONCE {
            paths.keep_unordered(nodes, &mut candidates, &mut pairs);
        }
    }
    paths.keep_unordered(nodes, &mut candidates, &mut pairs);
    pairs
}

/// Candidate pairs resolved at a time: bounds what the sweep holds for a graph whose accesses all overlap.
const CANDIDATES_AT_ONCE: usize = 1 << 20;

/// Whether a dependency path orders two nodes of a graph, found by walking back from the later node along its
/// dependencies (which point only to earlier nodes), never below the earliest node asked about: memory linear
/// in the nodes, where a table of every node's ancestors would be quadratic (a chain of 128k nodes: 2 GB).
struct DependencyPaths {
    /// The walk that last reached each node.
    reached_in: Vec<u32>,
    walk: u32,
    stack: Vec<usize>,
}

impl DependencyPaths {
    fn new(nodes: usize) -> DependencyPaths {
        DependencyPaths { reached_in: vec![0; nodes], walk: 0, stack: Vec::new() }
    }

    /// Moves the candidates `(i, x, j, y)` (node `i` before node `j`) that no path from `i` to `j` orders into
    /// `unordered`; one walk per later node.
    fn keep_unordered(&mut self, nodes: &[GraphNode], candidates: &mut Vec<NodePair>, unordered: &mut Vec<NodePair>) {
        candidates.sort_unstable_by_key(|&(i, x, j, y)| (j, i, x, y));
        for group in candidates.chunk_by(|a, b| a.2 == b.2) {
            let (j, lowest) = (group[0].2, group[0].0);
            self.walk_back(nodes, j, lowest);
            let walk = self.walk;
            unordered.extend(group.iter().filter(|&&(i, ..)| self.reached_in[i] != walk));
        }
        candidates.clear();
    }

    /// Marks every node from `lowest` up that `from` depends on, directly or not.
    fn walk_back(&mut self, nodes: &[GraphNode], from: usize, lowest: usize) {
        if self.walk == u32::MAX {
            self.reached_in.fill(0);
            self.walk = 0;
        }
        self.walk += 1;
        let walk = self.walk;
        self.stack.clear();
        self.stack.push(from);
        while let Some(node) = self.stack.pop() {
            for &dep in &nodes[node].depends_on {
                if dep < node && dep >= lowest && self.reached_in[dep] != walk {
                    self.reached_in[dep] = walk;
                    self.stack.push(dep);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AccessRange;
    use crate::synth::Rng;

    /// Every node's ancestors, the quadratic way: what the walks and the chains must agree with.
    fn ancestors(nodes: &[GraphNode]) -> Vec<Vec<bool>> {
        let mut table = vec![vec![false; nodes.len()]; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            for &dep in node.depends_on.iter().filter(|&&d| d < i) {
                let theirs = table[dep].clone();
                for (mine, theirs) in table[i].iter_mut().zip(theirs) {
                    *mine |= theirs;
                }
                table[i][dep] = true;
            }
        }
        table
    }

    /// A random graph of up to `most` nodes (none too), each with up to three dependencies (some on itself or later nodes,
    /// which are ignored) and up to three accesses in a small address space, so that many overlap.
    fn random_graph(rng: &mut Rng, most: usize) -> (Vec<GraphNode>, Vec<Vec<Access>>) {
        let count = rng.index(most + 1);
        let nodes: Vec<GraphNode> = (0..count)
            .map(|i| {
                let deps = (0..rng.index(4)).map(|_| rng.index(i + 2)).collect();
                GraphNode::with_accesses(format!("n{i}"), Vec::new(), deps)
            })
            .collect();
        let accesses = (0..count)
            .map(|_| {
                (0..rng.index(4))
                    .map(|_| {
                        let range = AccessRange::new(64 * rng.index(16) as u64, 1 + rng.index(200) as u64).unwrap();
                        let mode = if rng.index(2) == 0 { AccessMode::Read } else { AccessMode::Write };
                        Access::plain(range, mode)
                    })
                    .collect()
            })
            .collect();
        (nodes, accesses)
    }

    /// What the pairs must be, by definition: every two accesses of two nodes that overlap, one a write, whose
    /// nodes no path orders.
    fn expected_pairs(nodes: &[GraphNode], accesses: &[Vec<Access>], wanted: impl Fn(usize) -> bool) -> Vec<NodePair> {
        let table = ancestors(nodes);
        let mut pairs = Vec::new();
        for j in 0..nodes.len() {
            for i in 0..j {
                if table[j][i] || !(wanted(i) || wanted(j)) {
                    continue;
                }
                for (x, a) in accesses[i].iter().enumerate() {
                    for (y, b) in accesses[j].iter().enumerate() {
                        let writes = a.mode == AccessMode::Write || b.mode == AccessMode::Write;
                        if writes && a.range.intersection(b.range).is_some() {
                            pairs.push((i, x, j, y));
                        }
                    }
                }
            }
        }
        pairs.sort_unstable();
        pairs
    }

    #[test]
    fn both_sweeps_find_every_unordered_overlapping_pair_and_no_other() {
        let mut rng = Rng(29);
        for round in 0..300 {
            let (nodes, accesses) = random_graph(&mut rng, 30);
            let any_of: Vec<usize> = (0..nodes.len()).filter(|node| node % 4 == 1).collect();
            let of = if round % 3 == 0 { PairsOf::AnyOf(&any_of) } else { PairsOf::AllNodes };
            let expected = expected_pairs(&nodes, &accesses, |node| of.wants(node));
            let mut ways = vec![
                ("walks", pairs_by_walks(&nodes, &accesses, of)),
                ("as asked", unordered_node_pairs(&nodes, &accesses, of)),
            ];
            if let PairsOf::AllNodes = of {
                let chains = NodeChains::of(&nodes).expect("a small graph's chains fit");
                ways.push(("chains", pairs_by_chains(&chains, &accesses)));
            }
            for (way, mut found) in ways {
                found.sort_unstable();
                found.dedup();
                assert_eq!(found, expected, "{way}, round {round}");
            }
        }
    }

    #[test]
    fn walks_back_agree_with_the_table_of_ancestors() {
        let mut rng = Rng(27);
        for _ in 0..50 {
            let (nodes, _) = random_graph(&mut rng, 40);
            let count = nodes.len();
            let table = ancestors(&nodes);
            let mut candidates: Vec<NodePair> = (0..count).flat_map(|j| (0..j).map(move |i| (i, 0, j, 0))).collect();
            // Resolved in two halves, as a long sweep does.
            let later = candidates.split_off(candidates.len() / 2);
            let (mut paths, mut unordered) = (DependencyPaths::new(count), Vec::new());
            paths.keep_unordered(&nodes, &mut candidates, &mut unordered);
            paths.keep_unordered(&nodes, &mut later.clone(), &mut unordered);
            unordered.sort_unstable();
            let mut expected: Vec<_> = (0..count)
                .flat_map(|j| (0..j).map(move |i| (i, 0, j, 0)))
                .filter(|&(i, _, j, _)| !table[j][i])
                .collect();
            expected.sort_unstable();
            assert_eq!(unordered, expected);
        }
    }

    #[test]
    fn chains_say_what_reaches_what() {
        let mut rng = Rng(31);
        for _ in 0..100 {
            let (nodes, _) = random_graph(&mut rng, 40);
            let table = ancestors(&nodes);
            let chains = NodeChains::of(&nodes).expect("fits");
            for (node, ancestors_of_node) in table.iter().enumerate() {
                for (other, ancestors_of_other) in table.iter().enumerate() {
                    let chain = chains.chain_of[other] as usize;
                    let unordered = chains.unordered(node, chain).contains(&chains.position_of[other]);
                    let ordered = ancestors_of_node[other] || ancestors_of_other[node] || node == other;
                    assert_eq!(unordered, !ordered, "node {node} against node {other}");
                }
            }
        }
    }

    #[test]
    fn a_long_chain_of_updates_of_one_buffer_is_one_chain_and_races_with_nothing() {
        let count = 20_000;
        let nodes: Vec<GraphNode> = (0..count)
            .map(|i| GraphNode::with_accesses(format!("n{i}"), Vec::new(), if i > 0 { vec![i - 1] } else { vec![] }))
            .collect();
        let buffer = AccessRange::new(4096, 64).unwrap();
        let accesses: Vec<Vec<Access>> = (0..count)
            .map(|_| vec![Access::plain(buffer, AccessMode::Read), Access::plain(buffer, AccessMode::Write)])
            .collect();
        assert_eq!(NodeChains::of(&nodes).expect("fits").chains, 1);
        assert!(unordered_node_pairs(&nodes, &accesses, PairsOf::AllNodes).is_empty());
    }

    #[test]
    fn a_graph_of_too_many_chains_is_swept_by_walks() {
        // Independent nodes: each its own chain, nodes times chains past the bound.
        let count = (MAX_CHAIN_ENTRIES as f64).sqrt() as usize + 1;
        let nodes: Vec<GraphNode> =
            (0..count).map(|i| GraphNode::with_accesses(format!("n{i}"), Vec::new(), Vec::new())).collect();
        assert!(NodeChains::of(&nodes).is_none());
        let accesses: Vec<Vec<Access>> = (0..count)
            .map(|i| vec![Access::plain(AccessRange::new(4096 * i as u64, 64).unwrap(), AccessMode::Write)])
            .collect();
        assert!(unordered_node_pairs(&nodes, &accesses, PairsOf::AllNodes).is_empty(), "nothing overlaps");
    }

    /// `layers` times: a fork, `width` nodes after it, a join after them (a multi-stream captured step).
    fn fork_join(layers: usize, width: usize) -> Vec<GraphNode> {
        let mut nodes = Vec::new();
        for _ in 0..layers {
            let fork = nodes.len();
            let deps = if fork > 0 { vec![fork - 1] } else { vec![] };
            nodes.push(GraphNode::with_accesses("fork".into(), Vec::new(), deps));
            for _ in 0..width {
                nodes.push(GraphNode::with_accesses("side".into(), Vec::new(), vec![fork]));
            }
            nodes.push(GraphNode::with_accesses("join".into(), Vec::new(), (fork + 1..=fork + width).collect()));
        }
        nodes
    }

    #[test]
    fn forks_and_joins_take_as_many_chains_as_the_graph_is_wide() {
        let chains = NodeChains::of(&fork_join(256, 8)).expect("fits");
        assert_eq!(chains.chains, 8, "a side node goes on with a chain that ended before its fork");
    }

    #[test]
    fn many_chains_of_many_dependencies_go_the_walks_way() {
        // 1,400 independent nodes, then 1,400 that each depend on all of them: 2 M edges times 1,400 chains.
        let first = 1400;
        let mut nodes: Vec<GraphNode> =
            (0..first).map(|i| GraphNode::with_accesses(format!("a{i}"), Vec::new(), Vec::new())).collect();
        nodes.extend((0..first).map(|i| GraphNode::with_accesses(format!("b{i}"), Vec::new(), (0..first).collect())));
        assert!(NodeChains::of(&nodes).is_none());
    }

    #[test]
    fn an_empty_graph_has_no_pairs() {
        assert!(unordered_node_pairs(&[], &[], PairsOf::AllNodes).is_empty());
        assert_eq!(NodeChains::of(&[]).expect("fits").chains, 0);
    }
}
