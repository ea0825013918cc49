//! Signals in run mode: Ctrl-C reaches the program (the terminal sends SIGINT to the whole
//! foreground process group) while memsup keeps recording; a SIGTERM aimed at memsup is passed
//! on to the program; job control (SIGSTOP, SIGCONT) works on the traced program; and a
//! SIGKILL of memsup takes the program with it and leaves a readable, truncated profile.
//! fixtures/signal_wait.c and fixtures/attach_loop.c.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::common::report::report_json;
use crate::common::run::{
    assert_same_behaviour, clean_command, memsup_binary, memsup_run_command, run_command,
    wait_with_timeout,
};
use crate::common::*;

const INTERRUPTED: &str = "signal_wait: interrupted, block sum 4000\n";

/// A process started in a new process group, its stdout read up to its "ready" line.
struct Started {
    /// None once waited for.
    child: Option<Child>,
    stdout: BufReader<ChildStdout>,
    /// What it printed up to "ready", with the pid replaced by "N".
    header: String,
    /// The pid the fixture printed (memsup's child when started under memsup).
    program_pid: i32,
}

impl Drop for Started {
    /// Kills the whole group when a test fails half-way, so no fixture outlives the test.
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
            child.wait().ok();
        }
    }
}

impl Started {
    /// The pid of the process started (memsup, or the fixture when run natively).
    fn leader(&self) -> i32 {
        self.child.as_ref().expect("not waited for yet").id() as i32
    }

    /// Waits for the leader to end (not for the pipes to close), and forgets it.
    fn wait_for_leader(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("not waited for yet");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().expect("waiting for a child") {
                return status;
            }
            assert!(Instant::now() < deadline, "pid {} did not end", child.id());
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the end; stdout is the header plus everything printed after it.
    fn finish(mut self) -> Output {
        let child = self.child.take().expect("not waited for yet");
        let mut output = wait_with_timeout(child, "a signals test process");
        let mut rest = Vec::new();
        self.stdout.read_to_end(&mut rest).ok();
        let mut stdout = self.header.clone().into_bytes();
        stdout.extend(rest);
        output.stdout = stdout;
        output
    }
}

/// Starts `command` as the leader of a new process group (as a shell starts a job) and reads
/// its stdout up to the line "NAME: ready"; the line before must be "NAME: pid N".
fn start(mut command: Command, name: &str) -> Started {
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("starting {command:?}: {error}"));
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut started = Started {
        child: Some(child),
        stdout,
        header: String::new(),
        program_pid: 0,
    };
    let mut lines = String::new();
    for _ in 0..2 {
        started
            .stdout
            .read_line(&mut lines)
            .expect("reading the first lines");
    }
    let pid_prefix = format!("{name}: pid ");
    let pid: i32 = lines
        .strip_prefix(&pid_prefix)
        .and_then(|rest| rest.split_once('\n'))
        .and_then(|(pid, _)| pid.parse().ok())
        .unwrap_or_else(|| panic!("{name} printed no pid line first: {lines:?}"));
    assert_eq!(
        lines,
        format!("{pid_prefix}{pid}\n{name}: ready\n"),
        "first lines of {name}"
    );
    started.header = format!("{pid_prefix}N\n{name}: ready\n");
    started.program_pid = pid;
    started
}

fn send(pid: i32, signal: i32) {
    let result = unsafe { libc::kill(pid, signal) };
    assert_eq!(result, 0, "kill({pid}, {signal}) failed");
}

fn send_to_group(group: i32, signal: i32) {
    let result = unsafe { libc::killpg(group, signal) };
    assert_eq!(result, 0, "killpg({group}, {signal}) failed");
}

/// `memsup run -o PROFILE -- fixture` started as a job, and its profile's directory.
fn start_under_memsup(fixture: &Path, name: &str) -> (Started, PathBuf, TempDir) {
    let directory = tempfile::tempdir().expect("creating a temporary directory");
    let profile = directory.path().join("run.msup");
    (
        start(memsup_run_command(&profile, fixture), name),
        profile,
        directory,
    )
}

