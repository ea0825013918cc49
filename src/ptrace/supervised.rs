//! The tracer's two tables, processes by pid and threads by tid. Reads go through the map
//! (`Deref`); the tables change shape only through the operations below, each named for the
//! lifecycle step that calls it, so the rules of who is supervised live in one place.

use std::collections::HashMap;
use std::ops::Deref;

use crate::ptrace::state::{Process, Thread};

/// Every supervised process, keyed by its pid.
#[derive(Default)]
pub struct Processes(HashMap<i32, Process>);

impl Deref for Processes {
    type Target = HashMap<i32, Process>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Processes {
    pub fn get_mut(&mut self, pid: &i32) -> Option<&mut Process> {
        self.0.get_mut(pid)
    }

    /// A process memsup starts supervising (launched, joined, forked, or found at an exec):
    /// it replaces any entry left under its pid, whose process is gone.
    pub fn start(&mut self, process: Process) {
        self.0.insert(process.pid, process);
    }

    /// The process's entry, gone with it (its end or its detach).
    pub fn end(&mut self, pid: i32) -> Option<Process> {
        self.0.remove(&pid)
    }

    /// Takes a process out while its threads are worked on, to be put back with
    /// `put_back`; the borrow of one table never blocks the other.
    pub fn take(&mut self, pid: i32) -> Option<Process> {
        self.0.remove(&pid)
    }

    pub fn put_back(&mut self, process: Process) {
        self.0.insert(process.pid, process);
    }
}

/// Every supervised thread, keyed by its tid; each names its process.
#[derive(Default)]
pub struct Threads(HashMap<i32, Thread>);

impl Deref for Threads {
    type Target = HashMap<i32, Thread>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Threads {
    pub fn get_mut(&mut self, tid: &i32) -> Option<&mut Thread> {
        self.0.get_mut(tid)
    }

    /// A thread memsup starts supervising: new, joined, or a process's first.
    pub fn start(&mut self, tid: i32, thread: Thread) {
        self.0.insert(tid, thread);
    }

    /// A thread gone (reaped, or detached).
    pub fn end(&mut self, tid: i32) -> Option<Thread> {
        self.0.remove(&tid)
    }

    /// Every thread of `pid` gone with its process.
    pub fn end_all_of(&mut self, pid: i32) {
        self.0.retain(|_, thread| thread.pid != pid);
    }

    /// After an exec only the leader remains: the execing thread took its id.
    pub fn keep_only_leader(&mut self, pid: i32) {
        self.0
            .retain(|tid, thread| thread.pid != pid || *tid == pid);
    }

    /// The threads of `pid`, in no particular order.
    pub fn of(&self, pid: i32) -> Vec<i32> {
        self.0
            .iter()
            .filter(|(_, thread)| thread.pid == pid)
            .map(|(tid, _)| *tid)
            .collect()
    }

    /// The process `tid` belongs to, if it is supervised.
    pub fn process_of(&self, tid: i32) -> Option<i32> {
        self.0.get(&tid).map(|thread| thread.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakpoints::table::StepOverPolicy;
    use crate::ptrace::fake_tracee::FakeTracee;
    use crate::ptrace::tracee::Tracee;

    fn process(pid: i32, wrappers: bool) -> Process {
        let memory = FakeTracee::default().open_memory(pid);
        Process::new(pid, wrappers, StepOverPolicy::Auto, memory)
    }

    #[test]
    fn a_pid_names_one_process_until_it_ends() {
        let mut processes = Processes::default();
        processes.start(process(10, true));
        // A second start under the same pid replaces the first, gone with its process.
        processes.start(process(10, false));
        assert_eq!(processes.len(), 1);
        assert!(!processes[&10].probe_mapping_wrappers);
        let taken = processes.take(10).expect("supervised");
        assert!(processes.is_empty());
        processes.put_back(taken);
        assert_eq!(processes.end(10).map(|process| process.pid), Some(10));
        assert!(processes.end(10).is_none());
    }

    fn threads() -> Threads {
        let mut threads = Threads::default();
        threads.start(10, Thread::new(10));
        threads.start(11, Thread::new(10));
        threads.start(12, Thread::new(10));
        threads.start(20, Thread::new(20));
        threads
    }

    fn sorted(mut tids: Vec<i32>) -> Vec<i32> {
        tids.sort_unstable();
        tids
    }

    #[test]
    fn threads_are_found_by_process() {
        let threads = threads();
        assert_eq!(sorted(threads.of(10)), vec![10, 11, 12]);
        assert_eq!(threads.of(20), vec![20]);
        assert_eq!(threads.process_of(11), Some(10));
        assert_eq!(threads.process_of(99), None);
    }

    #[test]
    fn an_exec_leaves_only_the_leader_of_that_process() {
        let mut threads = threads();
        threads.keep_only_leader(10);
        assert_eq!(sorted(threads.keys().copied().collect()), vec![10, 20]);
    }

    #[test]
    fn a_process_end_takes_all_its_threads() {
        let mut threads = threads();
        threads.end_all_of(10);
        assert_eq!(threads.keys().copied().collect::<Vec<_>>(), vec![20]);
        assert_eq!(threads.end(20).map(|thread| thread.pid), Some(20));
        assert!(threads.end(20).is_none());
        assert!(threads.is_empty());
    }
}
