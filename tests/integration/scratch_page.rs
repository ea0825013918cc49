//! The scratch page memsup maps at attach is gone after the detach, even when every thread
//! of the process sits in a system call (the remote munmap then runs from an interrupted
//! call, which must be restarted exactly as without memsup): fixtures/blocked_read.c (read,
//! restarted through -ERESTARTSYS) and fixtures/sleep_check.c (clock_nanosleep, restarted
//! through -ERESTART_RESTARTBLOCK and restart_syscall).

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_cycle::{
    assert_same_maps, attach_then_interrupt, blocked_syscall, maps, wait_until_blocked_in,
};
use crate::common::live_process::{assert_code_unchanged, executable_mappings};
use crate::common::*;

const SYS_READ: &str = "0";
const SYS_CLOCK_NANOSLEEP: &str = "230";
const SYS_RESTART_SYSCALL: &str = "219";

/// Starts `fixture` with its stdin a pipe the test holds, and reads its announcement.
fn start(fixture: &Path, name: &str, args: &[&str]) -> Running {
    let start = Start {
        args,
        piped_stdin: true,
        ..Start::default()
    };
    start_announced(fixture, name, start)
}

/// Closes the fixture's stdin, reads the rest of its output, waits for it, requires an empty
/// stderr, and returns (everything it printed, exit code).
fn finish(process: Running) -> (String, Option<i32>) {
    let name = process.name.clone();
    let (_, finished) = process.finish();
    assert_eq!(
        String::from_utf8_lossy(&finished.stderr),
        "",
        "{name}'s stderr"
    );
    let stdout = String::from_utf8(finished.stdout).expect("text");
    (stdout, finished.status.code())
}

#[test]
fn four_attaches_to_a_process_blocked_in_read_leave_no_page_and_the_read_restarts() {
    for_each_variant("blocked_read", |_, fixture| {
        let input = b"first line\nsecond\n";
        let native = run_native(fixture, &[], Some(input));
        let mut process = start(fixture, "blocked_read", &[]);
        let pid = process.pid;
        wait_until_blocked_in(pid, SYS_READ);
        let maps_before = maps(pid);
        let code_before = executable_mappings(pid);
        for cycle in 1..=4 {
            attach_then_interrupt(pid, Duration::ZERO, &format!("cycle {cycle}"));
            assert_same_maps(pid, &maps_before, &format!("after cycle {cycle}"));
            assert_code_unchanged(pid, &code_before);
            // Still in read: the interrupted call was restarted, not returned.
            assert_eq!(blocked_syscall(pid), SYS_READ, "after cycle {cycle}");
        }
        process.write_stdin(b"first line\n");
        let echoed = process.next_line("the first line echoed");
        assert_eq!(echoed, "blocked_read: line 1: first line (11 bytes)");
        process.write_stdin(b"second\n");
        let (output, status) = finish(process);
        let native_stdout = String::from_utf8_lossy(&native.stdout).into_owned();
        let after_pid = |text: &str| text.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(
            after_pid(&output),
            after_pid(&native_stdout),
            "output after the pid line"
        );
        assert_eq!(status, native.status.code());
        assert_eq!(status, Some(0));
        assert_eq!(
            output,
            format!(
                "blocked_read: pid {pid}\nblocked_read: ready\n\
                 blocked_read: line 1: first line (11 bytes)\n\
                 blocked_read: line 2: second (7 bytes)\n\
                 blocked_read: 2 lines, 18 bytes allocated\n"
            )
        );
    });
}

/// Long enough for every variant's attach and detach to end while the fixtures still sleep.
const SLEEP_SECONDS: &str = "10";

#[test]
fn attaching_to_a_sleeping_process_keeps_the_whole_sleep_and_leaves_no_page() {
    // All variants sleep at once, and are all attached to before any is waited for: the test
    // lasts about one sleep, not three.
    let sleeping: Vec<(Variant, Running)> = variants("sleep_check")
        .into_iter()
        .map(|variant| {
            let fixture = fixture("sleep_check", variant);
            (variant, start(&fixture, "sleep_check", &[SLEEP_SECONDS]))
        })
        .collect();
    let sleeping = Mutex::new(sleeping);
    let pid_of = |variant: Variant| {
        let sleeping = sleeping.lock().unwrap_or_else(|poison| poison.into_inner());
        sleeping.iter().find(|(v, _)| *v == variant).unwrap().1.pid
    };
    for_each_variant("sleep_check", |variant, _| {
        let pid = pid_of(variant);
        wait_until_blocked_in(pid, SYS_CLOCK_NANOSLEEP);
        let maps_before = maps(pid);
        let code_before = executable_mappings(pid);
        attach_then_interrupt(pid, Duration::ZERO, "sleep_check");
        assert_same_maps(pid, &maps_before, "after the detach");
        assert_code_unchanged(pid, &code_before);
        assert_eq!(
            blocked_syscall(pid),
            SYS_RESTART_SYSCALL,
            "the interrupted sleep goes on through restart_syscall (if the fixture is no \
             longer asleep, the machine took over {SLEEP_SECONDS} s to attach and detach)"
        );
    });
    for_each_variant("sleep_check", |variant, _| {
        let process = {
            let mut sleeping = sleeping.lock().unwrap_or_else(|poison| poison.into_inner());
            let index = sleeping.iter().position(|(v, _)| *v == variant).unwrap();
            sleeping.remove(index).1
        };
        let pid = process.pid;
        let (output, status) = finish(process);
        assert_eq!(
            output,
            format!(
                "sleep_check: pid {pid}\nsleep_check: ready\n\
                 sleep_check: slept at least {SLEEP_SECONDS} s: ok\n"
            )
        );
        assert_eq!(status, Some(0));
    });
}
