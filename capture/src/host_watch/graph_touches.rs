//! What each graph and executable graph touches of the host memory the GPU reaches (pinned, registered and
//! managed blocks), gathered from the graph records as they are made, so that a graph launch puts those bytes
//! under guard as a kernel's or copy's call does (inflight.rs). A graph's touches come from its kernel nodes'
//! pointers, its copy nodes' sides and its stream-captured work; an executable graph takes its graph's at
//! instantiation and at an update. Node removals are not followed: a touch kept too long costs a fault that
//! records an access the analyzer then finds ordered, never a missed one.
//!
//! Streams joined into a capture are followed through the events the capturing streams record and the other
//! streams wait on (the fork-join pattern of multi-stream capture). Touches only this file's maps.

use rustc_hash::FxHashMap as HashMap;

use crate::graph_record::{GraphRecord, NodeBody, NodeOwner};

/// Bytes a graph's work may touch: `[address, address + bytes)`, with the protection a guard over them needs
/// (`PROT_NONE` for a write, `PROT_READ` for a read only).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Touch {
    pub address: u64,
    pub bytes: u64,
    pub prot: i32,
}

/// A capture in progress, by the stream that began it.
#[derive(Debug, Default)]
struct Capture {
    /// The graph captured into (`cuStreamBeginCaptureToGraph`), if the program named one.
    into: Option<u64>,
    touches: Vec<Touch>,
}

#[derive(Debug, Default)]
pub(super) struct GraphTouches {
    graphs: HashMap<u64, Vec<Touch>>,
    /// Child graphs (child-graph nodes, conditional bodies) by their parent: flattened at instantiation, since a
    /// body is filled after its conditional node is added.
    children: HashMap<u64, Vec<u64>>,
    execs: HashMap<u64, Vec<Touch>>,
    captures: HashMap<u64, Capture>,
    /// Streams taking part in a capture: the stream that began it (itself for that one).
    capturing: HashMap<u64, u64>,
    /// Events recorded on a capturing stream: the capture's origin stream (a wait on one joins the capture).
    capture_events: HashMap<u64, u64>,
}

/// How deep child graphs are followed (a graph cannot contain itself; this bounds a malformed record stream).
const MAX_NESTING: usize = 16;

impl GraphTouches {
    /// The stream that began the capture `stream` takes part in, if it does.
    pub fn capture_of(&self, stream: u64) -> Option<u64> {
        self.capturing.get(&stream).copied()
    }

    /// Work on a capturing stream touches `touch`: it runs at the captured graph's launches, not now.
    pub fn captured(&mut self, origin: u64, touch: Touch) {
        if let Some(capture) = self.captures.get_mut(&origin) {
            capture.touches.push(touch);
        }
    }

    /// An event recorded on `stream`: inside a capture it is a node of the captured graph.
    pub fn event_recorded(&mut self, event: u64, stream: u64) {
        match self.capture_of(stream) {
            Some(origin) => self.capture_events.insert(event, origin),
            None => self.capture_events.remove(&event),
        };
    }

    /// `stream` waits on `event`: waiting on a captured record joins the capture.
    pub fn waited(&mut self, stream: u64, event: u64) {
        if let Some(&origin) = self.capture_events.get(&event) {
            self.capturing.insert(stream, origin);
        }
    }

    /// Follows one graph record; `node` is what the body of a node record touches (worked out by the caller,
    /// which knows the blocks and the batch's pointer words; empty for other records).
    pub fn apply(&mut self, record: &GraphRecord, node: Vec<Touch>) {
        match record {
            GraphRecord::CaptureBegin { stream, into } => {
                self.captures.insert(*stream, Capture { into: *into, touches: Vec::new() });
                self.capturing.insert(*stream, *stream);
            }
            GraphRecord::CaptureEnd { stream, graph } => {
                let capture = self.captures.remove(stream).unwrap_or_default();
                self.capturing.retain(|_, origin| origin != stream);
                self.capture_events.retain(|_, origin| origin != stream);
                if let Some(graph) = graph.or(capture.into) {
                    self.graphs.entry(graph).or_default().extend(capture.touches);
                }
            }
            GraphRecord::Node { graph, body, .. } => self.add(*graph, body, node),
            GraphRecord::NodeUpdate { owner: NodeOwner::Graph(graph), body, .. } => self.add(*graph, body, node),
            GraphRecord::NodeUpdate { owner: NodeOwner::Exec(exec), .. } => {
                if !node.is_empty() {
                    self.execs.entry(*exec).or_default().extend(node);
                }
            }
            GraphRecord::Clone { graph, original } => {
                let touches = self.graphs.get(original).cloned().unwrap_or_default();
                let children = self.children.get(original).cloned().unwrap_or_default();
                self.graphs.insert(*graph, touches);
                self.children.insert(*graph, children);
            }
            GraphRecord::Instantiate { graph, exec } => {
                let touches = self.flattened(*graph);
                self.execs.insert(*exec, touches);
            }
            GraphRecord::ExecUpdate { exec, graph } => {
                let touches = self.flattened(*graph);
                self.execs.entry(*exec).or_default().extend(touches);
            }
            GraphRecord::Destroy { graph } => {
                self.graphs.remove(graph);
                self.children.remove(graph);
            }
            GraphRecord::ExecDestroy { exec } => {
                self.execs.remove(exec);
            }
            GraphRecord::CaptureInfo { .. }
            | GraphRecord::CaptureDependencies { .. }
            | GraphRecord::Create { .. }
            | GraphRecord::Dependencies { .. }
            | GraphRecord::NodeDestroy { .. }
            | GraphRecord::Launch { .. } => {}
        }
    }

