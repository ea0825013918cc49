//! Per-thread shadow stacks of hijacked return addresses (uretprobe style): a probed call's
//! return address is replaced by the trampoline, and the original is kept here.

use crate::breakpoints::table::ProbeKind;

/// A probed call that has not returned yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingReturn {
    /// Where the return address lives on the stack (rsp at entry).
    pub slot: u64,
    pub original_return: u64,
    pub kind: ProbeKind,
    /// rdi, rsi, rdx, r10, r8, r9 at entry.
    pub args: [u64; 6],
    pub time_ns: u64,
}

/// Deepest nesting kept per thread; older entries are dropped (a runaway recursion of
/// allocator calls is not something a program survives anyway).
const MAX_DEPTH: usize = 256;
/// A pending slot below rsp by less than this is on the same stack and was abandoned
/// (longjmp). Further away it may be another stack (a handler on sigaltstack): kept.
const SAME_STACK_SPAN: u64 = 8 << 20;

#[derive(Debug, Clone, Default)]
pub struct ShadowStack {
    entries: Vec<PendingReturn>,
}

impl ShadowStack {
    /// Drops entries whose frames were abandoned: their slot lies below the current stack
    /// pointer on the same stack.
    pub fn drop_abandoned(&mut self, rsp: u64) {
        while let Some(top) = self.entries.last() {
            if top.slot < rsp && rsp - top.slot < SAME_STACK_SPAN {
                self.entries.pop();
            } else {
                break;
            }
        }
    }

    /// Whether an allocator call is in progress on this thread (its frame is above rsp).
    pub fn inside_allocator(&self, rsp: u64) -> bool {
        self.entries
            .iter()
            .any(|entry| matches!(entry.kind, ProbeKind::Alloc(_)) && entry.slot >= rsp)
    }

    pub fn push(&mut self, entry: PendingReturn) {
        if self.entries.len() == MAX_DEPTH {
            self.entries.remove(0);
        }
        self.entries.push(entry);
    }

    /// The call returning now: rsp after `ret` is slot + 8. Entries pushed after it are gone
    /// too (a return from an outer frame ends every inner one).
    pub fn pop_returning(&mut self, rsp_after_return: u64) -> Option<PendingReturn> {
        let slot = rsp_after_return.wrapping_sub(8);
        let index = self.entries.iter().rposition(|entry| entry.slot == slot)?;
        let entry = self.entries[index];
        self.entries.truncate(index);
        Some(entry)
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
            time_ns: 0,
        }
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
        stack.drop_abandoned(0x7000_1800);
        assert_eq!(stack.entries().len(), 1);
        let returned = stack.pop_returning(0x7000_2008).unwrap();
        assert_eq!(returned.slot, 0x7000_2000);
        assert!(stack.entries().is_empty());
    }

    #[test]
    fn returning_from_an_outer_frame_ends_inner_ones() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_2000));
        stack.push(entry(0x7000_1000));
        assert_eq!(stack.pop_returning(0x7000_2008).unwrap().slot, 0x7000_2000);
        assert!(stack.entries().is_empty());
        assert_eq!(stack.pop_returning(0x7000_1008), None);
    }

    #[test]
    fn far_entries_on_another_stack_are_kept() {
        let mut stack = ShadowStack::default();
        stack.push(entry(0x7000_0000));
        stack.drop_abandoned(0x7f00_0000);
        assert_eq!(stack.entries().len(), 1);
    }
}
