//! The exports for other tools' viewers, read by those tools: `--format massif` through
//! ms_print and `--format heaptrack` through heaptrack_print, their totals and sites compared
//! exactly with the JSON report of the same profile; and the rows of `--format csv --sites`
//! for the README example (fixtures/alloc_script.c). The fixtures' own output and status are
//! checked against their native runs by `record`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::alloc_script::ALLOC_SCRIPT_STDOUT;
use crate::common::report::{processes, report_output};
use crate::common::run::{clean_command, run_command};
use crate::common::*;

const SITE_METRICS_STDOUT: &str = "site_metrics: sum 3868531392, leaked 496 bytes in 3 blocks\n";

/// `name` (dynamic glibc) recorded under memsup, its stdout checked; None without a compiler.
fn recorded(name: &str, stdout: &str) -> Option<Recording> {
    variants(name).first()?;
    let recording = record(&fixture(name, Variant::Dynamic), &[], None);
    assert_eq!(String::from_utf8_lossy(&recording.native.stdout), stdout);
    assert_image_count(&recording.report, 1);
    Some(recording)
}

/// Writes `memsup report --format FORMAT` of the recording beside its profile.
fn export(recording: &Recording, format: &str) -> std::path::PathBuf {
    let text = report_output(&recording.profile, &["--format", format, "-o", "-"]);
    let path = recording.profile.with_extension(format);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `tool ARGS`, requiring success; its stdout.
fn tool_output(tool: &str, args: &[&str]) -> String {
    let mut command = clean_command(tool);
    command.args(args);
    let output = run_command(command, None);
    assert!(
        output.status.success(),
        "{tool} {args:?} failed with {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap()
}

/// The innermost frame of a JSON site.
fn leaf(site: &Value) -> &Value {
    &site["stack"][0]
}

/// The JSON sites' `metric`, added by `key` of their innermost frame, zeros left out.
fn json_by_leaf(
    image: &Value,
    metric: &str,
    key: impl Fn(&Value) -> String,
) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for site in image["sites"].as_array().unwrap() {
        *totals.entry(key(leaf(site))).or_insert(0) += number(site, &format!("/{metric}"));
    }
    totals.retain(|_, value| *value > 0);
    totals
}

/// `function (file.c)`, as heaptrack's flame graph names a frame (the function alone
/// when it has no file).
fn function_and_file(frame: &Value) -> String {
    let function = frame["function"].as_str().unwrap();
    match frame["file"].as_str() {
        Some(file) => format!("{function} ({})", basename(file)),
        None => function.to_string(),
    }
}

/// `function at /path/file.c:LINE`, as heaptrack_print names a location; `function in
/// MODULE` without a file, `??` for no module.
fn function_at_line(frame: &Value) -> String {
    let function = frame["function"].as_str().unwrap();
    match (frame["file"].as_str(), frame["module"].as_str().unwrap()) {
        (Some(file), _) => format!("{function} at {file}:{}", frame["line"]),
        (None, "") => format!("{function} in ??"),
        (None, module) => format!("{function} in {module}"),
    }
}

/// heaptrack_print's flame graph stacks of `cost`, added by their innermost frame.
fn heaptrack_by_leaf(file: &Path, cost: &str) -> BTreeMap<String, u64> {
    let stacks = file.with_extension(format!("{cost}.stacks"));
    let file = file.to_str().unwrap();
    let stacks_arg = stacks.to_str().unwrap();
    tool_output(
        "heaptrack_print",
        &["--flamegraph-cost-type", cost, "-F", stacks_arg, file],
    );
    let mut totals = BTreeMap::new();
    for line in std::fs::read_to_string(&stacks).unwrap().lines() {
        let (frames, value) = line.rsplit_once(' ').unwrap();
        let leaf = frames.trim_end_matches(';').rsplit(';').next().unwrap();
        *totals.entry(leaf.to_string()).or_insert(0) += value.parse::<u64>().unwrap();
    }
    totals.retain(|_, value| *value > 0);
    totals
}

/// heaptrack_print's "most calls to allocation functions": calls per location.
fn heaptrack_calls(file: &Path) -> BTreeMap<String, u64> {
    let printed = tool_output(
        "heaptrack_print",
        &["-p", "0", "-T", "0", "-n", "100", file.to_str().unwrap()],
    );
    let lines: Vec<&str> = printed.lines().collect();
    let mut calls = BTreeMap::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(count) = line
            .strip_suffix(" peak consumption from")
            .and_then(|head| {
                head.split_once(" calls to allocation functions with ")
                    .map(|(count, _)| count)
            })
        else {
            continue;
        };
        let location = format!("{} {}", lines[index + 1], lines[index + 2].trim());
        calls.insert(location, count.parse::<u64>().unwrap());
    }
    calls
}

