//! `memsup diff`: fixtures/diff_sites.c built three ways, each binary named `diff_sites` in a
//! directory of its own: the base (-O1), the same with `-DEXTRA_BYTES=4096` (one more
//! allocation, at a known line), and the base at -O2 without frame pointers. Sites are
//! matched by their source chain, so the rebuilt binaries meet the base's sites.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::build::{build_output, fixtures_source_dir, temporary_beside};
use crate::common::report::number;
use crate::common::run::{clean_command, memsup_binary, run_command};
use crate::common::*;

const NATIVE_OUTPUT: &str = "diff_sites: checksum 1680198144\n";

/// The base's sites, by leaf function; the extra build adds `make_extra`.
const BASE_SITES: [&str; 3] = ["make_buffer", "make_scratch", "make_table"];

/// `diff_sites` built with `flags` into DIRECTORY/diff_sites (None without gcc, outside CI).
pub fn diff_build(directory: &str, flags: &[&str]) -> Option<PathBuf> {
    if !require_tool("gcc") {
        return None;
    }
    let output = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fixtures")
        .join(directory);
    fs::create_dir_all(&output).expect("creating the build directory");
    let source = fixtures_source_dir().join("diff_sites.c");
    let file_name = format!("{directory}/diff_sites");
    Some(build_output(
        &file_name,
        std::slice::from_ref(&source),
        |output| {
            let temporary = temporary_beside(output);
            let mut command = Command::new("gcc");
            command.args(flags).args(["-g", "-pthread"]).arg(&source);
            let result = command
                .arg("-o")
                .arg(&temporary)
                .output()
                .expect("running gcc");
            assert!(
                result.status.success(),
                "{command:?}: {}",
                String::from_utf8_lossy(&result.stderr)
            );
            fs::rename(&temporary, output).expect("renaming the build into place");
        },
    ))
}

pub fn base_build() -> Option<PathBuf> {
    diff_build("diff-base", &["-O1", "-fno-omit-frame-pointer"])
}

pub fn extra_build() -> Option<PathBuf> {
    diff_build(
        "diff-extra",
        &["-O1", "-fno-omit-frame-pointer", "-DEXTRA_BYTES=4096"],
    )
}

/// Records `binary`; its output and status are those of the native run (`record` checks
/// that they match it).
pub fn recorded(binary: &Path) -> Recording {
    let recording = record(binary, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        NATIVE_OUTPUT
    );
    assert_eq!(recording.native.status.code(), Some(0));
    recording
}

