//! An attach that cannot hurt the processes it joins: a process named twice (or by one of
//! its threads) is joined once; memsup's own failure (a panic on the tracer thread or on the
//! writer thread, an error from the event loop) detaches every process first and exits 70
//! with one line; memsup shields itself from the OOM killer while attached; a process that
//! has exited is refused, not waited for; one that ends while it is joined is refused when
//! named alone and passed over among others.
//! Fixtures: attach_loop.c (one thread), attach_threads.c (two threads).

use std::ffi::OsString;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::common::announced::{start_announced, start_native, Running, Start};
use crate::common::attach_loop::{finish_loop, start_loop};
use crate::common::attach_window::{attached_line, AttachWindow};
use crate::common::interactive::send_signal;
use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, process_state, tracer_pid, wait_until,
};
use crate::common::report::{processes, report_json};
use crate::common::run::{clean_command, memsup_binary, run_command};
use crate::common::*;

const LOOP_END: &str = "attach_loop: 4000000 iterations, checksum 8037224905761941632\n";
const THREADS_END: &str = "attach_threads: main rounds alike, checksum \
    15923887291240253904\nattach_threads: worker rounds alike, checksum \
    15923887291240253904\n";

/// Starts attach_loop (or, with `extra_lines`, attach_threads) and reads its announcement.
fn start(fixture: &Path, name: &str, extra_lines: usize) -> Running {
    let start = Start {
        extra_lines,
        ..Start::default()
    };
    start_announced(fixture, name, start)
}

/// Reads the rest of the output and checks the program ended as natively: `end`, exit 0,
/// no stderr.
fn finish(running: Running, end: &str) {
    assert_eq!(running.finish_cleanly(), end);
}

/// `memsup attach -o PROFILE --duration 1 TARGETS...`, with `MEMSUP_TEST_FAULT` when given.
fn attach(profile: &Path, targets: &[String], fault: Option<&str>, duration: bool) -> Output {
    let mut command = clean_command(memsup_binary());
    if let Some(fault) = fault {
        command.env("MEMSUP_TEST_FAULT", fault);
    }
    let mut arguments: Vec<OsString> = vec!["attach".into(), "-o".into(), profile.into()];
    if duration {
        arguments.extend(["--duration".into(), "1".into()]);
    }
    arguments.extend(targets.iter().map(OsString::from));
    command.args(arguments);
    run_command(command, None)
}

/// Attaches for a second to `targets`, all naming process `pid`; checks memsup ended 0 with
/// `note` and the profile line, and the profile holds one detached image of `pid`.
fn attach_once_for_a_second(pid: u32, targets: &[String], note: &str) -> Value {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("attach.msup");
    let output = attach(&profile, targets, None, true);
    let (program, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "memsup: {memsup_lines:?}");
    assert_eq!(program, "");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert_eq!(
        without_hook_pages_left(memsup_lines),
        [
            format!("memsup: note: attaching to each process once, as a whole: {note}"),
            attached_line(&[pid], "detaching after 1 s or on Ctrl-C"),
            format!("memsup: profile written to {}", profile.display()),
        ]
    );
    let report = report_json(&profile);
    assert_profile(&report, "attach", &[pid.to_string()]);
    assert_image_count(&report, 1);
    let image = &processes(&report)[0];
    assert_eq!(image["pid"], pid);
    assert_eq!(image["cause"], "attach");
    assert_exit(image, "detached", None);
    assert!(
        number(image, "/allocations") > 0,
        "a second saw no allocation"
    );
    report
}

#[test]
fn a_process_named_twice_is_joined_once() {
    for_each_variant("attach_loop", |_, fixture| {
        let running = start(fixture, "attach_loop", 0);
        let pid = running.pid;
        let code_before = executable_mappings(pid);
        let twice = [pid.to_string(), pid.to_string()];
        attach_once_for_a_second(
            pid,
            &twice,
            &format!("process {pid} (given as {pid}, {pid})"),
        );
        assert_eq!(tracer_pid(pid), 0, "still traced after the detach");
        assert_code_unchanged(pid, &code_before);
        finish(running, LOOP_END);
    });
}