/// A number of heaptrack_print's summary ("calls to allocation functions: 9 (818/s)").
fn summary_number(printed: &str, label: &str) -> u64 {
    let line = printed
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no {label:?} in\n{printed}"));
    line.split(' ').next().unwrap().parse().unwrap()
}

/// Exports the recording's one image to heaptrack and checks what heaptrack_print reads.
fn check_heaptrack(recording: &Recording) {
    export(recording, "heaptrack");
    check_heaptrack_of(recording, &processes(&recording.report)[0]);
}

/// heaptrack_print's calls, temporary allocations, peak, leaked bytes and sites of the
/// recording's heaptrack export equal those of `image` in the JSON report.
fn check_heaptrack_of(recording: &Recording, image: &Value) {
    let file = recording.profile.with_extension("heaptrack");
    let printed = tool_output("heaptrack_print", &[file.to_str().unwrap()]);
    let allocations = number(image, "/allocations");
    assert_eq!(
        summary_number(&printed, "calls to allocation functions"),
        allocations
    );
    let sites = image["sites"].as_array().unwrap();
    let temporary: u64 = sites
        .iter()
        .map(|site| number(site, "/temporary_allocations"))
        .sum();
    assert_eq!(
        summary_number(&printed, "temporary memory allocations"),
        temporary
    );
    let peaks = heaptrack_by_leaf(&file, "peak");
    assert_eq!(
        peaks.values().sum::<u64>(),
        number(image, "/peak_live_bytes")
    );
    assert_eq!(peaks, json_by_leaf(image, "peak_bytes", function_and_file));
    let leaked = heaptrack_by_leaf(&file, "leaked");
    assert_eq!(
        leaked.values().sum::<u64>(),
        number(image, "/live_bytes_at_exit")
    );
    assert_eq!(
        leaked,
        json_by_leaf(image, "leaked_bytes", function_and_file)
    );
    let calls = heaptrack_calls(&file);
    assert_eq!(calls.values().sum::<u64>(), allocations);
    assert_eq!(calls, json_by_leaf(image, "allocations", function_at_line));
}

#[test]
fn heaptrack_print_reads_the_readme_example_as_the_json_report_counts_it() {
    let Some(recording) = recorded("alloc_script", ALLOC_SCRIPT_STDOUT) else {
        return;
    };
    if !require_tool("heaptrack_print") {
        return;
    }
    let image = &processes(&recording.report)[0];
    assert_eq!(
        (
            number(image, "/allocations"),
            number(image, "/peak_live_bytes")
        ),
        (9, 10500)
    );
    assert_eq!(number(image, "/live_bytes_at_exit"), 1128);
    check_heaptrack(&recording);
    let file = recording.profile.with_extension("heaptrack");
    let peaks = heaptrack_by_leaf(&file, "peak");
    let expected = [
        ("main (alloc_script.c)", 2500),
        ("make_buffer (alloc_script.c)", 3000),
        ("make_record (alloc_script.c)", 5000),
    ];
    let expected: BTreeMap<String, u64> = expected
        .iter()
        .map(|(name, bytes)| (name.to_string(), *bytes))
        .collect();
    assert_eq!(peaks, expected);
}

#[test]
fn heaptrack_print_reads_the_site_metrics_fixture_as_the_json_report_counts_it() {
    let Some(recording) = recorded("site_metrics", SITE_METRICS_STDOUT) else {
        return;
    };
    if !require_tool("heaptrack_print") {
        return;
    }
    let image = &processes(&recording.report)[0];
    assert_eq!(
        (
            number(image, "/allocations"),
            number(image, "/peak_live_bytes")
        ),
        (11, 5996)
    );
    assert_eq!(number(image, "/live_bytes_at_exit"), 496);
    check_heaptrack(&recording);
}

