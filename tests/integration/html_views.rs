//! The flame graph's views in headless Chromium: bottom-up (the allocator's callers at the
//! root) and a deep stack drawn 40 levels at a time behind markers.

use std::collections::BTreeSet;

use memsup::report::html::{render, FlameGraph};

use crate::common::*;
use crate::html_report::{frame, frames_of, Frame};
use crate::html_sites::dom_after;

fn stack(frames: &[&str], value: u64) -> (Vec<String>, u64) {
    (frames.iter().map(|name| name.to_string()).collect(), value)
}

fn page(graphs: &[FlameGraph]) -> String {
    let mut page = Vec::new();
    render("views", &[], graphs, &mut page).unwrap();
    String::from_utf8(page).unwrap()
}

#[test]
fn chromium_draws_the_bottom_up_view() {
    if !require_tool("chromium") {
        return;
    }
    let graphs = [FlameGraph {
        metric: "peak".to_string(),
        description: "bytes".to_string(),
        stacks: vec![
            stack(&["main", "parse", "push_back"], 30),
            stack(&["worker", "malloc [libc.so.6]"], 30),
            stack(&["main", "parse"], 10),
            stack(&["start [libc.so.6]"], 20),
            stack(&["main", "build"], 10),
        ],
    }];
    let directory = tempfile::tempdir().unwrap();
    let clicks = "document.getElementById('invert').click();\n\
                  document.body.dataset.pressed = \
                  document.getElementById('invert').getAttribute('aria-pressed');";
    let dom = dom_after(&page(&graphs), clicks, directory.path(), "inverted");
    // Own bytes: push_back 30, malloc 30, start 20, parse 10, build 10; each with its
    // callers below it.
    let expected: BTreeSet<Frame> = [
        frame("all", "frame", "0%", "100%", "0px"),
        frame("malloc [libc.so.6]", "frame runtime", "0%", "30%", "18px"),
        frame("push_back", "frame", "30%", "30%", "18px"),
        frame("start [libc.so.6]", "frame runtime", "60%", "20%", "18px"),
        frame("build", "frame", "80%", "10%", "18px"),
        frame("parse", "frame", "90%", "10%", "18px"),
        frame("worker", "frame", "0%", "30%", "36px"),
        frame("parse", "frame", "30%", "30%", "36px"),
        frame("main", "frame", "80%", "10%", "36px"),
        frame("main", "frame", "90%", "10%", "36px"),
        frame("main", "frame", "30%", "30%", "54px"),
    ]
    .into_iter()
    .collect();
    assert_eq!(frames_of(&dom, 0), expected);
    assert!(dom.contains("data-pressed=\"true\""));
}

/// The names, tops and classes of the frames drawn, by top.
fn rows(frames: &BTreeSet<Frame>) -> Vec<(u64, String, String)> {
    let mut rows: Vec<(u64, String, String)> = frames
        .iter()
        .map(|each| {
            let top = each.top.trim_end_matches("px").parse::<u64>().unwrap();
            (top / 18, each.name.clone(), each.class.clone())
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn chromium_draws_a_deep_stack_forty_levels_at_a_time() {
    if !require_tool("chromium") {
        return;
    }
    let deep: Vec<String> = (0..300).map(|level| format!("f{level}")).collect();
    let graphs = [FlameGraph {
        metric: "peak".to_string(),
        description: "bytes".to_string(),
        stacks: vec![(deep, 30), stack(&["shallow"], 10)],
    }];
    let page = page(&graphs);
    let directory = tempfile::tempdir().unwrap();
    let loaded = dom_after(&page, "", directory.path(), "loaded");
    let function =
        |level: usize, class: &str| (level as u64 + 1, format!("f{level}"), class.to_string());
    let mut expected = vec![(0, "all".to_string(), "frame".to_string())];
    expected.push((1, "shallow".to_string(), "frame".to_string()));
    expected.extend((0..40).map(|level| function(level, "frame")));
    expected.push((
        41,
        "\u{2026} 260 more levels".to_string(),
        "frame more".to_string(),
    ));
    expected.sort();
    assert_eq!(rows(&frames_of(&loaded, 0)), expected, "as loaded");
    assert!(
        loaded.contains("style=\"height: 756px;\""),
        "42 rows of 18 px"
    );

    // The marker zooms into f39: the root, a marker for f0..f33, f34..f38 dimmed, then f39
    // and 40 levels below it, then a marker for the last 220.
    let click = "document.querySelector('#chart-0 .frame.more').click();";
    let zoomed = dom_after(&page, click, directory.path(), "zoomed");
    let mut expected = vec![
        (0, "all".to_string(), "frame ancestor".to_string()),
        (
            1,
            "\u{2026} 34 more callers".to_string(),
            "frame more".to_string(),
        ),
    ];
    expected.extend((34..39).map(|level| {
        (
            level as u64 - 32,
            format!("f{level}"),
            "frame ancestor".to_string(),
        )
    }));
    expected.extend(
        (39..80).map(|level| (level as u64 - 32, format!("f{level}"), "frame".to_string())),
    );
    expected.push((
        48,
        "\u{2026} 220 more levels".to_string(),
        "frame more".to_string(),
    ));
    expected.sort();
    assert_eq!(rows(&frames_of(&zoomed, 0)), expected, "zoomed into f39");
    let widths: BTreeSet<String> = frames_of(&zoomed, 0)
        .into_iter()
        .map(|each| each.width)
        .collect();
    assert_eq!(widths, BTreeSet::from(["100%".to_string()]));
}
