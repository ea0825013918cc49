//! `memsup diff --format html` in headless Chromium: the new profile's flame graph with each
//! frame coloured by the change of its own bytes (red grew, blue shrank, grey unchanged), on
//! the two builds of fixtures/diff_sites.c that differ by one allocation of 4096 bytes. The
//! page goes to NEW.diff.html in the current directory, or where `-o` says.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::common::chromium::{dumped_dom, start_chromium};
use crate::common::engine::{recorded_by_hooks, suite_engine_is_hooks};
use crate::common::run::{clean_command, memsup_binary, run_command};
use crate::common::*;
use crate::diff::{base_build, extra_build, recorded};

const GREW: &str = "rgb(255, 40, 40)";
const SHRANK: &str = "rgb(40, 40, 255)";
const UNCHANGED: &str = "rgb(220, 220, 220)";

/// A drawn frame's (data-change, background).
type Drawn = BTreeMap<String, (String, String)>;

/// The value of attribute `name` in the start tag `tag`.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// The frames drawn in section `graph-INDEX`, by name.
fn frames_of(dom: &str, index: usize) -> Drawn {
    let start = dom
        .find(&format!("id=\"graph-{index}\""))
        .expect("the section");
    let section = &dom[start..];
    let section = &section[..section.find("</section>").expect("its end")];
    let mut frames = Drawn::new();
    for (position, _) in section.match_indices("<div ") {
        let tag = &section[position..position + section[position..].find('>').unwrap()];
        if !attribute(tag, "class").is_some_and(|class| class.split(' ').any(|c| c == "frame")) {
            continue;
        }
        let style = attribute(tag, "style").unwrap_or_default();
        let background = style
            .split(';')
            .filter_map(|declaration| declaration.split_once(':'))
            .find(|(property, _)| property.trim() == "background")
            .map(|(_, value)| value.trim().to_string())
            .unwrap_or_default();
        let name = attribute(tag, "data-name").unwrap_or_default().to_string();
        let change = attribute(tag, "data-change")
            .unwrap_or_default()
            .to_string();
        frames.insert(name, (change, background));
    }
    frames
}

/// Hovers the peak graph's make_extra frame (when drawn) and keeps the tooltip's lines,
/// joined by " | ", in the body's `data-tooltip`.
const HOVER: &str = r#"<script>
const extra = document.querySelector('#chart-0 .frame[data-name="make_extra"]');
if (extra) {
  extra.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 5, clientY: 5 }));
  document.body.dataset.tooltip = document.getElementById("tooltip").textContent.split("\n").join(" | ");
}
</script>
</body>"#;

/// The page `memsup diff --format html` writes: by default NEW.diff.html in the current
/// directory (announced, nothing on stdout), else where `-o` says.
fn diff_page(base: &Path, new: &Path, directory: &Path, named: bool) -> String {
    let default_name = format!("{}.diff.html", new.file_stem().unwrap().to_string_lossy());
    let named_path = directory.join("named.diff.html");
    let mut command = clean_command(memsup_binary());
    command
        .current_dir(directory)
        .args(["diff", "--format", "html"]);
    if named {
        command.arg("-o").arg(&named_path);
    }
    command.arg(base).arg(new);
    let output = run_command(command, None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    let path = if named {
        assert_eq!(stderr, "");
        named_path
    } else {
        assert_eq!(
            stderr,
            format!("memsup: report written to {default_name}\n")
        );
        directory.join(default_name)
    };
    let page = fs::read_to_string(&path).unwrap();
    fs::remove_file(&path).unwrap();
    page
}

fn drawn_page(base: &Path, new: &Path, directory: &Path, name: &str) -> String {
    let page = diff_page(base, new, directory, name == "shrunk");
    let file = directory.join(format!("{name}.html"));
    fs::write(&file, page.replace("</body>", HOVER)).unwrap();
    let browser = start_chromium(&file, &directory.join(name));
    dumped_dom(browser)
}

/// Every frame of `frames` but those of `coloured` is grey.
fn assert_rest_unchanged(frames: &Drawn, coloured: &[&str]) {
    for (name, (_, background)) in frames {
        if !coloured.contains(&name.as_str()) {
            assert_eq!(background, UNCHANGED, "frame {name} in {frames:#?}");
        }
    }
}

#[test]
fn the_differential_flame_graph_colours_the_one_changed_site() {
    if !require_tool("chromium") {
        return;
    }
    let (Some(base), Some(extra)) = (base_build(), extra_build()) else {
        return;
    };
    let base = recorded(&base);
    let extra = recorded(&extra);
    // Recorded by the engine the suite runs under (memsup's default, or MEMSUP_ENGINE).
    let hooks = recorded_by_hooks(&crate::common::report::processes(&extra.report)[0]);
    assert_eq!(hooks, suite_engine_is_hooks());
    let directory = tempfile::tempdir().unwrap();
    let grown = drawn_page(&base.profile, &extra.profile, directory.path(), "grown");
    // peak (graph 0) and leaked (graph 1): make_extra is 4096 more, the rest the same.
    for graph in [0, 1] {
        let frames = frames_of(&grown, graph);
        showing_on_failure(&format!("graph {graph}: {frames:#?}"), || {
            assert_eq!(frames["make_extra"], ("4096".to_string(), GREW.to_string()));
            assert_eq!(
                frames["make_table"],
                ("0".to_string(), UNCHANGED.to_string())
            );
            assert_eq!(frames["all"].0, "4096");
            assert_eq!(frames["main"].0, "4096");
            assert_rest_unchanged(&frames, &["make_extra"]);
        });
    }
    let peak = frames_of(&grown, 0);
    assert_eq!(
        peak["make_buffer"],
        ("0".to_string(), UNCHANGED.to_string())
    );
    // 4096 of the new peak's 8096 bytes.
    assert!(
        grown.contains(
            "data-tooltip=\"make_extra | 4.00 KiB (4096 bytes), 50.59% of the total | \
             change +4.00 KiB (4096 bytes) (own +4.00 KiB (4096 bytes))\""
        ),
        "no tooltip in {}",
        &grown[grown.find("<body").unwrap()..][..200]
    );

    // The other way round, make_extra is gone: its 4096 bytes are a shrink of its caller.
    let shrunk = drawn_page(&extra.profile, &base.profile, directory.path(), "shrunk");
    let frames = frames_of(&shrunk, 0);
    assert!(!frames.contains_key("make_extra"), "{frames:#?}");
    assert_eq!(frames["main"], ("-4096".to_string(), SHRANK.to_string()));
    assert_rest_unchanged(&frames, &["main"]);
}
