//! `memsup report --format pprof` read by the real reader (`go tool pprof -top`) and
//! `--format speedscope` parsed, on the README example (alloc_script) and on fork_exec's three
//! process images: totals and per-function rows equal the JSON report's sites exactly.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::alloc_script::ALLOC_SCRIPT_STDOUT;
use crate::common::report::processes;
use crate::common::run::{clean_command, memsup_binary, run_command};
use crate::common::*;

/// pprof's sample types, the JSON site key each sums and the JSON image key of its total.
const SAMPLE_INDEXES: [(&str, &str, &str); 4] = [
    ("alloc_objects", "allocations", "allocations"),
    ("alloc_space", "bytes_allocated", "bytes_allocated"),
    ("inuse_objects", "leaked_blocks", "live_blocks_at_exit"),
    ("inuse_space", "leaked_bytes", "live_bytes_at_exit"),
];

/// alloc_script's totals in the dynamic and musl builds (fixtures/alloc_script.c): 9 blocks,
/// 19,628 bytes, 3 blocks and 1,128 bytes live at exit.
const ALLOC_SCRIPT_TOTALS: [u64; 4] = [9, 19_628, 3, 1_128];

const FORK_EXEC_STDOUT: &str = "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with \
     status 3\nfork_exec: child exited with status 3\n";

