//! Detach under the hook engine: a thread stopped inside the hook code (inside an allocator
//! call a hook made, or in a hook's wait) must leave it before the code is unmapped. With the
//! hooks switched off, the entries restored and every int3 gone, the process runs in short
//! turns, stopped again after each, until no thread may be inside or the turns run out.

use std::time::Duration;

use crate::ptrace::inside::InsideCheck;
use crate::ptrace::regs;
use crate::ptrace::stop::{Deadline, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;

/// Turns of running before the code is given up as still in use (left mapped, switched off).
const TURNS: u32 = 20;
/// How long each turn runs: an allocator call returns in microseconds; a turn also lets a
/// preempted thread be scheduled.
const TURN: Duration = Duration::from_millis(2);

/// Where the hook code stands once the threads had their turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookCode {
    /// No thread can be in it: it may be unmapped.
    Unused,
    /// A thread may still be in it (or could not be run): it stays mapped.
    MaybeInUse,
    /// The process exec'd or ended during a turn: the code went with its image.
    ImageGone,
}

impl Tracer<'_> {
    /// Whether a thread of `pid` (stopped) may still be inside `pages`, after up to `TURNS`
    /// turns of running. A process left in its group-stop by job control is not run, nor one
    /// with a thread stopped in the middle of an event (a clone, an exec).
    pub(crate) fn leave_hook_code(&mut self, pid: i32, pages: &[(u64, u64)]) -> HookCode {
        let deadline = Deadline::after(STOP_TIMEOUT);
        for turn in 0..=TURNS {
            // An exec makes the process anew, without its scratch page.
            if !self
                .processes
                .get(&pid)
                .is_some_and(|p| p.scratch.is_some())
            {
                return HookCode::ImageGone;
            }
            if !self.may_be_inside(pid, pages) {
                return HookCode::Unused;
            }
            let tids = self.threads.of(pid);
            let held = tids.iter().any(|tid| {
                self.inside_event.contains(tid)
                    || self.unresponsive.contains(tid)
                    || self
                        .threads
                        .get(tid)
                        .is_some_and(|thread| thread.job_stopped)
            });
            if turn == TURNS || held {
                return HookCode::MaybeInUse;
            }
            for &tid in &tids {
                // A held signal stays held: it is sent again after the detach.
                let _ = regs::resume(tid, 0);
            }
            std::thread::sleep(TURN);
            let _ = self.stop_threads(&tids, &deadline);
            while let Some(stop) = self.deferred.pop_front() {
                let _ = self.settle_for_detach(stop, &deadline);
            }
        }
        HookCode::MaybeInUse
    }

    /// Whether a stopped thread of `pid` runs in `pages` or has a frame returning into them.
    fn may_be_inside(&self, pid: i32, pages: &[(u64, u64)]) -> bool {
        let Some(process) = self.processes.get(&pid) else {
            return false;
        };
        let check = InsideCheck::for_process(pid, &self.modules);
        self.threads
            .of(pid)
            .iter()
            .any(|&tid| check.may_be_inside(tid, &process.memory, pages))
    }
}
