//! `memsup snapshot`: every thread's function and state, exactly, from a fixture whose
//! threads are blocked in known places (fixtures/snapshot_threads.c); a process stopped by
//! job control stays stopped; threads that start and end meanwhile
//! (fixtures/thread_churn.c) are let go; a missing PID, a process that exits while held and
//! an existing output file are refused in one line with their exit codes. Every fixture is released afterwards and must print and exit
//! as it does alone.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::bad_input::assert_one_error_line;
use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_window::EVENT_TIMEOUT;
use crate::common::interactive::send_signal;
use crate::common::live_process::{process_state, thread_states, tracer_pid, wait_until};
use crate::common::report::{report_json, report_output};
use crate::common::run::{clean_command, memsup_binary, spawn_piped, split_stderr, wait_within};
use crate::common::*;

const NAME: &str = "snapshot_threads";
/// The longest a snapshot is given.
const SNAPSHOT_WITHIN: Duration = Duration::from_secs(30);

/// The fixture's threads, by the role it announced.
struct Fixture {
    program: Running,
    reader: u32,
    sleeper: u32,
    waiter: u32,
    spinner: u32,
}

/// What the snapshot says of one thread.
#[derive(Debug, PartialEq, Eq)]
struct ThreadSeen {
    state: String,
    kernel_state: String,
    /// The frames of the fixture's own source, innermost first.
    fixture_frames: Vec<String>,
    outermost: String,
    /// Whether the kernel named a function it sleeps in.
    has_wchan: bool,
}

/// `glibc_variants_of` the snapshot_threads fixture.
fn glibc_variants(check: impl Fn(Variant, &Path)) {
    glibc_variants_of(NAME, check)
}

/// `check` on one build of the snapshot_threads fixture.
fn only_variant(variant: Variant, check: impl Fn(&Path)) {
    check(&fixture(NAME, variant));
}

/// Starts the fixture, reads its announcement, and waits until its main thread is inside
/// its read of stdin (it can only announce "ready" before it reads).
fn start(fixture: &Path) -> Fixture {
    let start = Start {
        args: &[],
        piped_stdin: true,
        extra_lines: 4,
    };
    let program = start_announced(fixture, NAME, start);
    let tid = |index: usize, role: &str| -> u32 {
        let line = &program.extra[index];
        let prefix = format!("{NAME}: {role} ");
        line.strip_prefix(&prefix)
            .and_then(|tid| tid.parse().ok())
            .unwrap_or_else(|| panic!("announcement line {index}: {line:?}"))
    };
    let fixture = Fixture {
        reader: tid(0, "reader"),
        sleeper: tid(1, "sleeper"),
        waiter: tid(2, "waiter"),
        spinner: tid(3, "spinner"),
        program,
    };
    let pid = fixture.program.pid;
    wait_until("the main thread reads stdin", EVENT_TIMEOUT, || {
        fs::read_to_string(format!("/proc/{pid}/task/{pid}/syscall"))
            .is_ok_and(|text| text.starts_with("0 "))
    });
    fixture
}

/// Lets the fixture's threads go and checks its whole output and exit status.
fn release(fixture: Fixture) {
    let mut program = fixture.program;
    program.write_stdin(b"\n");
    let rest = program.finish_cleanly();
    assert_eq!(rest, format!("{NAME}: released\n"), "after the release");
}

/// `memsup snapshot ARGS`, ended within SNAPSHOT_WITHIN.
fn snapshot(arguments: &[&str]) -> Output {
    let mut command: Command = clean_command(memsup_binary());
    command.arg("snapshot").args(arguments);
    let (child, description) = spawn_piped(command);
    wait_within(child, &description, SNAPSHOT_WITHIN)
}