/// A heap tree as ms_print prints it: its root's bytes, its top-level entries' bytes by label.
type MassifTree = (u64, BTreeMap<String, u64>);

/// ms_print's snapshot table rows (total bytes) and detailed trees: each tree's root bytes
/// and its top-level entries (`0xADDRESS: function (file:line)` to bytes).
fn ms_print_read(file: &Path) -> (Vec<u64>, Vec<MassifTree>) {
    let printed = tool_output("ms_print", &["--threshold=0", file.to_str().unwrap()]);
    let bytes = |text: &str| text.replace(',', "").parse::<u64>().unwrap();
    let mut totals = Vec::new();
    let mut trees: Vec<MassifTree> = Vec::new();
    for line in printed.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let is_row = fields.len() == 6 && fields[0].parse::<u64>().is_ok();
        if is_row && fields[1].parse::<f64>().is_ok() {
            totals.push(bytes(fields[2]));
        }
        let entry = |text: &str| -> Option<(u64, String)> {
            let (_, rest) = text.split_once("% (")?;
            let (amount, label) = rest.split_once("B) ")?;
            Some((bytes(amount), label.to_string()))
        };
        if line.contains("(heap allocation functions)") {
            trees.push((entry(line).unwrap().0, BTreeMap::new()));
        } else if let Some(child) = line.strip_prefix("->") {
            let (amount, label) = entry(child).unwrap();
            trees.last_mut().unwrap().1.insert(label, amount);
        }
    }
    (totals, trees)
}

/// `0xADDRESS: function (file.c:LINE)`, as massif names a frame.
fn massif_label(frame: &Value) -> String {
    let file = frame["file"].as_str().expect("fixture frames have a file");
    let address = frame["address"].as_u64().unwrap();
    let function = frame["function"].as_str().unwrap();
    format!(
        "0x{address:X}: {function} ({}:{})",
        basename(file),
        frame["line"]
    )
}

#[test]
fn ms_print_reads_the_peak_and_the_leaks_of_the_readme_example() {
    let Some(recording) = recorded("alloc_script", ALLOC_SCRIPT_STDOUT) else {
        return;
    };
    if !require_tool("ms_print") {
        return;
    }
    let image = &processes(&recording.report)[0];
    let file = export(&recording, "massif");
    let (totals, trees) = ms_print_read(&file);
    assert_eq!(totals.iter().max(), Some(&10500));
    assert_eq!(totals.last(), Some(&1128));
    assert_eq!(trees.len(), 2, "the peak's tree and the end's");
    assert_eq!(trees[0].0, number(image, "/peak_live_bytes"));
    assert_eq!(trees[0].1, json_by_leaf(image, "peak_bytes", massif_label));
    assert_eq!(trees[1].0, number(image, "/live_bytes_at_exit"));
    assert_eq!(
        trees[1].1,
        json_by_leaf(image, "leaked_bytes", massif_label)
    );
    let mut peak_entries: Vec<u64> = trees[0].1.values().copied().collect();
    peak_entries.sort_unstable();
    assert_eq!(peak_entries, [2500, 3000, 5000]);
    let mut end_entries: Vec<u64> = trees[1].1.values().copied().collect();
    end_entries.sort_unstable();
    assert_eq!(end_entries, [64, 64, 1000]);
}

