//! The flame graph of what was live at a moment, on fixtures/alloc_script.c, whose
//! allocations and frees happen in a known order: each moment must be one of the script's
//! states, in order; the peak its peak; the end its leaks. Then in headless Chromium: the
//! moment tab shows the peak, a click at the end of the timeline the last moment.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::report::report_output;
use crate::common::*;
use crate::html_report::frames_of;
use crate::html_sites::{body_attribute, dom_after, page_data};

const STDOUT: &str =
    "alloc_script checksum=3107620982\nalloc_script leaked 1128 bytes in 3 blocks\n";

/// Live bytes by the function that called malloc, after each step of the script.
fn script_states() -> Vec<BTreeMap<String, u64>> {
    let state = |entries: &[(&str, u64)]| -> BTreeMap<String, u64> {
        entries
            .iter()
            .map(|(name, bytes)| (name.to_string(), *bytes))
            .collect()
    };
    vec![
        state(&[]),
        state(&[("main", 9000)]),
        state(&[]),
        state(&[("make_buffer", 1000)]),
        state(&[("make_buffer", 2000)]),
        state(&[("make_buffer", 3000)]),
        state(&[("make_buffer", 3000), ("make_record", 5000)]),
        state(&[("make_buffer", 3000), ("make_record", 5000), ("main", 2500)]),
        state(&[("make_buffer", 2000), ("make_record", 5000), ("main", 2500)]),
        state(&[("make_buffer", 1000), ("make_record", 5000), ("main", 2500)]),
        state(&[("make_buffer", 1000), ("main", 2500)]),
        state(&[("make_buffer", 1000)]),
        state(&[("make_buffer", 1000), ("leak_small", 64)]),
        state(&[("make_buffer", 1000), ("leak_small", 128)]),
    ]
}

/// A graph's own bytes (a node's value less its children's) by frame name, zeros left out.
fn own_bytes(graph: &Value) -> BTreeMap<String, u64> {
    let names = graph["names"].as_array().unwrap();
    let nodes = graph["nodes"].as_array().unwrap();
    let mut own: Vec<i64> = nodes.iter().map(|node| node[2].as_i64().unwrap()).collect();
    for node in nodes {
        let parent = node[0].as_i64().unwrap();
        if parent >= 0 {
            own[parent as usize] -= node[2].as_i64().unwrap();
        }
    }
    let mut by_name = BTreeMap::new();
    for (node, bytes) in nodes.iter().zip(own) {
        if bytes > 0 {
            let name = names[node[1].as_u64().unwrap() as usize].as_str().unwrap();
            *by_name.entry(name.to_string()).or_default() += bytes as u64;
        }
    }
    by_name
}

const CLICKS: &str = r##"
document.getElementById("moment-tab").click();
const shown = () => document.querySelector("section.graph:not([hidden])").id;
document.body.dataset.tab = shown();
const svg = document.querySelector("#timelines-0 svg.timeline-chart");
const box = svg.getBoundingClientRect();
svg.dispatchEvent(new MouseEvent("click", { bubbles: true, clientX: box.right - 1, clientY: box.top + 5 }));
document.body.dataset.clicked = shown();
"##;

#[test]
fn each_moment_shows_what_the_script_had_live_then() {
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    assert_eq!(String::from_utf8_lossy(&recording.native.stdout), STDOUT);
    assert!(recording.native.status.success());
    let page = report_output(&recording.profile, &["--format", "html", "-o", "-"]);
    let data = page_data(&page);
    let graphs = data["graphs"].as_array().unwrap();
    let moments: Vec<(usize, &Value)> = (graphs.iter().enumerate())
        .filter(|(_, graph)| graph["metric"] == "moment")
        .collect();
    let kinds = |kind: &str| {
        moments
            .iter()
            .filter(|(_, g)| g["moment"]["kind"] == kind)
            .count()
    };
    // The RSS peak is a moment when the sampler took a sample in the program's few ms.
    let rss = kinds("peak RSS");
    assert!(rss <= 1);
    assert_eq!(
        (kinds("even"), kinds("peak"), moments.len()),
        (20, 1, 21 + rss)
    );
    let states = script_states();
    let mut reached = 0;
    for (index, graph) in &moments {
        let live = own_bytes(graph);
        let found = (reached..states.len()).find(|&state| states[state] == live);
        let state = found.unwrap_or_else(|| {
            panic!(
                "moment {index} ({}): {live:?} is no state from {reached} on",
                graph["moment"]
            )
        });
        if graph["moment"]["kind"] == "peak" {
            assert_eq!(state, 7, "the peak: {live:?}");
        }
        reached = state;
    }
    assert_eq!(reached, 13, "the last moment holds the leaks");

    if !require_tool("chromium") {
        return;
    }
    let (peak, _) = moments
        .iter()
        .find(|(_, graph)| graph["moment"]["kind"] == "peak")
        .unwrap();
    let (last, _) = moments.last().unwrap();
    let directory = tempfile::tempdir().unwrap();
    let dom = dom_after(&page, CLICKS, directory.path(), "moments");
    assert_eq!(body_attribute(&dom, "data-tab"), format!("graph-{peak}"));
    assert_eq!(
        body_attribute(&dom, "data-clicked"),
        format!("graph-{last}")
    );
    let widths = |index: usize| -> BTreeMap<String, String> {
        frames_of(&dom, index)
            .into_iter()
            .filter(|frame| {
                ["make_buffer", "make_record", "leak_small"].contains(&frame.name.as_str())
            })
            .map(|frame| (frame.name, frame.width))
            .collect()
    };
    // Drawn when their section was chosen: 5000 and 3000 of 10500 bytes, 1000 and 128 of 1128.
    assert_eq!(
        widths(*peak),
        BTreeMap::from([
            ("make_buffer".to_string(), "28.5714%".to_string()),
            ("make_record".to_string(), "47.619%".to_string()),
        ])
    );
    assert_eq!(
        widths(*last),
        BTreeMap::from([
            ("leak_small".to_string(), "11.3475%".to_string()),
            ("make_buffer".to_string(), "88.6525%".to_string()),
        ])
    );
}
