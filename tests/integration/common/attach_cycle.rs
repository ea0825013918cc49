//! Attach/detach cycles driven by events: memsup attaches, the test waits (bounded) until the
//! target's TracerPid is memsup, waits a chosen delay, then detaches it with SIGINT. And the
//! state a detach must leave as it found: the full list of mappings.

use std::fs;
use std::process::{Child, Output};
use std::thread;
use std::time::{Duration, Instant};

use super::engine::without_hook_pages_left;
use super::live_process::tracer_pid;
use super::run::{clean_command, memsup_binary, spawn_piped, split_stderr, wait_with_timeout};

/// How long memsup may take to seize a process before the test gives up.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);

/// /proc/PID/maps as text: ranges, permissions, offsets, devices, inodes and paths.
pub fn maps(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_else(|error| panic!("reading /proc/{pid}/maps: {error}"))
}

/// `pid`'s mappings are exactly `before`; on failure, the lines added and removed.
pub fn assert_same_maps(pid: u32, before: &str, what: &str) {
    let now = maps(pid);
    if now == before {
        return;
    }
    let added: Vec<&str> = now.lines().filter(|line| !before.contains(line)).collect();
    let removed: Vec<&str> = before.lines().filter(|line| !now.contains(line)).collect();
    panic!("{what}: mappings of {pid} changed: added {added:#?}, removed {removed:#?}");
}

/// The system call `pid`'s main thread is blocked in (its number, from /proc/PID/syscall), or
/// its first word ("running") when it is not in one.
pub fn blocked_syscall(pid: u32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/syscall"))
        .unwrap_or_else(|error| panic!("reading /proc/{pid}/syscall: {error}"));
    text.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Waits (bounded) until `pid`'s main thread is blocked in system call `number`: a fixture
/// announces itself just before it enters the call.
pub fn wait_until_blocked_in(pid: u32, number: &str) {
    super::live_process::wait_until(
        &format!("{pid} is blocked in system call {number}"),
        Duration::from_secs(10),
        || blocked_syscall(pid) == number,
    );
}

/// Runs `memsup attach PID`, waits until it traces `pid`, waits `delay`, sends it SIGINT and
/// checks that it detached cleanly (exit 0, no line of its own on stderr with -q).
pub fn attach_then_interrupt(pid: u32, delay: Duration, what: &str) {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("cycle.msup");
    let mut command = clean_command(memsup_binary());
    command.args(["attach", "-q", "-o"]);
    command.arg(&profile).arg(pid.to_string());
    let (mut child, description) = spawn_piped(command);
    drop(child.stdin.take());
    if wait_until_tracing(&mut child, pid) {
        thread::sleep(delay);
        // SAFETY: kill has no memory effects; the child is not reaped yet, so its PID is ours.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let output = wait_with_timeout(child, &description);
    check_clean_detach(&output, pid, what);
}

/// Waits until memsup (`child`) is `pid`'s tracer; false if memsup exited first.
fn wait_until_tracing(child: &mut Child, pid: u32) -> bool {
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        if tracer_pid(pid) == child.id() {
            return true;
        }
        if child.try_wait().expect("polling memsup").is_some() {
            return false;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("memsup did not attach to {pid} within {ATTACH_TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(1));
    }
}

fn check_clean_detach(output: &Output, pid: u32, what: &str) {
    let (_, memsup_lines) = split_stderr(&output.stderr);
    let memsup_lines = without_hook_pages_left(memsup_lines);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{what}: memsup attach {pid} ended with {:?}: {memsup_lines:?}",
        output.status
    );
    assert!(
        memsup_lines.is_empty(),
        "{what}: memsup wrote {memsup_lines:?}"
    );
    assert_eq!(
        tracer_pid(pid),
        0,
        "{what}: {pid} still traced after memsup exited"
    );
}
