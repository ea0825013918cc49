//! The embedded data of the flame graphs (its format is described in `html.rs`).

use std::collections::HashMap;

use super::differential::BaseJson;
use super::is_runtime_frame;
use super::merge::{GraphMoment, Merged};

#[derive(serde::Serialize)]
pub(super) struct DataJson<'a> {
    pub graphs: Vec<GraphJson<'a>>,
}

#[derive(serde::Serialize)]
pub(super) struct GraphJson<'a> {
    metric: &'a str,
    description: &'a str,
    total: u64,
    names: &'a [&'a str],
    runtime: Vec<usize>,
    /// (parent index or -1, name index, value)
    nodes: Vec<(i64, usize, u64)>,
    /// What `counts` count; absent when the stacks have no counts.
    #[serde(skip_serializing_if = "str::is_empty")]
    count_label: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    counts: Vec<u64>,
    /// Distinct module names, and per name an index into them or -1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    modules: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    name_modules: Vec<i64>,
    /// Distinct source line texts, and per node an index into them or -1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    node_locations: Vec<i64>,
    /// The moment of a graph of what was live then.
    #[serde(skip_serializing_if = "Option::is_none")]
    moment: Option<&'a GraphMoment>,
    /// On a differential page, the values of the profile compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseJson>,
}

impl<'a> GraphJson<'a> {
    pub fn new(tree: &'a Merged<'a>) -> Self {
        let (modules, name_modules) = interned(tree.modules.iter().copied());
        let (locations, node_locations) =
            interned(tree.nodes.iter().map(|node| node.location_text()));
        GraphJson {
            metric: tree.metric,
            description: tree.description,
            total: tree.total,
            names: &tree.names,
            runtime: (0..tree.names.len())
                .filter(|&index| is_runtime_frame(tree.names[index]))
                .collect(),
            nodes: tree
                .nodes
                .iter()
                .map(|node| {
                    let parent = node.parent.map_or(-1, |parent| parent as i64);
                    (parent, node.name, node.value)
                })
                .collect(),
            count_label: tree.count_label,
            counts: if tree.count_label.is_empty() {
                Vec::new()
            } else {
                tree.nodes.iter().map(|node| node.count).collect()
            },
            modules,
            name_modules,
            locations,
            node_locations,
            moment: tree.moment,
            base: None,
        }
    }
}

/// The distinct non-empty texts of `texts` in order of appearance, and per text its index
/// among them or -1 when empty; both empty when every text is.
fn interned<T: AsRef<str> + Eq + std::hash::Hash + Clone>(
    texts: impl Iterator<Item = T>,
) -> (Vec<T>, Vec<i64>) {
    let mut distinct: Vec<T> = Vec::new();
    let mut ids: HashMap<T, i64> = HashMap::new();
    let indices: Vec<i64> = texts
        .map(|text| {
            if text.as_ref().is_empty() {
                return -1;
            }
            *ids.entry(text.clone()).or_insert_with(|| {
                distinct.push(text);
                distinct.len() as i64 - 1
            })
        })
        .collect();
    if distinct.is_empty() {
        return (Vec::new(), Vec::new());
    }
    (distinct, indices)
}
