//! Leak suppressions: the built-in rule for libstdc++'s emergency exception pool on
//! fixtures/stack_templates.cpp, a LeakSanitizer file that removes a known site of
//! fixtures/alloc_script.c, and a bad file's one-line error.

use crate::common::report::{report_json_with, report_output};
use crate::common::run::run_memsup;
use crate::common::*;

/// `--suppressions FILE` with `text` in FILE, written beside `profile`.
fn suppression_file(profile: &std::path::Path, text: &str) -> String {
    let path = profile.with_extension("supp");
    std::fs::write(&path, text).expect("writing the suppression file");
    path.to_string_lossy().into_owned()
}

#[test]
fn libstdcxx_emergency_pool_is_suppressed_by_default() {
    let fixture = fixture("stack_templates", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    assert_eq!(recording.native.status.code(), Some(0));
    let image = launched_image(&recording.report, &fixture, &[]);
    // The pool is told by ld.so's _dl_init among its callers: a whole stack.
    let expected = serde_json::json!({ "blocks": 1, "bytes": 72704, "rules": 1 });
    assert_eq!(image["suppressed"], expected, "the pool, suppressed");
    assert_eq!(number(image, "/live_bytes_at_exit"), 0, "no leak left");
    let every = report_json_with(&recording.profile, &["--no-default-suppressions"]);
    let image = launched_image(&every, &fixture, &[]);
    assert_eq!(number(image, "/live_bytes_at_exit"), 72704);
    assert_eq!(number(image, "/suppressed/blocks"), 0);
    let text = report_output(&recording.profile, &[]);
    let row = text
        .lines()
        .find(|line| line.starts_with("  leaked at exit"));
    assert_eq!(
        row,
        Some(
            "  leaked at exit       0 bytes in 0 blocks; 1 block, 71.00 KiB (72704 bytes) \
             suppressed (1 rule)"
        )
    );
}

#[test]
fn a_suppression_file_removes_a_known_site() {
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        crate::alloc_script::ALLOC_SCRIPT_STDOUT
    );
    let file = suppression_file(
        &recording.profile,
        "# the two small leaks are known\nleak:leak_small\n",
    );
    let report = report_json_with(&recording.profile, &["--suppressions", &file]);
    let image = launched_image(&report, &fixture, &[]);
    let expected = serde_json::json!({ "blocks": 2, "bytes": 128, "rules": 1 });
    assert_eq!(image["suppressed"], expected);
    assert_eq!(number(image, "/live_bytes_at_exit"), 1000);
    assert_eq!(number(image, "/live_blocks_at_exit"), 1);
    let text = report_output(&recording.profile, &["--suppressions", &file]);
    let leaked = text
        .lines()
        .find(|line| line.starts_with("  leaked at exit"));
    assert_eq!(
        leaked,
        Some(
            "  leaked at exit       1000 bytes in 1 block; 2 blocks, 128 bytes suppressed (1 rule)"
        )
    );
    // The site stays, its leaks gone.
    let site = text.lines().find(|line| line.contains("leak_small"));
    let columns = "      0 bytes       2    128 bytes          0                       0  ";
    assert_eq!(
        site.map(|line| line.starts_with(&format!("{columns}leak_small alloc_script.c:66"))),
        Some(true),
        "{text}"
    );
}

#[test]
fn a_bad_suppression_file_is_one_line_and_exit_85() {
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let recording = record(&fixture, &[], None);
    let file = suppression_file(&recording.profile, "leak:ok\ncalled_from_lib:libfoo.so\n");
    let profile = recording.profile.to_string_lossy().into_owned();
    let output = run_memsup(["report", "--suppressions", &file, &profile], None);
    assert_eq!(output.status.code(), Some(85));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "memsup: error: suppressions {file}: line 2: suppression type \"called_from_lib\" \
             (only leak: is read)\n"
        )
    );
    assert!(output.stdout.is_empty());
}
