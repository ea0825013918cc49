//! The default text report: the README example line by line on one screen, a loop the
//! compiler unrolled as one site (text, folded, HTML), `--stacks full` and `--verbose`.

use std::path::Path;

use regex::Regex;
use serde_json::Value;

use crate::alloc_script::ALLOC_SCRIPT_STDOUT;
use crate::common::build::fixtures_source_dir;
use crate::common::report::report_output;
use crate::common::*;

const UNROLLED_STDOUT: &str =
    "unrolled_sites sum=409\nunrolled_sites leaked 2100 bytes in 3 blocks\n";

/// The lines of the README example's report, times, pids, the host and the resident sizes
/// (which depend on the machine) masked.
fn readme_example_lines() -> Vec<String> {
    let sites = [
        (
            "     4.88 KiB       1     4.88 KiB          0                       0",
            "make_record alloc_script.c:55 <- main :84",
        ),
        (
            "     2.93 KiB       3     2.93 KiB          0   1000 bytes in 1 block",
            "make_buffer alloc_script.c:48 <- main :83",
        ),
        (
            "     2.44 KiB       1     2.44 KiB          0                       0",
            "main alloc_script.c:85",
        ),
        (
            "      0 bytes       1     8.79 KiB          1                       0",
            "main alloc_script.c:76",
        ),
        (
            "      0 bytes       2    128 bytes          0   128 bytes in 2 blocks",
            "leak_small alloc_script.c:66 <- main :97",
        ),
        (
            "      0 bytes       1      0 bytes          1                       0",
            "main alloc_script.c:100",
        ),
    ];
    let mut lines: Vec<String> = [
        "memsup profile PROFILE",
        "  mode         run",
        "  command      FIXTURE",
        "  host         HOST",
        "  recorded by  memsup 0.1.0",
        "",
        "== process PID (launch) ==",
        "  command              FIXTURE",
        "  exit                 exited with status 0 after T (started T into the recording)",
        "  peak requested       10.25 KiB (10500 bytes) in 5 blocks, T after start",
        "  leaked at exit       1.10 KiB (1128 bytes) in 3 blocks",
        "  allocations          9 blocks, 19.17 KiB (19628 bytes): malloc 9, free 7",
        "  allocation sizes     0 B 1, 64–127 B 2 (2 live), 512–1023 B 3 (1 live), 2–4 KiB 1, 4–8 KiB 1, 8–16 KiB 1",
        "  peak resident        MEASURED",
        "  mapping calls        MAPPINGS",
        "  components (RSS)     MEASURED",
        "  heap sites by bytes live at the peak",
        "      at peak  allocs    allocated  temporary                  leaked  site",
    ]
    .map(str::to_string)
    .to_vec();
    lines.extend(sites.map(|(numbers, chain)| format!("{numbers}  {chain}")));
    lines
}

/// `text` with what changes from run to run replaced by a word.
fn masked(text: &str, profile: &Path, fixture: &Path) -> String {
    let text = text
        .replace(&profile.display().to_string(), "PROFILE")
        .replace(&fixture.display().to_string(), "FIXTURE");
    let rules = [
        (r"(?m)^(  host +).*$", "${1}HOST"),
        (r"(?m)^(  peak resident +).*$", "${1}MEASURED"),
        (r"(?m)^(  components \(RSS\) +).*$", "${1}MEASURED"),
        (r"(?m)^(  mapping calls +).*$", "${1}MAPPINGS"),
        (r"== process \d+", "== process PID"),
        (r"\d+(\.\d+)? (ns|µs|ms|s)\b", "T"),
    ];
    rules.iter().fold(text, |text, (pattern, word)| {
        Regex::new(pattern)
            .unwrap()
            .replace_all(&text, *word)
            .into_owned()
    })
}

#[test]
fn readme_example_report_is_one_screen() {
    if variants("alloc_script").is_empty() {
        return;
    }
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        ALLOC_SCRIPT_STDOUT
    );
    let image = launched_image(&recording.report, &fixture, &[]);
    assert_exit(image, "code", Some(0));
    let text = report_output(&recording.profile, &[]);
    let shown = masked(&text, &recording.profile, &fixture);
    let lines: Vec<&str> = shown.lines().collect();
    let expected = readme_example_lines();
    assert_eq!(lines[..expected.len()], expected, "{text}");
    // The mapping sites close it: the program's own, the dynamic loader's counted.
    let rest = &lines[expected.len()..];
    assert!(
        rest[0].starts_with("  mapping sites by bytes mapped"),
        "{text}"
    );
    assert!(
        rest[0].ends_with("of the dynamic loader not shown (--stacks full)"),
        "{text}"
    );
    assert!(
        rest[1..].iter().all(|line| !line.contains("ld-linux")),
        "{text}"
    );
    assert!(
        text.lines().count() <= 40,
        "{} lines:\n{text}",
        text.lines().count()
    );
    let components = text
        .lines()
        .find(|line| line.starts_with("  components (RSS)"))
        .expect("a components line");
    assert!(components.contains("app "), "{components}");
    assert!(
        components.contains(" (10.25 KiB requested)"),
        "{components}"
    );
}

