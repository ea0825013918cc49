//! The hook engine against the int3 engine: the same fixture recorded by each (caller
//! stacks, which both record exactly) gives the same calls, bytes, peaks and leaks, and the
//! hook engine says it recorded the program with no record lost.

use std::path::Path;

use serde_json::Value;

use crate::alloc_script::{alloc_script_expectation, ALLOC_SCRIPT_STDOUT};
use crate::common::engine::least_area_mib;
use crate::common::report::processes;
use crate::common::*;

/// What both engines must agree on, per process image.
pub const EXACT_FIELDS: &[&str] = &[
    "/calls",
    "/allocations",
    "/bytes_allocated",
    "/frees",
    "/null_frees",
    "/unknown_frees",
    "/failed_allocations",
    "/peak_live_bytes",
    "/peak_live_blocks",
    "/live_bytes_at_exit",
    "/live_blocks_at_exit",
    "/largest_allocation",
    "/probes/nested_calls",
];

pub fn recorded_by(engine: &str, fixture: &Path, args: &[&str]) -> Recording {
    record_with_options(
        &["--stacks", "caller", "--engine", engine],
        fixture,
        args,
        None,
    )
}

fn heap_numbers(report: &Value, fields: &[&str]) -> Vec<Vec<Value>> {
    processes(report)
        .iter()
        .map(|image| {
            fields
                .iter()
                .map(|field| image.pointer(field).cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect()
}

fn assert_engines_agree(name: &str) {
    assert_engines_agree_but(name, &[]);
}

/// As `assert_engines_agree`, the hook engine counting `fewer` calls: a call that never
/// returns is recorded at its return by a hook, so never (the int3 engine counts it).
fn assert_engines_agree_but(name: &str, fewer: &[(&str, u64)]) {
    for_each_variant(name, |_, fixture| {
        assert_fixture_engines_agree(fixture, &[], fewer);
    });
}

/// Records `fixture args` with each engine and checks that every process image has the same
/// numbers (but `fewer` calls under hooks, in every image) and that the hook engine lost,
/// tore, misread and released late no record and took no allocator stop. Returns both
/// recordings (int3, hooks) for further checks.
pub fn assert_fixture_engines_agree(
    fixture: &Path,
    args: &[&str],
    fewer: &[(&str, u64)],
) -> (Recording, Recording) {
    assert_fixture_engines_agree_on(fixture, args, fewer, EXACT_FIELDS)
}

/// `assert_fixture_engines_agree` on `fields` only (`fewer` needs "/calls" first).
pub fn assert_fixture_engines_agree_on(
    fixture: &Path,
    args: &[&str],
    fewer: &[(&str, u64)],
    fields: &[&str],
) -> (Recording, Recording) {
    let int3 = recorded_by("int3", fixture, args);
    let hooks = recorded_by("hooks", fixture, args);
    // Each run's output and exit status were checked against a native run by `record`.
    let mut expected = heap_numbers(&int3.report, fields);
    for image in &mut expected {
        for (function, count) in fewer {
            let calls = &mut image[0][*function];
            *calls = Value::from(calls.as_u64().expect("a count") - count);
        }
    }
    assert_eq!(heap_numbers(&hooks.report, fields), expected);
    for image in processes(&hooks.report) {
        assert_recorded_by_hooks_losslessly(image);
    }
    for image in processes(&int3.report) {
        assert_eq!(image["engine"], "int3");
    }
    (int3, hooks)
}

/// `image` was recorded by hooks, every record read whole, no allocator stop (how many may
/// come late is `assert_hook_costs`'s to bound).
pub fn assert_recorded_by_hooks_losslessly(image: &Value) {
    assert_eq!(image["engine"], "hooks", "{image:#}");
    assert_eq!(number(image, "/hooks/dropped"), 0);
    assert_eq!(number(image, "/hooks/torn"), 0);
    assert_eq!(number(image, "/hooks/invalid"), 0);
    // No allocator call took a stop: only the mapping calls' seccomp stops remain.
    assert_eq!(number(image, "/probes/entry_hits"), 0, "{image:#}");
}

#[test]
fn alloc_script_is_recorded_alike_by_both_engines() {
    assert_engines_agree("alloc_script");
}

#[test]
fn realloc_chain_is_recorded_alike_by_both_engines() {
    assert_engines_agree("realloc_chain");
}

#[test]
fn aligned_allocations_are_recorded_alike_by_both_engines() {
    assert_engines_agree("aligned");
}

#[test]
fn cxx_exceptions_are_recorded_alike_by_both_engines() {
    assert_engines_agree("cxx_exceptions");
}

#[test]
fn longjmp_out_of_a_signal_handler_is_recorded_alike_by_both_engines() {
    // The posix_memalign that the handler's siglongjmp abandons.
    assert_engines_agree_but("longjmp_signal", &[("posix_memalign", 1)]);
}

#[test]
fn the_alloc_script_under_hooks_has_its_known_numbers() {
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let hooks = recorded_by("hooks", &fixture, &[]);
    let image = launched_image(&hooks.report, &fixture, &[]);
    assert_eq!(number(image, "/calls/malloc"), 9);
    assert_eq!(number(image, "/calls/free"), 7);
    assert_eq!(number(image, "/bytes_allocated"), 19628);
    assert_eq!(number(image, "/peak_live_bytes"), 10500);
    assert_eq!(number(image, "/live_bytes_at_exit"), 1128);
    // 9 mallocs and 7 frees, nothing inside another allocator call.
    assert_eq!(number(image, "/hooks/records"), 16);
    assert_eq!(number(image, "/hooks/nested"), 0);
    let hooked: Vec<&str> = image["probe_sites"]
        .as_array()
        .expect("probe sites")
        .iter()
        .filter(|site| site["implementation"] == "hook")
        .map(|site| site["function"].as_str().expect("a name"))
        .collect();
    for function in ["malloc", "calloc", "realloc", "free", "posix_memalign"] {
        assert!(hooked.contains(&function), "{function} hooked: {hooked:?}");
    }
}

/// Under 100 MiB of address space the smallest hook area (a sixteenth of the limit at most:
/// fixtures/address_space.c) does not fit, while the program itself needs a few MiB.
const ADDRESS_SPACE_LIMIT: &str = "--as=104857600";

#[test]
fn a_program_whose_address_space_has_no_room_for_hooks_is_recorded_by_int3_and_says_why() {
    for_each_variant("alloc_script", |variant, fixture| {
        let fixture_path = fixture.to_str().expect("a UTF-8 path");
        let recording = record_with_options(
            &["--engine", "hooks"],
            Path::new("/usr/bin/prlimit"),
            &[ADDRESS_SPACE_LIMIT, fixture_path],
            None,
        );
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            ALLOC_SCRIPT_STDOUT
        );
        let report = &recording.report;
        assert_eq!(
            process_image(report, "prlimit", "launch")["engine"],
            "hooks"
        );
        let image = process_image(report, &file_name(fixture), "launch");
        assert_eq!(image["engine"], "int3", "{image:#}");
        assert_exit(image, "code", Some(0));
        // Every call recorded all the same, each at a stop.
        let (expected, sites) = alloc_script_expectation(variant, fixture);
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        assert_probe_costs(image, &expected, 0, 0);
        let reason = format!(
            "placing hooks failed: the program's address space is limited to 100 MiB (RLIMIT_AS), and the hook area needs {} MiB, more than a 16th of it",
            least_area_mib()
        );
        let sites = image["probe_sites"].as_array().expect("probe sites");
        assert!(sites.iter().any(|site| site["function"] == "malloc"));
        for site in sites {
            let implementation = site["implementation"].as_str().expect("a string");
            assert!(
                implementation.starts_with("int3, ")
                    && implementation.ends_with(&format!(" (no hook: {reason})")),
                "{site}"
            );
        }
        // Said once, however many modules it had.
        assert_eq!(
            image["warnings"],
            serde_json::json!([format!(
                "{reason}: its allocator calls stop it at int3 breakpoints instead, a stop each"
            )])
        );
    });
}
