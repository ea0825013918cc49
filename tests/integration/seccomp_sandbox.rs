//! fixtures/seccomp_sandbox.c: a program under a seccomp filter of its own that kills it on
//! a system call memsup would otherwise run in it (memfd_create for a fork child's rings and
//! an image's hook area; mmap of anonymous executable memory for an image's scratch page).
//! The program behaves as without memsup, and each image says what memsup did instead.

use std::path::Path;
use std::process::Child;

use serde_json::Value;

use crate::common::attach_cycle::{assert_same_maps, maps};
use crate::common::attach_window::AttachWindow;
use crate::common::engine::suite_engine_is_hooks;
use crate::common::interactive::run_until_ready;
use crate::common::live_process::tracer_pid;
use crate::common::mpi_job::requested_from;
use crate::common::report::{processes, report_json, warnings};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary, run_command};
use crate::common::strace::{strace_mapping_totals, MappingTotals};
use crate::common::*;

const STDOUT: &str = "seccomp_sandbox: fork child exited with status 3\n\
                      seccomp_sandbox: exec'd image exited with status 0\n";

/// The image of the fork child that ran work() (argv[1] is the filter's mode), and the
/// image the other fork child exec'd (argv[1] "image").
fn work_images(report: &Value) -> (&Value, &Value) {
    let with_argument = |argument: &str| -> &Value {
        let images: Vec<&Value> = processes(report)
            .iter()
            .filter(|image| image["argv"][1] == argument && image["cause"] == "fork")
            .collect();
        assert_eq!(images.len(), 1, "images with argv[1] {argument}");
        images[0]
    };
    let mode = processes(report)[0]["argv"][1]
        .as_str()
        .expect("the launched image's mode")
        .to_string();
    (with_argument(&mode), with_argument("image"))
}

/// Under the hook engine `image` warned `message` alone; under the int3 engine, which needs
/// none of the calls refused here, nothing.
fn assert_warned_under_hooks(image: &Value, message: String) {
    let expected = match suite_engine_is_hooks() {
        true => vec![message],
        false => Vec::new(),
    };
    assert_eq!(warnings(image), expected);
}

/// `image` recorded work()'s three blocks and their frees, with `engine`.
fn assert_work_recorded(image: &Value, engine: &str) {
    assert_eq!(image["engine"], engine, "{image:#}");
    assert_eq!(requested_from(image, "work"), (3, 6000), "{image:#}");
    assert_eq!(number(image, "/calls/free"), 3);
}

/// What memsup says of `call` that the filter would kill `image`'s process for (memsup runs
/// its calls in the main thread, whose id is the process's).
fn kill_warning(image: &Value, call: &str) -> String {
    format!(
        "thread {}'s seccomp filters would kill the process for it: memsup runs no {call} in it",
        image["pid"]
    )
}

/// What a fork child whose rings memsup could not make, for `why`, warns.
fn rings_warning(why: &str) -> String {
    format!(
        "its own hook rings could not be made ({why}); its allocator calls stop it at int3 breakpoints instead, a stop each"
    )
}

#[test]
fn a_filter_that_kills_on_memfd_create_leaves_the_rings_out_and_int3_in() {
    if !filters_readable() {
        return;
    }
    for_each_variant("seccomp_sandbox", |_, fixture| {
        let recording = record(fixture, &["memfd"], None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), STDOUT);
        let (child, image) = work_images(&recording.report);
        if !suite_engine_is_hooks() {
            // The int3 engine runs no memfd_create: nothing to avoid.
            assert_work_recorded(child, "int3");
            assert_work_recorded(image, "int3");
            assert_eq!(warnings(child), Vec::<String>::new());
            assert_eq!(warnings(image), Vec::<String>::new());
            return;
        }
        // The fork child got int3 probes where its parent's hooks were.
        assert_work_recorded(child, "int3");
        assert_eq!(
            warnings(child),
            [rings_warning(&kill_warning(child, "memfd_create"))]
        );
        // The exec'd image got its scratch page (mmap is allowed), and no hook area. Its
        // process warned first as a fork child, before the exec.
        assert_work_recorded(image, "int3");
        assert_eq!(
            warnings(image),
            [
                rings_warning(&kill_warning(image, "memfd_create")),
                format!(
                    "placing hooks failed: {}: its allocator calls stop it at int3 breakpoints instead, a stop each",
                    kill_warning(image, "memfd_create")
                )
            ]
        );
        for site in image["probe_sites"].as_array().expect("probe sites") {
            let implementation = site["implementation"].as_str().expect("a string");
            assert!(implementation.starts_with("int3, "), "{site}");
        }
    });
}

#[test]
fn a_filter_that_kills_on_anonymous_executable_memory_leaves_the_image_unprobed() {
    if !filters_readable() {
        return;
    }
    for_each_variant("seccomp_sandbox", |_, fixture| {
        let recording = record(fixture, &["anonymous-exec"], None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), STDOUT);
        let (child, image) = work_images(&recording.report);
        // The child's rings are shared memory, not executable: it keeps its parent's engine.
        let engine = if suite_engine_is_hooks() {
            "hooks"
        } else {
            "int3"
        };
        assert_work_recorded(child, engine);
        assert_eq!(warnings(child), Vec::<String>::new());
        // The exec'd image has no scratch page, so no probe: its allocator calls are not
        // recorded, its mapping calls are (memsup's own filter reports them).
        assert_eq!(
            warnings(image),
            [format!(
                "{}, so its allocator calls are not recorded, its mapping calls are",
                kill_warning(image, "mmap")
            )]
        );
        assert_eq!(requested_from(image, "work"), (0, 0));
        assert_eq!(number(image, "/calls/malloc"), 0);
        // Its mapping calls are those of the same image run natively, by strace's count.
        if require_tool("strace") {
            assert_eq!(
                MappingTotals::from_image(image),
                strace_mapping_totals(fixture, &["image"])
            );
        }
    });
}

