//! Attach targets the kernel refuses get the real reason and their own exit code; a
//! fractional `--duration` detaches on time; a SIGINT or SIGTERM that reaches memsup before
//! any setup is handled like a later one. fixtures/signal_wait.c, exit3.c.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::bad_input::assert_one_error_line;
use crate::common::announced::{start_announced, Start};
use crate::common::attach_window::attached_line;
use crate::common::interactive::send_signal;
use crate::common::live_process::tracer_pid;
use crate::common::report::report_json;
use crate::common::run::{
    clean_command, memsup_binary, memsup_run_command, spawn_piped, wait_within,
};
use crate::common::tools::record_skip;
use crate::common::*;

/// The longest a memsup that should end by itself is given.
const END_WITHIN: Duration = Duration::from_secs(30);
const INTERRUPTED: &str = "signal_wait: interrupted, block sum 4000\n";

/// memsup attach with `options` to `pid`, with `environment`, ended within `END_WITHIN`.
fn attach(options: &[&str], pid: u32, environment: &[(&str, &str)]) -> Output {
    let mut command = clean_command(memsup_binary());
    command.arg("attach").args(options).arg(pid.to_string());
    command.envs(environment.iter().copied());
    let (child, description) = spawn_piped(command);
    wait_within(child, &description, END_WITHIN)
}

/// signal_wait started natively and read up to "ready"; then `attach_with(pid)` runs while
/// it waits; then a SIGINT ends it, and it must print and exit exactly as without memsup.
fn attach_to_signal_wait(fixture: &Path, attach_with: impl FnOnce(u32)) {
    let program = start_announced(fixture, "signal_wait", Start::default());
    let pid = program.pid;
    attach_with(pid);
    assert_eq!(tracer_pid(pid), 0, "memsup detached");
    send_signal(pid, libc::SIGINT);
    let (rest, finished) = program.finish();
    assert_eq!(rest, INTERRUPTED, "the program's output after the detach");
    assert_eq!(finished.status.code(), Some(0), "the program's exit status");
}

/// The profile was written and memsup said so in its last line, after `before`.
fn assert_profile_written(output: &Output, before: &[String], profile: &Path) {
    let (program_stderr, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{memsup_lines:?}");
    assert_eq!(program_stderr, "");
    let mut expected = before.to_vec();
    expected.push(format!("memsup: profile written to {}", profile.display()));
    assert_eq!(memsup_lines, expected);
}

#[test]
fn a_fractional_duration_detaches_and_is_kept_in_the_profile() {
    for_each_variant("signal_wait", |_, fixture| {
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("attach.msup");
        attach_to_signal_wait(fixture, |pid| {
            let profile_text = profile.to_string_lossy();
            let output = attach(&["-o", &profile_text, "--duration", "0.2"], pid, &[]);
            let attached = attached_line(&[pid], "detaching after 0.2 s or on Ctrl-C");
            assert_profile_written(&output, &[attached], &profile);
        });
        let header = memsup::trace::reader::read_profile(&profile)
            .unwrap()
            .header;
        assert!(
            header
                .options
                .iter()
                .any(|option| option == "duration=0.2s"),
            "{:?}",
            header.options
        );
        let report = report_json(&profile);
        let image = &processes_of(&report)[0];
        assert_exit(image, "detached", None);
        // Joined, then detached 0.2 s after the join: well under the whole second that a
        // timer of whole seconds would take.
        let joined_for = number(image, "/duration_ns");
        assert!(
            (200_000_000..950_000_000).contains(&joined_for),
            "attached for {joined_for} ns with --duration 0.2"
        );
    });
}

fn processes_of(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    crate::common::report::processes(report)
}

/// A SIGINT raised before any setup (a test-only switch; without early handlers it would
/// kill memsup by its default action) ends the recording before any process is joined.
#[test]
fn a_sigint_before_setup_joins_nothing_and_leaves_the_program_untouched() {
    for_each_variant("signal_wait", |_, fixture| {
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("attach.msup");
        attach_to_signal_wait(fixture, |pid| {
            let profile_text = profile.to_string_lossy();
            let raise = [("MEMSUP_TEST_RAISE_AT_START", "INT")];
            let output = attach(&["-o", &profile_text], pid, &raise);
            // Nothing joined: memsup does not say it attached.
            assert_profile_written(&output, &[], &profile);
        });
        // Asked to end before joining: no process is joined, as a SIGINT that comes while
        // memsup joins several processes stops it joining more.
        let report = report_json(&profile);
        assert_image_count(&report, 0);
    });
}

/// Run mode: a SIGINT, SIGTERM, SIGHUP or SIGQUIT that comes before the program was started
/// (the program was sent nothing) stops memsup there: nothing is launched, no profile is
/// left, one line says so, and the exit status is 128+N.
#[test]
fn an_interruption_before_the_launch_starts_nothing() {
    if !require_tool("gcc") {
        return;
    }
    let marker_program = fixture("exitcode_marker", Variant::Dynamic);
    for (name, signal, line) in [
        (
            "INT",
            libc::SIGINT,
            "memsup: SIGINT before the program was started: nothing was run\n",
        ),
        (
            "TERM",
            libc::SIGTERM,
            "memsup: SIGTERM before the program was started: nothing was run\n",
        ),
    ] {
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("run.msup");
        let marker = directory.path().join("launched");
        let mut command = memsup_run_command(&profile, &marker_program);
        command.arg(&marker);
        command.env("MEMSUP_TEST_RAISE_AT_START", name);
        let (child, description) = spawn_piped(command);
        let output = wait_within(child, &description, END_WITHIN);
        assert_eq!(output.status.code(), Some(128 + signal), "{name}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), line, "{name}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "", "{name}");
        assert!(!marker.exists(), "{name}: the program was launched");
        assert!(!profile.exists(), "{name}: a profile was left");
    }
}

#[test]
fn attaching_to_memsup_itself_exits_74() {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("self.msup");
    // The shell's PID is memsup's once it execs: memsup is asked to attach to itself.
    let mut command = Command::new("sh");
    command.arg("-c").arg("exec \"$0\" attach -o \"$1\" $$");
    command.arg(memsup_binary()).arg(&profile);
    let (child, description) = spawn_piped(command);
    let pid = child.id();
    let output = wait_within(child, &description, END_WITHIN);
    assert_one_error_line(&output, 74, &[]);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "memsup: error: process {pid} is memsup itself; the kernel does not let a process \
             trace its own threads\n"
        )
    );
    assert!(!profile.exists(), "refused before the profile is created");
}

