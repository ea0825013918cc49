//! What the codec of format version 4 predicts from a block's records so far, on both sides:
//! the allocator function and size a call site called with last (a call site mostly asks one
//! function for one size), the stacks the block's allocations came from lately (a program
//! repeats a working set of call sites), and where a fresh allocation starts (glibc carves new chunks one after the other from the top of the
//! heap, so a block not reused from a free list lies where the previous fresh one ended).

use crate::events::heap::IntegerMap;
use crate::trace::recent::rounded_size;
use crate::trace::stacks::StackId;

/// Stacks one block remembers a size and a successor for (a bound on the reader's memory).
const MAX_PREDICTED_STACKS: usize = 65536;

/// Stacks of the block's latest allocations, most recent first.
pub(super) const RECENT_STACKS: usize = 64;

#[derive(Default)]
pub(super) struct Predictions {
    /// The function (its index in `AllocFunction::ALL`) and size of each stack's last call.
    calls: IntegerMap<StackId, (u8, u64)>,
    recent_stacks: Vec<StackId>,
}

impl Predictions {
    /// The function and size of the block's last allocation (or reallocation) at `stack`.
    pub(super) fn call(&self, stack: StackId) -> Option<(u8, u64)> {
        self.calls.get(&stack).copied()
    }

    pub(super) fn called_at(&mut self, stack: StackId, function: u8, size: u64) {
        if self.calls.len() < MAX_PREDICTED_STACKS || self.calls.contains_key(&stack) {
            self.calls.insert(stack, (function, size));
        }
    }

    /// The rank of `stack` among the block's latest distinct stacks, which it then leads.
    pub(super) fn stack_rank(&mut self, stack: StackId) -> Option<usize> {
        let rank = self.recent_stacks.iter().position(|&known| known == stack);
        self.move_to_front(rank, stack);
        rank
    }

    /// The stack of `rank` (see `stack_rank`), which then leads.
    pub(super) fn stack_at(&mut self, rank: usize) -> Option<StackId> {
        let stack = *self.recent_stacks.get(rank)?;
        self.move_to_front(Some(rank), stack);
        Some(stack)
    }

    /// Puts a stack not among the recent ones in front.
    pub(super) fn new_stack(&mut self, stack: StackId) {
        self.move_to_front(None, stack);
    }

    fn move_to_front(&mut self, rank: Option<usize>, stack: StackId) {
        match rank {
            Some(rank) => self.recent_stacks.remove(rank),
            None if self.recent_stacks.len() == RECENT_STACKS => self.recent_stacks.pop().unwrap(),
            None => 0,
        };
        self.recent_stacks.insert(0, stack);
    }
}

/// Where the next fresh chunk would start after a block of `size` bytes at `address`.
pub(super) fn fresh_after(address: u64, size: u64) -> u64 {
    address.wrapping_add(rounded_size(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_chunk_follows_the_previous_one() {
        // glibc: 24 bytes take a 32-byte chunk, 25 a 48-byte one, 0 the 32-byte minimum.
        assert_eq!(fresh_after(0x1000, 24), 0x1020);
        assert_eq!(fresh_after(0x1000, 25), 0x1030);
        assert_eq!(fresh_after(0x1000, 0), 0x1020);
    }

    #[test]
    fn a_stack_s_call_is_its_latest() {
        let mut predictions = Predictions::default();
        assert_eq!(predictions.call(3), None);
        predictions.called_at(3, 0, 40);
        predictions.called_at(3, 1, 48);
        assert_eq!(predictions.call(3), Some((1, 48)));
        assert_eq!(predictions.call(4), None);
    }

    #[test]
    fn recent_stacks_are_ranked_most_recent_first_and_bounded() {
        let mut predictions = Predictions::default();
        for stack in 1..=RECENT_STACKS as StackId {
            assert_eq!(predictions.stack_rank(stack), None);
        }
        assert_eq!(predictions.stack_rank(1), Some(RECENT_STACKS - 1));
        assert_eq!(predictions.stack_rank(1), Some(0), "moved to the front");
        predictions.new_stack(1000);
        assert_eq!(predictions.stack_rank(2), None, "the oldest fell out");
        // Now 2, 1000, 1, 64, 63 ...
        assert_eq!(predictions.stack_at(1), Some(1000));
        assert_eq!(predictions.stack_at(0), Some(1000));
        assert_eq!(predictions.stack_at(3), Some(64));
        assert_eq!(predictions.stack_at(RECENT_STACKS), None);
    }
}
