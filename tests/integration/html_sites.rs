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
    if !require_tool("chromium") || skip_stack_test_under_hooks("the sites' source lines") {
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
