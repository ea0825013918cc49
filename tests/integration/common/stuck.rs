//! What a command that overran its time was doing: every thread of it and of its
//! descendants with its state, kernel wait channel and kernel stack, and gdb's backtrace of
//! the command's own threads, so that a rare hang explains itself in the failure message.

use std::fs;
use std::process::Command;

/// A description of `pid` and the processes below it, for a test failure.
pub fn describe(pid: u32) -> String {
    let mut text = String::new();
    for process in with_descendants(pid) {
        for task in tasks(process) {
            let base = format!("/proc/{process}/task/{task}");
            let read =
                |name: &str| fs::read_to_string(format!("{base}/{name}")).unwrap_or_default();
            let stat = read("stat");
            // The state is the first field after the command's closing parenthesis.
            let state = stat.rsplit_once(") ").map_or("?", |(_, rest)| &rest[..1]);
            text += &format!(
                "pid {process} tid {task} {} state {state} wchan {} syscall {}\n",
                read("comm").trim(),
                read("wchan").trim(),
                read("syscall").trim()
            );
            for frame in read("stack").lines() {
                text += &format!("    {frame}\n");
            }
        }
    }
    text + &backtrace(pid)
}

/// gdb's backtrace of every thread of `pid`; gdb attaches and detaches, the process stays.
fn backtrace(pid: u32) -> String {
    let output = Command::new("timeout")
        .args(["60", "gdb", "-q", "-batch", "-nx", "-p", &pid.to_string()])
        .args(["-ex", "thread apply all bt 16"])
        .output();
    // gdb's errors too: one that cannot attach says why instead of printing nothing.
    match output {
        Ok(output) => {
            String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr)
        }
        Err(error) => format!("gdb: {error}\n"),
    }
}

fn with_descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = numbered_entries("/proc")
        .into_iter()
        .filter_map(|process| Some((process, parent(process)?)))
        .collect();
    let mut found = vec![pid];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|&&(_, of)| of == parent)
                .map(|&(child, _)| child),
        );
        index += 1;
    }
    found
}

fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split(' ').nth(1)?.parse().ok()
}

fn tasks(pid: u32) -> Vec<u32> {
    numbered_entries(&format!("/proc/{pid}/task"))
}

fn numbered_entries(directory: &str) -> Vec<u32> {
    let mut numbers: Vec<u32> = fs::read_dir(directory)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    numbers.sort_unstable();
    numbers
}