/// Snapshots `pid` into `profile`; requires success and memsup's two lines: where the
/// profile went, and how long the process was stopped (a time that varies) for 5 threads.
fn snapshot_into(profile: &Path, pid: u32) {
    let output = snapshot(&["-o", &profile.to_string_lossy(), &pid.to_string()]);
    let (other, lines) = split_stderr(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{lines:?} {other}");
    assert_eq!(other, "");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0],
        format!("memsup: profile written to {}", profile.display())
    );
    let stopped = lines[1]
        .strip_prefix(&format!("memsup: process {pid} was stopped for "))
        .and_then(|rest| rest.strip_suffix(" ms (5 threads)"))
        .unwrap_or_else(|| panic!("the stop line: {:?}", lines[1]));
    let milliseconds: f64 = stopped.parse().expect("a number of milliseconds");
    assert!(milliseconds > 0.0, "{milliseconds}");
    // Not on stdout: it is no terminal, so no report is printed.
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert_eq!(tracer_pid(pid), 0, "every thread let go");
}

/// Each thread of the JSON report's only process, by thread id, with its group's stack.
fn threads_seen(report: &Value, pid: u32, fixture: &Path) -> BTreeMap<u64, ThreadSeen> {
    let processes = report["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 1, "one process");
    let process = &processes[0];
    assert_eq!(process["pid"], pid);
    assert_eq!(process["exe"], fixture.to_string_lossy().as_ref());
    let threads = &process["threads"];
    assert!(threads["stopped_ns"].as_u64().unwrap() > 0);
    let mut seen = BTreeMap::new();
    for group in threads["groups"].as_array().expect("groups") {
        let stack = group["stack"].as_array().expect("a stack");
        let fixture_frames: Vec<String> = stack
            .iter()
            .filter(|frame| {
                frame["file"]
                    .as_str()
                    .is_some_and(|file| file.ends_with("snapshot_threads.c"))
            })
            .map(|frame| frame["function"].as_str().unwrap().to_string())
            .collect();
        let outermost = stack.last().expect("a frame")["function"]
            .as_str()
            .unwrap()
            .to_string();
        for thread in group["threads"].as_array().expect("threads") {
            let entry = ThreadSeen {
                state: thread["state"].as_str().unwrap().to_string(),
                kernel_state: thread["kernel_state"].as_str().unwrap().to_string(),
                fixture_frames: fixture_frames.clone(),
                outermost: outermost.clone(),
                has_wchan: !thread["wchan"].as_str().unwrap().is_empty(),
            };
            seen.insert(thread["tid"].as_u64().unwrap(), entry);
        }
    }
    seen
}

fn seen(state: &str, kernel_state: &str, frames: &[&str], outermost: &str) -> ThreadSeen {
    ThreadSeen {
        state: state.to_string(),
        kernel_state: kernel_state.to_string(),
        fixture_frames: frames.iter().map(|frame| frame.to_string()).collect(),
        outermost: outermost.to_string(),
        // A sleeping thread sleeps in a kernel function; a running one in none.
        has_wchan: kernel_state != "R",
    }
}

#[test]
fn a_snapshot_names_each_thread_s_function_and_state() {
    glibc_variants(|variant, path| {
        let fixture = start(path);
        let pid = fixture.program.pid;
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("snapshot.msup");
        snapshot_into(&profile, pid);
        let report = report_json(&profile);
        let threads = threads_seen(&report, pid, path);
        let expected = BTreeMap::from([
            (
                u64::from(pid),
                seen(
                    "in system call read",
                    "S",
                    &["wait_for_line", "main"],
                    "_start",
                ),
            ),
            (
                u64::from(fixture.reader),
                seen(
                    "in system call read",
                    "S",
                    &["wait_on_pipe", "reader"],
                    "clone3",
                ),
            ),
            (
                u64::from(fixture.sleeper),
                seen(
                    "in system call clock_nanosleep",
                    "S",
                    &["sleep_long", "sleeper"],
                    "clone3",
                ),
            ),
            (
                u64::from(fixture.waiter),
                seen(
                    "in system call futex",
                    "S",
                    &["wait_on_condition", "waiter"],
                    "clone3",
                ),
            ),
            (
                u64::from(fixture.spinner),
                seen(
                    "running",
                    "R",
                    &["spin_until_released", "spinner"],
                    "clone3",
                ),
            ),
        ]);
        assert_eq!(threads, expected, "{variant:?}");
        // The spinner was stopped in its own loop: its innermost frame is the fixture's.
        let text = report_output(&profile, &[]);
        let spinner_entry = format!(
            "       thread {}: running (kernel state R)\n         #0  spin_until_released at ",
            fixture.spinner
        );
        assert!(text.contains(&spinner_entry), "{text}");
        assert!(
            text.contains("  Threads: 5 in 5 distinct stacks\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("== process {pid} (snapshot) ==\n")),
            "{text}"
        );
        // The HTML page shows the same groups, the spinner's stack innermost first.
        let html = report_output(&profile, &["--format", "html", "-o", "-"]);
        let spinner_group = format!(
            "<li>thread {}: running (kernel state R)</li>\n</ul>\n\
             <ol class=\"stack\" start=\"0\">\n<li>spin_until_released at ",
            fixture.spinner
        );
        assert!(html.contains(&spinner_group), "{html}");
        assert!(
            html.contains("<p>5 threads in 5 distinct stacks</p>"),
            "{html}"
        );
        let dump = dump_text(&profile);
        let states = dump
            .lines()
            .filter(|line| line.starts_with("ThreadState {"));
        assert_eq!(states.count(), 5, "{dump}");
        assert_eq!(
            dump.lines()
                .filter(|line| line.starts_with("SnapshotStop {"))
                .count(),
            1
        );
        release(fixture);
    });
}

#[test]
fn a_process_stopped_by_job_control_stays_stopped() {
    only_variant(Variant::Dynamic, |path| {
        let fixture = start(path);
        let pid = fixture.program.pid;
        send_signal(pid, libc::SIGSTOP);
        // Every thread enters the group stop on its own way out of the kernel.
        wait_until(
            "every thread of the fixture is stopped",
            EVENT_TIMEOUT,
            || thread_states(pid).iter().all(|state| state == "T"),
        );
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("stopped.msup");
        snapshot_into(&profile, pid);
        let report = report_json(&profile);
        let threads = threads_seen(&report, pid, path);
        let states: Vec<(&str, &str)> = threads
            .values()
            .map(|thread| (thread.state.as_str(), thread.kernel_state.as_str()))
            .collect();
        assert_eq!(states, [("stopped", "T"); 5]);
        // The kernel puts a detached thread of a stopped group back in its group-stop; it
        // must still be there a while later.
        assert_eq!(process_state(pid), "T");
        std::thread::sleep(Duration::from_millis(200));
        for tid in threads.keys() {
            let stat = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
            let state = stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .next();
            assert_eq!(state, Some("T"), "thread {tid}");
        }
        send_signal(pid, libc::SIGCONT);
        release(fixture);
    });
}

#[test]
fn a_missing_pid_is_one_error_line_and_exit_71() {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("none.msup");
    // Above any pid_max (at most 2^22): no such process can exist.
    let output = snapshot(&["-o", &profile.to_string_lossy(), "2147483647"]);
    assert_one_error_line(&output, 71, &["no process with PID 2147483647"]);
    assert!(!profile.exists(), "no profile is left");
}

#[test]
fn an_existing_output_is_kept_without_force_and_the_default_name_is_memsup_s() {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("taken.msup");
    fs::write(&profile, "kept").unwrap();
    let mut sleeper = clean_command("sleep")
        .arg("30")
        .spawn()
        .expect("starting sleep");
    let pid = sleeper.id().to_string();
    let output = snapshot(&["-o", &profile.to_string_lossy(), &pid]);
    assert_one_error_line(&output, 73, &["taken.msup"]);
    assert_eq!(fs::read_to_string(&profile).unwrap(), "kept");
    let output = snapshot(&["-q", "-f", "-o", &profile.to_string_lossy(), &pid]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    let report = report_json(&profile);
    assert_eq!(report["profile"]["mode"], "snapshot");
    // Without -o: memsup.snapshot.N.msup in the current directory, as run and attach do.
    let mut command = clean_command(memsup_binary());
    command
        .current_dir(directory.path())
        .args(["snapshot", "-q", &pid]);
    let (child, description) = spawn_piped(command);
    let output = wait_within(child, &description, SNAPSHOT_WITHIN);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let mut names: Vec<String> = fs::read_dir(directory.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "taken.msup")
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let name = names.pop().unwrap();
    let number = name
        .strip_prefix("memsup.snapshot.")
        .and_then(|rest| rest.strip_suffix(".msup"))
        .unwrap_or_else(|| panic!("the default name: {name}"));
    assert!(number.parse::<u32>().is_ok(), "{name}");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

/// `memsup snapshot -o PROFILE PID` with the test-only `fault` injected.
fn snapshot_with_fault(profile: &Path, pid: u32, fault: &str) -> Command {
    let mut command = clean_command(memsup_binary());
    command
        .arg("snapshot")
        .arg("-o")
        .arg(profile)
        .arg(pid.to_string())
        .env("MEMSUP_TEST_FAULT", fault);
    command
}

fn dump_text(profile: &Path) -> String {
    let mut command = clean_command(memsup_binary());
    command.arg("dump").arg(profile);
    let output = command.output().expect("running memsup dump");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_process_that_exits_during_the_snapshot_is_one_error_line_and_exit_76() {
    only_variant(Variant::Dynamic, |path| {
        let fixture = start(path);
        let pid = fixture.program.pid;
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("exited.msup");
        let command = snapshot_with_fault(&profile, pid, "snapshot-exit");
        let (child, description) = spawn_piped(command);
        let output = wait_within(child, &description, SNAPSHOT_WITHIN);
        assert_one_error_line(
            &output,
            76,
            &[&format!(
                "process {pid} exited during the snapshot; nothing was written"
            )],
        );
        assert!(!profile.exists(), "no profile is left");
        // Killed while held: it printed nothing more and died of SIGKILL.
        let (rest, finished) = fixture.program.finish();
        assert_eq!(rest, "");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&finished.status),
            Some(libc::SIGKILL)
        );
        assert_eq!(String::from_utf8_lossy(&finished.stderr), "");
    });
}

/// Every thread of `pid` now, and whether any is still traced.
fn traced_threads(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| task.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&tid| {
            fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).is_ok_and(|status| {
                status.lines().any(|line| {
                    line.starts_with("TracerPid:") && line.trim_end() != "TracerPid:\t0"
                })
            })
        })
        .collect()
}

#[test]
fn threads_that_start_and_end_during_snapshots_are_handled() {
    glibc_variants_of("thread_churn", |variant, path| {
        if variant != Variant::Dynamic {
            return;
        }
        let start = Start {
            args: &[],
            piped_stdin: true,
            extra_lines: 0,
        };
        let mut program = start_announced(path, "thread_churn", start);
        let pid = program.pid;
        let directory = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let profile = directory.path().join(format!("churn-{round}.msup"));
            let output = snapshot(&["-q", "-o", &profile.to_string_lossy(), &pid.to_string()]);
            assert_eq!(output.status.code(), Some(0), "round {round}: {output:?}");
            assert_eq!(String::from_utf8_lossy(&output.stderr), "", "round {round}");
            assert_eq!(traced_threads(pid), Vec::<u32>::new(), "round {round}");
            let report = report_json(&profile);
            let process = &report["processes"][0];
            let groups = process["threads"]["groups"].as_array().expect("groups");
            let tids: Vec<u64> = groups
                .iter()
                .flat_map(|group| group["threads"].as_array().unwrap())
                .map(|thread| thread["tid"].as_u64().unwrap())
                .collect();
            // Main, the stdin watcher and at most two workers; main and the watcher always.
            assert!((2..=4).contains(&tids.len()), "round {round}: {tids:?}");
            assert!(tids.contains(&u64::from(pid)), "round {round}: {tids:?}");
            let dump = dump_text(&profile);
            let states = dump
                .lines()
                .filter(|line| line.starts_with("ThreadState {"));
            assert_eq!(states.count(), tids.len(), "round {round}");
        }
        program.write_stdin(b"\n");
        let rest = program.finish_cleanly();
        assert_eq!(rest, "thread_churn: stopped\n");
    });
}

