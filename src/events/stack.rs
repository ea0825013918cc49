//! Stacks as a source hands them over: raw data that only the interpret stage turns into
//! frames. A source that copies stacks learns through `CopyWindows` when a copy was too short.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::failure::lock;
use crate::unwind::StackSnapshot;

/// Set in a frame a source walked itself (`RawStack::Frames`, `EventKind::KnownStack`):
/// the instruction a signal interrupted, whose caller frame is the signal return trampoline.
/// Return addresses are user-space addresses, far below this bit.
pub const INTERRUPTED_MARK: u64 = 1 << 63;

/// How the interpret stage learns the stack of an event.
#[derive(Debug, Clone, PartialEq)]
pub enum RawStack {
    /// Only the return address into the caller (`--stacks caller`).
    Caller(u64),
    /// With full stacks, a stack that could not be copied: the caller is known, the rest is
    /// recorded as truncated.
    Uncopied(u64),
    /// A copy of the stack to unwind.
    Copy(Box<StackCopy>),
    /// Frames the source walked itself, caller first (`INTERRUPTED_MARK` may mark some).
    Frames(Vec<u64>),
    /// A stack registered earlier in this process image by `EventKind::KnownStack`.
    Known(u64),
}

impl RawStack {
    /// Bytes of stack copy it carries (what backpressure by bytes counts).
    pub fn copy_bytes(&self) -> u64 {
        match self {
            RawStack::Copy(copy) => copy.snapshot.stack.len() as u64,
            _ => 0,
        }
    }
}

/// A copy of a stopped thread's stack, with what the unwinder must know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct StackCopy {
    pub snapshot: StackSnapshot,
    /// The copy ends before the stack mapping does (a walk that runs off it was cut short).
    pub window_limited: bool,
    /// An address that stands in for return addresses on this stack (memsup's return
    /// trampoline), if any.
    pub substitute: Option<u64>,
    /// The return addresses `substitute` replaced, innermost first.
    pub substituted: Vec<u64>,
}

/// Walks that ran off the end of a window-limited copy, reported by the interpret stage to
/// the source that makes the copies, which then copies more of that thread's stack.
#[derive(Debug, Default)]
pub struct CopyWindows {
    /// Checked on every copy without taking the lock.
    news: AtomicBool,
    /// (tid, length of the copy that was too short).
    short: Mutex<Vec<(u32, u32)>>,
}

impl CopyWindows {
    /// A walk of `tid`'s copy of `length` bytes ran off its end.
    pub fn ran_off_copy(&self, tid: u32, length: u32) {
        lock(&self.short).push((tid, length));
        self.news.store(true, Ordering::Release);
    }

    /// Calls `grow` with each report since the last call.
    pub fn take(&self, mut grow: impl FnMut(u32, u32)) {
        if !self.news.swap(false, Ordering::Acquire) {
            return;
        }
        for (tid, length) in std::mem::take(&mut *lock(&self.short)) {
            grow(tid, length);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_copies_reach_the_copier_once() {
        let windows = CopyWindows::default();
        let mut seen = Vec::new();
        windows.take(|tid, length| seen.push((tid, length)));
        assert!(seen.is_empty());
        windows.ran_off_copy(7, 4096);
        windows.ran_off_copy(8, 8192);
        windows.take(|tid, length| seen.push((tid, length)));
        windows.take(|tid, length| seen.push((tid, length)));
        assert_eq!(seen, [(7, 4096), (8, 8192)]);
    }

    #[test]
    fn only_copies_carry_bytes() {
        let copy = RawStack::Copy(Box::new(StackCopy {
            snapshot: StackSnapshot {
                stack: vec![0; 100],
                ..StackSnapshot::default()
            },
            window_limited: false,
            substitute: None,
            substituted: Vec::new(),
        }));
        assert_eq!(copy.copy_bytes(), 100);
        assert_eq!(RawStack::Frames(vec![1, 2]).copy_bytes(), 0);
        assert_eq!(RawStack::Known(3).copy_bytes(), 0);
    }
}