/// `memsup diff OPTIONS BASE NEW`: (exit code, stdout, stderr).
pub fn memsup_diff(options: &[&str], base: &Path, new: &Path) -> (Option<i32>, String, String) {
    let mut command = clean_command(memsup_binary());
    command.arg("diff").args(options).arg(base).arg(new);
    let output = run_command(command, None);
    (
        output.status.code(),
        String::from_utf8(output.stdout).expect("UTF-8 output"),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn diff_json(base: &Path, new: &Path) -> Value {
    let (code, stdout, stderr) = memsup_diff(&["--format", "json"], base, new);
    assert_eq!(code, Some(0), "memsup diff failed: {stderr}");
    let diff: Value = serde_json::from_str(&stdout).expect("valid JSON");
    assert_eq!(diff["schema"], "memsup-diff");
    assert_eq!(diff["schema_version"], 1);
    assert_eq!(diff["images"].as_array().map(Vec::len), Some(1), "{diff:#}");
    assert_eq!(diff["unmatched_base"], serde_json::json!([]));
    assert_eq!(diff["unmatched_new"], serde_json::json!([]));
    diff
}

/// The line of `malloc(EXTRA_BYTES)` in the fixture's source.
pub fn extra_line() -> u64 {
    let source = fs::read_to_string(fixtures_source_dir().join("diff_sites.c")).unwrap();
    let index = source
        .lines()
        .position(|line| line.contains("fixture_keep(malloc(EXTRA_BYTES))"))
        .expect("the extra allocation");
    index as u64 + 1
}

fn leaf(site: &Value) -> (&str, u64, &str) {
    let frame = &site["stack"][0];
    (
        frame["function"].as_str().unwrap_or_default(),
        number(frame, "/line"),
        frame["module"].as_str().unwrap_or_default(),
    )
}

/// The base's totals: peak 4000, leaked 3000, 6000 bytes in 3 allocations.
fn assert_base_totals(totals: &Value) {
    let base: Vec<u64> = [
        "peak_bytes",
        "leaked_bytes",
        "bytes_allocated",
        "allocations",
    ]
    .iter()
    .map(|key| number(totals, &format!("/{key}")))
    .collect();
    assert_eq!(base, [4000, 3000, 6000, 3]);
}

/// Every site of `image` is unchanged, of zero change, and they are the base's three.
fn assert_all_unchanged(image: &Value) {
    let zero = serde_json::json!({"peak_bytes": 0, "leaked_bytes": 0, "bytes_allocated": 0,
        "allocations": 0});
    assert_eq!(image["totals"]["change"], zero);
    assert_base_totals(&image["totals"]["base"]);
    assert_eq!(image["totals"]["base"], image["totals"]["new"]);
    assert_unchanged_sites(image["sites"].as_array().unwrap());
}

/// `sites` are the base's three, unchanged, of zero change.
fn assert_unchanged_sites(sites: &[Value]) {
    let mut leaves: Vec<&str> = sites.iter().map(|site| leaf(site).0).collect();
    leaves.sort();
    assert_eq!(leaves, BASE_SITES, "{sites:#?}");
    for site in sites {
        assert_eq!(site["status"], "unchanged", "{site:#}");
        assert_eq!(site["base"], site["new"], "{site:#}");
        for key in [
            "peak_bytes",
            "leaked_bytes",
            "bytes_allocated",
            "allocations",
            "temporary_bytes",
        ] {
            assert_eq!(number(&site["change"], &format!("/{key}")), 0, "{site:#}");
        }
    }
}

#[test]
fn one_more_allocation_is_the_one_site_that_changed() {
    let (Some(base), Some(extra)) = (base_build(), extra_build()) else {
        return;
    };
    let base = recorded(&base);
    let extra = recorded(&extra);
    let diff = diff_json(&base.profile, &extra.profile);
    assert_eq!(diff["metric"], "peak");
    let image = &diff["images"][0];
    assert_base_totals(&image["totals"]["base"]);
    assert_eq!(
        image["totals"]["change"],
        serde_json::json!({"peak_bytes": 4096, "leaked_bytes": 4096, "bytes_allocated": 4096,
            "allocations": 1})
    );
    let sites = image["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 4, "{image:#}");
    let first = &sites[0];
    assert_eq!(first["status"], "new");
    assert_eq!(leaf(first), ("make_extra", extra_line(), "diff_sites"));
    assert_eq!(first["base"], Value::Null);
    let numbers = serde_json::json!({"peak_bytes": 4096, "leaked_bytes": 4096,
        "bytes_allocated": 4096, "allocations": 1, "temporary_bytes": 0});
    assert_eq!(first["new"], numbers);
    assert_eq!(first["change"], numbers);
    assert_unchanged_sites(&sites[1..]);

    // The text lists that site alone among the changed ones.
    let (code, text, stderr) = memsup_diff(&[], &base.profile, &extra.profile);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = text.lines().collect();
    let totals_at = lines
        .iter()
        .position(|line| line.trim_start().starts_with("peak requested"))
        .unwrap_or_else(|| panic!("no totals in\n{text}"));
    let words = |line: &str| {
        line.split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        words(lines[totals_at]),
        ["peak", "requested", "4000", "8096", "+4096"]
    );
    assert_eq!(
        words(lines[totals_at + 1]),
        ["leaked", "3000", "7096", "+4096"]
    );
    assert_eq!(
        words(lines[totals_at + 2]),
        ["allocated", "6000", "10096", "+4096"]
    );
    assert_eq!(words(lines[totals_at + 3]), ["allocations", "3", "4", "+1"]);
    assert_eq!(
        lines[totals_at + 4],
        "1 of 4 sites changed (1 new, 0 gone), by change of peak bytes:"
    );
    let site_line = format!(
        "  +4096 peak [new]  make_extra diff_sites.c:{}",
        extra_line()
    );
    assert!(lines[totals_at + 5].starts_with(&site_line), "{text}");
    assert!(lines[totals_at + 5].ends_with(" (diff_sites)"), "{text}");
    assert_eq!(
        lines[totals_at + 6],
        "      peak 0 -> 4096, leaked 0 -> 4096, temporary 0 -> 0, allocated 0 -> 4096 in 0 -> 1 allocations"
    );
    assert_eq!(lines.len(), totals_at + 7, "{text}");

    // Suppressed on both sides, make_extra's block is no leak: the leaked totals are equal.
    let rules = base.profile.with_extension("supp");
    fs::write(&rules, "# the new block\nleak:make_extra\n").unwrap();
    let rules = format!("--suppressions={}", rules.display());
    let (code, text, stderr) = memsup_diff(&[&rules], &base.profile, &extra.profile);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(words(lines[totals_at + 1]), ["leaked", "3000", "3000", "0"]);
    assert_eq!(
        lines[totals_at + 6],
        "      peak 0 -> 4096, leaked 0 -> 0, temporary 0 -> 0, allocated 0 -> 4096 in 0 -> 1 allocations"
    );
}

#[test]
fn two_runs_of_one_binary_and_another_build_of_it_show_no_change() {
    let Some(base) = base_build() else {
        return;
    };
    let Some(optimised) = diff_build("diff-o2", &["-O2", "-fomit-frame-pointer"]) else {
        return;
    };
    let first = recorded(&base);
    let again = recorded(&base);
    let other = recorded(&optimised);
    for (new, what) in [(&again, "a second run"), (&other, "an -O2 build elsewhere")] {
        let diff = diff_json(&first.profile, &new.profile);
        showing_on_failure(&what, || assert_all_unchanged(&diff["images"][0]));
    }
    let (code, text, _) = memsup_diff(&[], &first.profile, &other.profile);
    assert_eq!(code, Some(0));
    assert!(
        text.ends_with("  allocations                  3             3             0\nnone of the 3 sites changed\n"),
        "{text}"
    );
}

#[test]
fn profiles_without_a_program_in_common_are_refused() {
    let (Some(base), true) = (base_build(), !variants("fork_exec").is_empty()) else {
        return;
    };
    let forking = fixture("fork_exec", Variant::Dynamic);
    let child = fixture("exit3", Variant::Dynamic);
    let child = child.to_string_lossy().into_owned();
    let forked = record(&forking, &[child.as_str()], None);
    assert_eq!(forked.native.status.code(), Some(0));
    let base = recorded(&base);
    let (code, stdout, stderr) = memsup_diff(&[], &base.profile, &forked.profile);
    assert_eq!(code, Some(82), "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "memsup: error: nothing to compare: no program of {} (diff_sites) is in {} \
             (fork_exec-dynamic, fork_exec-dynamic, exit3-dynamic)\n",
            base.profile.display(),
            forked.profile.display()
        )
    );
}