/// The 1-based line of fixtures/unrolled_sites.c holding `text`.
fn source_line(text: &str) -> usize {
    let source = std::fs::read_to_string(fixtures_source_dir().join("unrolled_sites.c"))
        .expect("reading the fixture source");
    1 + source
        .lines()
        .position(|line| line.contains(text))
        .unwrap_or_else(|| panic!("no {text:?} in unrolled_sites.c"))
}

#[test]
fn an_unrolled_loop_is_one_site_in_text_folded_and_html() {
    let allocation_line = source_line("fixture_keep(malloc(700))");
    let call_line = source_line("make_blocks();");
    for_each_variant("unrolled_sites", |_, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            UNROLLED_STDOUT
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        // JSON keeps one site per return address: three.
        let per_address = image["sites"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|site| site["stack"][0]["function"] == "make_blocks")
            .count();
        assert_eq!(per_address, 3, "{image:#}");

        let text = report_output(&recording.profile, &[]);
        let chain = format!("make_blocks unrolled_sites.c:{allocation_line} <- main :{call_line}");
        let line = format!(
            "     2.05 KiB       3     2.05 KiB          0    2.05 KiB in 3 blocks  {chain}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&line.as_str()), "no {line:?} in\n{text}");
        assert_eq!(text.matches(" make_blocks ").count(), 1, "{text}");

        let folded = report_output(
            &recording.profile,
            &["--format", "folded", "--metric", "allocated"],
        );
        let blocks: Vec<&str> = folded
            .lines()
            .filter(|line| line.contains("make_blocks"))
            .collect();
        let tail = ";main;make_blocks 2100";
        assert_eq!(blocks.len(), 1, "{folded}");
        assert!(blocks[0].ends_with(tail), "{folded}");

        assert_eq!(
            html_values(&recording.profile, "allocated", "make_blocks"),
            vec![2100]
        );
        assert_eq!(
            html_values(&recording.profile, "leaked", "make_blocks"),
            vec![2100]
        );
        assert_full_and_verbose(
            &recording.profile,
            fixture,
            image,
            allocation_line,
            call_line,
        );
    });
}

/// The values of the flame graph nodes named `name` in the HTML page's graph of `metric`.
fn html_values(profile: &Path, metric: &str, name: &str) -> Vec<u64> {
    let page = report_output(profile, &["--format", "html", "-o", "-"]);
    let start = page.find("id=\"memsup-data\">").expect("the data block") + 17;
    let end = start + page[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&page[start..end]).expect("the data is JSON");
    let graph = data["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|graph| graph["metric"] == metric)
        .unwrap_or_else(|| panic!("no graph {metric}"));
    let names = graph["names"].as_array().unwrap();
    graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|node| names[node[1].as_u64().unwrap() as usize] == name)
        .map(|node| node[2].as_u64().unwrap())
        .collect()
}

/// `--stacks full` lists the site with its whole stack and "3 blocks" among the leaks;
/// `--verbose` adds the probe costs, which the JSON counts too.
fn assert_full_and_verbose(
    profile: &Path,
    fixture: &Path,
    image: &Value,
    allocation_line: usize,
    call_line: usize,
) {
    let full = report_output(profile, &["--stacks", "full"]);
    let lines: Vec<&str> = full.lines().collect();
    let leaks = lines
        .iter()
        .position(|line| *line == "  call sites by bytes leaked")
        .unwrap_or_else(|| panic!("no leak list in\n{full}"));
    assert_eq!(
        lines[leaks + 1],
        "    #1 2.05 KiB (2100 bytes) leaked in 3 blocks",
        "{full}"
    );
    let module = file_name(fixture);
    let frame = |function: &str, line: usize| {
        lines.iter().position(|text| {
            text.starts_with(&format!("       {function} at "))
                && text.ends_with(&format!("unrolled_sites.c:{line} in {module}"))
        })
    };
    let leaf = frame("make_blocks", allocation_line).unwrap_or_else(|| panic!("{full}"));
    assert_eq!(frame("main", call_line), Some(leaf + 1), "{full}");
    // The whole stack: main's callers too (glibc's __libc_start_call_main, musl's
    // libc_start_main_stage2).
    assert!(lines[leaf + 2].contains("libc_start"), "{full}");
    assert!(!full.contains("  probes "), "{full}");

    let verbose = report_output(profile, &["--verbose"]);
    let plural = |count: u64, noun: &str| match count {
        1 => format!("1 {noun}"),
        _ => format!("{count} {noun}s"),
    };
    let probes = format!(
        "  probes               {}, {}, {}",
        plural(number(image, "/probes/stops"), "stop"),
        plural(number(image, "/probes/single_steps"), "single-step"),
        plural(
            number(image, "/probes/stop_the_world"),
            "stop-the-world fallback"
        )
    );
    assert!(
        verbose.lines().any(|line| line == probes),
        "no {probes:?} in\n{verbose}"
    );
    assert!(verbose.contains("\n  sampler      "), "{verbose}");
    assert!(!report_output(profile, &[]).contains("  probes "));
}
