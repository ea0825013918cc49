//! The dynamic linker's rendezvous under the hook engine: its hook waits in the target while
//! memsup stops the process's threads, probes and hooks the modules it has not seen, and
//! lets it go (layout's `HookShape::Rendezvous`). The drain notices the wait and wakes the
//! tracer thread, which serves it here between two stops.

use crate::ptrace::stop::{Deadline, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;

impl Tracer<'_> {
    /// Serves every process whose rendezvous hooks wait.
    pub(crate) fn serve_rendezvous_requests(&mut self) {
        let Some(drain) = self.drain.as_ref() else {
            return;
        };
        let mut pids = drain.take_rendezvous_requests();
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            self.serve_rendezvous(pid as i32);
        }
    }

    /// With every thread of `pid` stopped: scans its modules (one of the stopped threads
    /// runs the system calls that place hooks), then serves the tickets taken before the
    /// stop and resumes the threads. A hook whose ticket came later waits for the next turn.
    fn serve_rendezvous(&mut self, pid: i32) {
        let Some(drain) = self.drain.as_ref() else {
            return;
        };
        if !self.processes.contains_key(&pid) || drain.rendezvous_waiting(pid as u32).is_none() {
            return;
        }
        let tids = self.threads.of(pid);
        let known_unresponsive = self.unresponsive.len();
        let stopped = self.stop_threads(&tids, &Deadline::after(STOP_TIMEOUT));
        let running = self.unresponsive[known_unresponsive..].to_vec();
        // Stopped now, by the interrupt or at a stop collected for later: while they are
        // marked joining, placing hooks sees them as stopped.
        let held: Vec<i32> = tids
            .iter()
            .copied()
            .filter(|tid| !running.contains(tid) && !self.joining.contains(tid))
            .collect();
        let injector = stopped
            .iter()
            .copied()
            .find(|&tid| tid == pid)
            .or_else(|| stopped.first().copied());
        self.joining.extend(held.iter().copied());
        // Read with every thread stopped: no ticket changes until they resume.
        let asked = self
            .drain
            .as_ref()
            .and_then(|drain| drain.rendezvous_waiting(pid as u32));
        match self.scan_modules(pid, injector) {
            Ok(()) | Err(crate::error::Error::ProcessGone(_)) => {}
            Err(error) => self.warn(pid, format!("modules after a rendezvous: {error}")),
        }
        for tid in &held {
            self.joining.remove(tid);
        }
        if let (Some(drain), Some(asked)) = (self.drain.as_ref(), asked) {
            drain.serve_rendezvous(pid as u32, asked);
        }
        for tid in stopped {
            let _ = self.resume(tid);
        }
    }
}