#[test]
fn csv_sites_rows_of_the_readme_example() {
    let Some(recording) = recorded("alloc_script", ALLOC_SCRIPT_STDOUT) else {
        return;
    };
    let image = &processes(&recording.report)[0];
    let pid = number(image, "/pid");
    let exe = image["exe"].as_str().unwrap();
    let source = leaf(&image["sites"][0])["file"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(basename(&source), "alloc_script.c");
    let printed = report_output(&recording.profile, &["--format", "csv", "--sites"]);
    let mut lines = printed.lines();
    assert_eq!(
        lines.next(),
        Some(
            "pid,exe,site,function,file,line,module,stack,allocations,bytes_allocated,\
             peak_bytes,leaked_bytes,leaked_blocks,temporary_allocations,temporary_bytes"
        )
    );
    // (function, line, callers' frames, the numbers after the stack)
    let expected = [
        (
            "make_record",
            55,
            "main (alloc_script.c:84);",
            "1,5000,5000,0,0,0,0",
        ),
        (
            "make_buffer",
            48,
            "main (alloc_script.c:83);",
            "3,3000,3000,1000,1,0,0",
        ),
        ("main", 85, "", "1,2500,2500,0,0,0,0"),
        ("main", 76, "", "1,9000,0,0,0,1,9000"),
        (
            "leak_small",
            66,
            "main (alloc_script.c:97);",
            "2,128,0,128,2,0,0",
        ),
        ("main", 100, "", "1,0,0,0,0,1,0"),
    ];
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), expected.len(), "{printed}");
    for (number, (row, (function, line, callers, numbers))) in rows.iter().zip(expected).enumerate()
    {
        let head = format!(
            "{pid},{exe},{},{function},{source},{line},{exe},",
            number + 1
        );
        let innermost = format!("{function} (alloc_script.c:{line})");
        let (stack, tail) = row
            .strip_prefix(&head)
            .and_then(|rest| rest.rsplit_once(&format!(",{numbers}")))
            .unwrap_or_else(|| panic!("row {row:?}, expected {head}STACK,{numbers}"));
        assert_eq!(tail, "", "{row}");
        // Whole stacks run on to _start.
        let ending = format!("{callers}{innermost}");
        assert!(
            stack.ends_with(&ending) && stack.starts_with("_start;"),
            "{stack}"
        );
    }
}

#[test]
fn a_profile_of_three_images_exports_the_launched_one_and_says_so() {
    if variants("fork_exec").is_empty() {
        return;
    }
    let child = fixture("exit3", Variant::Dynamic);
    let child = child.to_str().unwrap();
    let recording = record(&fixture("fork_exec", Variant::Dynamic), &[child], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with status 3\n\
         fork_exec: child exited with status 3\n"
    );
    assert_image_count(&recording.report, 3);
    let launched = &processes(&recording.report)[0];
    assert_eq!(launched["cause"], "launch");
    assert_eq!(
        (
            number(launched, "/allocations"),
            number(launched, "/peak_live_bytes")
        ),
        (3, 5555)
    );
    let profile = recording.profile.to_str().unwrap();
    for format in ["massif", "heaptrack"] {
        let output = run_memsup(["report", "--format", format, "-o", "-", profile], None);
        assert_eq!(output.status.code(), Some(0), "{format}");
        let note = format!(
            "memsup: the {format} file holds one process image, pid {} ({}); 2 other images \
             left out (--pid, --exe or --rank picks another)\n",
            launched["pid"],
            launched["exe"].as_str().unwrap()
        );
        assert_eq!(String::from_utf8_lossy(&output.stderr), note);
        let file = recording.profile.with_extension(format);
        std::fs::write(&file, &output.stdout).unwrap();
    }
    if require_tool("heaptrack_print") {
        check_heaptrack_of(&recording, launched);
    }
    if require_tool("ms_print") {
        let (totals, trees) = ms_print_read(&recording.profile.with_extension("massif"));
        assert_eq!(totals.iter().max(), Some(&5555));
        assert_eq!(trees[0].0, 5555);
        assert_eq!(trees[1].0, 0, "the parent frees everything");
        // `--exe` picks the exec'd child instead, and nothing is left out.
        let exit3 = processes(&recording.report)
            .iter()
            .find(|image| image["exe"].as_str().unwrap().contains("exit3"))
            .expect("the exit3 image");
        let output = run_memsup(
            [
                "report", "--format", "massif", "--exe", "exit3", "-o", "-", profile,
            ],
            None,
        );
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
        let file = recording.profile.with_extension("exit3.massif");
        std::fs::write(&file, &output.stdout).unwrap();
        let (totals, _) = ms_print_read(&file);
        assert_eq!(
            totals.iter().max().copied(),
            Some(number(exit3, "/peak_live_bytes"))
        );
    }
}

#[test]
fn sites_and_mpi_functions_go_with_the_csv_format_only() {
    let output = run_memsup(["report", "--format", "json", "--sites", "none.msup"], None);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "memsup: error: --sites goes with --format csv (see memsup report --help)\n"
    );
    assert!(output.stdout.is_empty());
    let output = run_memsup(["report", "--mpi-functions", "none.msup"], None);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "memsup: error: --mpi-functions goes with --format csv (see memsup report --help)\n"
    );
    assert!(output.stdout.is_empty());
}