#[test]
fn a_process_named_by_one_of_its_threads_is_joined_whole() {
    for_each_variant("attach_threads", |_, fixture| {
        let running = start(fixture, "attach_threads", 1);
        let pid = running.pid;
        let thread_line = &running.extra[0];
        let thread: u32 = thread_line
            .strip_prefix("attach_threads: thread ")
            .and_then(|tid| tid.parse().ok())
            .unwrap_or_else(|| panic!("no thread ID in {thread_line:?}"));
        assert_ne!(thread, pid);
        let code_before = executable_mappings(pid);
        let both = [pid.to_string(), thread.to_string()];
        let report = attach_once_for_a_second(
            pid,
            &both,
            &format!("process {pid} (given as {pid}, {thread})"),
        );
        // Both threads allocate: the image has more than one thread's calls in it.
        assert!(number(&processes(&report)[0], "/calls/malloc") > 0);
        assert_eq!(tracer_pid(pid), 0, "still traced after the detach");
        assert_code_unchanged(pid, &code_before);
        let alone = [thread.to_string()];
        attach_once_for_a_second(pid, &alone, &format!("process {pid} (given as {thread})"));
        assert_eq!(tracer_pid(pid), 0, "still traced after the second detach");
        assert_code_unchanged(pid, &code_before);
        send_signal(pid, libc::SIGUSR1);
        finish(running, THREADS_END);
    });
}

/// Each injected failure and the one line memsup must end with: (prefix, suffix), the
/// panic's source line number lying between. All but the last come after the join.
const FAULTS: [(&str, &str, &str); 4] = [
    (
        "tracer-panic",
        "memsup: error: internal error: the main thread panicked at src/ptrace/tracer.rs:",
        ": test fault: the tracer fails after handling a stop; detached from every process",
    ),
    (
        "writer-panic",
        "memsup: error: internal error: the memsup-writer thread panicked at src/trace/writer.rs:",
        ": test fault: the writer fails at its first allocation record; detached from every \
         process",
    ),
    (
        "tracer-error",
        "memsup: error: test fault: the event loop fails after handling a stop",
        "",
    ),
    // Every thread is stopped with its stop collected: the detach must not wait for another
    // (it would take 10 s and add a line saying a thread did not stop).
    (
        "attach-error",
        "memsup: error: test fault: joining fails with every thread stopped",
        "",
    ),
];

