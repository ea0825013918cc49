//! fixtures/attach_loop.c: attach to a running process for a second, detach, attach again,
//! and check the program's code is untouched and it ends exactly as a native run does.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::ChildStdout;
use std::thread;

use serde_json::Value;

use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, start_fixture, KillOnDrop,
};
use crate::common::report::report_json;
use crate::common::run::wait_with_timeout;
use crate::common::*;

/// Starts the fixture natively and waits for its "ready" line.
fn start_loop(fixture: &Path) -> (KillOnDrop, BufReader<ChildStdout>, u32, String) {
    let (guard, stdout) = start_fixture(fixture);
    let pid = guard.0.as_ref().unwrap().id();
    let mut stdout = BufReader::new(stdout);
    let mut header = String::new();
    for _ in 0..2 {
        stdout
            .read_line(&mut header)
            .expect("reading attach_loop's first lines");
    }
    assert_eq!(
        header,
        format!("attach_loop: pid {pid}\nattach_loop: ready\n")
    );
    (guard, stdout, pid, header)
}

/// What one attach window must show (see fixtures/attach_loop.c).
fn check_window(report: &Value, pid: u32, fixture: &Path) {
    assert_profile(report, "attach", &[pid.to_string()]);
    assert_image_count(report, 1);
    let image = process_image(report, &file_name(fixture), "attach");
    assert_eq!(image["pid"], pid);
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
        allocations > 0,
        "an attach window of a second saw no allocation"
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
    assert_eq!(number(image, "/null_frees"), 0);
    assert_eq!(number(image, "/failed_allocations"), 0);
    assert_eq!(number(image, "/peak_live_blocks"), 1, "one block at a time");
    let peak = number(image, "/peak_live_bytes");
    assert!((16..=520).contains(&peak), "peak {peak}");
    assert!(number(image, "/live_blocks_at_exit") <= 1);
    assert!(number(image, "/live_bytes_at_exit") <= 520);
    let largest = number(image, "/largest_allocation");
    assert!((16..=520).contains(&largest), "largest {largest}");
    if allocations >= 64 {
        assert_eq!(
            largest, 520,
            "64 consecutive iterations include the 520-byte size"
        );
    }
    let bytes = number(image, "/bytes_allocated");
    assert!(
        (16 * allocations..=520 * allocations).contains(&bytes),
        "bytes {bytes}"
    );
    assert_eq!(number(image, "/probes/nested_calls"), 0);
    assert_eq!(number(image, "/probes/single_steps"), 0);
    assert_eq!(number(image, "/probes/stop_the_world"), 0);
    assert_eq!(image["top_sites"][0]["function"], "main");
}

fn attach_for_a_second(pid: u32, fixture: &Path) {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("attach.msup");
    let pid_argument = pid.to_string();
    let output = run_memsup(
        [
            "attach".as_ref(),
            "-o".as_ref(),
            profile.as_os_str(),
            "--duration".as_ref(),
            "1".as_ref(),
            pid_argument.as_ref(),
        ] as [&std::ffi::OsStr; 6],
        None,
    );
    let (_, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "memsup attach failed: {memsup_lines:?}"
    );
    check_window(&report_json(&profile), pid, fixture);
}

#[test]
fn attach_detach_twice_leaves_the_program_unchanged() {
    for_each_variant("attach_loop", |_, fixture| {
        let reference_fixture = fixture.to_path_buf();
        let native = thread::spawn(move || run_native(&reference_fixture, &[], None));

        let (mut guard, mut stdout, pid, header) = start_loop(fixture);
        let code_before = executable_mappings(pid);
        attach_for_a_second(pid, fixture);
        assert_code_unchanged(pid, &code_before);
        attach_for_a_second(pid, fixture);
        assert_code_unchanged(pid, &code_before);

        let mut rest = String::new();
        stdout
            .read_to_string(&mut rest)
            .expect("reading attach_loop's output");
        let child = guard.0.take().unwrap();
        let finished = wait_with_timeout(child, "attach_loop after two attaches");
        assert_eq!(finished.status.code(), Some(0), "attach_loop's exit status");
        assert_eq!(String::from_utf8_lossy(&finished.stderr), "");

        let native = native.join().unwrap();
        let native_stdout = String::from_utf8_lossy(&native.stdout).into_owned();
        let native_rest = native_stdout.lines().skip(2).collect::<Vec<_>>().join("\n") + "\n";
        assert_eq!(native.status.code(), Some(0));
        assert_eq!(format!("{header}{rest}"), format!("{header}{native_rest}"));
        assert_eq!(
            rest,
            "attach_loop: 4000000 iterations, checksum 8037224905761941632\n"
        );
    });
}
