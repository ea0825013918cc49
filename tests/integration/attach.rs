//! fixtures/attach_loop.c: attach to a running process, detach, attach again, and check the
//! program's code is untouched and it ends exactly as a native run does. Each window ends by
//! an event: the program prints a mark once it has run a known number of iterations under
//! memsup, then the test sends memsup SIGINT.

use std::time::Duration;

use serde_json::Value;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_loop::{finish, finish_loop, loop_checksum, mark, start_loop};
use crate::common::attach_window::{attached_line, AttachWindow};
use crate::common::interactive::send_signal;
use crate::common::live_process::{assert_code_unchanged, executable_mappings, process_state};
use crate::common::report::processes;
use crate::common::*;

/// The checksum formula is the fixture's: a native run of a given length prints it, and the
/// default run's documented line holds.
#[test]
fn the_loop_checksum_is_the_fixtures() {
    assert_eq!(loop_checksum(4_000_000), 8037224905761941632);
    for_each_variant("attach_loop", |_, fixture| {
        let native = run_native(fixture, &["100000"], None);
        assert_eq!(native.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&native.stdout);
        assert_eq!(
            stdout.lines().nth(2),
            Some("attach_loop: 100000 iterations, checksum 15923887291240253904")
        );
        assert_eq!(loop_checksum(100_000), 15923887291240253904);
    });
}

/// Attaches to `programs`, waits for a mark from each, and detaches.
fn attach_until_marks(programs: &[&Running]) -> Value {
    let pids: Vec<u32> = programs.iter().map(|program| program.pid).collect();
    let window = AttachWindow::open(&pids, &[]);
    let profile = window.profile();
    for program in programs {
        mark(program);
    }
    let (output, report) = window.close();
    // A warning here would say memsup could not probe or name something.
    let (_, memsup_lines) = split_stderr(&output.stderr);
    let mut sorted = pids.clone();
    sorted.sort_unstable();
    assert_eq!(
        without_hook_pages_left(memsup_lines),
        [
            attached_line(&sorted, "Ctrl-C detaches"),
            format!("memsup: profile written to {}", profile.display())
        ],
        "memsup's lines"
    );
    report
}

/// What one attach window must show (see fixtures/attach_loop.c), for every process in it.
fn check_window(report: &Value, pids: &[u32]) {
    let targets: Vec<String> = pids.iter().map(u32::to_string).collect();
    showing_on_failure(&format_args!("report: {report}"), || {
        assert_profile(report, "attach", &targets);
        assert_image_count(report, pids.len());
    });
    for &pid in pids {
        let image = processes(report)
            .iter()
            .find(|image| image["pid"] == pid)
            .unwrap_or_else(|| panic!("no image of process {pid} in the report: {report}"));
        check_detached_image(image);
    }
}

/// Checks one detached image; a failed assertion also prints the whole image.
fn check_detached_image(image: &Value) {
    showing_on_failure(&format_args!("image: {image}"), || {
        check_detached_numbers(image)
    });
}

fn check_detached_numbers(image: &Value) {
    assert_eq!(image["cause"], "attach", "cause");
    let warnings = image["warnings"].as_array().cloned().unwrap_or_default();
    let hook_pages_left = HOOK_PAGES_LEFT.trim_start_matches("memsup: warning: ");
    // Only the hook engine may leave its pages (and an attach after it then removes them),
    // and then the check is recorded as skipped.
    let about_pages_left = |warning: &Value| {
        recorded_by_hooks(image)
            && (warning == hook_pages_left
                || warning
                    .as_str()
                    .is_some_and(|text| text.starts_with(EARLIER_MEMSUP_REMOVED)))
    };
    if warnings.iter().any(about_pages_left) {
        record_skip("a clean detach: memsup left its hook pages mapped, switched off");
    }
    let warnings: Vec<_> = warnings
        .into_iter()
        .filter(|warning| !about_pages_left(warning))
        .collect();
    assert!(warnings.is_empty(), "warnings: {warnings:?}");
    assert_exit(image, "detached", None);
    let malloc = number(image, "/calls/malloc");
    let free = number(image, "/calls/free");
    for function in crate::common::expect::FUNCTIONS {
        if function != "malloc" && function != "free" {
            assert_eq!(
                number(image, &format!("/calls/{function}")),
                0,
                "calls of {function}"
            );
        }
    }
    let allocations = number(image, "/allocations");
    assert!(
        allocations >= 4096,
        "a window that saw a mark saw its 4096 iterations: {allocations} allocations"
    );
    // A malloc in flight at detach is counted as a call but has no result.
    assert!(
        malloc == allocations || malloc == allocations + 1,
        "{malloc} calls, {allocations} allocations"
    );
    assert!(
        malloc.abs_diff(free) <= 1,
        "malloc and free calls pair up: {malloc} vs {free}"
    );
    let unknown_frees = number(image, "/unknown_frees");
    assert!(
        unknown_frees <= 1,
        "only the first free can be of a block from before the attach"
    );
    assert_eq!(
        number(image, "/frees") + unknown_frees,
        free,
        "every free is known or unknown"
    );
    assert_eq!(number(image, "/null_frees"), 0, "null frees");
    assert_eq!(
        number(image, "/failed_allocations"),
        0,
        "failed allocations"
    );
    assert_eq!(number(image, "/peak_live_blocks"), 1, "one block at a time");
    assert_eq!(
        number(image, "/peak_live_bytes"),
        520,
        "64 consecutive iterations include the 520-byte size"
    );
    let live_blocks = number(image, "/live_blocks_at_exit");
    assert!(live_blocks <= 1, "{live_blocks} blocks live at the detach");
    let live_bytes = number(image, "/live_bytes_at_exit");
    assert!(live_bytes <= 520, "{live_bytes} bytes live at the detach");
    assert_eq!(
        number(image, "/largest_allocation"),
        520,
        "largest allocation"
    );
    let bytes = number(image, "/bytes_allocated");
    assert!(
        (16 * allocations..=520 * allocations).contains(&bytes),
        "bytes {bytes}"
    );
    assert_eq!(number(image, "/probes/nested_calls"), 0, "nested calls");
    assert_eq!(number(image, "/probes/single_steps"), 0, "single steps");
    assert_eq!(number(image, "/probes/stop_the_world"), 0, "stop the world");
    assert_eq!(
        leaf_function(&image["sites"][0]),
        "main",
        "the first site's leaf"
    );
}