/// Whether memsup, run by this test, can read a thread's seccomp filters: it needs
/// CAP_SYS_ADMIN and to run under no filter itself. The "would kill" verdicts need it;
/// without it memsup goes by counts (`unable_to_read_the_filters_...`).
fn filters_readable() -> bool {
    // SAFETY: geteuid has no side effects.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || own_filters() > 0 {
        record_skip("reading seccomp filters needs root and no seccomp filter of the test's own");
        return false;
    }
    true
}

/// The seccomp filters this test runs under (a container's, say), which memsup and what it
/// launches inherit.
fn own_filters() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("own status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Seccomp_filters:"))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}

#[test]
fn unable_to_read_the_filters_memsup_trusts_only_those_it_expects() {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("dropping CAP_SYS_ADMIN from memsup's bounding set needs root");
        return;
    }
    if !require_tool("setpriv") {
        return;
    }
    let expected = own_filters() + 1;
    for_each_variant("seccomp_sandbox", |_, fixture| {
        let mut native = clean_command(fixture);
        native.arg("anonymous-exec");
        let native = run_command(native, None);
        let directory = tempfile::tempdir().expect("a temporary directory");
        let profile = directory.path().join("run.msup");
        // Reading a thread's filters takes CAP_SYS_ADMIN: memsup runs without it.
        let mut supervised = clean_command("setpriv");
        supervised
            .arg("--bounding-set=-sys_admin")
            .arg(memsup_binary());
        supervised.arg("run").arg("-o").arg(&profile).arg("--");
        supervised.arg(fixture).arg("anonymous-exec");
        let supervised = run_command(supervised, None);
        assert_same_behaviour(&supervised, &native);
        assert_eq!(String::from_utf8_lossy(&native.stdout), STDOUT);
        let report = report_json(&profile);
        let (child, image) = work_images(&report);
        let unread = |image: &Value, call: &str| {
            format!(
                "thread {}'s seccomp filters are {}, memsup expects {expected} and cannot read them (Permission denied (os error 13)): memsup runs no {call} in it",
                image["pid"],
                expected + 1
            )
        };
        // Even the child's rings, which this filter would allow, are not made.
        assert_warned_under_hooks(child, rings_warning(&unread(child, "memfd_create")));
        assert_work_recorded(child, "int3");
        // Under hooks its process warned first as a fork child, before the exec.
        let mut expected = match suite_engine_is_hooks() {
            true => vec![rings_warning(&unread(image, "memfd_create"))],
            false => Vec::new(),
        };
        expected.push(format!(
            "{}, so its allocator calls are not recorded, its mapping calls are",
            unread(image, "mmap")
        ));
        assert_eq!(warnings(image), expected);
        assert_eq!(requested_from(image, "work"), (0, 0));
    });
}

/// The fixture under its filter of `mode`, waiting for a line: natively, then with `at_ready`
/// acting on the waiting process. Both must print and end alike.
fn wait_mode_runs(fixture: &Path, mode: &str, at_ready: impl FnOnce(&Child)) {
    let command = || {
        let mut command = clean_command(fixture);
        command.args([mode, "wait"]);
        command
    };
    let native = run_until_ready(command(), |_| {});
    let acted_on = run_until_ready(command(), at_ready);
    assert_same_behaviour(&acted_on, &native);
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        "ready\nseccomp_sandbox: worked\n"
    );
}

#[test]
fn an_attach_to_a_program_that_forbids_memfd_create_records_it_with_int3() {
    if !filters_readable() {
        return;
    }
    for_each_variant("seccomp_sandbox", |_, fixture| {
        let mut window = None;
        wait_mode_runs(fixture, "memfd", |child| {
            window = Some(AttachWindow::open(&[child.id()], &[]));
        });
        let (_, directory) = window.expect("attached").end(false);
        let report = report_json(&directory.path().join("attach.msup"));
        let image = &processes(&report)[0];
        assert_work_recorded(image, "int3");
        assert_warned_under_hooks(
            image,
            format!(
                "placing hooks failed: {}: its allocator calls stop it at int3 breakpoints instead, a stop each",
                kill_warning(image, "memfd_create")
            ),
        );
    });
}

#[test]
fn an_attach_that_would_need_a_forbidden_mmap_leaves_the_program_as_it_was() {
    if !filters_readable() {
        return;
    }
    for_each_variant("seccomp_sandbox", |_, fixture| {
        wait_mode_runs(fixture, "anonymous-exec", |child| {
            let pid = child.id();
            let before = maps(pid);
            let directory = tempfile::tempdir().expect("a temporary directory");
            let profile = directory.path().join("attach.msup");
            let output = run_memsup(
                [
                    "attach".as_ref(),
                    "-o".as_ref(),
                    profile.as_os_str(),
                    pid.to_string().as_ref(),
                ],
                None,
            );
            let (_, lines) = split_stderr(&output.stderr);
            assert_eq!(
                lines,
                [format!(
                    "memsup: error: thread {pid}'s seccomp filters would kill the process for it: memsup runs no mmap in it"
                )]
            );
            assert_eq!(output.status.code(), Some(86));
            assert!(!profile.exists(), "no profile is left");
            assert_eq!(tracer_pid(pid), 0);
            assert_same_maps(pid, &before, "a refused attach");
        });
    });
}
