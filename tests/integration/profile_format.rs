//! The profile file itself: version-2 and version-3 profiles still report, and `memsup dump`
//! prints the record stream with damage marked where it is met.

use std::path::{Path, PathBuf};

use crate::common::report::{processes, report_json, report_output};
use crate::common::*;

/// Recorded by the last memsup that wrote version 2, with
/// `memsup run -f -o tests/data/v2_example.msup -- realloc_chain` (fixtures/realloc_chain.c,
/// `gcc -O1`, glibc dynamic): its numbers are the fixture's own (see realloc_chain.c).
fn v2_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v2_example.msup")
}

fn dump(arguments: &[&str], profile: &Path) -> std::process::Output {
    let mut all: Vec<&std::ffi::OsStr> = vec!["dump".as_ref()];
    all.extend(arguments.iter().map(std::ffi::OsStr::new));
    all.push(profile.as_os_str());
    run_memsup(all, None)
}

fn dump_lines(arguments: &[&str], profile: &Path) -> Vec<String> {
    let output = dump(arguments, profile);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// fixtures/realloc_chain.c's own numbers, which every stored example profile holds, read
/// whole and undamaged.
fn assert_realloc_chain_numbers(report: &serde_json::Value) {
    let image = &processes(report)[0];
    assert_eq!(number(image, "/allocations"), 12);
    assert_eq!(number(image, "/bytes_allocated"), 8410);
    assert_eq!(number(image, "/peak_live_bytes"), 3200);
    assert_eq!(number(image, "/live_bytes_at_exit"), 96);
    assert_eq!(number(image, "/calls/realloc"), 11);
    assert_eq!(report["profile"]["truncated"], false);
    assert_eq!(report["profile"]["damage"], serde_json::json!([]));
}

#[test]
fn a_version_2_profile_still_reports() {
    assert_realloc_chain_numbers(&report_json(&v2_example()));
}

/// Recorded by the last memsup that wrote version 3 (before the predictions of version 4),
/// with `memsup run -f -o tests/data/v3_example.msup -- realloc_chain` (fixtures/realloc_chain.c,
/// `gcc -O1 -fno-omit-frame-pointer -g`, glibc dynamic): the fixture's own numbers again.
fn v3_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v3_example.msup")
}

#[test]
fn a_version_3_profile_still_reports_and_dumps() {
    assert_realloc_chain_numbers(&report_json(&v3_example()));
    let lines = dump_lines(&[], &v3_example());
    assert_eq!(lines.len(), 152);
    let count = |prefix: &str| lines.iter().filter(|line| line.starts_with(prefix)).count();
    assert_eq!(
        (count("Alloc "), count("Realloc "), count("End ")),
        (2, 14, 1)
    );
    assert!(lines.contains(
        &"Alloc { time_ns: 42590000, pid: 6909, tid: 6909, function: Malloc, \
          address: 0x562c6c50e8f0, size: 64, stack: 57 }"
            .to_string()
    ));
}

#[test]
fn dump_prints_every_record_of_a_version_2_profile() {
    let lines = dump_lines(&[], &v2_example());
    assert_eq!(lines.len(), 150);
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("Alloc "))
            .count(),
        2
    );
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("Realloc "))
            .count(),
        14
    );
    assert!(lines.contains(
        &"Alloc { time_ns: 48691457, pid: 17833, tid: 17833, function: Malloc, \
          address: 0x5571b08bc8f0, size: 64, stack: 56 }"
            .to_string()
    ));
    assert!(lines.last().unwrap().starts_with("End { time_ns: "));
    let json = dump_lines(&["--format", "json", "--pid", "17833"], &v2_example());
    let allocs: Vec<&String> = json
        .iter()
        .filter(|line| line.starts_with("{\"Alloc\""))
        .collect();
    assert_eq!(
        allocs[1],
        "{\"Alloc\":{\"time_ns\":48691457,\"pid\":17833,\"tid\":17833,\"function\":\"Malloc\",\
         \"address\":93946781616368,\"size\":64,\"stack\":56}}"
    );
    assert!(dump_lines(&["--pid", "1"], &v2_example()).is_empty());
}

#[test]
fn dump_of_a_fresh_profile_shows_the_fixture_s_calls_and_damage_in_line() {
    let fixture = fixture("realloc_chain", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    let lines = dump_lines(&[], &recording.profile);
    let count = |prefix: &str| lines.iter().filter(|line| line.starts_with(prefix)).count();
    // malloc(SIZE_MAX) and malloc(64) are Alloc records; the 14 realloc and reallocarray
    // calls made directly by the program are Realloc records.
    assert_eq!(count("Alloc "), 2);
    assert_eq!(count("Realloc "), 14);
    assert_eq!(count("End "), 1);
    assert!(!lines.iter().any(|line| line.starts_with('#')), "{lines:?}");

    // The same profile with its own bytes appended again: every block is repeated.
    let doubled = recording._directory.path().join("doubled.msup");
    let mut bytes = std::fs::read(&recording.profile).unwrap();
    bytes.extend(bytes.clone());
    std::fs::write(&doubled, &bytes).unwrap();
    let lines = dump_lines(&[], &doubled);
    let count = |prefix: &str| lines.iter().filter(|line| line.starts_with(prefix)).count();
    let marks: Vec<&String> = lines.iter().filter(|line| line.starts_with('#')).collect();
    assert!(
        marks[0].starts_with("# damaged: this recording's start again at byte "),
        "{marks:?}"
    );
    assert_eq!(marks[1], "# damaged: block 0 repeated");
    assert_eq!(count("Alloc "), 2);
    let report = report_output(&doubled, &[]);
    assert!(
        report.contains("\nWARNING: damaged: block 0 repeated\n"),
        "{report}"
    );
    let json = report_json(&doubled);
    assert_eq!(json["profile"]["damage"][1], "damaged: block 0 repeated");
    assert_eq!(json["profile"]["truncated"], false);
}

#[test]
fn dump_refuses_a_missing_or_foreign_file_in_one_line() {
    let missing = dump(&[], Path::new("/nonexistent/p.msup"));
    assert_eq!(missing.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(
        stderr,
        "memsup: error: cannot read /nonexistent/p.msup: entity not found\n"
    );
    let foreign = dump(
        &[],
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("Cargo.toml")
            .as_path(),
    );
    assert_eq!(foreign.status.code(), Some(65));
    assert!(
        String::from_utf8_lossy(&foreign.stderr).ends_with("Cargo.toml: not a memsup profile\n")
    );
}
