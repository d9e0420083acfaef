//! The call paths walked so far, as a tree of frames from the capture's own frame outward: each node is one
//! code address with its unwind rule, its children the return addresses seen above it. A walk that follows a
//! known path finds each next rule by comparing the return address it read with the first child's (the
//! most recently used child is kept first), with no hashing and no lookup that waits on the read; the
//! node where a walk ends remembers the call site id it led to. Plain data, no I/O.

use super::rules::Rule;

/// A node's index; 0 is the root, above every walk's first frame.
pub type NodeId = u32;
const NONE: NodeId = NodeId::MAX;
/// Nodes kept at most; past that the tree starts over (the sites themselves are kept elsewhere).
const MAX_NODES: usize = 1 << 16;

/// One frame of a known path.
#[derive(Copy, Clone, Debug)]
pub struct Node {
    /// The frame's code address (its return address; the exact pc for a walk's first frame).
    pub pc: u64,
    pub rule: Rule,
    /// The frame's module (an index of the unwinder's), and whether the frame is kept.
    pub module: u16,
    pub kept: bool,
    /// The call site id of the walks that end here (0: not known yet).
    pub site: u32,
    first_child: NodeId,
    next_sibling: NodeId,
}

pub struct Paths {
    nodes: Vec<Node>,
}

impl Default for Paths {
    fn default() -> Self {
        Paths::new()
    }
}

impl Paths {
    pub fn new() -> Paths {
        let root =
            Node { pc: 0, rule: Rule::Unknown, module: 0, kept: false, site: 0, first_child: NONE, next_sibling: NONE };
        let mut nodes = Vec::with_capacity(256);
        nodes.push(root);
        Paths { nodes }
    }

    #[inline]
    pub fn node(&self, id: NodeId) -> Node {
        self.nodes[id as usize]
    }

    pub fn set_site(&mut self, id: NodeId, site: u32) {
        self.nodes[id as usize].site = site;
    }

    /// The child of `parent` at `pc`, moved to the front of its siblings.
    #[inline]
    pub fn child(&mut self, parent: NodeId, pc: u64) -> Option<NodeId> {
        let first = self.nodes[parent as usize].first_child;
        if first != NONE && self.nodes[first as usize].pc == pc {
            return Some(first);
        }
        self.later_child(parent, pc)
    }

    #[cold]
    fn later_child(&mut self, parent: NodeId, pc: u64) -> Option<NodeId> {
        let mut previous = self.nodes[parent as usize].first_child;
        let mut current = self.nodes.get(previous as usize)?.next_sibling;
        while current != NONE {
            let node = self.nodes[current as usize];
            if node.pc == pc {
                self.nodes[previous as usize].next_sibling = node.next_sibling;
                self.nodes[current as usize].next_sibling = self.nodes[parent as usize].first_child;
                self.nodes[parent as usize].first_child = current;
                return Some(current);
            }
            previous = current;
            current = node.next_sibling;
        }
        None
    }

    /// Adds a child of `parent` in front of its siblings; None when the tree is full (the caller starts it over
    /// with [`Paths::clear`]).
    pub fn add_child(&mut self, parent: NodeId, pc: u64, rule: Rule, module: u16, kept: bool) -> Option<NodeId> {
        if self.nodes.len() >= MAX_NODES {
            return None;
        }
        let id = self.nodes.len() as NodeId;
        let next_sibling = self.nodes[parent as usize].first_child;
        self.nodes.push(Node { pc, rule, module, kept, site: 0, first_child: NONE, next_sibling });
        self.nodes[parent as usize].first_child = id;
        Some(id)
    }

    pub fn clear(&mut self) {
        self.nodes.truncate(1);
        self.nodes[0].first_child = NONE;
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_found_and_the_last_used_comes_first() {
        let mut paths = Paths::new();
        let a = paths.add_child(0, 0x10, Rule::Bottom, 0, true).expect("room");
        let b = paths.add_child(0, 0x20, Rule::Bottom, 0, true).expect("room");
        let c = paths.add_child(0, 0x30, Rule::Bottom, 0, true).expect("room");
        assert_eq!(paths.child(0, 0x30), Some(c));
        assert_eq!(paths.child(0, 0x10), Some(a));
        assert_eq!(paths.child(0, 0x10), Some(a), "now first");
        assert_eq!(paths.child(0, 0x20), Some(b));
        assert_eq!(paths.child(0, 0x30), Some(c));
        assert_eq!(paths.child(0, 0x40), None);
        assert_eq!(paths.child(a, 0x10), None, "a has no children");
        let grandchild = paths.add_child(a, 0x11, Rule::Unknown, 1, false).expect("room");
        assert_eq!(paths.child(a, 0x11), Some(grandchild));
        paths.set_site(grandchild, 7);
        assert_eq!(paths.node(grandchild).site, 7);
        paths.clear();
        assert_eq!((paths.len(), paths.child(0, 0x10)), (1, None));
    }
}
