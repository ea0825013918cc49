//! fixtures/site_metrics.c: the numbers of each call site (a whole stack, allocator frames
//! dropped) in the JSON report, the folded stacks of every metric, the options that change
//! which frames are dropped, and the text report's lists.

use std::path::Path;

use serde_json::Value;

use crate::common::build::fixtures_source_dir;
use crate::common::expect::SiteExpectation;
use crate::common::report::{report_json_with, report_output};
use crate::common::*;

const STDOUT: &str = "site_metrics: sum 3868531392, leaked 496 bytes in 3 blocks\n";

/// One site of the fixture, as its header lists it.
struct ExpectedSite {
    leaf: &'static str,
    allocations: u64,
    bytes_allocated: u64,
    /// Every block of the site has this size.
    size: u64,
    freed_blocks: u64,
    peak: (u64, u64),
    local_peak_bytes: u64,
    recycling_ratio: f64,
    temporary: (u64, u64),
    leaked: (u64, u64),
}

/// By peak bytes, then bytes allocated: the order of the report.
const SITES: [ExpectedSite; 7] = [
    ExpectedSite {
        leaf: "open_table",
        allocations: 1,
        bytes_allocated: 4000,
        size: 4000,
        freed_blocks: 1,
        peak: (4000, 1),
        local_peak_bytes: 4000,
        recycling_ratio: 1.0,
        temporary: (0, 0),
        leaked: (0, 0),
    },
    ExpectedSite {
        leaf: "open_index",
        allocations: 1,
        bytes_allocated: 1500,
        size: 1500,
        freed_blocks: 1,
        peak: (1500, 1),
        local_peak_bytes: 1500,
        recycling_ratio: 1.0,
        temporary: (0, 0),
        leaked: (0, 0),
    },
    ExpectedSite {
        leaf: "grow_list",
        allocations: 1,
        bytes_allocated: 400,
        size: 400,
        freed_blocks: 0,
        peak: (400, 1),
        local_peak_bytes: 400,
        recycling_ratio: 1.0,
        temporary: (0, 0),
        leaked: (400, 1),
    },
    ExpectedSite {
        leaf: "leak_names",
        allocations: 2,
        bytes_allocated: 96,
        size: 48,
        freed_blocks: 0,
        peak: (96, 2),
        local_peak_bytes: 96,
        recycling_ratio: 1.0,
        temporary: (0, 0),
        leaked: (96, 2),
    },
    ExpectedSite {
        leaf: "scratch_buffers",
        allocations: 4,
        bytes_allocated: 1024,
        size: 256,
        freed_blocks: 4,
        peak: (0, 0),
        local_peak_bytes: 256,
        recycling_ratio: 4.0,
        temporary: (4, 1024),
        leaked: (0, 0),
    },
    ExpectedSite {
        leaf: "grow_list",
        allocations: 1,
        bytes_allocated: 200,
        size: 200,
        freed_blocks: 1,
        peak: (0, 0),
        local_peak_bytes: 200,
        recycling_ratio: 1.0,
        temporary: (1, 200),
        leaked: (0, 0),
    },
    ExpectedSite {
        leaf: "start_list",
        allocations: 1,
        bytes_allocated: 100,
        size: 100,
        freed_blocks: 1,
        peak: (0, 0),
        local_peak_bytes: 100,
        recycling_ratio: 1.0,
        temporary: (1, 100),
        leaked: (0, 0),
    },
];

/// Folded stacks from main on, per metric, in the order memsup prints them.
const FOLDED: [(&str, &[(&str, u64)]); 4] = [
    (
        "peak",
        &[
            ("main;grow_list", 400),
            ("main;leak_names", 96),
            ("main;open_index", 1500),
            ("main;open_table", 4000),
        ],
    ),
    (
        "allocated",
        &[
            ("main;grow_list", 600),
            ("main;leak_names", 96),
            ("main;open_index", 1500),
            ("main;open_table", 4000),
            ("main;scratch_buffers", 1024),
            ("main;start_list", 100),
        ],
    ),
    (
        "leaked",
        &[("main;grow_list", 400), ("main;leak_names", 96)],
    ),
    (
        "temporary",
        &[
            ("main;grow_list", 200),
            ("main;scratch_buffers", 1024),
            ("main;start_list", 100),
        ],
    ),
];

