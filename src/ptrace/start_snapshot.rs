//! The first smaps snapshot of a process image, taken while the process waits at its launch,
//! fork or exec stop, so that its residency starts at its start even when it lives a few
//! milliseconds. A vfork child shares its parent's memory until it execs: its exec is its
//! first snapshot.

use super::exit_snapshot::{WAITING_SNAPSHOT_ALLOWANCE_NS, WAITING_SNAPSHOT_SHARE};
use crate::events::EventKind;
use crate::ptrace::tracer::Tracer;
use crate::trace::format::SnapshotReason;

impl Tracer<'_> {
    /// Snapshots `pid` now (it is stopped at `reason`'s event), within the budget of the
    /// snapshots processes wait for; the launched process is always snapshotted.
    pub(crate) fn snapshot_at_start(&mut self, pid: i32, reason: SnapshotReason) {
        if pid != self.root_pid && !self.waiting_snapshot_within_budget() {
            // Said in its image, not on the terminal: a build forks thousands of them.
            let message = format!(
                "no snapshot at its {}: the snapshots processes wait for (fork, exec, exit) \
                 had used their budget ({} % of the recording's time, {} ms at least); its \
                 residency starts at the sampler's first reading",
                reason.name(),
                100 / WAITING_SNAPSHOT_SHARE,
                WAITING_SNAPSHOT_ALLOWANCE_NS / 1_000_000
            );
            self.send(pid, pid, EventKind::Warning { message });
            return;
        }
        let taken = self.snapshot_waiting(pid, reason);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.start_snapshotted = taken;
        }
    }
}
