//! The component reports of one recorded profile (fixtures/residency.c), checked against the
//! JSON report of the same profile: the HTML page's charts as headless Chromium lays them out
//! (one series per component with points, one line per process total), the CSV rows and the
//! Perfetto counter tracks.
//!
//! The residency fixture holds 64 MiB of heap blocks, so its launched image must list
//! components; these tests fail while the analysis lists none.

use std::collections::BTreeSet;
use std::fs;

use serde_json::Value;

use crate::common::chromium::{dumped_dom, start_chromium};
use crate::common::report::{processes, report_output};
use crate::common::*;

/// The residency fixture (dynamic glibc) recorded under memsup, or None without a compiler.
fn recorded() -> Option<Recording> {
    let variant = *variants("residency").first()?;
    let program = fixture("residency", variant);
    Some(record(&program, &[], None))
}

/// The components of every image of the JSON report, requiring some in the launched image.
fn components_of(report: &Value) -> Vec<Vec<Value>> {
    let images: Vec<Vec<Value>> = processes(report)
        .iter()
        .map(|image| {
            image["components"]
                .as_array()
                .unwrap_or_else(|| panic!("an image without a components list: {image:#}"))
                .clone()
        })
        .collect();
    let launched = processes(report)
        .iter()
        .position(|image| image["cause"] == "launch")
        .expect("a launched image");
    assert!(
        !images[launched].is_empty(),
        "the JSON report lists no components for the launched image of the residency fixture"
    );
    images
}

fn names_with(components: &[Value], timeline: &str) -> BTreeSet<String> {
    components
        .iter()
        .filter(|component| {
            !component[timeline]
                .as_array()
                .expect("a timeline array")
                .is_empty()
        })
        .map(|component| component["name"].as_str().unwrap().to_string())
        .collect()
}

/// The value of attribute `name` of the start tag at the beginning of `tag`.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let tag = &tag[..tag.find('>').unwrap()];
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let value = &tag[start..start + tag[start..].find('"').unwrap()];
    Some(
        value
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// The chart `chart` of section `timelines-INDEX` in a dumped DOM: its start tag's
/// attributes are read with `attribute`, its paths with `paths`.
fn chart<'a>(dom: &'a str, index: usize, chart: &str) -> &'a str {
    let section = &dom[dom
        .find(&format!("id=\"timelines-{index}\""))
        .unwrap_or_else(|| panic!("no section timelines-{index} in\n{dom}"))..];
    let section = &section[..section.find("</section>").unwrap()];
    let start = section
        .find(&format!(
            "<svg class=\"timeline-chart\" data-chart=\"{chart}\""
        ))
        .unwrap_or_else(|| panic!("no {chart} chart in\n{section}"));
    let svg = &section[start..];
    &svg[..svg.find("</svg>").unwrap()]
}

/// The value of attribute `name` of every `<path>` of class `series` in `svg`.
fn series_attributes(svg: &str, name: &str) -> Vec<String> {
    svg.match_indices("<path ")
        .map(|(position, _)| &svg[position..])
        .filter(|tag| {
            attribute(tag, "class").is_some_and(|class| class.split(' ').any(|c| c == "series"))
        })
        .map(|tag| attribute(tag, name).unwrap_or_default())
        .collect()
}

/// Keeps, on each chart, the width Chromium laid it out at.
const MEASURE: &str = r#"<script>
for (const svg of document.querySelectorAll("svg.timeline-chart")) {
  svg.dataset.renderedWidth = Math.round(svg.getBoundingClientRect().width);
  svg.dataset.seriesDrawn = [...svg.querySelectorAll("path.series")]
    .filter((path) => path.getTotalLength() > 0).length;
}
</script>
</body>"#;

