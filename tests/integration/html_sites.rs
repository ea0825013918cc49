//! The HTML report of a recorded fixture in headless Chromium: the call-site table sorted by
//! clicks on its headers, and the flame graph's tooltip with source line, module and count.

use std::fs;
use std::path::Path;

use crate::common::build::fixtures_source_dir;
use crate::common::chromium::{dumped_dom, start_chromium};
use crate::common::report::report_output;
use crate::common::*;
use crate::html_report::{tag_with, text_of};

const STDOUT: &str = "site_metrics: sum 3868531392, leaked 496 bytes in 3 blocks\n";

/// The DOM Chromium dumps after `page` loaded and `script` ran after the page's own.
pub(crate) fn dom_after(page: &str, script: &str, directory: &Path, name: &str) -> String {
    let file = directory.join(format!("{name}.html"));
    fs::write(
        &file,
        page.replace(
            "</body>",
            &format!("<script>\n{script}\n</script>\n</body>"),
        ),
    )
    .unwrap();
    dumped_dom(start_chromium(
        &file,
        &directory.join(format!("{name}-profile")),
    ))
}

/// The value of attribute `name` of the body element of `dom`.
pub(crate) fn body_attribute(dom: &str, name: &str) -> String {
    tag_with(dom, "<body")
        .into_iter()
        .find(|(attribute, _)| attribute == name)
        .unwrap_or_else(|| panic!("no {name} on the body of\n{dom}"))
        .1
}

/// The line of the site marker `/* site: NAME */` in fixtures/site_metrics.c.
fn marked_line(name: &str) -> usize {
    let source = fs::read_to_string(fixtures_source_dir().join("site_metrics.c")).unwrap();
    let marker = format!("/* site: {name} */");
    1 + source
        .lines()
        .position(|line| line.contains(&marker))
        .unwrap_or_else(|| panic!("no {marker}"))
}

/// Sorts the table by allocations, again (reversed), then by function, keeping each order of
/// the rows' functions in a body attribute; then hovers over open_table in the peak graph.
const CLICKS: &str = r##"
const header = (label) =>
  Array.from(document.querySelectorAll("#sites th")).find((each) => each.textContent === label);
const order = () =>
  Array.from(document.querySelectorAll("#sites tbody tr"))
    .map((row) => row.cells[0].textContent + " " + row.cells[3].textContent)
    .join(", ");
document.body.dataset.loaded = order();
header("allocations").click();
document.body.dataset.byAllocations = order();
header("allocations").click();
document.body.dataset.byAllocationsReversed = order();
header("function").click();
document.body.dataset.byFunction = order();
document.body.dataset.sort = header("function").getAttribute("aria-sort");
const frame = document.querySelector('#chart-0 .frame[data-name="open_table"]');
frame.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 5, clientY: 5 }));
"##;

#[test]
fn chromium_sorts_the_site_table_and_shows_frame_details() {
    if !require_tool("chromium") {
        return;
    }
    let fixture = fixture("site_metrics", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    assert_eq!(String::from_utf8_lossy(&recording.native.stdout), STDOUT);
    assert!(recording.native.status.success());
    let page = report_output(&recording.profile, &["--format", "html", "-o", "-"]);
    let directory = tempfile::tempdir().unwrap();
    let dom = dom_after(&page, CLICKS, directory.path(), "sites");

    // By bytes at the peak, then bytes allocated.
    assert_eq!(
        body_attribute(&dom, "data-loaded"),
        "open_table 1, open_index 1, grow_list 1, leak_names 2, scratch_buffers 4, \
         grow_list 1, start_list 1"
    );
    // Largest first; ties in the page's order, in both directions.
    assert_eq!(
        body_attribute(&dom, "data-by-allocations"),
        "scratch_buffers 4, leak_names 2, open_table 1, open_index 1, grow_list 1, \
         grow_list 1, start_list 1"
    );
    assert_eq!(
        body_attribute(&dom, "data-by-allocations-reversed"),
        "open_table 1, open_index 1, grow_list 1, grow_list 1, start_list 1, leak_names 2, \
         scratch_buffers 4"
    );
    assert_eq!(
        body_attribute(&dom, "data-by-function"),
        "grow_list 1, grow_list 1, leak_names 2, open_index 1, open_table 1, \
         scratch_buffers 4, start_list 1"
    );
    assert_eq!(body_attribute(&dom, "data-sort"), "ascending");

    let module = fixture.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        text_of(&dom, "id=\"tooltip\""),
        format!(
            "open_table\nsite_metrics.c:{} in {module}\n3.91 KiB (4000 bytes), 66.71% of the \
             total\nblocks live at the peak: 1",
            marked_line("open_table")
        )
    );
}

/// The embedded data of a page.
pub(crate) fn page_data(page: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"memsup-data\">";
    let start = page.find(open).expect("the data block") + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

/// The graph `metric` of a page's data: its total and the value of the one node `name`.
fn graph_total_and_node(data: &serde_json::Value, metric: &str, name: &str) -> (u64, Option<u64>) {
    let graphs = data["graphs"].as_array().unwrap();
    let graph = graphs
        .iter()
        .find(|graph| graph["metric"] == metric)
        .unwrap();
    let names = graph["names"].as_array().unwrap();
    let values: Vec<u64> = (graph["nodes"].as_array().unwrap().iter())
        .filter(|node| names[node[1].as_u64().unwrap() as usize] == name)
        .map(|node| node[2].as_u64().unwrap())
        .collect();
    assert!(values.len() <= 1, "{name} is one node: {values:?}");
    (graph["total"].as_u64().unwrap(), values.first().copied())
}

#[test]
fn chromium_draws_the_mapped_tab() {
    if !require_tool("chromium") {
        return;
    }
    let fixture = fixture("mappings", Variant::Dynamic);
    let full = record(&fixture, &["full"], None);
    let baseline = record(&fixture, &["baseline"], None);
    for (recording, mode) in [(&full, "full"), (&baseline, "baseline")] {
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            format!("mappings: {mode} done\n")
        );
        assert!(recording.native.status.success());
    }
    let page = report_output(&full.profile, &["--format", "html", "-o", "-"]);
    let baseline_page = report_output(&baseline.profile, &["--format", "html", "-o", "-"]);
    // The peak of anonymous mapped memory is the fixture's 69632-byte mmap (17 pages), on
    // top of what the baseline run maps too.
    let (total, own) = graph_total_and_node(&page_data(&page), "mapped", "map_and_unmap");
    let (baseline_total, none) =
        graph_total_and_node(&page_data(&baseline_page), "mapped", "map_and_unmap");
    assert_eq!(own, Some(69632));
    assert_eq!(none, None);
    assert_eq!(total - baseline_total, 69632);

    let directory = tempfile::tempdir().unwrap();
    let click = "document.querySelector('.tab[data-graph=\"4\"]').click();";
    let dom = dom_after(&page, click, directory.path(), "mapped");
    assert!(dom.contains("aria-selected=\"true\">mapped</button>"));
    let drawn: Vec<_> = crate::html_report::frames_of(&dom, 4)
        .into_iter()
        .filter(|frame| frame.name == "map_and_unmap")
        .collect();
    assert_eq!(drawn.len(), 1, "{drawn:?}");
    // Chromium writes the style's percentages to 6 significant digits.
    let drawn_width: f64 = drawn[0].width.trim_end_matches('%').parse().unwrap();
    let width = (100.0 * 69632.0) / total as f64;
    assert!(
        (drawn_width - width).abs() < 5e-4,
        "{drawn_width}% drawn, {width}% expected"
    );
}
