//! The last smaps snapshot of a process, taken at its main thread's exit stop: the one moment
//! its whole address space is still there and the program waits. The thread waits while
//! /proc/PID/smaps is read (tens of ms for a large process), so these snapshots are bounded,
//! together with those at fork and exec (`start_snapshot.rs`); an image whose start was
//! snapshotted is snapshotted at its exit too, so the bound costs images, not their ends.

use std::sync::OnceLock;

use crate::ptrace::regs;
use crate::ptrace::tracer::Tracer;
use crate::trace::format::SnapshotReason;

/// Share of the recording's time the snapshots a process waits for (fork, exec, exit) may
/// take, but for the launched process's (a program forking many short children must not
/// slow down by much more).
pub(super) const WAITING_SNAPSHOT_SHARE: u64 = 20; // 1/20 = 5 %
/// What they may take whatever the share: the first children of a recording, a few ms into
/// it, are snapshotted too.
pub(super) const WAITING_SNAPSHOT_ALLOWANCE_NS: u64 = 20_000_000;

impl Tracer<'_> {
    /// Called at `tid`'s exit stop: snapshots the process when every thread memsup knows of
    /// it has reached its exit stop (the whole process is ending: exit_group, or the last
    /// thread after a main thread that ended with pthread_exit). Until the last one is
    /// resumed, the address space is all there.
    pub(crate) fn snapshot_at_exit(&mut self, tid: i32) {
        let Some(pid) = self.threads.process_of(tid) else {
            return;
        };
        let threads = self.threads.values().filter(|t| t.pid == pid).count();
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        process.exiting_threads.insert(tid);
        // A vfork child's memory is its parent's.
        if process.exiting_threads.len() < threads || process.shares_parent_memory {
            return;
        }
        let owed = pid == self.root_pid || process.start_snapshotted;
        if !owed && !self.waiting_snapshot_within_budget() {
            return;
        }
        if killed_by_exec_on_old_kernel(tid) {
            return;
        }
        // Every thread is stopped: the hooks' records go first, so the snapshot finds the
        // blocks they made (the analysis takes events in the order they come).
        self.flush_hooks(pid);
        self.snapshot_waiting(pid, SnapshotReason::Exit);
    }

    /// Snapshots `pid`, which waits meanwhile; what that took counts against the budget
    /// unless it is the launched process. Whether a snapshot was sent.
    pub(super) fn snapshot_waiting(&mut self, pid: i32, reason: SnapshotReason) -> bool {
        let started = std::time::Instant::now();
        let snapshot = self.residency.snapshot_now(pid, reason);
        let taken = snapshot.is_some();
        if let Some(snapshot) = snapshot {
            self.send(pid, pid, snapshot);
        } else {
            self.tell_if_unreadable(pid);
        }
        if pid != self.root_pid {
            self.waiting_snapshot_ns += started.elapsed().as_nanos() as u64;
        }
        taken
    }

    /// A process that made itself non-dumpable (prctl PR_SET_DUMPABLE 0, or a change of
    /// user or group) shows its /proc files only to a reader with CAP_SYS_PTRACE: said once
    /// per image, with what it costs the profile.
    fn tell_if_unreadable(&mut self, pid: i32) {
        let path = format!("/proc/{pid}/smaps");
        let Err(error) = std::fs::File::open(&path) else {
            return;
        };
        if error.kind() != std::io::ErrorKind::PermissionDenied {
            return;
        }
        let told = self
            .processes
            .get_mut(&pid)
            .map(|process| std::mem::replace(&mut process.unreadable_told, true));
        if told != Some(false) {
            return;
        }
        self.warn(
            pid,
            format!("{path} could not be read ({error}): the program made itself non-dumpable (prctl PR_SET_DUMPABLE, or a change of user or group), and memsup, without CAP_SYS_PTRACE, reads none of its /proc files from then on: its residency stops at the last reading before that, and libraries it loads after are not probed"),
        );
    }

    pub(super) fn waiting_snapshot_within_budget(&self) -> bool {
        let allowed = self.sink.elapsed_ns() / WAITING_SNAPSHOT_SHARE;
        self.waiting_snapshot_ns <= allowed.max(WAITING_SNAPSHOT_ALLOWANCE_NS)
    }
}

/// Before Linux 5.7, opening /proc/PID/smaps takes the exec lock (cred_guard_mutex) that a
/// thread calling execve holds while it waits for the other threads, the main one included,
/// to die: reading it at an exit stop caused by that exec would wait forever. Those exits are
/// the SIGKILL the exec sends.
fn killed_by_exec_on_old_kernel(tid: i32) -> bool {
    let killed = regs::event_message(tid).is_ok_and(|status| status & 0x7f == libc::SIGKILL as u64);
    killed && !kernel_at_least(5, 7)
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    static RELEASE: OnceLock<(u32, u32)> = OnceLock::new();
    let release = *RELEASE.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        parse_release(&text)
    });
    release >= (major, minor)
}

/// "6.1.0-18-amd64" -> (6, 1); (0, 0) when unreadable.
fn parse_release(text: &str) -> (u32, u32) {
    let mut numbers = text
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_are_read_as_major_and_minor() {
        assert_eq!(parse_release("6.1.0-18-amd64\n"), (6, 1));
        assert_eq!(parse_release("3.10.0-1160.el7.x86_64"), (3, 10));
        assert_eq!(parse_release("5.7"), (5, 7));
        assert_eq!(parse_release(""), (0, 0));
        assert!((4, 18) < (5, 7) && (5, 7) <= (5, 7) && (5, 10) >= (5, 7));
    }
}