#[test]
fn attach_detach_twice_leaves_the_program_unchanged() {
    for_each_variant("attach_loop", |_, fixture| {
        let program = start_loop(fixture);
        let code_before = executable_mappings(program.pid);
        for _ in 0..2 {
            let report = attach_until_marks(&[&program]);
            check_window(&report, &[program.pid]);
            assert_code_unchanged(program.pid, &code_before);
        }
        finish_loop(program);
    });
}

#[test]
fn one_attach_joins_two_processes() {
    for_each_variant("attach_loop", |_, fixture| {
        let first = start_loop(fixture);
        let second = start_loop(fixture);
        let first_code = executable_mappings(first.pid);
        let second_code = executable_mappings(second.pid);
        let report = attach_until_marks(&[&first, &second]);
        check_window(&report, &[first.pid, second.pid]);
        assert_code_unchanged(first.pid, &first_code);
        assert_code_unchanged(second.pid, &second_code);
        finish_loop(first);
        finish_loop(second);
    });
}

#[test]
fn a_process_stopped_by_job_control_stays_stopped_while_attached() {
    for_each_variant("attach_loop", |_, fixture| {
        let program = start_loop(fixture);
        let pid = program.pid;
        send_signal(pid, libc::SIGSTOP);
        crate::common::live_process::wait_until("the loop stops", Duration::from_secs(10), || {
            process_state(pid) == "T"
        });
        // The window ends as soon as memsup holds the process: SIGINT is served once the
        // attach is complete, and a stopped program has nothing more to show.
        let (output, report) = AttachWindow::open(&[pid], &["-q"]).close();
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            "",
            "memsup -q's stderr"
        );
        assert_eq!(process_state(pid), "T", "still stopped after the detach");
        let image = &processes(&report)[0];
        assert_exit(image, "detached", None);
        assert_eq!(
            number(image, "/calls/malloc"),
            0,
            "a stopped process allocates nothing"
        );
        send_signal(pid, libc::SIGCONT);
        mark(&program);
        finish_loop(program);
    });
}

/// Detaching while the program forks: a child born as memsup stops everyone carries memsup's
/// int3s and must be cleaned before it runs free (fixtures/fork_loop.c counts children that
/// did not exit normally). Without that, about one detach in three killed a child. Each
/// window lasts until two children have ended under memsup; the detach then often lands
/// during the next fork, which is slow.
#[test]
fn children_forked_during_a_detach_carry_no_probes() {
    for_each_variant("fork_loop", |_, fixture| {
        let program = start_announced(fixture, "fork_loop", Start::default());
        for _ in 0..5 {
            let window = AttachWindow::open(&[program.pid], &["-q"]);
            mark(&program);
            let (output, _) = window.close();
            let stderr = String::from_utf8_lossy(&output.stderr);
            let lines = stderr.lines().map(str::to_string).collect();
            assert_eq!(
                without_hook_pages_left(lines),
                Vec::<String>::new(),
                "memsup -q's stderr"
            );
        }
        assert_eq!(finish(program), "fork_loop: bad children 0\n");
    });
}