fn glibc_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 9), ("realloc", 2), ("free", 6)]),
        returned_calls: 11,
        allocations: 11,
        bytes_allocated: 7320,
        frees: 8,
        peak_live_bytes: 5996,
        peak_live_blocks: 5,
        live_bytes_at_exit: 496,
        live_blocks_at_exit: 3,
        largest_allocation: 4000,
        ..Default::default()
    }
}

fn heap_numbers(variant: Variant, fixture: &Path) -> HeapExpectation {
    match variant {
        Variant::Dynamic => glibc_numbers(),
        Variant::Static => glibc_numbers().plus_static_startup(GlibcStaticStartup::of(fixture)),
        Variant::Musl => HeapExpectation {
            nested_calls: 2,
            ..glibc_numbers()
        },
    }
}

/// The source line marked `/* site: NAME */`: where the site's innermost frame calls.
fn marked_line(name: &str) -> u64 {
    let source = std::fs::read_to_string(fixtures_source_dir().join("site_metrics.c"))
        .expect("reading the fixture source");
    let marker = format!("/* site: {name} */");
    let index = source
        .lines()
        .position(|line| line.contains(&marker))
        .unwrap_or_else(|| panic!("no {marker} in site_metrics.c"));
    index as u64 + 1
}

/// The one site whose innermost function is `leaf` and that allocated `bytes_allocated`.
fn fixture_site<'a>(image: &'a Value, leaf: &str, bytes_allocated: u64) -> &'a Value {
    let matching: Vec<&Value> = image["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .filter(|site| leaf_function(site) == leaf && site["bytes_allocated"] == bytes_allocated)
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "sites ending in {leaf} with {bytes_allocated} bytes allocated: {matching:#?}"
    );
    matching[0]
}

fn assert_site(image: &Value, expected: &ExpectedSite) {
    let site = fixture_site(image, expected.leaf, expected.bytes_allocated);
    let frame = &site["stack"][0];
    let file = frame["file"].as_str().unwrap_or_default();
    assert!(file.ends_with("fixtures/site_metrics.c"), "{frame}");
    assert_eq!(frame["line"], marked_line(expected.leaf), "{frame}");
    assert_eq!(frame["inlined"], false);
    assert_eq!(site["stack"][1]["function"], "main", "{site}");
    let numbers = [
        ("allocations", expected.allocations),
        ("bytes_allocated", expected.bytes_allocated),
        ("min_size", expected.size),
        ("average_size", expected.size),
        ("max_size", expected.size),
        ("freed_blocks", expected.freed_blocks),
        ("peak_bytes", expected.peak.0),
        ("peak_blocks", expected.peak.1),
        ("local_peak_bytes", expected.local_peak_bytes),
        ("temporary_allocations", expected.temporary.0),
        ("temporary_bytes", expected.temporary.1),
        ("leaked_bytes", expected.leaked.0),
        ("leaked_blocks", expected.leaked.1),
    ];
    for (field, value) in numbers {
        assert_eq!(site[field], value, "{field} of {}: {site:#}", expected.leaf);
    }
    assert_eq!(
        site["recycling_ratio"], expected.recycling_ratio,
        "{site:#}"
    );
    let lifetimes = ["min_lifetime_ns", "average_lifetime_ns", "max_lifetime_ns"];
    if expected.freed_blocks == 0 {
        for field in lifetimes {
            assert!(
                site[field].is_null(),
                "no block freed, no {field}: {site:#}"
            );
        }
    } else {
        let [min, average, max] = lifetimes.map(|field| number(site, &format!("/{field}")));
        assert!(min <= average && average <= max, "{site:#}");
        // Record times are whole microseconds. Under int3 each call costs a stop, so a
        // block lives at least one; the hook engine takes no stop, and a block freed within
        // the microsecond of its allocation lives 0 ns.
        assert!(recorded_by_hooks(image) || 0 < min, "{site:#}");
        for (field, value) in [(lifetimes[0], min), (lifetimes[2], max)] {
            assert_eq!(value % 1000, 0, "{field} of {}: {site:#}", expected.leaf);
        }
    }
}

