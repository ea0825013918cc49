//! The HTML report in a browser: headless Chromium loads a rendered page from a file and
//! dumps the DOM its script built; the frames of the first metric, their positions, widths
//! and classes are checked exactly, once as loaded and once after a zoom and a search.

use std::collections::BTreeSet;
use std::fs;

use memsup::report::html::{render, FlameGraph};

use crate::common::chromium::{dumped_dom, start_chromium};
use crate::common::*;

const MIB: u64 = 1 << 20;

/// A name that would end the data block and inject an element if it were written raw.
const HOSTILE: &str = "</script><b id=\"injected\">x</b> & 'q'";

fn stack(frames: &[&str], value: u64) -> (Vec<String>, u64) {
    (
        frames.iter().map(|frame| frame.to_string()).collect(),
        value,
    )
}

/// "peak": a root of 100 MiB with three children of 50, 30 and 20 MiB; "leaked": empty;
/// "temporary": a hostile name and a frame too narrow to draw.
fn graphs() -> Vec<FlameGraph> {
    vec![
        FlameGraph {
            metric: "peak".to_string(),
            description: "bytes live at the global peak".to_string(),
            stacks: vec![
                stack(&["main", "parse", "std::vector<int>::push_back"], 30 * MIB),
                stack(&["worker", "malloc [libc.so.6]"], 30 * MIB),
                stack(&["main", "parse"], 10 * MIB),
                stack(&["__libc_start_call_main [libc.so.6]"], 20 * MIB),
                stack(&["main", "build"], 10 * MIB),
            ],
        },
        FlameGraph {
            metric: "leaked".to_string(),
            description: "bytes never freed".to_string(),
            stacks: Vec::new(),
        },
        FlameGraph {
            metric: "temporary".to_string(),
            description: "bytes freed soon after".to_string(),
            stacks: vec![stack(&[HOSTILE], 1_000_000), stack(&["tiny"], 1)],
        },
    ]
}

/// A drawn frame: data-name, class, and the left, width and top of its style.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Frame {
    pub name: String,
    pub class: String,
    pub left: String,
    pub width: String,
    pub top: String,
}

pub(crate) fn frame(name: &str, class: &str, left: &str, width: &str, top: &str) -> Frame {
    Frame {
        name: name.to_string(),
        class: class.to_string(),
        left: left.to_string(),
        width: width.to_string(),
        top: top.to_string(),
    }
}

pub(crate) fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The attributes of the start tag at the beginning of `tag` ("<div a=\"1\" b=\"2\">...").
pub(crate) fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = &tag[tag.find(' ').expect("a tag with attributes")..];
    loop {
        rest = rest.trim_start();
        if rest.starts_with('>') {
            return found;
        }
        let equals = rest.find("=\"").expect("name=\"value\" attributes");
        let name = rest[..equals].to_string();
        let value_start = equals + 2;
        let value_length = rest[value_start..].find('"').expect("a closing quote");
        found.push((
            name,
            unescape(&rest[value_start..value_start + value_length]),
        ));
        rest = &rest[value_start + value_length + 1..];
    }
}

/// The frames drawn in section `graph-INDEX` of a dumped DOM.
pub(crate) fn frames_of(dom: &str, index: usize) -> BTreeSet<Frame> {
    let start = dom
        .find(&format!("id=\"graph-{index}\""))
        .unwrap_or_else(|| panic!("no section graph-{index} in\n{dom}"));
    let section = &dom[start..];
    let section = &section[..section.find("</section>").expect("the end of the section")];
    let mut frames = BTreeSet::new();
    for (position, _) in section.match_indices("<div ") {
        let attributes = attributes(&section[position..]);
        let get = |wanted: &str| {
            attributes
                .iter()
                .find(|(name, _)| name == wanted)
                .map(|(_, value)| value.clone())
                .unwrap_or_default()
        };
        if !get("class").split(' ').any(|class| class == "frame") {
            continue;
        }
        let style = get("style");
        let property = |wanted: &str| {
            style
                .split(';')
                .filter_map(|declaration| declaration.split_once(':'))
                .find(|(name, _)| name.trim() == wanted)
                .map(|(_, value)| value.trim().to_string())
                .unwrap_or_default()
        };
        frames.insert(Frame {
            name: get("data-name"),
            class: get("class"),
            left: property("left"),
            width: property("width"),
            top: property("top"),
        });
    }
    frames
}

/// Clicks "main" in the first graph (a zoom), types "PARSE" in the search box, hovers over
/// "parse", keeps the matched share in a body attribute, then picks the third tab.
const INTERACTIONS: &str = r#"<script>
const frameNamed = (name) => document.querySelector(`#chart-0 .frame[data-name="${name}"]`);
frameNamed("main").click();
const box = document.getElementById("search");
box.value = "PARSE";
box.dispatchEvent(new Event("input"));
const hover = { bubbles: true, clientX: 5, clientY: 5 };
frameNamed("parse").dispatchEvent(new MouseEvent("mousemove", hover));
document.body.dataset.matchedInPeak = document.getElementById("matched").textContent;
document.querySelector('.tab[data-graph="2"]').click();
</script>
</body>"#;

