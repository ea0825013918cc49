//! fixtures/attach_loop.c run until told to stop: started, marked, stopped, and its end
//! checked against the checksum of as many iterations.

use std::path::Path;

use super::announced::{start_announced, Running, Start};
use super::interactive::send_signal;

/// More iterations than any test waits for: the loop runs until SIGUSR1.
pub const UNTIL_STOPPED: &str = "1000000000";

/// Starts attach_loop running until SIGUSR1.
pub fn start_loop(fixture: &Path) -> Running {
    let start = Start {
        args: &[UNTIL_STOPPED],
        ..Start::default()
    };
    start_announced(fixture, "attach_loop", start)
}

/// Asks `program` for a mark (SIGUSR2) and waits for it.
pub fn mark(program: &Running) {
    send_signal(program.pid, libc::SIGUSR2);
    let mark = program.next_line("its mark");
    assert_eq!(mark, format!("{}: mark", program.name));
}

/// Stops `program` (SIGUSR1), requires exit status 0 and no stderr, and returns what it
/// printed after the last mark.
pub fn finish(program: Running) -> String {
    send_signal(program.pid, libc::SIGUSR1);
    program.finish_cleanly()
}

/// attach_loop's checksum after `iterations` iterations (fixtures/attach_loop.c).
pub fn loop_checksum(iterations: u64) -> u64 {
    let mut checksum = 0u64;
    for i in 0..iterations {
        let size = 16 + (i % 64) * 8;
        let first = i & 0xff;
        let last = (i >> 8) & 0xff;
        checksum = checksum.wrapping_mul(31).wrapping_add(first + last + size);
    }
    checksum
}

/// Stops attach_loop and checks it ended as a native run of as many iterations does.
pub fn finish_loop(program: Running) {
    let rest = finish(program);
    let rest: Vec<&str> = rest.lines().collect();
    assert_eq!(rest.len(), 1, "attach_loop's last lines: {rest:?}");
    let iterations: u64 = rest[0]
        .strip_prefix("attach_loop: ")
        .and_then(|line| line.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("attach_loop's last line: {rest:?}"));
    assert_eq!(
        rest[0],
        format!(
            "attach_loop: {iterations} iterations, checksum {}",
            loop_checksum(iterations)
        )
    );
}