/// A frame's name as reports show it (`Frame::name`): its function, else its address and
/// module file name.
fn frame_name(frame: &Value) -> String {
    let function = frame["function"].as_str().unwrap_or_default();
    if !function.is_empty() {
        return function.to_string();
    }
    let address = number(frame, "/address");
    match frame["module"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
    {
        None | Some("") => format!("{address:#x}"),
        Some(module) => format!("{address:#x} ({module})"),
    }
}

/// The name of the innermost frame of `site`, `[no stack]` without frames.
fn leaf_name(site: &Value) -> String {
    site["stack"]
        .as_array()
        .and_then(|stack| stack.first())
        .map_or_else(|| "[no stack]".to_string(), frame_name)
}

/// Per leaf function, the sum of the JSON site key `key` over the sites of `images`; zero
/// sums left out, as pprof shows no flat value for them.
fn leaf_totals(images: &[&Value], key: &str) -> BTreeMap<String, u64> {
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for image in images {
        for site in image["sites"].as_array().expect("sites") {
            *totals.entry(leaf_name(site)).or_default() += number(site, &format!("/{key}"));
        }
    }
    totals.retain(|_, total| *total > 0);
    totals
}

/// `memsup report --format FORMAT PROFILE`'s stdout, written to `FILE` beside the profile.
fn export(profile: &Path, format: &str, file: &Path) {
    let mut command = clean_command(memsup_binary());
    command.args(["report", "--format", format, "-o"]).arg(file);
    command.arg(profile);
    let output = run_command(command, None);
    assert!(
        output.status.success(),
        "memsup report --format {format} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A file the user named is not announced; the report is in it, not on stdout.
    assert!(
        output.stdout.is_empty() && output.stderr.is_empty(),
        "{output:?}"
    );
}

/// What `go tool pprof -top` printed: the profile's total, the part of it the shown nodes
/// account for (less than the total under `-tagfocus`) and each function's flat value.
#[derive(Debug)]
struct Top {
    total: u64,
    shown: u64,
    flat: BTreeMap<String, u64>,
}

/// `go tool pprof -top -sample_index=INDEX [-tagfocus=pid=PID] FILE`, every node shown and
/// bytes in bytes.
fn pprof_top(file: &Path, sample_index: &str, pid: Option<u64>) -> Top {
    let home = file.parent().expect("the export's directory");
    let mut command = clean_command("go");
    command.env("HOME", home).args(["tool", "pprof", "-top"]);
    command.args(["-nodefraction=0", "-nodecount=1000000"]);
    command.arg(format!("-sample_index={sample_index}"));
    if sample_index.ends_with("_space") {
        command.arg("-unit=B");
    }
    if let Some(pid) = pid {
        command.arg(format!("-tagfocus=pid={pid}"));
    }
    command.arg(file);
    let output = run_command(command, None);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "go tool pprof failed: {}{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_top(&stdout)
}

/// A value of pprof's `-top`: `1128B` or `9`.
fn pprof_value(text: &str) -> u64 {
    text.trim_end_matches('B')
        .parse()
        .unwrap_or_else(|_| panic!("not a pprof value: {text:?}"))
}

fn parse_top(stdout: &str) -> Top {
    let showing = stdout
        .lines()
        .find_map(|line| line.strip_prefix("Showing nodes accounting for "))
        .unwrap_or_else(|| panic!("no totals line in:\n{stdout}"));
    // "Showing nodes accounting for 1128B, 100% of 1128B total"
    let (shown, total) = showing
        .split_once(", ")
        .and_then(|(shown, tail)| Some((shown, tail.rsplit(" of ").next()?)))
        .and_then(|(shown, tail)| Some((shown, tail.strip_suffix(" total")?)))
        .unwrap_or_else(|| panic!("unexpected totals line: {showing}"));
    let mut flat: BTreeMap<String, u64> = BTreeMap::new();
    let rows = stdout.lines().skip_while(|line| !line.contains("flat%"));
    for row in rows.skip(1) {
        let columns: Vec<&str> = row.split_whitespace().collect();
        let value = pprof_value(columns[0]);
        // The name is what follows the five numeric columns; pprof marks inlined frames.
        let name = columns[5..].join(" ");
        let name = name.strip_suffix(" (inline)").unwrap_or(&name).to_string();
        if value > 0 {
            *flat.entry(name).or_default() += value;
        }
    }
    Top {
        total: pprof_value(total),
        shown: pprof_value(shown),
        flat,
    }
}

/// The sum of the JSON image key `key` over `images`.
fn images_total(images: &[&Value], key: &str) -> u64 {
    images
        .iter()
        .map(|image| number(image, &format!("/{key}")))
        .sum()
}

/// Every sample type of `file` read by pprof equals the JSON report's `images`: the total,
/// and, for the images of process `pid` when given (else all), what the shown nodes account
/// for and each function's flat row. Returns the totals.
fn assert_pprof_matches(file: &Path, images: &[&Value], pid: Option<u64>) -> Vec<u64> {
    let selected: Vec<&Value> = images
        .iter()
        .copied()
        .filter(|image| pid.map_or(true, |pid| number(image, "/pid") == pid))
        .collect();
    assert!(!selected.is_empty(), "no image of pid {pid:?}");
    let mut totals = Vec::new();
    for (sample_index, site_key, image_key) in SAMPLE_INDEXES {
        let top = pprof_top(file, sample_index, pid);
        let expected = leaf_totals(&selected, site_key);
        let selected_total = images_total(&selected, image_key);
        assert_eq!(top.flat, expected, "{sample_index} rows (pid {pid:?})");
        assert_eq!(
            top.shown, selected_total,
            "{sample_index} shown (pid {pid:?})"
        );
        assert_eq!(
            expected.values().sum::<u64>(),
            selected_total,
            "{sample_index}"
        );
        assert_eq!(
            top.total,
            images_total(images, image_key),
            "{sample_index} total"
        );
        totals.push(top.total);
    }
    totals
}

#[test]
fn pprof_of_the_readme_example_reads_as_the_json_report() {
    if !require_tool("go") {
        return;
    }
    for_each_variant("alloc_script", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            ALLOC_SCRIPT_STDOUT
        );
        let file = recording._directory.path().join("heap.pb.gz");
        export(&recording.profile, "pprof", &file);
        let images: Vec<&Value> = processes(&recording.report).iter().collect();
        assert_eq!(images.len(), 1);
        let totals = assert_pprof_matches(&file, &images, None);
        if variant != Variant::Static {
            assert_eq!(totals, ALLOC_SCRIPT_TOTALS);
        }
        let top = pprof_top(&file, "inuse_space", None);
        assert_eq!(top.flat["make_buffer"], 1000, "the leaked buffer");
        assert_eq!(top.flat["leak_small"], 128, "two leaked 64-byte blocks");
    });
}

#[test]
fn pprof_of_fork_exec_tags_each_sample_with_its_pid() {
    if !require_tool("go") {
        return;
    }
    for_each_variant("fork_exec", |variant, fixture| {
        let child = crate::common::fixture("exit3", variant);
        let child = child.to_string_lossy().into_owned();
        let recording = record(fixture, &[child.as_str()], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            FORK_EXEC_STDOUT
        );
        let file = recording._directory.path().join("heap.pb.gz");
        export(&recording.profile, "pprof", &file);
        let images: Vec<&Value> = processes(&recording.report).iter().collect();
        assert_eq!(images.len(), 3);
        assert_pprof_matches(&file, &images, None);
        let mut pids: Vec<u64> = images.iter().map(|image| number(image, "/pid")).collect();
        pids.sort_unstable();
        pids.dedup();
        assert_eq!(
            pids.len(),
            2,
            "the parent, and the child before and after exec"
        );
        for pid in pids {
            assert_pprof_matches(&file, &images, Some(pid));
        }
    });
}

