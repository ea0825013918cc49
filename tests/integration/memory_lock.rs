//! fixtures/memory_lock.c: a program that locks its memory with mlockall. Under the hook
//! engine memsup takes its hooks out before the lock (run mode), or places none when every
//! new mapping would be locked (attach after `MCL_FUTURE`), so that the ring area is never
//! locked with the program's memory nor weighed against its RLIMIT_MEMLOCK. The program
//! behaves as without memsup, and what it allocates is recorded exactly as by the int3
//! engine.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::attach_window::AttachWindow;
use crate::common::engine::suite_engine_is_hooks;
use crate::common::interactive::run_until_ready;
use crate::common::mpi_job::requested_from;
use crate::common::report::{processes, report_json, warnings};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary, run_command};
use crate::common::*;

const LOCKED: &str = "memory_lock: mlockall 0\nmemory_lock: locked under 256 MiB\n";

/// The hook area's size as memsup's warnings give it.
fn area_mib() -> u64 {
    use memsup::hooks::drain::{ring_capacity, ring_count};
    memsup::hooks::layout::Shape::full(ring_count(), ring_capacity()).bytes() >> 20
}

/// What a run-mode image warns under the hook engine when it locks its memory.
fn taken_out_warning() -> String {
    format!(
        "it locks all its memory (mlockall): memsup took its hooks out first, so that their ring area ({} MiB reserved, most of it never touched) is neither locked with it nor weighed against its RLIMIT_MEMLOCK; its allocator calls stop it at int3 breakpoints from then on, a stop each",
        area_mib()
    )
}

/// Under the hook engine: `image` was recorded by the hooks until the lock, says so once,
/// and every probe site is an int3 with the lock as its reason. Under the int3 engine:
/// nothing to say.
fn assert_hooks_taken_out(image: &Value) {
    if !suite_engine_is_hooks() {
        assert_eq!(image["engine"], "int3");
        assert_eq!(warnings(image), Vec::<String>::new());
        return;
    }
    assert_eq!(image["engine"], "hooks", "{image:#}");
    assert_eq!(warnings(image), [taken_out_warning()]);
    let sites = image["probe_sites"].as_array().expect("probe sites");
    assert!(!sites.is_empty());
    for site in sites {
        let implementation = site["implementation"].as_str().expect("a string");
        assert!(
            implementation.starts_with("int3, ")
                && implementation.ends_with(" (no hook: the program locked all its memory (mlockall), and memsup took its hooks out first)"),
            "{site}"
        );
    }
}

/// The allocator calls of the recording's image equal those the int3 engine records of the
/// same run, and so do the blocks of `work`, `churn` and `use_plugin`.
fn assert_same_as_int3(fixture: &Path, args: &[&str], image: &Value) {
    let int3 = record_with_options(&["--engine", "int3"], fixture, args, None);
    let expected = &processes(&int3.report)[0];
    assert_eq!(image["calls"], expected["calls"]);
    for function in ["work", "churn", "use_plugin"] {
        assert_eq!(
            requested_from(image, function),
            requested_from(expected, function)
        );
    }
}

#[test]
fn a_program_that_locks_all_its_memory_locks_only_its_own() {
    for_each_variant("memory_lock", |_, fixture| {
        let recording = record(fixture, &["all"], None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), LOCKED);
        let image = &processes(&recording.report)[0];
        assert_eq!(requested_from(image, "work"), (3, 6000));
        assert_hooks_taken_out(image);
        assert_same_as_int3(fixture, &["all"], image);
    });
}

#[test]
fn a_thread_inside_the_hooks_when_the_program_locks_its_memory_leaves_them_first() {
    // The thread's stack and its malloc arena are more than an unprivileged RLIMIT_MEMLOCK
    // (8 MiB on Debian) lets a program lock: natively the call would fail.
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("locking a thread's stack and arena needs root");
        return;
    }
    for_each_variant("memory_lock", |_, fixture| {
        let recording = record(fixture, &["threads"], None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), LOCKED);
        let image = &processes(&recording.report)[0];
        assert_eq!(requested_from(image, "churn"), (2000, 96000));
        assert_eq!(requested_from(image, "work"), (3, 6000));
        assert_hooks_taken_out(image);
        assert_same_as_int3(fixture, &["threads"], image);
    });
}

