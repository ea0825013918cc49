//! A fixture started natively for memsup to attach to. It announces itself with
//! "NAME: pid N", maybe more lines, then "NAME: ready"; the test checks those, reads its
//! further lines with bounded waits, and ends it. It is killed if the test fails half-way.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Output, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread;

use super::attach_window::EVENT_TIMEOUT;
use super::live_process::KillOnDrop;
use super::run::{clean_command, wait_with_timeout};

/// The lines a program prints, each with its newline, read on a thread of their own so that
/// every wait for one is bounded (by EVENT_TIMEOUT).
struct Lines {
    /// A line, or why the output could not be read further.
    receiver: Receiver<Result<String, String>>,
}

impl Lines {
    fn new(pipe: impl Read + Send + 'static) -> Lines {
        let (sender, receiver) = channel();
        thread::spawn(move || {
            let mut pipe = BufReader::new(pipe);
            loop {
                let mut line = String::new();
                let read = match pipe.read_line(&mut line) {
                    Ok(0) => break,
                    Ok(_) => Ok(line),
                    Err(error) => Err(error.to_string()),
                };
                let failed = read.is_err();
                if sender.send(read).is_err() || failed {
                    break;
                }
            }
        });
        Lines { receiver }
    }

    /// The next line, without its newline; fails naming `what` after EVENT_TIMEOUT, when the
    /// program closed its output, or when the line has no newline.
    fn next(&self, what: &str) -> String {
        let mut line = self.next_raw(what);
        if line.pop() != Some('\n') {
            panic!("{what}: the output ended in the middle of a line: {line:?}");
        }
        line
    }

    /// The next line with its newline (none at the end of the output).
    fn next_raw(&self, what: &str) -> String {
        match self.receiver.recv_timeout(EVENT_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(error)) => panic!("reading the program's output for {what}: {error}"),
            Err(RecvTimeoutError::Timeout) => {
                panic!("no line within {EVENT_TIMEOUT:?} while waiting for {what}")
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the program closed its output while waiting for {what}")
            }
        }
    }

    /// The rest of the output, exactly, up to its end.
    fn rest(&self, what: &str) -> String {
        let mut text = String::new();
        loop {
            match self.receiver.recv_timeout(EVENT_TIMEOUT) {
                Ok(Ok(line)) => text.push_str(&line),
                Ok(Err(error)) => panic!("reading {what}'s output: {error} (after {text:?})"),
                Err(RecvTimeoutError::Disconnected) => return text,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{what} did not end its output within {EVENT_TIMEOUT:?}: {text:?}")
                }
            }
        }
    }
}

/// How to start a fixture: its arguments, whether its stdin is a pipe the test holds (else
/// /dev/null), and how many lines it prints between its pid line and its ready line.
#[derive(Clone, Copy, Default)]
pub struct Start<'a> {
    pub args: &'a [&'a str],
    pub piped_stdin: bool,
    pub extra_lines: usize,
}

/// A fixture running natively, its stdout and stderr piped.
pub struct Running {
    guard: KillOnDrop,
    /// The pipe to its stdin, with `Start::piped_stdin`; closed by `finish`.
    stdin: Option<ChildStdin>,
    lines: Lines,
    /// Everything read from its stdout so far.
    printed: RefCell<String>,
    pub pid: u32,
    pub name: String,
    /// The lines between the pid line and the ready line, without their newlines.
    pub extra: Vec<String>,
}

/// Starts `fixture` (called `name` in messages) and reads nothing yet.
pub fn start_native(fixture: &Path, name: &str, start: Start) -> Running {
    let stdin = if start.piped_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = clean_command(fixture)
        .args(start.args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("starting {}: {error}", fixture.display()));
    let lines = Lines::new(child.stdout.take().expect("piped stdout"));
    Running {
        stdin: child.stdin.take(),
        pid: child.id(),
        guard: KillOnDrop(Some(child)),
        lines,
        printed: RefCell::default(),
        name: name.to_string(),
        extra: Vec::new(),
    }
}

/// Starts `fixture` and reads and checks its announcement: "NAME: pid N" with its real pid,
/// `start.extra_lines` lines (kept in `extra`), then "NAME: ready".
pub fn start_announced(fixture: &Path, name: &str, start: Start) -> Running {
    let mut running = start_native(fixture, name, start);
    let pid_line = running.next_line("the pid line");
    assert_eq!(
        pid_line,
        format!("{name}: pid {}", running.pid),
        "{name}'s first line"
    );
    for _ in 0..start.extra_lines {
        running.extra.push(running.next_line("the announcement"));
    }
    let ready_line = running.next_line("the ready line");
    assert_eq!(
        ready_line,
        format!("{name}: ready"),
        "{name}'s announcement"
    );
    running
}

impl Running {
    /// The next line it prints, without its newline, waited for at most EVENT_TIMEOUT.
    pub fn next_line(&self, what: &str) -> String {
        let line = self.lines.next(&format!("{}: {what}", self.name));
        let mut printed = self.printed.borrow_mut();
        printed.push_str(&line);
        printed.push('\n');
        line
    }

    /// Writes `bytes` to its stdin (started with `Start::piped_stdin`).
    pub fn write_stdin(&mut self, bytes: &[u8]) {
        let name = &self.name;
        self.stdin
            .as_mut()
            .unwrap_or_else(|| panic!("{name}'s stdin is not a pipe, or is closed"))
            .write_all(bytes)
            .unwrap_or_else(|error| panic!("writing to {name}'s stdin: {error}"));
    }

    /// Closes its stdin, reads the rest of its output (bounded) and waits for it (bounded):
    /// the text printed after the lines read so far, and its output, whose stdout is all it
    /// printed.
    pub fn finish(mut self) -> (String, Output) {
        drop(self.stdin.take());
        let rest = self.lines.rest(&self.name);
        let child = self.guard.0.take().expect("waited for once");
        let mut output = wait_with_timeout(child, &self.name);
        let mut printed = self.printed.take();
        printed.push_str(&rest);
        output.stdout = printed.into_bytes();
        (rest, output)
    }

    /// `finish`, requiring exit status 0 and an empty stderr; returns the rest of stdout.
    pub fn finish_cleanly(self) -> String {
        let name = self.name.clone();
        let (rest, output) = self.finish();
        assert_eq!(output.status.code(), Some(0), "{name}'s exit status");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            "",
            "{name}'s stderr"
        );
        rest
    }
}