#[test]
fn on_a_terminal_the_snapshot_prints_its_text_report() {
    // script(1) gives memsup a terminal for its stdout.
    if !require_tool("script") {
        return;
    }
    only_variant(Variant::Dynamic, |path| {
        let fixture = start(path);
        let pid = fixture.program.pid;
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("terminal.msup");
        let inner = format!(
            "{} snapshot -o {} {pid}",
            memsup_binary().display(),
            profile.display()
        );
        let mut command = clean_command("script");
        command.args(["-qec", &inner, "/dev/null"]);
        let (child, description) = spawn_piped(command);
        let output = wait_within(child, &description, SNAPSHOT_WITHIN);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        // The terminal carries memsup's stderr too, with carriage returns.
        let shown = String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n");
        let report = report_output(&profile, &[]);
        assert!(shown.ends_with(&report), "{shown}");
        assert!(shown.contains(&format!("== process {pid} (snapshot) ==\n")));
        assert!(
            shown.contains("  Threads: 5 in 5 distinct stacks\n"),
            "{shown}"
        );
        release(fixture);
    });
}

#[test]
fn memsup_killed_while_it_holds_a_process_leaves_it_running() {
    only_variant(Variant::Dynamic, |path| {
        let fixture = start(path);
        let pid = fixture.program.pid;
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("killed.msup");
        let command = snapshot_with_fault(&profile, pid, "snapshot-hold");
        let (mut memsup, _) = spawn_piped(command);
        wait_until("memsup holds every thread", EVENT_TIMEOUT, || {
            thread_states(pid) == ["t"; 5]
        });
        memsup.kill().unwrap();
        let killed = memsup.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&killed),
            Some(libc::SIGKILL)
        );
        wait_until("no thread is traced", EVENT_TIMEOUT, || {
            traced_threads(pid).is_empty()
        });
        // Running again: the blocked threads back in their calls, the spinner spinning.
        wait_until("every thread runs again", EVENT_TIMEOUT, || {
            thread_states(pid)
                .iter()
                .all(|state| state == "S" || state == "R")
        });
        release(fixture);
    });
}