/// `program` without CAP_IPC_LOCK and with an RLIMIT_MEMLOCK of 8 MiB, as an unprivileged
/// user runs it on Debian: mlockall then weighs the whole address space against the limit.
fn under_a_small_lock_limit(program: &Path) -> Command {
    let mut command = clean_command("setpriv");
    command
        .arg("--bounding-set=-ipc_lock")
        .args(["prlimit", "--memlock=8388608:8388608"])
        .arg(program);
    command
}

#[test]
fn under_a_small_memory_lock_limit_the_lock_succeeds_as_it_does_natively() {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("dropping CAP_IPC_LOCK from the bounding set needs root");
        return;
    }
    if !require_tool("setpriv") || !require_tool("prlimit") {
        return;
    }
    for_each_variant("memory_lock", |_, fixture| {
        let mut native = under_a_small_lock_limit(fixture);
        native.arg("all");
        let native = run_command(native, None);
        let directory = tempfile::tempdir().expect("a temporary directory");
        let profile = directory.path().join("run.msup");
        let mut supervised = under_a_small_lock_limit(memsup_binary());
        supervised.arg("run").arg("-o").arg(&profile).arg("--");
        supervised.arg(fixture).arg("all");
        let supervised = run_command(supervised, None);
        assert_same_behaviour(&supervised, &native);
        assert_eq!(String::from_utf8_lossy(&native.stdout), LOCKED);
        let report = report_json(&profile);
        let image = &processes(&report)[0];
        assert_eq!(requested_from(image, "work"), (3, 6000));
        assert_hooks_taken_out(image);
    });
}

#[test]
fn an_attach_to_a_program_that_locks_every_new_mapping_records_it_with_int3() {
    for_each_variant("memory_lock", |_, fixture| {
        let command = || {
            let mut command = clean_command(fixture);
            command.args(["all", "wait"]);
            command
        };
        let native = run_until_ready(command(), |_| {});
        let mut window = None;
        let attached = run_until_ready(command(), |child| {
            window = Some(AttachWindow::open(&[child.id()], &[]));
        });
        assert_same_behaviour(&attached, &native);
        assert_eq!(
            String::from_utf8_lossy(&native.stdout),
            "ready\nmemory_lock: mlockall 0\nmemory_lock: locked under 256 MiB\n"
        );
        let (_, directory) = window.expect("attached").end(false);
        let report = report_json(&directory.path().join("attach.msup"));
        let image = &processes(&report)[0];
        assert_eq!(image["engine"], "int3");
        assert_eq!(requested_from(image, "work"), (3, 6000));
        let expected = match suite_engine_is_hooks() {
            true => vec![format!(
                "placing hooks failed: the program locks every new mapping (mlockall with MCL_FUTURE), and the hook area's {} MiB would be locked with it: its allocator calls stop it at int3 breakpoints instead, a stop each",
                area_mib()
            )],
            false => Vec::new(),
        };
        assert_eq!(warnings(image), expected);
    });
}

#[test]
fn a_library_loaded_after_the_lock_gets_int3_probes() {
    // Dynamic glibc only, as in dlopen.rs: a static program cannot load a plugin.
    if !require_tool("gcc") {
        return;
    }
    let library = shared_object("dlopen_arena");
    let fixture = fixture("memory_lock", Variant::Dynamic);
    let library = library.to_str().expect("a UTF-8 fixtures path");
    let args = ["plugin", library];
    let recording = record(&fixture, &args, None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        format!("memory_lock: plugin used\n{LOCKED}")
    );
    let image = &processes(&recording.report)[0];
    // mi_malloc, probed as malloc, after the lock: by an int3 with the lock as its reason.
    assert_eq!(requested_from(image, "use_plugin"), (1, 96));
    assert_eq!(requested_from(image, "work"), (3, 6000));
    assert_hooks_taken_out(image);
    assert_same_as_int3(&fixture, &args, image);
}