#[test]
fn chromium_draws_one_series_per_component() {
    if !require_tool("chromium") {
        return;
    }
    let Some(recording) = recorded() else {
        return;
    };
    let images = components_of(&recording.report);
    let html = report_output(&recording.profile, &["--format", "html", "-o", "-"]);
    let directory = tempfile::tempdir().expect("a temporary directory");
    let page = directory.path().join("page.html");
    fs::write(&page, html.replace("</body>", MEASURE)).unwrap();
    let dom = dumped_dom(start_chromium(&page, &directory.path().join("profile")));

    for (index, (components, image)) in images.iter().zip(processes(&recording.report)).enumerate()
    {
        let timeline = &image["timeline"];
        let totals: Vec<String> = ["requested", "rss", "pss"]
            .into_iter()
            .filter(|metric| !timeline[*metric].as_array().unwrap().is_empty())
            .map(str::to_string)
            .collect();
        if components.is_empty() && totals.is_empty() {
            let section = &dom[dom.find(&format!("id=\"timelines-{index}\"")).unwrap()..];
            assert!(section[..section.find("</section>").unwrap()].contains("Nothing to show"));
            continue;
        }
        for (name, key) in [
            ("requested", "requested_timeline"),
            ("rss", "resident_timeline"),
        ] {
            let svg = chart(&dom, index, name);
            let drawn = series_attributes(svg, "data-component");
            let expected = names_with(components, key);
            assert_eq!(
                drawn.len(),
                expected.len(),
                "image {index} {name}: {drawn:?}"
            );
            assert_eq!(
                drawn.into_iter().collect::<BTreeSet<_>>(),
                expected,
                "image {index}: one {name} series per component with points"
            );
            assert!(
                series_attributes(svg, "data-metric")
                    .iter()
                    .all(|metric| metric == name),
                "image {index} {name}"
            );
            let series = expected.len().to_string();
            assert_eq!(attribute(svg, "data-series-drawn"), Some(series), "{name}");
            let width: u32 = attribute(svg, "data-rendered-width")
                .unwrap()
                .parse()
                .unwrap();
            assert!(width > 100, "image {index} {name} laid out {width} px wide");
        }
        let svg = chart(&dom, index, "totals");
        assert_eq!(
            series_attributes(svg, "data-metric"),
            totals,
            "image {index}"
        );
        // The stacked requested chart peaks at the highest sum of the components' requested
        // bytes, which can not exceed the axis.
        let requested = chart(&dom, index, "requested");
        let highest: u64 = attribute(requested, "data-highest")
            .unwrap()
            .parse()
            .unwrap();
        let axis: u64 = attribute(requested, "data-axis-max")
            .unwrap()
            .parse()
            .unwrap();
        let largest_peak = components
            .iter()
            .map(|component| number(component, "/peak_requested_bytes"))
            .max()
            .unwrap();
        assert!(
            (largest_peak..=axis).contains(&highest),
            "image {index}: {largest_peak} <= {highest} <= {axis}"
        );
        let legend: Vec<String> = components
            .iter()
            .map(|component| component["name"].as_str().unwrap().to_string())
            .collect();
        for name in &legend {
            assert!(
                dom.contains(&format!("<li data-component=\"{name}\">")),
                "image {index}: {name} in the legend"
            );
        }
    }
}

#[test]
fn csv_and_perfetto_carry_the_json_timelines() {
    let Some(recording) = recorded() else {
        return;
    };
    let images = components_of(&recording.report);
    // Every point of the JSON report, as CSV rows in the documented order.
    let mut expected =
        vec!["pid,image_start_ns,time_ns,component,metric,bytes,estimated".to_string()];
    let mut tracks = BTreeSet::new();
    for (components, image) in images.iter().zip(processes(&recording.report)) {
        let pid = number(image, "/pid");
        let start = number(image, "/start_ns");
        let estimates: Vec<&Value> = image["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|snapshot| snapshot["estimated"] == true)
            .map(|snapshot| &snapshot["time_ns"])
            .collect();
        let mut row = |component: &str, metric: &str, time: &Value, bytes: &Value| {
            let of_snapshots = component != "total" && metric != "requested";
            let estimated = u8::from(of_snapshots && estimates.contains(&time));
            expected.push(format!(
                "{pid},{start},{time},{component},{metric},{bytes},{estimated}"
            ));
            tracks.insert((pid, format!("{component} {metric}")));
        };
        for component in components {
            let name = component["name"].as_str().unwrap();
            assert!(!name.contains([',', '"']), "{name} would be quoted");
            for point in component["requested_timeline"].as_array().unwrap() {
                row(name, "requested", &point[0], &point[1]);
            }
            for (column, metric) in [(1, "rss"), (2, "pss"), (3, "swap")] {
                for point in component["resident_timeline"].as_array().unwrap() {
                    row(name, metric, &point[0], &point[column]);
                }
            }
        }
        for metric in ["requested", "rss", "pss", "swap"] {
            for point in image["timeline"][metric].as_array().unwrap() {
                row("total", metric, &point[0], &point[1]);
            }
        }
    }
    let csv = report_output(&recording.profile, &["--format", "csv"]);
    assert_eq!(csv.lines().collect::<Vec<_>>(), expected);

    let trace: Value = serde_json::from_str(&report_output(
        &recording.profile,
        &["--format", "perfetto", "-o", "-"],
    ))
    .expect("the trace is JSON");
    let events = trace["traceEvents"].as_array().unwrap();
    let counters: Vec<&Value> = events.iter().filter(|event| event["ph"] == "C").collect();
    assert_eq!(
        counters.len(),
        expected.len() - 1,
        "one counter event per CSV row"
    );
    let drawn: BTreeSet<(u64, String)> = counters
        .iter()
        .map(|event| {
            (
                number(event, "/pid"),
                event["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(drawn, tracks);
    let names = events
        .iter()
        .filter(|event| event["ph"] == "M" && event["name"] == "process_name")
        .count();
    assert_eq!(names, images.len(), "one process_name per image");
}
