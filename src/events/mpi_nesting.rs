//! The outermost MPI calls of each thread. The hook engine reports every MPI call, nested
//! or not (an MPI function calling another), and the int3 engine's probes, which stay on a
//! few functions, report theirs into the same stream: the profile keeps one entry and one
//! return per outermost call (`Record::MpiCall`), and the hook engine's sums of calls in
//! which nothing happened (`Record::MpiCalls`) made outside any open call. The drain keeps
//! one too, of the hooked calls it sends, to send the sums the hooks made in their slots
//! only while their thread has none open.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct MpiNesting {
    /// The entry stack pointers of the calls open on each thread, by (pid, tid), outermost
    /// first (0 where not known).
    open: HashMap<(u32, u32), Vec<u64>>,
}

impl MpiNesting {
    /// Whether thread `tid` of `pid` entering (`entry`) or leaving an MPI function, whose
    /// stack pointer at entry was `stack_pointer` (0 when not known), enters or leaves its
    /// outermost call. A return without an entry (a fork child returning from its parent's
    /// call) is passed on: the analysis ignores it.
    ///
    /// A record can be lost (`--ring-full drop`): a call inside another runs deeper on the
    /// stack (a lower stack pointer), so an entry at or above an open call's stack pointer
    /// means that call returned unseen, and a return above inner open calls' means theirs
    /// did; they are closed, so that one lost return does not make every later call nested.
    pub fn is_outermost(&mut self, pid: u32, tid: u32, entry: bool, stack_pointer: u64) -> bool {
        let returned_unseen = |open: &mut Vec<u64>, above: &dyn Fn(u64) -> bool| {
            while open
                .last()
                .is_some_and(|&top| top != 0 && stack_pointer != 0 && above(top))
            {
                open.pop();
            }
        };
        if entry {
            let open = self.open.entry((pid, tid)).or_default();
            returned_unseen(open, &|top| top <= stack_pointer);
            open.push(stack_pointer);
            return open.len() == 1;
        }
        let Some(open) = self.open.get_mut(&(pid, tid)) else {
            return true;
        };
        returned_unseen(open, &|top| top < stack_pointer);
        match open.last() {
            // The return of a call whose entry was lost, inside the open one.
            Some(&top) if top != 0 && stack_pointer != 0 && top > stack_pointer => return false,
            Some(_) => {
                open.pop();
            }
            None => {}
        }
        if !open.is_empty() {
            return false;
        }
        self.open.remove(&(pid, tid));
        true
    }

    /// Whether thread `tid` of `pid` is inside a call.
    pub fn is_inside(&self, pid: u32, tid: u32) -> bool {
        self.open.contains_key(&(pid, tid))
    }

    /// The thread ended: its open calls with it.
    pub fn thread_ended(&mut self, pid: u32, tid: u32) {
        self.open.remove(&(pid, tid));
    }

    /// The image ended (exit, exec): every thread's open calls with it.
    pub fn image_ended(&mut self, pid: u32) {
        self.open.retain(|&(owner, _), _| owner != pid);
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
            .map(|&(tid, entry)| nesting.is_outermost(1, tid, entry, 0))
            .collect();
        assert_eq!(
            passed,
            [true, false, true, false, false, true, false, true, true]
        );
        assert!(nesting.open.is_empty());
    }

    #[test]
    fn an_ended_thread_or_image_leaves_no_open_call() {
        let mut nesting = MpiNesting::default();
        assert!(nesting.is_outermost(1, 10, true, 0));
        assert!(nesting.is_outermost(1, 11, true, 0));
        assert!(nesting.is_outermost(2, 20, true, 0));
        nesting.thread_ended(1, 10);
        assert!(
            nesting.is_outermost(1, 10, true, 0),
            "a new call of a new thread"
        );
        nesting.image_ended(1);
        assert!(nesting.is_outermost(1, 11, true, 0));
        assert!(!nesting.is_outermost(2, 20, true, 0), "pid 2 still inside");
    }

    #[test]
    fn a_thread_is_inside_from_its_outermost_entry_to_its_return() {
        let mut nesting = MpiNesting::default();
        assert!(!nesting.is_inside(1, 10));
        nesting.is_outermost(1, 10, true, 0);
        nesting.is_outermost(1, 10, true, 0);
        nesting.is_outermost(1, 10, false, 0);
        assert!(nesting.is_inside(1, 10));
        assert!(!nesting.is_inside(1, 11));
        nesting.is_outermost(1, 10, false, 0);
        assert!(!nesting.is_inside(1, 10));
    }

    #[test]
    fn a_lost_return_closes_its_call_at_the_next_entry_or_return_above_it() {
        const OUTER: u64 = 0x7000;
        const INNER: u64 = 0x6f00;
        let mut nesting = MpiNesting::default();
        // Calls of a loop at the same depth, the first one's return lost: the second is
        // outermost all the same, and so is its return.
        assert!(nesting.is_outermost(1, 10, true, OUTER));
        assert!(nesting.is_outermost(1, 10, true, OUTER));
        assert!(nesting.is_outermost(1, 10, false, OUTER));
        assert!(!nesting.is_inside(1, 10));
        // An inner call whose return was lost: the outer return closes both.
        assert!(nesting.is_outermost(1, 10, true, OUTER));
        assert!(!nesting.is_outermost(1, 10, true, INNER));
        assert!(nesting.is_outermost(1, 10, false, OUTER));
        assert!(!nesting.is_inside(1, 10));
        // An inner call whose entry was lost: its return is nested, not the outer one's.
        assert!(nesting.is_outermost(1, 10, true, OUTER));
        assert!(!nesting.is_outermost(1, 10, false, INNER));
        assert!(nesting.is_inside(1, 10));
        assert!(nesting.is_outermost(1, 10, false, OUTER));
        // An entry higher on the stack than an open call's: that call returned unseen.
        assert!(nesting.is_outermost(1, 10, true, INNER));
        assert!(nesting.is_outermost(1, 10, true, OUTER));
        assert!(nesting.is_outermost(1, 10, false, OUTER));
        assert!(nesting.open.is_empty());
    }
}
