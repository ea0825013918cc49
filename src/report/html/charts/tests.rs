//! The charts of the hand-built components (see report/test_data.rs): one series per
//! component with points, stacked to the known highest values, on round axes.

use super::*;
use crate::report::test_data::{component, components_analysis};

fn section() -> String {
    process_section(&components_analysis().processes[0], 0)
}

/// The `<svg>` element of chart `chart`, up to its end.
fn chart<'a>(html: &'a str, chart: &str) -> &'a str {
    let start = html
        .find(&format!(
            "<svg class=\"timeline-chart\" data-chart=\"{chart}\""
        ))
        .unwrap_or_else(|| panic!("no {chart} chart in\n{html}"));
    let rest = &html[start..];
    &rest[..rest.find("</svg>").unwrap()]
}

/// The value of attribute `name` of the start tag at the beginning of `tag`.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let tag = &tag[..tag.find('>').unwrap()];
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&tag[start..start + tag[start..].find('"').unwrap()])
}

struct Series {
    component: Option<String>,
    metric: String,
    fill: String,
    vertices: Vec<(f64, f64)>,
}

fn series(svg: &str) -> Vec<Series> {
    svg.match_indices("<path ")
        .map(|(position, _)| {
            let tag = &svg[position..];
            let vertices = attribute(tag, "d")
                .unwrap()
                .split_whitespace()
                .filter(|token| *token != "Z")
                .map(|token| {
                    let (x, y) = token[1..].split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            Series {
                component: attribute(tag, "data-component").map(str::to_string),
                metric: attribute(tag, "data-metric").unwrap().to_string(),
                fill: attribute(tag, "fill").unwrap().to_string(),
                vertices,
            }
        })
        .collect()
}

fn top(series: &Series) -> f64 {
    series
        .vertices
        .iter()
        .map(|&(_, y)| y)
        .fold(f64::INFINITY, f64::min)
}

/// The y of `bytes` on an axis ending at `axis_max`, worked out here.
fn expected_y(bytes: f64, axis_max: f64) -> f64 {
    230.0 - bytes / axis_max * 220.0
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() < 0.006,
        "{what}: {actual} instead of {expected}"
    );
}

#[test]
fn requested_bytes_stack_to_the_known_highest() {
    let html = section();
    let svg = chart(&html, "requested");
    assert_eq!(attribute(svg, "data-highest"), Some("3500"));
    assert_eq!(attribute(svg, "data-axis-max"), Some("4096"), "4 KiB");
    let drawn = series(svg);
    let names: Vec<Option<&str>> = drawn.iter().map(|s| s.component.as_deref()).collect();
    assert_eq!(
        names,
        [Some("app"), Some("libc")],
        "overhead has no requested bytes"
    );
    assert!(drawn.iter().all(|s| s.metric == "requested"));
    assert_eq!(drawn[0].fill, "#4e79a7");
    assert_eq!(drawn[1].fill, "#f28e2b");
    // app alone peaks at 3000; app + libc at 3500 (2000 ns), the top of the chart.
    assert_close(top(&drawn[0]), expected_y(3000.0, 4096.0), "app");
    assert_close(top(&drawn[1]), expected_y(3500.0, 4096.0), "libc on app");
    assert_close(top(&drawn[1]), 42.01, "the highest point");
    // Steps from the first point (1000 ns, the left edge) to the image's end (5000 ns, the
    // right edge): 3 upper steps and 3 lower ones, 2 vertices each.
    assert_eq!(drawn[0].vertices.len(), 12);
    assert_eq!(drawn[0].vertices[0].0, 72.0);
    assert_close(drawn[0].vertices[0].1, 176.29, "app at 1000 ns");
    assert_eq!(drawn[0].vertices[5].0, 710.0);
    assert_eq!(
        drawn[0].vertices[6],
        (710.0, 230.0),
        "app's band sits on the axis"
    );
    assert!(svg.contains("<title>app: requested up to 2.93 KiB</title>"));
    // Axis labels: 0 to 4 KiB, and the time in seconds.
    for label in ["0 KiB", "1 KiB", "4 KiB"] {
        assert!(svg.contains(&format!(">{label}</text>")), "{label}");
    }
    assert!(!svg.contains(">5 KiB</text>"));
    assert!(svg.contains(">0.000001 s</text>") && svg.contains(">0.000005 s</text>"));
}

#[test]
fn resident_memory_stacks_at_the_snapshots() {
    let html = section();
    let svg = chart(&html, "rss");
    // 8192 + 4096 + 2048 at 2500 ns; the axis ends at 15 KiB (steps of 5 KiB).
    assert_eq!(attribute(svg, "data-highest"), Some("14336"));
    assert_eq!(attribute(svg, "data-axis-max"), Some("15360"));
    let drawn = series(svg);
    let names: Vec<&str> = drawn
        .iter()
        .map(|s| s.component.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["app", "libc", "overhead"]);
    let highest = drawn.iter().map(top).fold(f64::INFINITY, f64::min);
    assert_close(highest, expected_y(14336.0, 15360.0), "the highest point");
    assert_close(top(&drawn[2]), highest, "overhead is on top");
    assert_close(top(&drawn[1]), expected_y(12288.0, 15360.0), "libc on app");
    // The bands start at the first snapshot: 1500 ns is 1/8 of the way from 1000 to 5000.
    assert_close(drawn[0].vertices[0].0, 72.0 + 638.0 / 8.0, "first snapshot");
}

#[test]
fn totals_are_three_lines() {
    let html = section();
    let svg = chart(&html, "totals");
    assert_eq!(attribute(svg, "data-highest"), Some("20000"));
    assert_eq!(attribute(svg, "data-axis-max"), Some("20480"));
    let drawn = series(svg);
    let metrics: Vec<&str> = drawn.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(metrics, ["requested", "rss", "pss"]);
    assert!(drawn
        .iter()
        .all(|s| s.component.is_none() && s.fill == "none"));
    assert_eq!(drawn[1].vertices.len(), 3);
    assert_close(top(&drawn[1]), expected_y(20000.0, 20480.0), "peak RSS");
    assert_close(top(&drawn[2]), expected_y(18000.0, 20480.0), "peak PSS");
    assert_eq!(drawn[0].vertices[0].0, 72.0);
    assert_close(drawn[0].vertices[2].0, 72.0 + 638.0 / 2.0, "3000 ns");
}

#[test]
fn legend_lists_every_component_with_its_colour() {
    let html = section();
    assert!(html.starts_with(
        "<section class=\"timelines\" id=\"timelines-0\" data-pid=\"100\">\n\
         <h2>Memory over time: 100 /bin/app</h2>\n"
    ));
    let legend = &html[html.find("<ul class=\"legend\">").unwrap()..];
    let legend = &legend[..legend.find("</ul>").unwrap()];
    assert_eq!(legend.matches("<li ").count(), 3);
    assert!(legend.contains(
        "<li data-component=\"libc\"><svg class=\"swatch\" width=\"12\" height=\"12\" \
         aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"#f28e2b\"/></svg>libc: \
         peak requested 500 bytes, RSS 4.00 KiB, PSS 2.00 KiB, swap 4.00 KiB</li>"
    ));
    assert_eq!(html.matches("<svg class=\"timeline-chart\"").count(), 3);
}

#[test]
fn colours_are_stable_and_names_escaped() {
    assert_eq!(colour("overhead"), "#9c755f");
    assert_eq!(colour("libfoo.so"), colour("libfoo.so"));
    assert_ne!(colour("libfoo.so"), colour("libbar.so"));
    assert!(colour("libfoo.so").starts_with("hsl("));
    let mut analysis = components_analysis();
    analysis.processes[0].components.components = vec![component("<b>\"x\"&", &[(1000, 10)], &[])];
    let html = process_section(&analysis.processes[0], 3);
    assert!(!html.contains("<b>"));
    assert!(html.contains("data-component=\"&lt;b&gt;&quot;x&quot;&amp;\""));
    let drawn = series(chart(&html, "rss"));
    assert!(drawn.is_empty(), "no resident points: no series");
    assert!(chart(&html, "rss").contains(">no data</text>"));
}

#[test]
fn warnings_come_before_the_charts() {
    let mut analysis = components_analysis();
    analysis.processes[0]
        .warnings
        .push("fragmentation: <2.00 KiB> of the arenas hold no live block".to_string());
    let html = process_section(&analysis.processes[0], 0);
    let warnings = html.find("<ul class=\"warnings\">").expect("the warnings");
    assert!(warnings < html.find("<svg").unwrap());
    assert!(html.contains(
        "<li>no allocator symbols in /usr/lib/libjit.so</li>\n<li>fragmentation: &lt;2.00 \
         KiB&gt; of the arenas hold no live block</li>\n</ul>"
    ));
}

#[test]
fn an_image_without_timelines_says_so() {
    let mut analysis = components_analysis();
    analysis.processes[0].components = Default::default();
    let html = process_section(&analysis.processes[0], 0);
    assert!(html.contains("Nothing to show: no timeline was recorded."));
    assert!(!html.contains("<svg"));
}

#[test]
fn round_axes() {
    let axis = ValueAxis::new(3500);
    assert_eq!(axis.max_bytes, 4096);
    assert_eq!(ValueAxis::new(0).max_bytes, 1);
    assert_eq!(ValueAxis::new(1000).max_bytes, 1000);
    assert_eq!(ValueAxis::new(70 << 20).max_bytes, 80 << 20);
    assert_eq!(ValueAxis::new((3 << 30) + 1).max_bytes, 4 << 30);
    assert_eq!(axis.y(0), PLOT_BOTTOM);
    assert_eq!(axis.y(4096), PLOT_TOP);
}

#[test]
fn the_page_carries_one_section_per_image_and_fetches_nothing() {
    let mut out = Vec::new();
    crate::report::html_report::render(&components_analysis(), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    assert_eq!(page.matches("<section class=\"timelines\"").count(), 1);
    let sections = page.find("id=\"timelines-0\"").unwrap();
    assert!(
        sections > page.find("</main>").unwrap(),
        "after the flamegraphs"
    );
    let lower = page.to_lowercase();
    for forbidden in ["http://", "https://", "src=", "url(", "href="] {
        assert!(
            !lower.contains(forbidden),
            "the page contains {forbidden:?}"
        );
    }
}

#[test]
fn an_estimate_is_a_dashed_line_across_the_rss_chart_only() {
    let html = section();
    let rss = chart(&html, "rss");
    let lines: Vec<&str> = rss
        .match_indices("<line class=\"estimate\"")
        .map(|(position, _)| &rss[position..])
        .collect();
    // The second snapshot, at 2,500 ns of an axis from 1,000 to 5,000 ns, counted 3 mappings.
    assert_eq!(lines.len(), 1);
    assert_eq!(attribute(lines[0], "data-time-ns"), Some("2500"));
    assert_eq!(attribute(lines[0], "x1"), Some("311.25"));
    assert!(lines[0].contains("<title>estimated from pagemap at 0.000 s (3 mappings counted"));
    assert!(rss.contains("(dashed lines: estimates from pagemap)"));
    assert!(!chart(&html, "requested").contains("class=\"estimate\""));
}
