//! The outermost MPI calls of each thread. The hook engine reports every MPI call, nested
//! or not (an MPI function calling another), and the int3 engine's probes, which stay on a
//! few functions, report theirs into the same stream: the profile keeps one entry and one
//! return per outermost call (`Record::MpiCall`), and the hook engine's sums of calls in
//! which nothing happened (`Record::MpiCalls`) made outside any open call.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct MpiNesting {
    /// Calls open on each thread, by (pid, tid).
    depth: HashMap<(u32, u32), u32>,
}

impl MpiNesting {
    /// Whether thread `tid` of `pid` entering (`entry`) or leaving an MPI function enters or
    /// leaves its outermost call. A return without an entry (a fork child returning from
    /// its parent's call) is passed on: the analysis ignores it.
    pub fn is_outermost(&mut self, pid: u32, tid: u32, entry: bool) -> bool {
        if entry {
            let depth = self.depth.entry((pid, tid)).or_default();
            *depth += 1;
            return *depth == 1;
        }
        let Some(depth) = self.depth.get_mut(&(pid, tid)) else {
            return true;
        };
        *depth -= 1;
        if *depth > 0 {
            return false;
        }
        self.depth.remove(&(pid, tid));
        true
    }

    /// Whether thread `tid` of `pid` is inside a call.
    pub fn is_inside(&self, pid: u32, tid: u32) -> bool {
        self.depth.contains_key(&(pid, tid))
    }

    /// The thread ended: its open calls with it.
    pub fn thread_ended(&mut self, pid: u32, tid: u32) {
        self.depth.remove(&(pid, tid));
    }

    /// The image ended (exit, exec): every thread's open calls with it.
    pub fn image_ended(&mut self, pid: u32) {
        self.depth.retain(|&(owner, _), _| owner != pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_outermost_entry_and_return_of_each_thread_pass() {
        let mut nesting = MpiNesting::default();
        // Thread 10 calls A, which calls B, which calls C; thread 11 calls D meanwhile.
        let calls = [
            (10, true),
            (10, true),
            (11, true),
            (10, true),
            (10, false),
            (11, false),
            (10, false),
            (10, false),
            (10, false),
        ];
        let passed: Vec<bool> = calls
            .iter()
            .map(|&(tid, entry)| nesting.is_outermost(1, tid, entry))
            .collect();
        assert_eq!(
            passed,
            [true, false, true, false, false, true, false, true, true]
        );
        assert!(nesting.depth.is_empty());
    }

    #[test]
    fn an_ended_thread_or_image_leaves_no_open_call() {
        let mut nesting = MpiNesting::default();
        assert!(nesting.is_outermost(1, 10, true));
        assert!(nesting.is_outermost(1, 11, true));
        assert!(nesting.is_outermost(2, 20, true));
        nesting.thread_ended(1, 10);
        assert!(
            nesting.is_outermost(1, 10, true),
            "a new call of a new thread"
        );
        nesting.image_ended(1);
        assert!(nesting.is_outermost(1, 11, true));
        assert!(!nesting.is_outermost(2, 20, true), "pid 2 still inside");
    }

    #[test]
    fn a_thread_is_inside_from_its_outermost_entry_to_its_return() {
        let mut nesting = MpiNesting::default();
        assert!(!nesting.is_inside(1, 10));
        nesting.is_outermost(1, 10, true);
        nesting.is_outermost(1, 10, true);
        nesting.is_outermost(1, 10, false);
        assert!(nesting.is_inside(1, 10));
        assert!(!nesting.is_inside(1, 11));
        nesting.is_outermost(1, 10, false);
        assert!(!nesting.is_inside(1, 10));
    }
}
