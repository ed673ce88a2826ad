// SPDX-License-Identifier: Apache-2.0
//! Named stacks kept as a tree: each distinct stack prefix once, up to a fixed number of nodes.
//!
//! A long recording keeps finding stacks it has not seen (10–15 a second on a busy nginx worker), nearly all
//! of them a known stack with different last frames. A table of whole stacks grows by a whole stack for each;
//! the tree grows by the few frames that differ, and stops growing at its limit.

use std::collections::HashMap;
use std::hash::Hash;

/// Stands in for the frames of a stack that did not fit: its part beyond the deepest node it shares with the
/// stacks already kept.
pub const CUT: u32 = u32::MAX;

/// No node: a root's parent, the end of a list of children.
const NONE: u32 = u32::MAX;

/// Children are a linked list: most nodes have one or two, and the nodes' memory then grows by one node at a
/// time, where a hash table of children would grow in doublings.
struct Node {
    parent: u32,
    frame: u32,
    first_child: u32,
    next_sibling: u32,
    /// Samples whose stack ends here.
    count: u64,
}

pub struct StackTree<K> {
    roots: HashMap<K, u32>,
    nodes: Vec<Node>,
    max_nodes: usize,
    /// Samples whose stack was cut at the node limit.
    pub cut_samples: u64,
}

impl<K: Clone + Eq + Hash> StackTree<K> {
    /// A tree that adds frame nodes while it has fewer than `max_nodes` nodes (roots included), and then at
    /// most one CUT node below each. Their memory is reserved, not touched: it is used as the tree grows,
    /// without moving.
    pub fn new(max_nodes: usize) -> Self {
        StackTree {
            roots: HashMap::new(),
            nodes: Vec::with_capacity(2 * max_nodes),
            max_nodes,
            cut_samples: 0,
        }
    }

    /// Counts `count` samples of the stack `frames` (outermost first) under `key`. Once the tree is full, a
    /// stack that needs new nodes ends in a CUT frame below the deepest node it shares.
    pub fn add(&mut self, key: &K, frames: impl IntoIterator<Item = u32>, count: u64) {
        let mut at = match self.roots.get(key) {
            Some(&root) => root,
            None => {
                let root = self.push(NONE, NONE, NONE);
                self.roots.insert(key.clone(), root);
                root
            }
        };
        for frame in frames {
            at = match self.find_child(at, frame) {
                Some(child) => child,
                None if self.nodes.len() < self.max_nodes => self.child(at, frame),
                None => {
                    self.cut_samples += count;
                    let cut = self.find_child(at, CUT).unwrap_or_else(|| self.child(at, CUT));
                    self.nodes[cut as usize].count += count;
                    return;
                }
            };
        }
        self.nodes[at as usize].count += count;
    }

    /// Forgets every stack, keeping the nodes' memory for the next ones: continuous mode takes a tree each
    /// interval, and a new reservation each time would land elsewhere in the heap and touch new pages.
    pub fn clear(&mut self) {
        self.roots.clear();
        self.nodes.clear();
        self.cut_samples = 0;
    }

    /// Every stack with samples: its key, its frames outermost first, and its count.
    pub fn stacks(&self) -> impl Iterator<Item = (&K, Vec<u32>, u64)> + '_ {
        let key_of: HashMap<u32, &K> = self.roots.iter().map(|(key, &root)| (root, key)).collect();
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.count > 0)
            .map(move |(i, n)| {
                let mut frames = Vec::new();
                let mut at = i as u32;
                while self.nodes[at as usize].parent != NONE {
                    frames.push(self.nodes[at as usize].frame);
                    at = self.nodes[at as usize].parent;
                }
                frames.reverse();
                (key_of[&at], frames, n.count)
            })
    }

    fn find_child(&self, parent: u32, frame: u32) -> Option<u32> {
        let mut at = self.nodes[parent as usize].first_child;
        while at != NONE {
            let node = &self.nodes[at as usize];
            if node.frame == frame {
                return Some(at);
            }
            at = node.next_sibling;
        }
        None
    }

    /// A new first child of `parent`.
    fn child(&mut self, parent: u32, frame: u32) -> u32 {
        let child = self.push(parent, frame, self.nodes[parent as usize].first_child);
        self.nodes[parent as usize].first_child = child;
        child
    }

    fn push(&mut self, parent: u32, frame: u32, next_sibling: u32) -> u32 {
        self.nodes.push(Node {
            parent,
            frame,
            first_child: NONE,
            next_sibling,
            count: 0,
        });
        (self.nodes.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(tree: &StackTree<u8>) -> Vec<(u8, Vec<u32>, u64)> {
        let mut v: Vec<_> = tree.stacks().map(|(k, f, c)| (*k, f, c)).collect();
        v.sort();
        v
    }

    #[test]
    fn stacks_share_their_common_prefix() {
        let mut tree = StackTree::new(100);
        tree.add(&1, [10, 20, 30], 2);
        tree.add(&1, [10, 20, 31], 1);
        tree.add(&1, [10, 20, 30], 3);
        tree.add(&1, [10, 20], 1);
        tree.add(&2, [10, 20, 30], 1);
        // Key 1: root, 10, 20, 30, 31. Key 2: root, 10, 20, 30.
        assert_eq!(tree.nodes.len(), 9);
        assert_eq!(
            sorted(&tree),
            vec![
                (1, vec![10, 20], 1),
                (1, vec![10, 20, 30], 5),
                (1, vec![10, 20, 31], 1),
                (2, vec![10, 20, 30], 1),
            ]
        );
        assert_eq!(tree.cut_samples, 0);
    }

    #[test]
    fn a_full_tree_cuts_new_stacks_where_they_leave_the_known_ones() {
        let mut tree = StackTree::new(4);
        tree.add(&1, [10, 20, 30], 1);
        tree.add(&1, [10, 20, 30], 1);
        tree.add(&1, [10, 21, 30], 2);
        tree.add(&1, [10, 22, 30], 1);
        tree.add(&1, [11], 1);
        assert_eq!(tree.nodes.len(), 6, "the four nodes, and one CUT under each of two");
        assert_eq!(tree.cut_samples, 4);
        assert_eq!(
            sorted(&tree),
            vec![(1, vec![10, 20, 30], 2), (1, vec![10, CUT], 3), (1, vec![CUT], 1)]
        );
        let reserved = tree.nodes.capacity();
        tree.clear();
        assert_eq!((sorted(&tree), tree.cut_samples), (vec![], 0));
        assert_eq!(tree.nodes.capacity(), reserved);
        tree.add(&2, [10], 1);
        assert_eq!(sorted(&tree), vec![(2, vec![10], 1)]);
    }
}
