//! Temporary allocations as heaptrack counts them (`heaptrack_interpret.cpp`: `temporary =
//! lastPtr == ptr; lastPtr = 0;` on every free, `lastPtr = ptr` on every allocation): a block
//! is temporary when it is freed right after it was allocated, with no other allocation or
//! free of the process in between, whatever the thread.

/// The one block whose free would now be temporary.
#[derive(Debug, Default)]
pub(super) struct TemporaryRule {
    last_allocation: Option<u64>,
}

impl TemporaryRule {
    /// A block was allocated at `address` (a realloc's new block included).
    pub fn allocated(&mut self, address: u64) {
        self.last_allocation = Some(address);
    }

    /// `address` was freed (a realloc's old block included; also a pointer never seen
    /// allocated, which heaptrack counts as an event too). True when the block is temporary.
    pub fn freed(&mut self, address: u64) -> bool {
        self.last_allocation.take() == Some(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_free_right_after_its_allocation_is_temporary() {
        let mut rule = TemporaryRule::default();
        rule.allocated(0x10);
        assert!(rule.freed(0x10));
        assert!(!rule.freed(0x10), "the free consumed it");
        rule.allocated(0x20);
        rule.allocated(0x30);
        assert!(!rule.freed(0x20), "another allocation came between");
        assert!(!rule.freed(0x30), "another free came between");
        rule.allocated(0x40);
        assert!(!rule.freed(0x999));
        assert!(!rule.freed(0x40), "an unknown free came between");
    }
}
