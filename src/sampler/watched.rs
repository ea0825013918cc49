//! The processes the sampler reads: kept by the tracer's record sink, which sees every
//! `ProcessStart` and `ProcessExit` whatever made them (launch, fork, attach, exit, detach).

use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Watched {
    pids: Mutex<BTreeSet<i32>>,
}

impl Watched {
    pub fn insert(&self, pid: i32) {
        self.lock().insert(pid);
    }

    pub fn remove(&self, pid: i32) {
        self.lock().remove(&pid);
    }

    /// Copies the current set into `into`, reusing its allocation; the lock is held only
    /// for the copy, never while /proc is read.
    pub fn snapshot(&self, into: &mut Vec<i32>) {
        into.clear();
        into.extend(self.lock().iter().copied());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<i32>> {
        // A panic elsewhere must not stop the recording from being written.
        self.pids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_current_processes() {
        let watched = Watched::default();
        let mut pids = vec![99];
        watched.insert(7);
        watched.insert(3);
        watched.insert(7);
        watched.snapshot(&mut pids);
        assert_eq!(pids, [3, 7]);
        watched.remove(3);
        watched.remove(42);
        watched.snapshot(&mut pids);
        assert_eq!(pids, [7]);
    }
}
