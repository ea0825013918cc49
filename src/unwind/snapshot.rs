//! What the tracer copies at a stop, so that the thread can be resumed before unwinding.

/// The registers an x86-64 unwind needs and a copy of the stack from the stack pointer up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackSnapshot {
    /// rip of the stopped thread.
    pub ip: u64,
    /// The thread stopped at the first instruction of a function: `sp` points at the return
    /// address, and the walk starts in the caller (a function's first instruction has no
    /// frame of its own to unwind, and may lack CFI).
    pub at_function_entry: bool,
    /// rsp; `stack[0]` is the byte at this address.
    pub sp: u64,
    /// rbp, for frames without CFI (frame-pointer walk).
    pub bp: u64,
    /// The bytes `[sp, sp + stack.len())`.
    pub stack: Vec<u8>,
}

impl StackSnapshot {
    /// The little-endian word at `address`, or `None` when any of its 8 bytes lies outside
    /// the copy (the unwinder then stops with a truncated stack).
    pub fn read_word(&self, address: u64) -> Option<u64> {
        let offset = usize::try_from(address.checked_sub(self.sp)?).ok()?;
        let end = offset.checked_add(8)?;
        let bytes = self.stack.get(offset..end)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// One past the last copied address.
    pub fn end(&self) -> u64 {
        self.sp.saturating_add(self.stack.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_whole_words_inside_the_copy() {
        let mut stack = vec![0u8; 24];
        stack[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        let snapshot = StackSnapshot {
            ip: 0,
            at_function_entry: false,
            sp: 0x1000,
            bp: 0,
            stack,
        };
        assert_eq!(snapshot.read_word(0x1008), Some(0x1122_3344_5566_7788));
        assert_eq!(snapshot.read_word(0x1010), Some(0));
        assert_eq!(snapshot.read_word(0x1011), None);
        assert_eq!(snapshot.read_word(0xff8), None);
        assert_eq!(snapshot.read_word(u64::MAX - 3), None);
        assert_eq!(snapshot.end(), 0x1018);
    }
}
