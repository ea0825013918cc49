//! The details the tooltip and the call-site table show: modules, source lines and counts
//! merged with the stacks, and the table's rows for a scripted profile.

use std::path::Path;

use serde_json::{json, Value};

use super::merge::{DetailedGraph, DetailedStack, FrameLabel, Merged};
use super::*;
use crate::analysis::site_tests::sites_profile;
use crate::analysis::{analyze_with, SkipFrames};

fn label(name: &str, module: &str, location: &str) -> FrameLabel {
    FrameLabel {
        name: name.to_string(),
        module: module.to_string(),
        location: location.to_string(),
    }
}

fn detailed(stacks: Vec<(Vec<FrameLabel>, u64, u64)>) -> DetailedGraph {
    DetailedGraph {
        metric: "peak".to_string(),
        description: "bytes".to_string(),
        count_label: "blocks".to_string(),
        moment: None,
        stacks: stacks
            .into_iter()
            .map(|(frames, value, count)| DetailedStack {
                frames,
                value,
                count,
            })
            .collect(),
    }
}

fn embedded(graphs: &[DetailedGraph]) -> Value {
    let mut out = Vec::new();
    render_detailed("app", &[], graphs, &[], &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    let open = format!("<script type=\"application/json\" id=\"{DATA_ID}\">");
    let start = page.find(&open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

#[test]
fn counts_add_up_and_source_lines_gather_per_node() {
    let main = |line: u32| label("main", "app", &format!("app.c:{line}"));
    let graph = detailed(vec![
        (vec![main(10), label("parse", "app", "parse.c:5")], 300, 3),
        (vec![main(12), label("parse", "app", "parse.c:5")], 100, 1),
        (vec![main(14)], 50, 2),
        (vec![main(16), label("malloc", "libc.so.6", "")], 20, 4),
        (vec![main(18)], 0, 9),
    ]);
    let tree = Merged::new(&graph);
    let nodes: Vec<(Option<usize>, &str, u64, u64, String)> = tree
        .nodes
        .iter()
        .map(|node| {
            let name = tree.names[node.name];
            (
                node.parent,
                name,
                node.value,
                node.count,
                node.location_text(),
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [
            (
                None,
                "main",
                470,
                10,
                "app.c:10, app.c:12, app.c:14 and 1 more".to_string()
            ),
            (Some(0), "parse", 400, 4, "parse.c:5".to_string()),
            (Some(0), "malloc", 20, 4, String::new()),
        ],
        "a stack of no value adds neither bytes nor count nor line"
    );
    assert_eq!(tree.modules, ["app", "app", "libc.so.6"]);

    let data = embedded(&[graph]);
    let graph = &data["graphs"][0];
    assert_eq!(graph["count_label"], "blocks");
    assert_eq!(graph["counts"], json!([10, 4, 4]));
    assert_eq!(graph["modules"], json!(["app", "libc.so.6"]));
    assert_eq!(graph["name_modules"], json!([0, 0, 1]));
    assert_eq!(
        graph["locations"],
        json!(["app.c:10, app.c:12, app.c:14 and 1 more", "parse.c:5"])
    );
    assert_eq!(graph["node_locations"], json!([0, 1, -1]));
}

#[test]
fn graphs_without_details_embed_none() {
    let graph = FlameGraph {
        metric: "peak".to_string(),
        description: "bytes".to_string(),
        stacks: vec![(vec!["main".to_string()], 5)],
    };
    let data = embedded(&[DetailedGraph::from(&graph)]);
    let keys: Vec<&String> = data["graphs"][0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "description",
            "metric",
            "names",
            "nodes",
            "runtime",
            "total"
        ]
    );
}

/// The table's rows of the scripted profile: (function, file:line, module, allocations,
/// bytes at peak, leaked, temporary), each number as (data-value, text).
#[test]
fn the_site_table_lists_the_merged_sites_by_peak() {
    let analysis = analyze_with(
        &sites_profile(),
        Path::new("s.msup"),
        &SkipFrames::default(),
    );
    let html = site_table::site_table_section(&analysis);
    let rows: Vec<&str> = html
        .lines()
        .filter(|line| line.starts_with("<tr data-row"))
        .collect();
    let fill = "fill_values(std::vector&lt;int, std::allocator&lt;int&gt; &gt;&amp;)";
    let number =
        |value: u64, text: &str| format!("<td class=\"number\" data-value=\"{value}\">{text}</td>");
    let expected = [
        format!(
            "<tr data-row=\"0\" title=\"{fill} \u{2190} load_table() \u{2190} main\">\
             <td>{fill}</td><td>app.cpp:12</td><td>app</td>{}{}{}{}</tr>",
            number(3, "3"),
            number(600, "600 bytes"),
            number(200, "200 bytes"),
            number(0, "0"),
        ),
        format!(
            "<tr data-row=\"1\" title=\"main\"><td>main</td><td>app.cpp:52</td><td>app</td>\
             {}{}{}{}</tr>",
            number(3, "3"),
            number(350, "350 bytes"),
            number(300, "300 bytes"),
            number(1, "1"),
        ),
        format!(
            "<tr data-row=\"2\" title=\"build_index \u{2190} main\"><td>build_index</td>\
             <td>index.c:30</td><td>app</td>{}{}{}{}</tr>",
            number(3, "3"),
            number(250, "250 bytes"),
            number(0, "0 bytes"),
            number(2, "2"),
        ),
    ];
    assert_eq!(rows, expected);
    assert!(html.contains(
        "<thead><tr><th data-kind=\"text\">function</th><th data-kind=\"text\">file:line</th>\
         <th data-kind=\"text\">module</th><th data-kind=\"number\">allocations</th>\
         <th data-kind=\"number\">bytes at peak</th><th data-kind=\"number\">leaked</th>\
         <th data-kind=\"number\">temporary</th></tr></thead>"
    ));
}

#[test]
fn the_mapped_graph_holds_the_anonymous_bytes_at_their_peak() {
    let analysis = analyze_with(
        &sites_profile(),
        Path::new("s.msup"),
        &SkipFrames::default(),
    );
    assert_eq!(analysis.processes[0].mappings.peak_bytes, 4096);
    let graph = site_stacks::mapped_graph(&analysis);
    assert_eq!(graph.metric, "mapped");
    assert_eq!(graph.count_label, "mmap calls");
    let stacks: Vec<(Vec<String>, u64, u64)> = graph
        .stacks
        .iter()
        .map(|stack| {
            let names = stack
                .frames
                .iter()
                .map(|frame| frame.name.clone())
                .collect();
            (names, stack.value, stack.count)
        })
        .collect();
    assert_eq!(
        stacks,
        [(vec!["main".to_string(), "build_index".to_string()], 4096, 1)]
    );
}