/// Lifetimes ordered by the fixture's nesting: table > index > the list's freed blocks, and
/// table > every scratch buffer. Under hooks, which take no stop, two of them may fall in
/// the same whole microseconds: never out of order (truncating two times never reverses
/// them), but maybe equal.
fn assert_lifetime_order(image: &Value) {
    let ordered = |shorter: u64, longer: u64| match recorded_by_hooks(image) {
        true => shorter <= longer,
        false => shorter < longer,
    };
    let lifetime = |leaf, bytes, field: &str| {
        number(
            fixture_site(image, leaf, bytes),
            &format!("/{field}_lifetime_ns"),
        )
    };
    let table = lifetime("open_table", 4000, "max");
    let index = lifetime("open_index", 1500, "max");
    assert_eq!(table, lifetime("open_table", 4000, "min"), "one block");
    assert!(ordered(index, table), "index {index} ns, table {table} ns");
    for (leaf, bytes) in [("start_list", 100), ("grow_list", 200)] {
        let list = lifetime(leaf, bytes, "max");
        assert!(ordered(list, index), "{leaf} {list} ns, index {index} ns");
    }
    let scratch = lifetime("scratch_buffers", 1024, "max");
    assert!(
        ordered(scratch, table),
        "scratch {scratch} ns, table {table} ns"
    );
}

/// The folded lines that go through main, from main on, with their values.
fn fixture_lines(folded: &str) -> Vec<(String, u64)> {
    folded
        .lines()
        .filter_map(|line| {
            let (frames, value) = line.rsplit_once(' ').expect("frames, a space, a value");
            let frames: Vec<&str> = frames.split(';').collect();
            let main = frames.iter().position(|frame| *frame == "main")?;
            Some((frames[main..].join(";"), value.parse().expect("a number")))
        })
        .collect()
}

fn assert_folded(profile: &Path) {
    for (metric, expected) in FOLDED {
        let folded = report_output(profile, &["--format", "folded", "--metric", metric]);
        let expected: Vec<(String, u64)> = expected
            .iter()
            .map(|(frames, value)| (frames.to_string(), *value))
            .collect();
        assert_eq!(
            fixture_lines(&folded),
            expected,
            "--metric {metric}:\n{folded}"
        );
    }
    let default = report_output(profile, &["--format", "folded"]);
    let peak = report_output(profile, &["--format", "folded", "--metric", "peak"]);
    assert_eq!(default, peak, "the default metric is peak");
}

/// The HTML page carries a graph per metric with every frame of that metric's folded stacks
/// (names as the page embeds them: JSON strings with `<`, `>` and `&` escaped).
fn assert_html(profile: &Path) {
    let page = report_output(profile, &["--format", "html", "-o", "-"]);
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(!page.contains("http://") && !page.contains("https://"));
    for (metric, _) in FOLDED {
        assert!(page.contains(&format!(">{metric}<")), "no tab for {metric}");
        let folded = report_output(profile, &["--format", "folded", "--metric", metric]);
        for line in folded.lines() {
            let (frames, _) = line.rsplit_once(' ').expect("frames and a value");
            for frame in frames.split(';') {
                let embedded = serde_json::to_string(frame)
                    .unwrap()
                    .replace('<', "\\u003c")
                    .replace('>', "\\u003e")
                    .replace('&', "\\u0026");
                assert!(
                    page.contains(&embedded),
                    "{metric}: {embedded} not in the page"
                );
            }
        }
    }
}

/// Dropping grow_list and leak_names too makes main the leaf; keeping every frame shows the
/// fixture's xmalloc wrapper.
fn assert_skip_options(profile: &Path) {
    let skipped = report_json_with(
        profile,
        &["--skip-frames", "grow_list", "--skip-frames", "leak_*"],
    );
    let image = &skipped["processes"][0];
    let lines: Vec<&Value> = [400, 200, 96]
        .iter()
        .map(|&bytes| &fixture_site(image, "main", bytes)["stack"][0]["line"])
        .collect();
    assert!(
        lines[0] != lines[1] && lines[1] != lines[2],
        "three calls from main, three lines: {lines:?}"
    );
    let kept = report_json_with(profile, &["--no-default-skip-frames"]);
    let site = fixture_site(&kept["processes"][0], "xmalloc", 96);
    assert_eq!(site["stack"][1]["function"], "leak_names");
    assert_eq!(site["stack"][1]["line"], marked_line("leak_names"));
}