/// speedscope's profiles of each image, in order, and the JSON site key each one weighs.
const SPEEDSCOPE_METRICS: [(&str, &str); 3] = [
    ("bytes at the peak", "peak_bytes"),
    ("bytes allocated, in time order", "bytes_allocated"),
    ("bytes leaked", "leaked_bytes"),
];

/// The speedscope export of `recording` has a sampled profile per image and metric whose
/// weights add up, in total and per leaf frame, to the JSON report's sites.
fn assert_speedscope_matches(recording: &Recording) {
    let file = recording._directory.path().join("heap.speedscope.json");
    export(&recording.profile, "speedscope", &file);
    let text = std::fs::read_to_string(&file).expect("reading the export");
    let export: Value = serde_json::from_str(&text).expect("speedscope JSON");
    assert_eq!(
        export["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = export["shared"]["frames"]
        .as_array()
        .expect("shared.frames");
    let frame_name = |index: &Value| {
        let index = index.as_u64().expect("a frame index") as usize;
        frames[index]["name"]
            .as_str()
            .expect("a frame name")
            .to_string()
    };
    let images = processes(&recording.report);
    let profiles = export["profiles"].as_array().expect("profiles");
    assert_eq!(profiles.len(), images.len() * SPEEDSCOPE_METRICS.len());
    let expected_profiles = images
        .iter()
        .flat_map(|image| SPEEDSCOPE_METRICS.map(|metric| (image, metric)));
    for (profile, (image, (words, key))) in profiles.iter().zip(expected_profiles) {
        let exe = image["exe"].as_str().unwrap_or_default();
        let program = exe.rsplit('/').next().unwrap_or_default();
        let name = format!("{program} (pid {}): {words}", image["pid"]);
        assert_eq!(profile["name"], name.as_str());
        assert_eq!(
            (&profile["type"], &profile["unit"]),
            (&"sampled".into(), &"bytes".into())
        );
        let samples = profile["samples"].as_array().expect("samples");
        let weights = profile["weights"].as_array().expect("weights");
        assert_eq!(samples.len(), weights.len(), "{name}");
        let mut leaves: BTreeMap<String, u64> = BTreeMap::new();
        for (stack, weight) in samples.iter().zip(weights) {
            let leaf = stack
                .as_array()
                .and_then(|stack| stack.last())
                .expect("a frame");
            *leaves.entry(frame_name(leaf)).or_default() += weight.as_u64().expect("bytes");
        }
        assert_eq!(leaves, leaf_totals(&[image], key), "{name}");
        let total: u64 = leaves.values().sum();
        assert_eq!(number(profile, "/endValue"), total, "{name}");
        assert_eq!(number(profile, "/startValue"), 0);
    }
}

#[test]
fn speedscope_weights_add_up_to_the_json_sites() {
    let alloc_script = crate::common::fixture("alloc_script", Variant::Dynamic);
    let recording = record(&alloc_script, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        ALLOC_SCRIPT_STDOUT
    );
    assert_speedscope_matches(&recording);
    // The time-ordered profile follows the script (consecutive samples of one function
    // merged, as speedscope's Time Order view draws them).
    let file = recording._directory.path().join("heap.speedscope.json");
    let export: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let frames = &export["shared"]["frames"];
    let in_time_order = &export["profiles"][1];
    let mut runs: Vec<(String, u64)> = Vec::new();
    let samples = in_time_order["samples"].as_array().unwrap();
    let weights = in_time_order["weights"].as_array().unwrap();
    for (sample, weight) in samples.iter().zip(weights) {
        let leaf = sample.as_array().unwrap().last().unwrap().as_u64().unwrap();
        let name = frames[leaf as usize]["name"].as_str().unwrap().to_string();
        let weight = weight.as_u64().unwrap();
        match runs.last_mut() {
            Some((last, bytes)) if *last == name => *bytes += weight,
            _ => runs.push((name, weight)),
        }
    }
    let expected = [
        ("main", 9000),
        ("make_buffer", 3000),
        ("make_record", 5000),
        ("main", 2500),
        ("leak_small", 128),
        ("main", 0),
    ];
    let expected: Vec<(String, u64)> = expected
        .iter()
        .map(|(name, bytes)| (name.to_string(), *bytes))
        .collect();
    assert_eq!(runs, expected);
    let fork_exec = crate::common::fixture("fork_exec", Variant::Dynamic);
    let child = crate::common::fixture("exit3", Variant::Dynamic);
    let child = child.to_string_lossy().into_owned();
    let recording = record(&fork_exec, &[child.as_str()], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        FORK_EXEC_STDOUT
    );
    assert_speedscope_matches(&recording);
}
