//! A process running natively (for memsup to attach to): its state, its tracer, and
//! snapshots of its code read from /proc/PID/mem, to check what a detach left behind.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

/// Kills the process when the test fails half-way, so no fixture outlives the test.
pub struct KillOnDrop(pub Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            child.kill().ok();
            child.wait().ok();
        }
    }
}

/// Polls `condition` every millisecond until it holds; fails the test naming `what` after
/// `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// The PID tracing `pid` (0 when none), from /proc/PID/status.
pub fn tracer_pid(pid: u32) -> u32 {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|error| panic!("reading /proc/{pid}/status: {error}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix("TracerPid:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no TracerPid in /proc/{pid}/status"))
}

/// The state letter of `pid` in /proc/PID/stat (after the parenthesised command name).
pub fn process_state(pid: u32) -> String {
    stat_state(&format!("/proc/{pid}/stat")).unwrap_or_else(|error| panic!("{error}"))
}

/// The state letters of every thread of `pid`, by thread id (a thread that ended meanwhile
/// left out).
pub fn thread_states(pid: u32) -> Vec<String> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|error| panic!("reading /proc/{pid}/task: {error}"));
    let mut tids: Vec<u32> = tasks
        .flatten()
        .filter_map(|task| task.file_name().to_string_lossy().parse().ok())
        .collect();
    tids.sort_unstable();
    tids.iter()
        .filter_map(|tid| stat_state(&format!("/proc/{pid}/task/{tid}/stat")).ok())
        .collect()
}

/// Whether process `pid` has ended: gone, or a zombie waiting to be reaped.
pub fn has_ended(pid: u32) -> bool {
    stat_state(&format!("/proc/{pid}/stat")).map_or(true, |state| state == "Z" || state == "X")
}

fn stat_state(path: &str) -> Result<String, String> {
    let stat = fs::read_to_string(path).map_err(|error| format!("reading {path}: {error}"))?;
    let after_name = &stat[stat
        .rfind(')')
        .ok_or(format!("no command name in {path}"))?
        + 1..];
    Ok(after_name
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// The byte at `address` in the memory of `pid`.
pub fn read_byte(pid: u32, address: u64) -> u8 {
    let memory = File::open(format!("/proc/{pid}/mem")).expect("opening the process's memory");
    let mut byte = [0];
    memory
        .read_exact_at(&mut byte, address)
        .unwrap_or_else(|error| panic!("reading /proc/{pid}/mem at {address:#x}: {error}"));
    byte[0]
}

/// (start, end, path) and bytes of every executable file mapping of `pid` (not [vdso] and
/// the like, which are the kernel's).
pub type CodeSnapshot = Vec<((u64, u64, String), Vec<u8>)>;

pub fn executable_mappings(pid: u32) -> CodeSnapshot {
    executable_mappings_except(pid, None)
}

/// As `executable_mappings`, without the mappings of the file at `reloaded`: a library the
/// program itself keeps loading and unloading is not there to compare after a detach.
pub fn executable_mappings_except(pid: u32, reloaded: Option<&str>) -> CodeSnapshot {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).expect("reading maps");
    let memory = File::open(format!("/proc/{pid}/mem")).expect("opening the process's memory");
    let mut snapshot = Vec::new();
    for line in maps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (range, permissions) = (fields[0], fields[1]);
        let path = fields.get(5).copied().unwrap_or_default();
        if !permissions.contains('x') || path.starts_with('[') || Some(path) == reloaded {
            continue;
        }
        let (start, end) = range.split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let end = u64::from_str_radix(end, 16).unwrap();
        let mut bytes = vec![0; (end - start) as usize];
        // A read fails where the mapping is one the dynamic linker is still laying out (its
        // first mapping spans the whole file and more, until the segments are mapped over
        // it) or one the program unmapped (a dlclose): read again until it is readable or
        // gone, which leaves it out of the snapshot.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let read = loop {
            let Err(error) = memory.read_exact_at(&mut bytes, start) else {
                break true;
            };
            let maps_now = fs::read_to_string(format!("/proc/{pid}/maps")).expect("reading maps");
            if !maps_now.lines().any(|now| now == line) {
                break false;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "reading {line}: {error}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        if read {
            snapshot.push(((start, end, path.to_string()), bytes));
        }
    }
    assert!(
        !snapshot.is_empty(),
        "no executable mapping in /proc/{pid}/maps"
    );
    snapshot
}

/// Every executable mapping of the snapshot is still mapped, executable, and holds the same
/// bytes.
pub fn assert_code_unchanged(pid: u32, before: &CodeSnapshot) {
    assert_code_unchanged_except(pid, before, &[]);
}

/// As `assert_code_unchanged`, except at `changed` (addresses whose bytes the caller checks
/// itself). The mappings are compared by address range: a program that mprotects a page of
/// its code splits the mapping in /proc/PID/maps without changing what is mapped.
pub fn assert_code_unchanged_except(pid: u32, before: &CodeSnapshot, changed: &[u64]) {
    let after = executable_mappings(pid);
    let mut now = Vec::new();
    for ((start, end, path), bytes) in before {
        now.clear();
        for address in (*start..*end).step_by(4096) {
            let ((piece_start, piece_end, _), piece) = after
                .iter()
                .find(|((piece_start, piece_end, piece_path), _)| {
                    (*piece_start..*piece_end).contains(&address) && piece_path == path
                })
                .unwrap_or_else(|| {
                    panic!("{path} at {address:#x} is no longer mapped executable after detach")
                });
            let page_end = (address + 4096).min(*piece_end).min(*end);
            let from = (address - piece_start) as usize;
            now.extend_from_slice(&piece[from..from + (page_end - address) as usize]);
        }
        let mut differences = bytes
            .iter()
            .zip(&now)
            .enumerate()
            .filter(|(offset, (old, new))| {
                old != new && !changed.contains(&(start + *offset as u64))
            });
        if let Some((offset, (old, new))) = differences.next() {
            panic!(
                "code of {path} changed after detach at {:#x}: {old:#04x} -> {new:#04x}",
                start + offset as u64
            );
        }
    }
}

/// The name the hook engine's ring area has in /proc/PID/maps.
pub const HOOK_AREA: &str = "/memfd:memsup-hooks";

/// The hook engine's mappings of `pid`, as /proc/PID/maps lines.
pub fn hook_mappings(pid: u32) -> Vec<String> {
    fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_else(|error| panic!("reading /proc/{pid}/maps: {error}"))
        .lines()
        .filter(|line| is_hook_engine_mapping(line))
        .map(str::to_string)
        .collect()
}

/// Whether a line of /proc/PID/maps is the hook engine's: its ring area, or an anonymous
/// executable mapping (its code pages; no fixture maps such a page itself).
pub fn is_hook_engine_mapping(line: &str) -> bool {
    let fields: Vec<&str> = line.split_whitespace().collect();
    line.contains(HOOK_AREA) || (fields.len() == 5 && fields[1] == "r-xp")
}
