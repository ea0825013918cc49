//! Fixtures that print "ready" and wait for a line on standard input: the test acts on the
//! process (stops it, asks memsup for a snapshot) in between, natively and under memsup alike.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Output};
use std::thread;

use super::run::{spawn_piped, wait_with_timeout};

/// Starts `command`, waits for its first output line, calls `at_ready` with the child, then
/// writes a line to its standard input and waits for it to end. The output holds everything
/// it printed, the first line included.
pub fn run_until_ready(command: Command, at_ready: impl FnOnce(&Child)) -> Output {
    let (mut child, description) = spawn_piped(command);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first_line = String::new();
    stdout
        .read_line(&mut first_line)
        .unwrap_or_else(|error| panic!("reading from {description}: {error}"));
    assert!(
        first_line.starts_with("ready"),
        "{description} printed {first_line:?} instead of ready"
    );
    at_ready(&child);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"go\n")
        .unwrap_or_else(|error| panic!("writing to {description}: {error}"));
    let rest = thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout.read_to_end(&mut bytes).ok();
        bytes
    });
    let mut output = wait_with_timeout(child, &description);
    let mut stdout = first_line.into_bytes();
    stdout.extend(rest.join().unwrap());
    output.stdout = stdout;
    output
}

/// The one child process of `pid` (memsup's launched program), from /proc.
pub fn only_child(pid: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_else(|error| panic!("reading the children of {pid}: {error}"));
    let children: Vec<u32> = children
        .split_whitespace()
        .map(|child| child.parse().unwrap())
        .collect();
    assert_eq!(children.len(), 1, "children of {pid}: {children:?}");
    children[0]
}

/// Sends `signal` to `pid`.
pub fn send_signal(pid: u32, signal: i32) {
    // SAFETY: kill has no memory effects.
    let result = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(result, 0, "kill({pid}, {signal})");
}