/// The 1-based line of the fixture source holding `text`.
fn line_of(text: &str) -> u64 {
    let source = std::fs::read_to_string(fixtures_source_dir().join("site_metrics.c"))
        .expect("reading the fixture source");
    let index = source
        .lines()
        .position(|line| line.contains(text))
        .unwrap_or_else(|| panic!("no {text:?} in site_metrics.c"));
    index as u64 + 1
}

/// The default text report: one line per site, its stack cut at main.
fn assert_short_text(profile: &Path) {
    let text = report_output(profile, &["--top", "3"]);
    let lines: Vec<&str> = text.lines().collect();
    let title = lines
        .iter()
        .position(|line| line.starts_with("  heap sites by bytes live at the peak (3 of "))
        .unwrap_or_else(|| panic!("no list of 3 sites in\n{text}"));
    let expected = [
        "      at peak  allocs    allocated  temporary                  leaked  site".to_string(),
        format!(
            "     3.91 KiB       1     3.91 KiB          0                       0  \
             open_table site_metrics.c:{} <- main :{}",
            marked_line("open_table"),
            line_of("= open_table();")
        ),
        format!(
            "     1.46 KiB       1     1.46 KiB          0                       0  \
             open_index site_metrics.c:{} <- main :{}",
            marked_line("open_index"),
            line_of("= open_index();")
        ),
    ];
    assert_eq!(lines[title + 1..title + 4], expected, "{text}");
    let after = lines.get(title + 5);
    assert!(
        after.map_or(true, |line| line.is_empty()
            || line.starts_with("  mapping sites")),
        "--top 3:\n{text}"
    );
}

/// `--stacks full`: every list, every number, whole stacks.
fn assert_text(profile: &Path, fixture: &Path) {
    assert_short_text(profile);
    let text = report_output(profile, &["--top", "3", "--stacks", "full"]);
    let lines: Vec<&str> = text.lines().collect();
    for expected in [
        "  call sites by bytes live at the peak",
        "    #1 3.91 KiB (4000 bytes) live at the peak in 1 block",
        "  call sites by temporary allocations",
        "    #1 4 temporary allocations, 1.00 KiB (1024 bytes)",
        "       freed none (lifetimes are those of freed blocks)",
    ] {
        assert!(lines.contains(&expected), "no line {expected:?} in\n{text}");
    }
    let scratch_frame = format!(
        "site_metrics.c:{} in {}",
        marked_line("scratch_buffers"),
        file_name(fixture)
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("       scratch_buffers at ")
                && line.ends_with(&scratch_frame)),
        "no frame line ending in {scratch_frame:?} in\n{text}"
    );
    assert!(!text.contains("    #4 "), "--top 3");
}

#[test]
fn site_metrics_per_call_stack() {
    // Sites are call stacks, and the lifetimes are ordered by nesting (strictly under int3,
    // where each block lives at least a microsecond: stops at every call ensure it).
    for_each_variant("site_metrics", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), STDOUT);
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let expected = heap_numbers(variant, fixture);
        assert_heap(image, &expected);
        assert_probe_costs(image, &expected, 0, 0);
        for site in &SITES {
            assert_site(image, site);
        }
        if variant != Variant::Static {
            let in_order: Vec<SiteExpectation> = SITES
                .iter()
                .map(|expected| {
                    site(Some(expected.leaf), expected.peak.0, expected.peak.1)
                        .with_totals(expected.allocations, expected.bytes_allocated)
                })
                .collect();
            assert_sites(image, &in_order);
            assert_eq!(image["sites"].as_array().map(Vec::len), Some(SITES.len()));
        }
        assert_lifetime_order(image);
        assert_folded(&recording.profile);
        assert_html(&recording.profile);
        assert_skip_options(&recording.profile);
        assert_text(&recording.profile, fixture);
    });
}
