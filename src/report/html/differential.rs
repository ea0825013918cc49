//! Differential flame graphs, as Brendan Gregg draws them: the flame graph of the new
//! profile, each frame coloured by how its own bytes changed from the profile compared with
//! (red grew, blue shrank, grey unchanged). A stack only the old profile has cannot be drawn
//! in the new one's graph: its bytes count as a shrink of the nearest caller both share.
//!
//! Embedded data: a graph of such a page carries `"base": {"total", "nodes": [value, ...]}`,
//! `nodes` giving, per node of its `nodes` (same order), the old profile's bytes through it.
//! The script works out the own changes and the colours.

use std::collections::HashMap;

use super::graph_json::GraphJson;
use super::merge::Merged;

#[derive(serde::Serialize)]
pub(super) struct BaseJson {
    total: u64,
    nodes: Vec<u64>,
}

/// Sets each graph's `base` from the stacks of the same graph of the old profile.
pub(super) fn add_bases(
    graphs: &mut [GraphJson],
    merged: &[Merged],
    bases: &[Vec<(Vec<String>, u64)>],
) {
    for ((graph, tree), base) in graphs.iter_mut().zip(merged).zip(bases) {
        graph.base = Some(base_values(tree, base));
    }
}

/// The old profile's bytes through each node of `tree`: every old stack followed from the
/// root for as long as the new tree has its frames.
fn base_values(tree: &Merged, stacks: &[(Vec<String>, u64)]) -> BaseJson {
    let name_ids: HashMap<&str, usize> = tree
        .names
        .iter()
        .enumerate()
        .map(|(index, name)| (*name, index))
        .collect();
    let node_ids: HashMap<(Option<usize>, usize), usize> = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| ((node.parent, node.name), index))
        .collect();
    let mut nodes = vec![0u64; tree.nodes.len()];
    let mut total = 0u64;
    for (frames, value) in stacks {
        total = total.saturating_add(*value);
        let mut parent = None;
        for frame in frames {
            let Some(&name) = name_ids.get(frame.as_str()) else {
                break;
            };
            let Some(&node) = node_ids.get(&(parent, name)) else {
                break;
            };
            nodes[node] = nodes[node].saturating_add(*value);
            parent = Some(node);
        }
    }
    BaseJson { total, nodes }
}

#[cfg(test)]
mod tests {
    use super::super::FlameGraph;
    use super::*;

    fn stacks(list: &[(&[&str], u64)]) -> Vec<(Vec<String>, u64)> {
        list.iter()
            .map(|(frames, value)| (frames.iter().map(|f| f.to_string()).collect(), *value))
            .collect()
    }

    #[test]
    fn old_stacks_are_followed_as_far_as_the_new_tree_goes() {
        let graph = FlameGraph {
            metric: "peak".to_string(),
            description: String::new(),
            stacks: stacks(&[(&["main", "grow"], 5000), (&["main", "same"], 700)]),
        };
        let detailed = super::super::DetailedGraph::from(&graph);
        let tree = Merged::new(&detailed);
        let base = stacks(&[
            (&["main", "grow"], 1000),
            (&["main", "same"], 700),
            (&["main", "gone"], 300),
            (&["other"], 50),
        ]);
        let values = base_values(&tree, &base);
        // Pre-order, children by value: main, grow, same.
        let names: Vec<&str> = tree
            .nodes
            .iter()
            .map(|node| tree.names[node.name])
            .collect();
        assert_eq!(names, ["main", "grow", "same"]);
        assert_eq!(values.nodes, [2000, 1000, 700]);
        assert_eq!(values.total, 2050);
    }
}
