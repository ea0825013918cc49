//! The live status line: drawn on stderr when it is a terminal (a pseudo-terminal made by
//! util-linux `script`), and never when it is not (then memsup says only where the profile is,
//! and nothing at all with -q). fixtures/signal_wait.c and fixtures/alloc_script.c.

use std::io::Read;
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::alloc_script::{alloc_script_expectation, ALLOC_SCRIPT_STDOUT};
use crate::common::run::{clean_command, memsup_binary, split_stderr, wait_with_timeout};
use crate::common::*;
use crate::signals::{
    check_signal_wait_profile, native_signal_wait_interrupted, signal_wait_numbers,
};

/// A word for `sh -c`, in single quotes.
fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The lines the program wrote ("signal_wait: ..."), out of what the terminal received: the
/// terminal turns "\n" into "\r\n", and the status line, redrawn after "\r", may precede a
/// program line on the same terminal line.
fn program_lines(terminal: &str) -> String {
    let mut lines = String::new();
    for (start, _) in terminal.match_indices("signal_wait: ") {
        let line = &terminal[start..];
        let end = line.find("\r\n").unwrap_or(line.len());
        lines.push_str(&line[..end]);
        lines.push('\n');
    }
    lines
}

fn first_number_after(text: &str, prefix: &str) -> Option<i32> {
    let rest = &text[text.find(prefix)? + prefix.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[test]
fn status_line_is_drawn_on_a_terminal() {
    if !require_tool("gcc") || !require_tool("script") {
        return;
    }
    let fixture = fixture("signal_wait", Variant::Dynamic);
    let directory = tempfile::tempdir().expect("creating a temporary directory");
    let profile = directory.path().join("run.msup");
    let memsup_command = [
        memsup_binary().to_str().unwrap(),
        "run",
        "-o",
        profile.to_str().unwrap(),
        "--",
        fixture.to_str().unwrap(),
    ]
    .map(shell_quoted)
    .join(" ");
    // script runs the command on a new pseudo-terminal (stdin, stdout and stderr) and copies
    // what it writes to its own stdout; -e: exit with the command's status; -f: flush at once.
    let mut child = clean_command("script")
        .args(["-qfec", &memsup_command, "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting script");
    let mut terminal_output = child.stdout.take().unwrap();
    let (sender, chunks) = mpsc::channel::<Vec<u8>>();
    let reader = thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(length @ 1..) = terminal_output.read(&mut buffer) {
            if sender.send(buffer[..length].to_vec()).is_err() {
                break;
            }
        }
    });
    // The program waits for SIGINT: send it once the status line has been drawn (every 250 ms).
    let mut captured = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let program_pid = loop {
        if let Ok(chunk) = chunks.recv_timeout(Duration::from_millis(50)) {
            captured.extend(chunk);
        }
        let text = String::from_utf8_lossy(&captured);
        let pid = first_number_after(&text, "signal_wait: pid ");
        if let (Some(pid), true) = (pid, text.contains(" events")) {
            break pid;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("no status line with \"events\" within 20 s on the terminal: {text:?}");
        }
    };
    assert_eq!(unsafe { libc::kill(program_pid, libc::SIGINT) }, 0);
    let output = wait_with_timeout(child, "script running memsup");
    reader.join().unwrap();
    captured.extend(chunks.try_iter().flatten());
    let terminal = String::from_utf8_lossy(&captured);

    assert_eq!(
        output.status.code(),
        Some(0),
        "memsup's status through script"
    );
    let status_line = terminal
        .split(['\r', '\n'])
        .find(|piece| piece.contains("memsup: ") && piece.contains(" events"));
    assert!(
        status_line.is_some_and(|line| line.contains("1 process(es)")),
        "a status line naming the process: {terminal:?}"
    );
    assert!(
        terminal.contains(&format!(
            "memsup: profile written to {}\r\n",
            profile.display()
        )),
        "memsup names the profile at the end: {terminal:?}"
    );
    let native = native_signal_wait_interrupted(&fixture);
    assert_eq!(output.status.code(), native.status.code());
    let shown = program_lines(&terminal).replacen(
        &format!("signal_wait: pid {program_pid}\n"),
        "signal_wait: pid N\n",
        1,
    );
    assert_eq!(
        shown,
        String::from_utf8_lossy(&native.stdout),
        "the program's lines on the terminal: {terminal:?}"
    );
    let expected_numbers = signal_wait_numbers(Variant::Dynamic, &fixture, true);
    let image = check_signal_wait_profile(&profile, &fixture, &expected_numbers, 1);
    assert_exit(&image, "code", Some(0));
}

#[test]
fn no_status_line_without_a_terminal() {
    for_each_variant("alloc_script", |variant, fixture| {
        let (expected, sites) = alloc_script_expectation(variant, fixture);
        for quiet in [false, true] {
            let options: &[&str] = if quiet { &["-q"] } else { &[] };
            let recording = record_with_options(options, fixture, &[], None);
            assert_eq!(
                String::from_utf8_lossy(&recording.native.stdout),
                ALLOC_SCRIPT_STDOUT
            );
            let (_, memsup_lines) = split_stderr(&recording.supervised.stderr);
            let expected_lines = if quiet {
                Vec::new()
            } else {
                vec![format!(
                    "memsup: profile written to {}",
                    recording.profile.display()
                )]
            };
            assert_eq!(
                memsup_lines, expected_lines,
                "memsup's stderr (quiet: {quiet})"
            );
            let image = launched_image(&recording.report, fixture, &[]);
            assert_heap(image, &expected);
            assert_sites(image, &sites);
        }
    });
}