#[test]
fn a_failing_memsup_detaches_before_it_exits() {
    for_each_variant("attach_loop", |_, fixture| {
        // One program and one memsup per failure, side by side.
        std::thread::scope(|scope| {
            let failures: Vec<_> = FAULTS
                .into_iter()
                .map(|fault| scope.spawn(move || fail_while_attached(fixture, fault)))
                .collect();
            for failure in failures {
                if let Err(panic) = failure.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
    });
}

/// Attaches to a fresh `fixture` with `fault` injected; checks memsup's one line and exit
/// 70, and the program untouched, untraced and ending as natively.
fn fail_while_attached(fixture: &Path, (fault, prefix, suffix): (&str, &str, &str)) {
    // It runs until stopped, however fast it allocates under the engine.
    let running = start_loop(fixture);
    let pid = running.pid;
    let code_before = executable_mappings(pid);
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("attach.msup");
    // No --duration: only the failure ends this attach. The tracer faults come after a stop
    // it handled, and under the hook engine a program that only allocates makes none: a
    // SIGWINCH (ignored by default, so the program sees nothing) stops it for the tracer.
    let attached = AtomicBool::new(true);
    let output = std::thread::scope(|scope| {
        scope.spawn(|| {
            while attached.load(Ordering::Relaxed) {
                send_signal(pid, libc::SIGWINCH);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let output = attach(&profile, &[pid.to_string()], Some(fault), false);
        attached.store(false, Ordering::Relaxed);
        output
    });
    let (program, memsup_lines) = split_stderr(&output.stderr);
    let memsup_lines = without_hook_pages_left(memsup_lines);
    assert_eq!(output.status.code(), Some(70), "{fault}: {memsup_lines:?}");
    assert_eq!(program, "", "{fault}: stderr besides memsup's lines");
    // The attached line first, unless the join itself failed.
    let attached = match fault {
        "attach-error" => vec![],
        _ => vec![attached_line(&[pid], "Ctrl-C detaches")],
    };
    assert_eq!(
        memsup_lines.len(),
        attached.len() + 1,
        "{fault}: {memsup_lines:?}"
    );
    assert_eq!(memsup_lines[..attached.len()], attached, "{fault}");
    let line = &memsup_lines[attached.len()];
    assert!(
        line.starts_with(prefix) && line.ends_with(suffix),
        "{fault}: {line}"
    );
    let line_number = &line[prefix.len()..line.len() - suffix.len()];
    assert!(
        line_number.is_empty() == suffix.is_empty()
            && line_number.chars().all(|c| c.is_ascii_digit()),
        "{fault}: {line}"
    );
    assert_eq!(
        tracer_pid(pid),
        0,
        "{fault}: still traced after memsup exited"
    );
    assert_code_unchanged(pid, &code_before);
    finish_loop(running);
}

/// Whether memsup may lower its OOM score here: CAP_SYS_RESOURCE in the effective set
/// (root in a container or a sandbox may lack it; no package can give it).
fn lowering_permitted() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .expect("CapEff in /proc/self/status");
    effective & (1 << CAP_SYS_RESOURCE) != 0
}

#[test]
fn memsup_asks_the_oom_killer_to_spare_it_while_attached() {
    let permitted = lowering_permitted();
    let own_score = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    let fixture = fixture("attach_loop", Variant::Dynamic);
    let running = start(&fixture, "attach_loop", 0);
    let pid = running.pid;
    let window = AttachWindow::open(&[pid], &["-q"]);
    let memsup_pid = window.memsup_pid();
    let score = std::fs::read_to_string(format!("/proc/{memsup_pid}/oom_score_adj")).unwrap();
    // Requires exit 0 and a readable profile.
    let (output, _) = window.close();
    if permitted {
        assert_eq!(
            score.trim(),
            "-1000",
            "memsup's oom_score_adj while attached"
        );
    } else {
        crate::common::tools::record_skip(
            "the lowered oom_score_adj: no CAP_SYS_RESOURCE here (the score left alone is checked)",
        );
        assert_eq!(
            score, own_score,
            "without the capability the score is left alone"
        );
    }
    let (_, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(without_hook_pages_left(memsup_lines), Vec::<String>::new());
    assert_eq!(tracer_pid(pid), 0);
    finish(running, LOOP_END);
}

#[test]
fn a_process_that_exited_and_awaits_its_parent_is_refused() {
    let fixture = fixture("exit3", Variant::Dynamic);
    let exited = start_native(&fixture, "exit3", Start::default());
    let pid = exited.pid;
    wait_until("exit3 is a zombie", Duration::from_secs(30), || {
        process_state(pid) == "Z"
    });
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("attach.msup");
    let output = attach(&profile, &[pid.to_string()], None, true);
    assert_eq!(
        split_stderr(&output.stderr),
        (
            String::new(),
            vec![format!("memsup: error: no process with PID {pid}")]
        )
    );
    assert_eq!(output.status.code(), Some(71));
    assert!(!profile.exists(), "a refused attach leaves no profile");
    let (output_text, finished) = exited.finish();
    assert_eq!(finished.status.code(), Some(3));
    assert_eq!(
        output_text,
        "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with status 3\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&finished.stderr),
        "exit3: this line goes to stderr\n"
    );
}

/// A process that ends between memsup's seizure and its stop (the `join-exit` test fault
/// kills the first process seized, there): named alone, it is refused in one line with exit
/// 76 and no profile is left (two threads: the leader's end, reported only after the other
/// thread's, is waited for last); named with another, it is passed over with a note and the
/// other is recorded as usual.
#[test]
fn a_process_ending_while_it_is_joined_is_refused_alone_and_passed_over_among_others() {
    let threads = fixture("attach_threads", Variant::Dynamic);
    let fixture = fixture("attach_loop", Variant::Dynamic);
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("attach.msup");
    let alone = start(&threads, "attach_threads", 1);
    let output = attach(&profile, &[alone.pid.to_string()], Some("join-exit"), true);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "memsup: error: process {} ended while memsup was joining it; nothing was recorded\n",
            alone.pid
        )
    );
    assert_eq!(output.status.code(), Some(76));
    assert!(!profile.exists(), "a profile of nothing was left");
    assert_killed(alone);

    let (ended, other) = (start_loop(&fixture), start_loop(&fixture));
    let code_before = executable_mappings(other.pid);
    let targets = [ended.pid.to_string(), other.pid.to_string()];
    let output = attach(&profile, &targets, Some("join-exit"), true);
    let (program, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{memsup_lines:?}");
    assert_eq!(program, "");
    assert_eq!(
        without_hook_pages_left(memsup_lines),
        [
            format!(
                "memsup: note: process {} ended while memsup was joining it",
                ended.pid
            ),
            attached_line(&[other.pid], "detaching after 1 s or on Ctrl-C"),
            format!("memsup: profile written to {}", profile.display()),
        ]
    );
    let report = report_json(&profile);
    assert_image_count(&report, 1);
    let image = &processes(&report)[0];
    assert_eq!(image["pid"], other.pid);
    assert_exit(image, "detached", None);
    assert!(
        number(image, "/allocations") > 0,
        "a second saw no allocation"
    );
    assert_killed(ended);
    assert_eq!(tracer_pid(other.pid), 0, "still traced after the detach");
    assert_code_unchanged(other.pid, &code_before);
    finish_loop(other);
}

/// `program` was killed by SIGKILL.
fn assert_killed(program: Running) {
    use std::os::unix::process::ExitStatusExt;
    let (_, ended) = program.finish();
    assert_eq!(
        ended.status.signal(),
        Some(libc::SIGKILL),
        "{:?}",
        ended.status
    );
}