    /// What a launch of `exec` touches.
    pub fn launched(&self, exec: u64) -> &[Touch] {
        self.execs.get(&exec).map(Vec::as_slice).unwrap_or(&[])
    }

    fn add(&mut self, graph: u64, body: &NodeBody, node: Vec<Touch>) {
        match body {
            NodeBody::Child { graph: child } => self.children.entry(graph).or_default().push(*child),
            NodeBody::Conditional { bodies } => self.children.entry(graph).or_default().extend(bodies.iter()),
            _ if node.is_empty() => {}
            _ => self.graphs.entry(graph).or_default().extend(node),
        }
    }

    /// A graph's touches with its children's, as an instantiation copies them.
    fn flattened(&self, graph: u64) -> Vec<Touch> {
        let mut touches = Vec::new();
        let mut pending = vec![(graph, 0)];
        while let Some((graph, depth)) = pending.pop() {
            touches.extend_from_slice(self.graphs.get(&graph).map(Vec::as_slice).unwrap_or(&[]));
            if depth < MAX_NESTING {
                let children = self.children.get(&graph).map(Vec::as_slice).unwrap_or(&[]);
                pending.extend(children.iter().map(|&child| (child, depth + 1)));
            }
        }
        touches.sort_unstable_by_key(|t| (t.address, t.bytes, t.prot));
        touches.dedup();
        touches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE: Touch = Touch { address: 0x1000, bytes: 0x3000, prot: libc::PROT_NONE };
    const READ: Touch = Touch { address: 0x8000, bytes: 0x1000, prot: libc::PROT_READ };

    fn kernel_node(graph: u64) -> GraphRecord {
        let body = NodeBody::Kernel { function: 0, first_pointer: 0, pointer_count: 1 };
        GraphRecord::Node { graph, node: 1, deps: Box::new([]), body }
    }

    #[test]
    fn an_executable_graph_touches_what_its_nodes_and_child_graphs_touch_when_instantiated() {
        let mut touches = GraphTouches::default();
        touches.apply(&kernel_node(10), vec![WRITE]);
        let child = GraphRecord::Node { graph: 11, node: 2, deps: Box::new([]), body: NodeBody::Child { graph: 12 } };
        touches.apply(&child, vec![]);
        touches.apply(&kernel_node(12), vec![READ]);
        touches.apply(&GraphRecord::Instantiate { graph: 10, exec: 20 }, vec![]);
        touches.apply(&GraphRecord::Instantiate { graph: 11, exec: 21 }, vec![]);
        assert_eq!(touches.launched(20), [WRITE]);
        assert_eq!(touches.launched(21), [READ]);
        // A node added after instantiation is not in the executable graph until an update.
        touches.apply(&kernel_node(10), vec![READ]);
        assert_eq!(touches.launched(20), [WRITE]);
        touches.apply(&GraphRecord::ExecUpdate { exec: 20, graph: 10 }, vec![]);
        assert!(touches.launched(20).contains(&READ));
        touches.apply(&GraphRecord::ExecDestroy { exec: 20 }, vec![]);
        assert!(touches.launched(20).is_empty());
    }

    #[test]
    fn work_captured_on_forked_streams_belongs_to_the_captured_graph() {
        let mut touches = GraphTouches::default();
        touches.apply(&GraphRecord::CaptureBegin { stream: 1, into: None }, vec![]);
        assert_eq!(touches.capture_of(2), None, "not joined yet");
        touches.event_recorded(5, 1);
        touches.waited(2, 5);
        let origin = touches.capture_of(2).expect("joined through the event");
        touches.captured(origin, READ);
        touches.captured(touches.capture_of(1).expect("capturing"), WRITE);
        touches.apply(&GraphRecord::CaptureEnd { stream: 1, graph: Some(30) }, vec![]);
        assert_eq!(touches.capture_of(2), None, "the capture ended for every stream in it");
        touches.apply(&GraphRecord::Instantiate { graph: 30, exec: 40 }, vec![]);
        assert_eq!(touches.launched(40), [WRITE, READ]);
        // An event recorded outside a capture joins nothing.
        touches.event_recorded(5, 1);
        touches.waited(3, 5);
        assert_eq!(touches.capture_of(3), None);
    }
}