#[test]
fn several_processes_are_snapshotted_one_after_the_other() {
    only_variant(Variant::Static, |path| {
        let first = start(path);
        let second = start(path);
        let pids = [first.program.pid, second.program.pid];
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("two.msup");
        let profile_text = profile.to_string_lossy();
        let (first_pid, second_pid) = (pids[0].to_string(), pids[1].to_string());
        // The second process named twice, once by a thread id: joined once, with a note.
        let reader = second.reader.to_string();
        let output = snapshot(&["-o", &profile_text, &first_pid, &second_pid, &reader]);
        let (other, lines) = split_stderr(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{lines:?} {other}");
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].starts_with("memsup: note: "), "{lines:?}");
        for (line, pid) in lines[2..].iter().zip(pids) {
            let prefix = format!("memsup: process {pid} was stopped for ");
            assert!(line.starts_with(&prefix), "{line}");
            assert!(line.ends_with(" ms (5 threads)"), "{line}");
        }
        let report = report_json(&profile);
        let processes = report["processes"].as_array().expect("processes");
        let seen: Vec<(u64, usize)> = processes
            .iter()
            .map(|process| {
                let groups = process["threads"]["groups"].as_array().unwrap();
                (process["pid"].as_u64().unwrap(), groups.len())
            })
            .collect();
        assert_eq!(seen, [(u64::from(pids[0]), 5), (u64::from(pids[1]), 5)]);
        release(first);
        release(second);
    });
}
