//! The page as text: nothing fetched, every text escaped, the embedded data exact.

use serde_json::Value;

use super::*;

fn graph(metric: &str, stacks: &[(&[&str], u64)]) -> FlameGraph {
    FlameGraph {
        metric: metric.to_string(),
        description: format!("bytes {metric}"),
        stacks: stacks
            .iter()
            .map(|(frames, value)| (frames.iter().map(|f| f.to_string()).collect(), *value))
            .collect(),
    }
}

fn page(title: &str, summary: &[&str], graphs: &[FlameGraph]) -> String {
    let summary: Vec<String> = summary.iter().map(|line| line.to_string()).collect();
    let mut out = Vec::new();
    render(title, &summary, graphs, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn sample_graphs() -> Vec<FlameGraph> {
    vec![
        graph(
            "peak",
            &[
                (&["main", "parse", "std::vector<int>::push_back"], 300),
                (&["main", "build"], 100),
                (&["__libc_start_main [libc.so.6]", "malloc [libc.so.6]"], 24),
            ],
        ),
        graph("leaked", &[]),
        graph("allocated", &[(&["main"], 1 << 20)]),
    ]
}

/// The text of the embedded data block, as written.
fn data_block(page: &str) -> &str {
    let open = format!("<script type=\"application/json\" id=\"{DATA_ID}\">");
    let start = page.find(&open).expect("the data block") + open.len();
    let length = page[start..]
        .find("</script>")
        .expect("the end of the data block");
    &page[start..start + length]
}

fn data(page: &str) -> Value {
    serde_json::from_str(data_block(page)).expect("the data block is JSON")
}

/// The stacks a graph's embedded tree stands for: each node's own value (its value minus
/// its children's) on the path from the root, sorted.
fn stacks_of(graph: &Value) -> Vec<(Vec<String>, u64)> {
    let names: Vec<String> = graph["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap().to_string())
        .collect();
    let nodes: Vec<(i64, usize, u64)> = serde_json::from_value(graph["nodes"].clone()).unwrap();
    let mut paths: Vec<Vec<String>> = Vec::new();
    let mut own: Vec<u64> = Vec::new();
    for (index, &(parent, name, value)) in nodes.iter().enumerate() {
        assert!(
            parent < index as i64,
            "node {index}: parent {parent} comes after it"
        );
        let mut path = if parent < 0 {
            Vec::new()
        } else {
            own[parent as usize] -= value;
            paths[parent as usize].clone()
        };
        path.push(names[name].clone());
        paths.push(path);
        own.push(value);
    }
    let mut stacks: Vec<(Vec<String>, u64)> = paths
        .into_iter()
        .zip(own)
        .filter(|(_, value)| *value > 0)
        .collect();
    stacks.sort();
    stacks
}

fn sorted_input(graph: &FlameGraph) -> Vec<(Vec<String>, u64)> {
    let mut stacks = graph.stacks.clone();
    stacks.sort();
    stacks
}

#[test]
fn nothing_is_fetched() {
    let text = page("app", &["one line"], &sample_graphs());
    let lower = text.to_lowercase();
    for forbidden in ["http://", "https://", "//cdn", "src=", "@import", "url("] {
        assert!(
            !lower.contains(forbidden),
            "the page contains {forbidden:?}"
        );
    }
    assert!(text.contains("content=\"default-src 'none'; "));
    assert!(!SCRIPT.to_lowercase().contains("</script"));
    assert!(!STYLE.to_lowercase().contains("</style"));
    assert!(text.starts_with("<!DOCTYPE html>\n"));
    assert!(text.ends_with("</html>\n"));
}

#[test]
fn hostile_frame_names_round_trip() {
    let hostile = [
        "</script><script>alert(1)</script>",
        "\"quoted\" and 'single'",
        "a & b &amp; <!-- -->",
        "std::map<std::string, std::vector<int>>::operator[]",
        "naïve ünïcode — 日本語 \u{1F600} \u{2028}",
        "back\\slash\ttab\nnewline",
    ];
    let script_then_newline = [hostile[0], hostile[5]];
    let stacks: Vec<(&[&str], u64)> = vec![
        (&hostile[..3], 7),
        (&hostile[..2], 5),
        (&hostile[3..], 11),
        (&script_then_newline, 2),
    ];
    let graphs = vec![
        graph("</script>peak&\"", &stacks),
        graph("second", &[(&hostile[4..5], 1)]),
    ];
    let text = page("t", &[], &graphs);
    let block = data_block(&text);
    for raw in ['<', '>', '&'] {
        assert!(!block.contains(raw), "{raw:?} is written raw in the data");
    }
    assert_eq!(
        text.matches("</script>").count(),
        2,
        "one data block, one script"
    );
    let json = data(&text);
    let embedded = json["graphs"].as_array().unwrap();
    assert_eq!(embedded.len(), graphs.len());
    for (embedded, graph) in embedded.iter().zip(&graphs) {
        assert_eq!(embedded["metric"], graph.metric.as_str());
        assert_eq!(embedded["description"], graph.description.as_str());
        assert_eq!(stacks_of(embedded), sorted_input(graph));
    }
    assert_eq!(json["graphs"][0]["total"], 25);
}

#[test]
fn title_and_summary_are_escaped() {
    let text = page(
        "<b>app</b> & \"run.msup\"",
        &["peak <i>1 KiB</i>", "it's & done"],
        &sample_graphs(),
    );
    let title = "&lt;b&gt;app&lt;/b&gt; &amp; &quot;run.msup&quot;";
    assert!(text.contains(&format!("<title>memsup: {title}</title>")));
    assert!(text.contains(&format!("<h1>memsup: {title}</h1>")));
    assert!(text.contains(
        "<pre class=\"summary\">peak &lt;i&gt;1 KiB&lt;/i&gt;\nit&#39;s &amp; done</pre>"
    ));
    assert!(!text.contains("<b>") && !text.contains("<i>"));
}

#[test]
fn every_metric_is_a_tab_with_its_section() {
    let mut graphs = sample_graphs();
    graphs.push(graph("<odd> \"metric\"", &[(&["x"], 1)]));
    let text = page("app", &[], &graphs);
    let mut last = 0;
    for (index, graph) in graphs.iter().enumerate() {
        let label = escape(&graph.metric);
        let tab = format!(
            "<button type=\"button\" class=\"tab\" role=\"tab\" data-graph=\"{index}\" \
             aria-selected=\"{}\">{label}</button>",
            index == 0
        );
        let position = text.find(&tab).unwrap_or_else(|| panic!("no tab {tab}"));
        assert!(position > last, "tabs in the order of the graphs");
        last = position;
        let hidden = if index == 0 { "" } else { " hidden" };
        assert!(text.contains(&format!(
            "<section class=\"graph\" id=\"graph-{index}\" data-metric=\"{label}\"{hidden}>"
        )));
    }
    assert!(text.contains("<p class=\"description\">bytes peak; total 424 bytes</p>"));
    assert!(text
        .contains("<p class=\"description\">bytes allocated; total 1.00 MiB (1048576 bytes)</p>"));
}

#[test]
fn an_empty_metric_says_so() {
    let graphs = vec![
        graph("leaked", &[]),
        graph("zero", &[(&["main"], 0)]),
        graph("peak", &[(&["main"], 1)]),
    ];
    let text = page("app", &[], &graphs);
    assert!(
        text.contains("<p class=\"empty\">Nothing to show: no stack has a value for leaked.</p>")
    );
    assert!(text.contains("<p class=\"empty\">Nothing to show: no stack has a value for zero.</p>"));
    assert!(!text.contains("id=\"chart-0\"") && !text.contains("id=\"chart-1\""));
    assert!(text.contains("<div class=\"chart\" id=\"chart-2\"></div>"));
    let json = data(&text);
    assert_eq!(json["graphs"][1]["total"], 0);
    assert_eq!(json["graphs"][1]["nodes"], serde_json::json!([]));

    let none = page("app", &[], &[]);
    assert!(none.contains("<p class=\"empty\">Nothing to show: no flamegraph.</p>"));
    assert!(!none.contains("class=\"tab\""));
    assert_eq!(data(&none), serde_json::json!({"graphs": []}));
}

#[test]
fn shared_prefixes_are_merged_in_pre_order() {
    let graphs = vec![graph(
        "peak",
        &[
            (&["e"], 4),
            (&["a", "b", "c"], 5),
            (&["a", "d"], 2),
            (&["a", "b"], 3),
            (&["a", "b", "c"], 1),
            (&["a", "a"], 2),
            (&["b"], 4),
            (&[], 1),
            (&["never"], 0),
        ],
    )];
    let json = data(&page("app", &[], &graphs));
    let graph = &json["graphs"][0];
    let names: Vec<&str> = graph["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    let nodes: Vec<(i64, usize, u64)> = serde_json::from_value(graph["nodes"].clone()).unwrap();
    let nodes: Vec<(i64, &str, u64)> = nodes
        .into_iter()
        .map(|(parent, name, value)| (parent, names[name], value))
        .collect();
    assert_eq!(
        nodes,
        [
            (-1, "a", 13),
            (0, "b", 9),
            (1, "c", 6),
            (0, "a", 2),
            (0, "d", 2),
            (-1, "b", 4),
            (-1, "e", 4),
        ]
    );
    assert_eq!(graph["total"], 22, "the empty stack counts at the root");
    assert_eq!(names.len(), 5, "names are interned: {names:?}");
    assert!(!names.contains(&"never"));
}

#[test]
fn deep_stacks_are_merged_without_recursion() {
    let frames: Vec<String> = (0..100_000)
        .map(|depth| format!("f{}", depth % 3))
        .collect();
    let graphs = vec![FlameGraph {
        metric: "peak".to_string(),
        description: "deep".to_string(),
        stacks: vec![(frames.clone(), 8), (frames[..50_000].to_vec(), 2)],
    }];
    let json = data(&page("app", &[], &graphs));
    let nodes = json["graphs"][0]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 100_000);
    assert_eq!(nodes[49_999], serde_json::json!([49_998, 1, 10]));
    assert_eq!(nodes[50_000], serde_json::json!([49_999, 2, 8]));
}

#[test]
fn runtime_frames_are_recognised_by_their_module() {
    for name in [
        "malloc [libc.so.6]",
        "_dl_start [ld-linux-x86-64.so.2]",
        "operator new(unsigned long) (/usr/lib/x86_64-linux-gnu/libstdc++.so.6)",
        "__libc_start_main [/lib/x86_64-linux-gnu/libc-2.31.so]",
        "malloc [/lib/ld-musl-x86_64.so.1]",
        "_Unwind_RaiseException [libgcc_s.so.1] ",
    ] {
        assert!(is_runtime_frame(name), "{name}");
    }
    for name in [
        "malloc",
        "main [app]",
        "main+0x25 (app)",
        "foo(libc.so.6)",
        "parse [libcrypto.so.3]",
        "std::vector<int>::push_back(int const&)",
        "libc.so.6",
    ] {
        assert!(!is_runtime_frame(name), "{name}");
    }
    let json = data(&page("app", &[], &sample_graphs()));
    let graph = &json["graphs"][0];
    let runtime: Vec<&str> = graph["runtime"]
        .as_array()
        .unwrap()
        .iter()
        .map(|index| {
            graph["names"][index.as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        runtime,
        ["__libc_start_main [libc.so.6]", "malloc [libc.so.6]"]
    );
}