/// The state letter of /proc/PID/stat (after the parenthesised command name), if it exists.
fn process_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Waits up to a second for `pid`'s state to satisfy `accept`; returns the last state seen.
fn wait_for_state(pid: i32, accept: impl Fn(Option<char>) -> bool) -> Option<char> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let state = process_state(pid);
        if accept(state) || Instant::now() > deadline {
            return state;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// signal_wait's numbers (shared with the progress tests): ended by SIGINT (the block freed)
/// or by SIGTERM (still live).
pub fn signal_wait_numbers(variant: Variant, fixture: &Path, freed: bool) -> HeapExpectation {
    let dynamic = HeapExpectation {
        calls: calls(&[("malloc", 1), ("free", u64::from(freed))]),
        returned_calls: 1,
        allocations: 1,
        bytes_allocated: 4000,
        frees: u64::from(freed),
        peak_live_bytes: 4000,
        peak_live_blocks: 1,
        live_bytes_at_exit: if freed { 0 } else { 4000 },
        live_blocks_at_exit: u64::from(!freed),
        largest_allocation: 4000,
        ..Default::default()
    };
    match variant {
        Variant::Static => dynamic.plus_static_startup(GlibcStaticStartup::of(fixture)),
        Variant::Dynamic | Variant::Musl => dynamic,
    }
}

/// The report of a signal_wait run: one complete image with exactly these numbers.
pub fn check_signal_wait_profile(
    profile: &Path,
    fixture: &Path,
    expected: &HeapExpectation,
    signals: u64,
) -> serde_json::Value {
    let report = report_json(profile);
    let image = launched_image(&report, fixture, &[]).clone();
    assert_heap(&image, expected);
    assert_site_listed(&image, &site(Some("main"), 4000, 1).with_totals(1, 4000));
    assert_probe_costs(&image, expected, 0, signals);
    image
}

/// signal_wait run natively as a job and ended by SIGINT to its group: its output (pid shown
/// as "N") and status.
pub fn native_signal_wait_interrupted(fixture: &Path) -> Output {
    let native = start(clean_command(fixture), "signal_wait");
    send_to_group(native.leader(), libc::SIGINT);
    let native = native.finish();
    assert_eq!(native.status.code(), Some(0));
    let expected_stdout = format!("signal_wait: pid N\nsignal_wait: ready\n{INTERRUPTED}");
    assert_eq!(String::from_utf8_lossy(&native.stdout), expected_stdout);
    native
}

#[test]
fn ctrl_c_to_the_process_group_reaches_the_program_and_recording_completes() {
    for_each_variant("signal_wait", |variant, fixture| {
        let native = native_signal_wait_interrupted(fixture);
        let (supervised, profile, _directory) = start_under_memsup(fixture, "signal_wait");
        // What a terminal does on Ctrl-C: SIGINT to every process of the foreground job.
        send_to_group(supervised.leader(), libc::SIGINT);
        let supervised = supervised.finish();
        assert_same_behaviour(&supervised, &native);
        let image = check_signal_wait_profile(
            &profile,
            fixture,
            &signal_wait_numbers(variant, fixture, true),
            1,
        );
        assert_exit(&image, "code", Some(0));
    });
}

#[test]
fn sigterm_sent_to_memsup_is_forwarded_and_kills_the_program() {
    for_each_variant("signal_wait", |variant, fixture| {
        let native = start(clean_command(fixture), "signal_wait");
        send(native.program_pid, libc::SIGTERM);
        let native = native.finish();
        assert_eq!(native.status.code(), None);
        assert_eq!(
            String::from_utf8_lossy(&native.stdout),
            "signal_wait: pid N\nsignal_wait: ready\n"
        );

        let (supervised, profile, _directory) = start_under_memsup(fixture, "signal_wait");
        // To memsup only: the program gets it because memsup passes it on.
        send(supervised.leader(), libc::SIGTERM);
        let supervised = supervised.finish();
        assert_same_behaviour(&supervised, &native);
        assert_eq!(supervised.status.code(), Some(128 + 15));
        let image = check_signal_wait_profile(
            &profile,
            fixture,
            &signal_wait_numbers(variant, fixture, false),
            1,
        );
        assert_exit(&image, "signal", Some(15));
    });
}

/// SIGSTOP stops the program within a second; it stays stopped until SIGCONT, and runs on.
fn stop_and_continue(pid: i32) {
    send(pid, libc::SIGSTOP);
    let stopped = |state: Option<char>| matches!(state, Some('T' | 't'));
    let state = wait_for_state(pid, stopped);
    assert!(
        stopped(state),
        "pid {pid} not stopped a second after SIGSTOP: {state:?}"
    );
    thread::sleep(Duration::from_millis(100));
    let state = process_state(pid);
    assert!(stopped(state), "pid {pid} did not stay stopped: {state:?}");
    send(pid, libc::SIGCONT);
    let state = wait_for_state(pid, |state| !stopped(state));
    assert!(
        !stopped(state),
        "pid {pid} still stopped a second after SIGCONT: {state:?}"
    );
}

#[test]
fn sigstop_and_sigcont_stop_and_resume_the_traced_program() {
    for_each_variant("signal_wait", |variant, fixture| {
        let native = start(clean_command(fixture), "signal_wait");
        stop_and_continue(native.program_pid);
        send(native.program_pid, libc::SIGINT);
        let native = native.finish();
        assert_eq!(native.status.code(), Some(0));

        let (supervised, profile, _directory) = start_under_memsup(fixture, "signal_wait");
        stop_and_continue(supervised.program_pid);
        send(supervised.program_pid, libc::SIGINT);
        let supervised = supervised.finish();
        assert_same_behaviour(&supervised, &native);
        assert_eq!(
            String::from_utf8_lossy(&supervised.stdout),
            format!("signal_wait: pid N\nsignal_wait: ready\n{INTERRUPTED}")
        );
        let image = check_signal_wait_profile(
            &profile,
            fixture,
            &signal_wait_numbers(variant, fixture, true),
            3,
        );
        assert_exit(&image, "code", Some(0));
    });
}

#[test]
fn sigkill_of_memsup_kills_the_program_and_leaves_a_truncated_profile() {
    if !require_tool("gcc") {
        return;
    }
    let fixture = fixture("attach_loop", Variant::Dynamic);
    let (supervised, profile, _directory) = start_under_memsup(&fixture, "attach_loop");
    let program = supervised.program_pid;
    let group = supervised.leader();
    thread::sleep(Duration::from_millis(300));
    send(supervised.leader(), libc::SIGKILL);
    // Only memsup is waited for here: reading the pipes to their end would also wait for the
    // program, which holds them too.
    let status = supervised.wait_for_leader();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "memsup's end");
    // PTRACE_O_EXITKILL: the tracer's death kills the program. Once killed it is gone, or a
    // zombie until whoever adopted it (init or a subreaper) reaps it.
    let dead = |state: Option<char>| matches!(state, None | Some('Z' | 'X'));
    let state = wait_for_state(program, dead);
    if !dead(state) {
        unsafe { libc::killpg(group, libc::SIGKILL) };
    }
    assert!(
        dead(state),
        "attach_loop (pid {program}) still runs a second after memsup was killed: {state:?}"
    );

    let report = report_json(&profile);
    assert_eq!(report["profile"]["truncated"], true, "profile.truncated");
    let image = process_image(&report, &file_name(&fixture), "launch");
    // Bounds, not exact numbers: how far the loop got before the kill, and which of the
    // profile's blocks were flushed, depend on timing. 300 ms covers thousands of iterations.
    assert!(
        number(image, "/calls/malloc") > 0,
        "a truncated profile still shows the calls recorded before the kill: {image:#}"
    );
    let mut command = clean_command(memsup_binary());
    command.arg("report").arg(&profile);
    let text = run_command(command, None);
    assert!(text.status.success(), "memsup report: {text:?}");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|line| line
            == "WARNING: the profile is truncated (memsup was stopped before it finished); \
                showing what was recorded up to the last whole block."),
        "the text report warns that the profile is truncated:\n{text}"
    );
}
