//! fixtures/stack_tree.c: the profile's stack tree holds each distinct stack once, however
//! many events use it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use memsup::trace::format::Record;
use memsup::trace::reader::read_profile;
use memsup::trace::stacks::{StackId, StackNode, StackTable};

use crate::common::*;

/// What the profile of one run says about the three paths.
struct Tree {
    /// Stack nodes written for the program's own image.
    nodes: usize,
    /// Allocation size -> (allocations, distinct stacks).
    sizes: BTreeMap<u64, (u64, BTreeSet<StackId>)>,
    /// Allocation size -> function names of its stack, innermost first (up to `main`).
    chains: BTreeMap<u64, Vec<String>>,
}

fn tree_of(recording: &Recording) -> Tree {
    let profile = read_profile(&recording.profile).expect("reading the profile");
    let mut nodes = 0;
    let mut table = StackTable::default();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut sizes: BTreeMap<u64, (u64, BTreeSet<StackId>)> = BTreeMap::new();
    for record in &profile.records {
        match record {
            Record::StackNode {
                id,
                parent,
                address,
                ..
            } => {
                nodes += 1;
                assert!(table.add(StackNode {
                    id: *id,
                    parent: *parent,
                    address: *address
                }));
            }
            Record::Symbol {
                address, function, ..
            } => {
                names.insert(*address, function.clone());
            }
            Record::Alloc { size, stack, .. } if [111, 222, 333].contains(size) => {
                let entry = sizes.entry(*size).or_default();
                entry.0 += 1;
                entry.1.insert(*stack);
            }
            _ => {}
        }
    }
    let chains = sizes
        .iter()
        .map(|(&size, (_, stacks))| {
            let stack = *stacks.iter().next().expect("one stack");
            let mut chain = Vec::new();
            for address in table.frames(stack) {
                let name = names.get(&address).cloned().unwrap_or_default();
                let at_main = name == "main";
                chain.push(name);
                if at_main {
                    break;
                }
            }
            (size, chain)
        })
        .collect();
    Tree {
        nodes,
        sizes,
        chains,
    }
}

#[test]
fn the_stack_tree_does_not_grow_with_the_number_of_events() {
    for_each_variant("stack_tree", |_variant, fixture| {
        let small = record(fixture, &["10"], None);
        let large = record(fixture, &["2000"], None);
        assert_eq!(
            String::from_utf8_lossy(&large.native.stdout),
            "stack_tree rounds=2000\n"
        );
        let (small, large) = (tree_of(&small), tree_of(&large));
        assert_eq!(small.nodes, large.nodes, "nodes for 10 and 2000 rounds");
        for (tree, rounds) in [(&small, 10), (&large, 2000)] {
            for size in [111, 222, 333] {
                let (allocations, stacks) = &tree.sizes[&size];
                assert_eq!(*allocations, rounds, "allocations of {size}");
                assert_eq!(stacks.len(), 1, "stacks of size {size}");
            }
            let distinct: BTreeSet<StackId> = tree
                .sizes
                .values()
                .flat_map(|(_, s)| s.iter().copied())
                .collect();
            assert_eq!(distinct.len(), 3);
            assert_eq!(tree.chains[&111], ["leaf", "path_a", "main"]);
            assert_eq!(tree.chains[&222], ["leaf", "middle", "path_b", "main"]);
            assert_eq!(tree.chains[&333], ["path_c", "main"]);
        }
    });
}
