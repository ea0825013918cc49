//! Call stacks interned as a prefix tree (heaptrack's `t ip parent`): a node is a return
//! address under a parent node, a stack is the id of its innermost node. A billion events
//! with a thousand distinct stacks cost a thousand nodes, written once each.

use crate::events::heap::IntegerMap;

/// Id of a node; 0 is the root (the empty stack).
pub type StackId = u32;
pub const EMPTY_STACK: StackId = 0;

/// A node the writer has not written yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackNode {
    pub id: StackId,
    pub parent: StackId,
    pub address: u64,
}

/// The tree on the recording side: interns stacks, handing out the nodes that are new.
#[derive(Debug, Default)]
pub struct StackInterner {
    children: IntegerMap<(StackId, u64), StackId>,
    next_id: StackId,
}

impl StackInterner {
    /// Interns `frames` (innermost first). New nodes are appended to `new_nodes`, parents
    /// before children, to be written before the first record that uses the returned id.
    pub fn intern(&mut self, frames: &[u64], new_nodes: &mut Vec<StackNode>) -> StackId {
        let mut node = EMPTY_STACK;
        for &address in frames.iter().rev() {
            node = match self.children.get(&(node, address)) {
                Some(&child) => child,
                None => {
                    self.next_id += 1;
                    let child = self.next_id;
                    self.children.insert((node, address), child);
                    new_nodes.push(StackNode {
                        id: child,
                        parent: node,
                        address,
                    });
                    child
                }
            };
        }
        node
    }

    /// Nodes interned so far.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }
}

/// The tree on the reading side, rebuilt from the nodes in a profile.
#[derive(Debug, Default, Clone)]
pub struct StackTable {
    /// (parent, address) of node id i + 1.
    nodes: Vec<(StackId, u64)>,
}

impl StackTable {
    /// Adds a node; ids arrive in increasing order, parents first. Returns false for a node
    /// out of order or under an unknown parent (a damaged profile), which is ignored.
    pub fn add(&mut self, node: StackNode) -> bool {
        let expected = self.nodes.len() as StackId + 1;
        if node.id != expected || node.parent >= node.id {
            return false;
        }
        self.nodes.push((node.parent, node.address));
        true
    }

    /// The innermost frame of stack `id` and the stack it sits on (None for the root or an
    /// unknown id).
    pub fn node(&self, id: StackId) -> Option<(u64, StackId)> {
        let &(parent, address) = self.nodes.get((id as usize).checked_sub(1)?)?;
        Some((address, parent))
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The frames of stack `id`, innermost first (empty for the root or an unknown id).
    pub fn frames(&self, id: StackId) -> Vec<u64> {
        let mut frames = Vec::new();
        let mut node = id;
        while node != EMPTY_STACK {
            let Some(&(parent, address)) = self.nodes.get(node as usize - 1) else {
                return Vec::new();
            };
            frames.push(address);
            node = parent;
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefixes_are_stored_once() {
        let mut interner = StackInterner::default();
        let mut nodes = Vec::new();
        // Innermost first: main -> work -> alloc_a, main -> work -> alloc_b, main -> other.
        let a = interner.intern(&[0x30, 0x20, 0x10], &mut nodes);
        let b = interner.intern(&[0x31, 0x20, 0x10], &mut nodes);
        let c = interner.intern(&[0x40, 0x10], &mut nodes);
        assert_eq!(interner.intern(&[0x30, 0x20, 0x10], &mut nodes), a);
        assert_eq!(nodes.len(), 5, "main, work, alloc_a, alloc_b, other");
        assert_eq!(interner.len(), 5);
        let ids: Vec<StackId> = nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        assert_eq!((a, b, c), (3, 4, 5));
        assert!(nodes.iter().all(|n| n.parent < n.id), "parents come first");
    }

    #[test]
    fn the_table_rebuilds_every_stack() {
        let mut interner = StackInterner::default();
        let mut nodes = Vec::new();
        let stacks: [&[u64]; 4] = [&[0x30, 0x20, 0x10], &[0x31, 0x20, 0x10], &[0x40, 0x10], &[]];
        let ids: Vec<StackId> = stacks
            .iter()
            .map(|s| interner.intern(s, &mut nodes))
            .collect();
        let mut table = StackTable::default();
        assert!(nodes.iter().all(|&node| table.add(node)));
        for (stack, id) in stacks.iter().zip(ids) {
            assert_eq!(table.frames(id), stack.to_vec());
        }
        assert_eq!(table.frames(EMPTY_STACK), Vec::<u64>::new());
        assert_eq!(table.frames(99), Vec::<u64>::new(), "unknown id");
    }

    #[test]
    fn nodes_out_of_order_are_refused() {
        let mut table = StackTable::default();
        assert!(!table.add(StackNode {
            id: 2,
            parent: 0,
            address: 1
        }));
        assert!(table.add(StackNode {
            id: 1,
            parent: 0,
            address: 1
        }));
        assert!(
            !table.add(StackNode {
                id: 2,
                parent: 2,
                address: 1
            }),
            "its own parent"
        );
    }
}
