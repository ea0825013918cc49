//! Shared test harness: fixture builds, running memsup and fixtures, reading reports, and the
//! exact-number assertions.

pub mod announced;
pub mod attach_cycle;
pub mod attach_loop;
pub mod attach_window;
pub mod build;
pub mod chromium;
pub mod engine;
pub mod expect;
pub mod interactive;
pub mod live_process;
pub mod mpi;
pub mod mpi_job;
pub mod report;
pub mod run;
pub mod stacks;
pub mod strace;
pub mod stuck;
pub mod tools;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

pub use build::{fixture, shared_object, shared_object_with, variants, CodeGen, Variant};
pub use engine::{
    recorded_by_hooks, without_hook_pages_left, EARLIER_MEMSUP_REMOVED, HOOK_PAGES_LEFT,
};
pub use expect::{
    assert_heap, assert_probe_costs, assert_site_listed, assert_sites, calls, leaf_function, site,
    GlibcStaticStartup, HeapExpectation,
};
pub use report::{assert_exit, assert_image_count, assert_profile, number, process_image};
pub use run::{record, record_with_options, run_memsup, run_native, split_stderr, Recording};
pub use tools::{record_skip, require_tool};

/// The file name of a fixture binary ("alloc_script-dynamic").
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .expect("a fixture path has a file name")
        .to_string_lossy()
        .into_owned()
}

/// `check` on the glibc builds of fixture `name`, for what musl's build cannot show: musl's
/// C library has no unwind tables (DESIGN.md §5a), so its stacks end inside musl before
/// reaching the fixture's functions, and a musl fixture that allocates nothing has no
/// allocator to find.
pub fn glibc_variants_of(name: &str, check: impl Fn(Variant, &Path)) {
    for variant in variants(name) {
        if variant != Variant::Musl {
            check(variant, &fixture(name, variant));
        }
    }
}

/// Runs `check` for every variant of fixture `name` this machine can build (dynamic, static,
/// and musl for C), and fails once at the end listing every variant that failed, so one
/// broken variant does not hide the others.
pub fn for_each_variant(name: &str, check: impl Fn(Variant, &Path)) {
    let mut failures = Vec::new();
    for variant in variants(name) {
        let path = fixture(name, variant);
        let outcome = catch_unwind(AssertUnwindSafe(|| check(variant, &path)));
        if let Err(panic) = outcome {
            let message = panic_message(panic.as_ref());
            failures.push(format!("--- {name} {}:\n{message}", variant.suffix()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The text a panic was raised with.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
        .unwrap_or_else(|| "(no message)".to_string())
}

/// Runs `check`; when it fails, fails again with its message followed by `shown`, so every
/// assertion inside prints, say, the whole image it looked at.
pub fn showing_on_failure(shown: &dyn std::fmt::Display, check: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(check)) {
        panic!("{}\n{shown}", panic_message(panic.as_ref()));
    }
}

/// The command line `record` runs, as the profile header shows it.
pub fn target_of(fixture: &Path, args: &[&str]) -> Vec<String> {
    let mut target = vec![fixture.to_string_lossy().into_owned()];
    target.extend(args.iter().map(|argument| argument.to_string()));
    target
}

/// The single image of a one-process run: launched, the expected command line, no other image.
pub fn launched_image<'a>(
    report: &'a serde_json::Value,
    fixture: &Path,
    args: &[&str],
) -> &'a serde_json::Value {
    let target = target_of(fixture, args);
    assert_profile(report, "run", &target);
    assert_image_count(report, 1);
    let image = process_image(report, &file_name(fixture), "launch");
    assert!(
        image["parent_pid"].is_null(),
        "a launched process has no supervised parent"
    );
    let argv: Vec<&str> = image["argv"]
        .as_array()
        .map(|items| items.iter().filter_map(|item| item.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(argv, target, "argv of the launched image");
    image
}