/// The attributes of the start tag that contains `marker`.
pub(crate) fn tag_with(dom: &str, marker: &str) -> Vec<(String, String)> {
    let position = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in\n{dom}"));
    attributes(&dom[dom[..=position].rfind('<').unwrap()..])
}

pub(crate) fn has_attribute(attributes: &[(String, String)], wanted: &str) -> bool {
    attributes.iter().any(|(name, _)| name == wanted)
}

/// The text of the element whose start tag contains `marker` (no child elements).
pub(crate) fn text_of(dom: &str, marker: &str) -> String {
    let start = &dom[dom.find(marker).unwrap_or_else(|| panic!("no {marker}"))..];
    let text = &start[start.find('>').unwrap() + 1..];
    unescape(&text[..text.find('<').unwrap()])
}

#[test]
fn chromium_draws_the_flamegraphs() {
    if !require_tool("chromium") {
        return;
    }
    let directory = tempfile::tempdir().expect("a temporary directory");
    let mut page = Vec::new();
    let summary = ["peak 100.00 MiB".to_string()];
    render("app <run.msup>", &summary, &graphs(), &mut page).unwrap();
    let page = String::from_utf8(page).unwrap();
    let loaded = directory.path().join("loaded.html");
    fs::write(&loaded, &page).unwrap();
    let clicked = directory.path().join("clicked.html");
    fs::write(&clicked, page.replace("</body>", INTERACTIONS)).unwrap();
    let profiles = [directory.path().join("p1"), directory.path().join("p2")];
    // Both browsers run at once: each takes a second or two, mostly starting up.
    let loaded = start_chromium(&loaded, &profiles[0]);
    let clicked = start_chromium(&clicked, &profiles[1]);
    let loaded = dumped_dom(loaded);
    let clicked = dumped_dom(clicked);

    let expected: BTreeSet<Frame> = [
        frame("all", "frame", "0%", "100%", "0px"),
        frame("main", "frame", "0%", "50%", "18px"),
        frame("worker", "frame", "50%", "30%", "18px"),
        frame(
            "__libc_start_call_main [libc.so.6]",
            "frame runtime",
            "80%",
            "20%",
            "18px",
        ),
        frame("parse", "frame", "0%", "40%", "36px"),
        frame("build", "frame", "40%", "10%", "36px"),
        frame("malloc [libc.so.6]", "frame runtime", "50%", "30%", "36px"),
        frame("std::vector<int>::push_back", "frame", "0%", "30%", "54px"),
    ]
    .into_iter()
    .collect();
    assert_eq!(frames_of(&loaded, 0), expected, "peak as loaded");
    assert!(frames_of(&loaded, 1).is_empty(), "leaked has no frames");
    let leaked = &loaded[loaded.find("id=\"graph-1\"").unwrap()..];
    assert!(leaked.contains("Nothing to show"), "leaked says so");
    let names: BTreeSet<String> = frames_of(&loaded, 2).into_iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        BTreeSet::from(["all".to_string(), HOSTILE.to_string()]),
        "the hostile name is drawn as text, the tiny frame not at all"
    );
    assert!(
        !loaded.contains("<b id=\"injected\""),
        "no element injected"
    );
    assert!(loaded.contains("aria-selected=\"true\">peak</button>"));

    // Zoomed into main: its caller dimmed at full width, main's callees relative to main.
    let expected: BTreeSet<Frame> = [
        frame("all", "frame ancestor", "0%", "100%", "0px"),
        frame("main", "frame", "0%", "100%", "18px"),
        frame("parse", "frame match", "0%", "80%", "36px"),
        frame("build", "frame", "80%", "20%", "36px"),
        frame("std::vector<int>::push_back", "frame", "0%", "60%", "54px"),
    ]
    .into_iter()
    .collect();
    assert_eq!(frames_of(&clicked, 0), expected, "peak zoomed into main");
    assert_eq!(
        tag_with(&clicked, "<body")
            .iter()
            .find(|(name, _)| name == "data-matched-in-peak"),
        Some(&(
            "data-matched-in-peak".to_string(),
            "Matched: 40.00 MiB (41943040 bytes), 40.00% of the total".to_string()
        )),
        "the matched share in peak"
    );
    let tooltip = tag_with(&clicked, "id=\"tooltip\"");
    assert!(!has_attribute(&tooltip, "hidden"), "the tooltip is shown");
    assert_eq!(
        text_of(&clicked, "id=\"tooltip\""),
        "parse\n40.00 MiB (41943040 bytes), 40.00% of the total"
    );
    // The third tab: its section alone is shown, the search now measured in it.
    assert!(has_attribute(
        &tag_with(&clicked, "id=\"graph-0\""),
        "hidden"
    ));
    assert!(!has_attribute(
        &tag_with(&clicked, "id=\"graph-2\""),
        "hidden"
    ));
    assert!(clicked.contains("aria-selected=\"true\">temporary</button>"));
    assert_eq!(
        text_of(&clicked, "id=\"matched\""),
        "Matched: 0 bytes, 0.00% of the total"
    );
}
