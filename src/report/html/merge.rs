//! The stacks of one flame graph merged into a prefix tree, with what the tooltip shows
//! besides bytes: each function's module, each node's source lines and block count.

use std::collections::{BTreeSet, HashMap};

use super::FlameGraph;

/// One frame of a stack with its details; `module` and `location` may be empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameLabel {
    /// What the graph draws: the function, or an address when it is unknown.
    pub name: String,
    /// The module's file name, e.g. "libc.so.6".
    pub module: String,
    /// "file:line" of the call this frame made, e.g. "alloc_script.c:48".
    pub location: String,
}

/// A stack, frames root first, with its value (bytes) and how many blocks make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailedStack {
    pub frames: Vec<FrameLabel>,
    pub value: u64,
    pub count: u64,
}

/// A flame graph whose stacks carry modules, source lines and block counts.
#[derive(Debug, Clone)]
pub struct DetailedGraph {
    pub metric: String,
    pub description: String,
    /// What the counts are, e.g. "allocations"; empty when the stacks have no counts.
    pub count_label: String,
    pub stacks: Vec<DetailedStack>,
    /// For the graph of what was live at a moment: which one. Such graphs have no tab of
    /// their own; the moment picker and the timelines choose them.
    pub moment: Option<GraphMoment>,
}

/// A moment of an image's timeline.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GraphMoment {
    /// The image's position on the page (its `timelines-N` section).
    pub image: usize,
    /// Since the recording started, as the timelines' time axis.
    pub time_ns: u64,
    /// What the picker shows, e.g. "peak, 0.52 s".
    pub label: String,
    /// "peak", "peak RSS" or "even" (one of the evenly spaced times).
    pub kind: &'static str,
}

impl From<&FlameGraph> for DetailedGraph {
    fn from(graph: &FlameGraph) -> Self {
        let label = |name: &String| FrameLabel {
            name: name.clone(),
            module: String::new(),
            location: String::new(),
        };
        DetailedGraph {
            metric: graph.metric.clone(),
            description: graph.description.clone(),
            count_label: String::new(),
            moment: None,
            stacks: graph
                .stacks
                .iter()
                .map(|(frames, value)| DetailedStack {
                    frames: frames.iter().map(label).collect(),
                    value: *value,
                    count: 0,
                })
                .collect(),
        }
    }
}

/// A node's source lines past this many are counted, not listed.
const MAX_LOCATIONS: usize = 3;

/// The stacks of one graph merged into a prefix tree, nodes in pre-order.
pub(super) struct Merged<'a> {
    pub metric: &'a str,
    pub description: &'a str,
    pub count_label: &'a str,
    pub moment: Option<&'a GraphMoment>,
    pub total: u64,
    pub names: Vec<&'a str>,
    /// Per name, the module of its first frame ("" when unknown).
    pub modules: Vec<&'a str>,
    pub nodes: Vec<MergedNode>,
}

pub(super) struct MergedNode {
    /// Index in `Merged::nodes`; None for the children of the root.
    pub parent: Option<usize>,
    /// Index in `Merged::names`.
    pub name: usize,
    pub value: u64,
    pub count: u64,
    /// The distinct "file:line" of the frames merged into the node, sorted.
    pub locations: BTreeSet<String>,
}

impl<'a> Merged<'a> {
    pub fn new(graph: &'a DetailedGraph) -> Self {
        let mut names: Vec<&str> = Vec::new();
        let mut modules: Vec<&str> = Vec::new();
        let mut name_ids: HashMap<&str, usize> = HashMap::new();
        // Nodes in creation order; a node is identified by (parent, name).
        let mut nodes: Vec<MergedNode> = Vec::new();
        let mut node_ids: HashMap<(Option<usize>, usize), usize> = HashMap::new();
        let mut total = 0u64;
        for stack in &graph.stacks {
            if stack.value == 0 {
                continue;
            }
            total = total.saturating_add(stack.value);
            let mut parent = None;
            for frame in &stack.frames {
                let name = *name_ids.entry(frame.name.as_str()).or_insert_with(|| {
                    names.push(frame.name.as_str());
                    modules.push(frame.module.as_str());
                    names.len() - 1
                });
                let node = *node_ids.entry((parent, name)).or_insert_with(|| {
                    nodes.push(MergedNode {
                        parent,
                        name,
                        value: 0,
                        count: 0,
                        locations: BTreeSet::new(),
                    });
                    nodes.len() - 1
                });
                let merged = &mut nodes[node];
                merged.value = merged.value.saturating_add(stack.value);
                merged.count = merged.count.saturating_add(stack.count);
                if !frame.location.is_empty() {
                    merged.locations.insert(frame.location.clone());
                }
                parent = Some(node);
            }
        }
        Merged {
            metric: &graph.metric,
            description: &graph.description,
            count_label: &graph.count_label,
            moment: graph.moment.as_ref(),
            total,
            nodes: pre_order(nodes, &names),
            names,
            modules,
        }
    }
}

impl MergedNode {
    /// The node's source lines as the tooltip shows them: "a.c:48, a.c:83 and 2 more".
    pub fn location_text(&self) -> String {
        let listed: Vec<&str> = self
            .locations
            .iter()
            .take(MAX_LOCATIONS)
            .map(String::as_str)
            .collect();
        let text = listed.join(", ");
        match self.locations.len().saturating_sub(MAX_LOCATIONS) {
            0 => text,
            more => format!("{text} and {more} more"),
        }
    }
}

/// `nodes` (parents before children) renumbered in pre-order, children by value descending,
/// then by name. Iterative: stacks can be deeper than the thread's stack allows recursion.
fn pre_order(nodes: Vec<MergedNode>, names: &[&str]) -> Vec<MergedNode> {
    let mut top = Vec::new();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (index, node) in nodes.iter().enumerate() {
        match node.parent {
            Some(parent) => children[parent].push(index),
            None => top.push(index),
        }
    }
    let order = |list: &mut Vec<usize>| {
        list.sort_by(|&a, &b| {
            (nodes[b].value, names[nodes[a].name]).cmp(&(nodes[a].value, names[nodes[b].name]))
        })
    };
    order(&mut top);
    children.iter_mut().for_each(order);
    let mut taken: Vec<Option<MergedNode>> = nodes.into_iter().map(Some).collect();
    let mut sorted = Vec::with_capacity(taken.len());
    // (old index, new index of its parent); popped in order, so pushed in reverse.
    let mut pending: Vec<(usize, Option<usize>)> =
        top.iter().rev().map(|&index| (index, None)).collect();
    while let Some((index, parent)) = pending.pop() {
        let new_index = sorted.len();
        let mut node = taken[index].take().expect("each node is visited once");
        node.parent = parent;
        sorted.push(node);
        pending.extend(
            children[index]
                .iter()
                .rev()
                .map(|&child| (child, Some(new_index))),
        );
    }
    sorted
}
