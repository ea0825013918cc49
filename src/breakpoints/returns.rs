//! Per-thread shadow stacks of hijacked return addresses (uretprobe style): a probed call's
//! return address is replaced by the trampoline, and the original is kept here.

use crate::breakpoints::table::ProbeKind;
use crate::events::RawStack;

/// A probed call that has not returned yet.
#[derive(Debug)]
pub struct PendingReturn {
    /// Where the return address lives on the stack (rsp at entry).
    pub slot: u64,
    pub original_return: u64,
    pub kind: ProbeKind,
    /// rdi, rsi, rdx, r10, r8, r9 at entry.
    pub args: [u64; 6],
    /// The stack captured at entry, sent with the call's event when it returns.
    pub stack: Option<RawStack>,
}

/// Deepest nesting kept per thread; older entries are dropped (a runaway recursion of
/// allocator calls is not something a program survives anyway).
const MAX_DEPTH: usize = 256;
/// A pending slot below rsp by less than this is on the same stack and was abandoned
/// (longjmp). Further away it may be another stack (a handler on sigaltstack): kept.
const SAME_STACK_SPAN: u64 = 8 << 20;

#[derive(Debug, Default)]
pub struct ShadowStack {
    entries: Vec<PendingReturn>,
}

impl ShadowStack {
    /// Drops and returns entries whose frames were abandoned (longjmp): their slot lies below
    /// the stack pointer of a new call on the same stack, or is the new call's own slot and no
    /// longer holds the trampoline (`slot_is_trampoline`, asked only in that case: a tail call
    /// from a probed function keeps the trampoline there and is still pending).
    pub fn drop_abandoned(
        &mut self,
        rsp: u64,
        slot_is_trampoline: impl FnOnce() -> bool,
    ) -> Vec<PendingReturn> {
        let mut dropped = Vec::new();
        while let Some(top) = self.entries.last() {
            if top.slot < rsp && rsp - top.slot < SAME_STACK_SPAN {
                dropped.extend(self.entries.pop());
            } else {
                break;
            }
        }
        if self.entries.last().is_some_and(|top| top.slot == rsp) && !slot_is_trampoline() {
            dropped.extend(self.entries.pop());
        }
        dropped
    }

    /// Whether an allocator call is in progress on this thread (its frame is above rsp).
    pub fn inside_allocator(&self, rsp: u64) -> bool {
        self.entries
            .iter()
            .any(|entry| matches!(entry.kind, ProbeKind::Alloc(_)) && entry.slot >= rsp)
    }

    /// Whether an MPI call is in progress on this thread (its frame is above rsp).
    pub fn inside_mpi_call(&self, rsp: u64) -> bool {
        self.entries
            .iter()
            .any(|entry| matches!(entry.kind, ProbeKind::Mpi(_)) && entry.slot >= rsp)
    }

    pub fn push(&mut self, entry: PendingReturn) {
        if self.entries.len() == MAX_DEPTH {
            self.entries.remove(0);
        }
        self.entries.push(entry);
    }

    /// The call returning now (rsp after `ret` is slot + 8), and the entries pushed after it,
    /// which were abandoned (a return from an outer frame ends every inner one).
    pub fn pop_returning(
        &mut self,
        rsp_after_return: u64,
    ) -> Option<(PendingReturn, Vec<PendingReturn>)> {
        let slot = rsp_after_return.wrapping_sub(8);
        let index = self.entries.iter().rposition(|entry| entry.slot == slot)?;
        let abandoned = self.entries.split_off(index + 1);
        let entry = self.entries.pop().expect("index is in range");
        Some((entry, abandoned))
    }

    /// Empties the stack, returning what was still pending (the thread is gone).
    pub fn take_all(&mut self) -> Vec<PendingReturn> {
        std::mem::take(&mut self.entries)
    }

    /// A forked child's copy: the same pending calls with the same stacks (the child's stack
    /// is a copy of the parent's).
    pub fn fork_copy(&self) -> ShadowStack {
        ShadowStack {
            entries: self
                .entries
                .iter()
                .map(|entry| PendingReturn {
                    stack: entry.stack.clone(),
                    ..*entry
                })
                .collect(),
        }
    }

    pub fn entries(&self) -> &[PendingReturn] {
        &self.entries
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::AllocFunction;

    fn entry(slot: u64) -> PendingReturn {
        PendingReturn {
            slot,
            original_return: slot + 1,
            kind: ProbeKind::Alloc(AllocFunction::Malloc),
            args: [0; 6],
            stack: None,
        }
    }

    fn slots(entries: &[PendingReturn]) -> Vec<u64> {
        entries.iter().map(|entry| entry.slot).collect()
    }

    #[test]
    fn nested_call_is_inside_the_outer_one() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_1000));
        assert!(stack.inside_allocator(0x7000_0f00));
        assert!(!stack.inside_allocator(0x7000_1100));
    }

    #[test]
    fn longjmp_abandoned_entries_are_dropped_and_returns_still_match() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_2000));
        stack.push(entry(0x7000_1000)); // abandoned by a longjmp back above it
        let dropped = stack.drop_abandoned(0x7000_1800, || unreachable!());
        assert_eq!(slots(&dropped), [0x7000_1000]);
        assert_eq!(stack.entries().len(), 1);
        let (returned, abandoned) = stack.pop_returning(0x7000_2008).unwrap();
        assert_eq!(returned.slot, 0x7000_2000);
        assert!(abandoned.is_empty());
        assert!(stack.entries().is_empty());
    }

    #[test]
    fn returning_from_an_outer_frame_ends_inner_ones() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_2000));
        stack.push(entry(0x7000_1000));
        let (returned, abandoned) = stack.pop_returning(0x7000_2008).unwrap();
        assert_eq!(returned.slot, 0x7000_2000);
        assert_eq!(slots(&abandoned), [0x7000_1000]);
        assert!(stack.entries().is_empty());
        assert!(stack.pop_returning(0x7000_1008).is_none());
    }

    #[test]
    fn a_forked_copy_keeps_the_calls_and_their_stacks() {
        let mut stack = ShadowStack::default();
        let mut pending = entry(0x7000_1000);
        pending.stack = Some(RawStack::Caller(0x1234));
        stack.push(pending);
        stack.push(entry(0x7000_0f00));
        let copy = stack.fork_copy();
        assert_eq!(slots(copy.entries()), [0x7000_1000, 0x7000_0f00]);
        assert!(matches!(
            copy.entries()[0].stack,
            Some(RawStack::Caller(0x1234))
        ));
        assert!(copy.entries()[1].stack.is_none());
    }

    #[test]
    fn far_entries_on_another_stack_are_kept() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_0000));
        assert!(stack
            .drop_abandoned(0x7f00_0000, || unreachable!())
            .is_empty());
        assert_eq!(stack.entries().len(), 1);
    }

    #[test]
    fn a_new_call_in_an_abandoned_calls_slot_ends_it_but_a_tail_call_does_not() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_1000));
        assert!(stack.drop_abandoned(0x7000_1000, || true).is_empty());
        assert_eq!(
            slots(&stack.drop_abandoned(0x7000_1000, || false)),
            [0x7000_1000]
        );
        assert!(stack.entries().is_empty());
    }
}