/// PF_KTHREAD in /proc/PID/stat (field 9).
fn is_kernel_thread(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    let flags: u64 = after_name
        .split_whitespace()
        .nth(6)
        .unwrap()
        .parse()
        .unwrap();
    flags & 0x0020_0000 != 0
}

/// kthreadd (PID 2) when it is visible, else any kernel thread.
fn some_kernel_thread() -> Option<u32> {
    if is_kernel_thread(2) {
        return Some(2);
    }
    fs::read_dir("/proc")
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .find(|pid| is_kernel_thread(*pid))
}

#[test]
fn attaching_to_a_kernel_thread_exits_75_naming_it() {
    let Some(pid) = some_kernel_thread() else {
        record_skip("no kernel thread is visible in this PID namespace");
        return;
    };
    let name = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("kthread.msup");
    let output = attach(&["-o", &profile.to_string_lossy()], pid, &[]);
    assert_one_error_line(&output, 75, &[]);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "memsup: error: process {pid} ({}) is a kernel thread: it has no user memory to \
             record, and the kernel refuses to trace kernel threads\n",
            name.trim_end()
        )
    );
    assert!(!profile.exists(), "refused before the profile is created");
}

/// PID 1 is not refused by memsup itself: the kernel decides (root may trace init; in a
/// container init is often an ordinary process). Attaching to the machine's real init is not
/// something a test suite does, so this checks the refusal an unprivileged user gets: the
/// kernel's rule named, not ptrace_scope advice, which cannot help.
#[test]
fn init_refused_to_an_unprivileged_user_names_init_and_the_rule() {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        record_skip("dropping privileges for this test needs root");
        return;
    }
    if !require_tool("setpriv") {
        return;
    }
    let init_uid = fs::metadata("/proc/1").unwrap().uid();
    if init_uid == 65534 || tracer_pid(1) != 0 {
        record_skip("init runs as nobody or is traced already");
        return;
    }
    // Creatable by `nobody`: /tmp, not the test's private directory.
    let profile = format!("/tmp/memsup-init-{}.msup", std::process::id());
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(memsup_binary())
        .args(["attach", "-o", &profile, "1"])
        .stdin(Stdio::null())
        .output()
        .expect("running memsup as nobody");
    assert_one_error_line(&output, 77, &[]);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "memsup: error: not permitted to trace process 1: PID 1 is init, run by uid \
             {init_uid}; the kernel lets only a tracer with CAP_SYS_PTRACE in init's user \
             namespace trace another user's process\n"
        )
    );
    assert!(!Path::new(&profile).exists(), "no profile is left behind");
}
