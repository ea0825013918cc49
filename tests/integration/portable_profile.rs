//! A profile reports the same once the binaries it was recorded from are gone: every symbol
//! (names, inlined frames, file:line) is resolved at the end of recording and stored in it.

use std::ffi::OsStr;

use crate::alloc_script::ALLOC_SCRIPT_STDOUT;
use crate::common::*;

fn report(profile: &std::path::Path, format: &str) -> String {
    let output = run_memsup(
        [
            OsStr::new("report"),
            OsStr::new("--format"),
            OsStr::new(format),
            profile.as_os_str(),
        ],
        None,
    );
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 report")
}

#[test]
fn reports_need_no_binaries() {
    let built = fixture("alloc_script", Variant::Dynamic);
    let directory = tempfile::tempdir().unwrap();
    let program = directory.path().join("alloc_script");
    std::fs::copy(&built, &program).unwrap();
    let recording = record(&program, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        ALLOC_SCRIPT_STDOUT
    );
    let text = report(&recording.profile, "text");
    let json = report(&recording.profile, "json");
    // Names and source positions come from the program's DWARF: only the profile holds
    // them once the program is gone.
    let position = "  make_record alloc_script.c:55";
    assert!(text.contains(position), "{position} not in\n{text}");
    assert!(json.contains("\"function\": \"make_record\""), "{json}");
    std::fs::remove_file(&program).unwrap();
    assert_eq!(report(&recording.profile, "text"), text);
    assert_eq!(report(&recording.profile, "json"), json);
}
