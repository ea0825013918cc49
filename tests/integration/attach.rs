//! fixtures/attach_loop.c: attach to a running process for a second, detach, attach again,
//! and check the program's code is untouched and it ends exactly as a native run does.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::ChildStdout;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, start_fixture, KillOnDrop,
};
use crate::common::report::{processes, report_json};
use crate::common::run::wait_with_timeout;
use crate::common::*;

/// Starts the fixture natively and waits for its "ready" line.
fn start_loop(fixture: &Path) -> (KillOnDrop, BufReader<ChildStdout>, u32, String) {
    start_announced(fixture, "attach_loop")
}

/// Starts a fixture that first prints "NAME: pid N" and "NAME: ready", and reads those.
fn start_announced(
    fixture: &Path,
    name: &str,
) -> (KillOnDrop, BufReader<ChildStdout>, u32, String) {
    let (guard, stdout) = start_fixture(fixture);
    let pid = guard.0.as_ref().unwrap().id();
    let mut stdout = BufReader::new(stdout);
    let mut header = String::new();
    for _ in 0..2 {
        stdout
            .read_line(&mut header)
            .unwrap_or_else(|error| panic!("reading {name}'s first lines: {error}"));
    }
    assert_eq!(header, format!("{name}: pid {pid}\n{name}: ready\n"));
    (guard, stdout, pid, header)
}

/// What one attach window must show (see fixtures/attach_loop.c), for every process in it.
fn check_window(report: &Value, pids: &[u32]) {
    let targets: Vec<String> = pids.iter().map(u32::to_string).collect();
    assert_profile(report, "attach", &targets);
    assert_image_count(report, pids.len());
    for &pid in pids {
        let image = processes(report)
            .iter()
            .find(|image| image["pid"] == pid)
            .unwrap_or_else(|| panic!("no image of process {pid}"));
        assert_eq!(image["cause"], "attach");
        check_detached_image(image);
    }
}

fn check_detached_image(image: &Value) {
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
    assert_eq!(leaf_function(&image["sites"][0]), "main");
}

fn attach_for_a_second(pids: &[u32]) {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("attach.msup");
    let mut arguments: Vec<std::ffi::OsString> = ["attach", "-o"].map(Into::into).to_vec();
    arguments.push(profile.clone().into());
    arguments.extend(["--duration", "1"].map(Into::into));
    arguments.extend(pids.iter().map(|pid| pid.to_string().into()));
    let output = run_memsup(arguments, None);
    let (_, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "memsup attach failed: {memsup_lines:?}"
    );
    check_window(&report_json(&profile), pids);
}

#[test]
fn attach_detach_twice_leaves_the_program_unchanged() {
    for_each_variant("attach_loop", |_, fixture| {
        let reference_fixture = fixture.to_path_buf();
        let native = thread::spawn(move || run_native(&reference_fixture, &[], None));

        let (mut guard, mut stdout, pid, header) = start_loop(fixture);
        let code_before = executable_mappings(pid);
        attach_for_a_second(&[pid]);
        assert_code_unchanged(pid, &code_before);
        attach_for_a_second(&[pid]);
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

/// Reads the rest of a loop's output and checks it ended as a native run does.
fn finish_loop(mut guard: KillOnDrop, mut stdout: BufReader<ChildStdout>) {
    let mut rest = String::new();
    stdout
        .read_to_string(&mut rest)
        .expect("reading attach_loop's output");
    let finished = wait_with_timeout(guard.0.take().unwrap(), "attach_loop after the attach");
    assert_eq!(finished.status.code(), Some(0), "attach_loop's exit status");
    assert_eq!(String::from_utf8_lossy(&finished.stderr), "");
    assert_eq!(
        rest,
        "attach_loop: 4000000 iterations, checksum 8037224905761941632\n"
    );
}

#[test]
fn one_attach_joins_two_processes() {
    for_each_variant("attach_loop", |_, fixture| {
        let (first_guard, first_stdout, first_pid, _) = start_loop(fixture);
        let (second_guard, second_stdout, second_pid, _) = start_loop(fixture);
        let first_code = executable_mappings(first_pid);
        let second_code = executable_mappings(second_pid);
        attach_for_a_second(&[first_pid, second_pid]);
        assert_code_unchanged(first_pid, &first_code);
        assert_code_unchanged(second_pid, &second_code);
        finish_loop(first_guard, first_stdout);
        finish_loop(second_guard, second_stdout);
    });
}

fn process_state(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("reading stat");
    let after_name = &stat[stat.rfind(')').expect("command name") + 1..];
    after_name
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_process_stopped_by_job_control_stays_stopped_while_attached() {
    for_each_variant("attach_loop", |_, fixture| {
        let (guard, stdout, pid, _) = start_loop(fixture);
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        crate::common::live_process::wait_until("the loop stops", Duration::from_secs(10), || {
            process_state(pid) == "T"
        });
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("stopped.msup");
        let profile_argument = profile.to_str().unwrap();
        let pid_argument = pid.to_string();
        let output = run_memsup(
            [
                "attach",
                "-q",
                "-o",
                profile_argument,
                "--duration",
                "1",
                &pid_argument,
            ],
            None,
        );
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(process_state(pid), "T", "still stopped after the detach");
        let report = report_json(&profile);
        let image = &processes(&report)[0];
        assert_exit(image, "detached", None);
        assert_eq!(
            number(image, "/calls/malloc"),
            0,
            "a stopped process allocates nothing"
        );
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        finish_loop(guard, stdout);
    });
}

/// Detaching while the program forks: a child born as memsup stops everyone carries memsup's
/// int3s and must be cleaned before it runs free (fixtures/fork_loop.c counts children that
/// did not exit normally). Without that, about one detach in three killed a child.
#[test]
fn children_forked_during_a_detach_carry_no_probes() {
    for_each_variant("fork_loop", |_, fixture| {
        let (guard, mut stdout, pid, _) = start_announced(fixture, "fork_loop");
        for _ in 0..5 {
            let directory = tempfile::tempdir().unwrap();
            let profile = directory.path().join("forks.msup");
            let pid_argument = pid.to_string();
            let arguments = [
                "attach",
                "-q",
                "-o",
                profile.to_str().unwrap(),
                "--duration",
                "1",
                &pid_argument,
            ];
            let output = run_memsup(arguments, None);
            assert_eq!(
                output.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
        let mut rest = String::new();
        stdout
            .read_to_string(&mut rest)
            .expect("reading fork_loop's output");
        let mut guard = guard;
        let finished = wait_with_timeout(guard.0.take().unwrap(), "fork_loop");
        assert_eq!(finished.status.code(), Some(0));
        assert_eq!(rest, "fork_loop: bad children 0\n");
    });
}
