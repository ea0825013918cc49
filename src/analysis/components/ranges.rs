//! The address ranges an image's recorded mapping calls created, so that a mapping of a later
//! smaps snapshot can be traced to the call (and stack) that made it; and the ranges unmapped
//! lately, because a snapshot is read over a while and sent at its end: a range unmapped
//! during the read can still be in it, after its unmapping in the stream.

use std::collections::BTreeMap;

use crate::events::made::cut_span;
use crate::trace::format::MapCall;
use crate::trace::stacks::StackId;

const PAGE: u64 = 4096;
/// MAP_SHARED (MAP_SHARED_VALIDATE has this bit too).
const MAP_SHARED: u64 = 0x01;

/// Who created a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Creator {
    pub stack: StackId,
    /// MAP_SHARED, or System V shared memory.
    pub shared: bool,
    /// The process image whose stack tree `stack` is in, when not this one: a fork child's
    /// mappings were made by its parent (an index into the analysis' images).
    pub owner: Option<usize>,
}

impl Creator {
    fn new(stack: StackId, shared: bool) -> Creator {
        Creator {
            stack,
            shared,
            owner: None,
        }
    }
}

/// How long a range unmapped is remembered for the snapshots read meanwhile (a read window
/// is at most this long).
pub(super) const REMOVED_KEPT_NS: u64 = 1_000_000_000;
/// Unmapped ranges kept before the ones older than `REMOVED_KEPT_NS` are first dropped;
/// after a prune the next one waits until twice as many remain.
const REMOVED_PRUNED_AT: usize = 4096;

/// Non-overlapping ranges by start address: (end, creator).
#[derive(Debug, Default, Clone)]
pub(super) struct CreatedRanges {
    ranges: BTreeMap<u64, (u64, Creator)>,
    /// Ranges unmapped lately, non-overlapping by start address: (end, creator, when).
    removed: BTreeMap<u64, (u64, (Creator, u64))>,
    /// The time of the latest call applied.
    now_ns: u64,
    /// How many unmapped ranges make the next prune.
    prune_at: usize,
}

impl CreatedRanges {
    /// Applies one recorded mapping call made at `time_ns`; failed calls and brk change
    /// nothing.
    pub fn apply(
        &mut self,
        time_ns: u64,
        call: MapCall,
        args: &[u64; 6],
        result: i64,
        stack: StackId,
    ) {
        if (-4095..=-1).contains(&result) {
            return;
        }
        self.now_ns = self.now_ns.max(time_ns);
        let address = result as u64;
        match call {
            MapCall::Mmap => {
                let shared = args[3] & MAP_SHARED != 0;
                self.insert(address, args[1], Creator::new(stack, shared));
            }
            MapCall::Mremap => {
                let shared = self.creator(args[0]).is_some_and(|old| old.shared);
                self.remove(args[0], args[1]);
                self.insert(address, args[2], Creator::new(stack, shared));
            }
            // shmat does not say how long the segment is: a page is enough to find it by the
            // start address of its snapshot mapping, and shmdt removes it by that address.
            MapCall::Shmat => self.insert(address, PAGE, Creator::new(stack, true)),
            MapCall::Munmap => self.remove(args[0], args[1]),
            MapCall::Shmdt => {
                if let Some(&(end, creator)) = self.ranges.get(&args[0]).filter(|(_, c)| c.shared) {
                    self.ranges.remove(&args[0]);
                    self.note_removed(args[0], end, creator);
                }
            }
            MapCall::Brk => {}
        }
    }

    /// The ranges as a fork child of image `parent` inherits them: its own calls made none,
    /// and what the parent unmapped is not in the child's address space.
    pub fn inherited(&self, parent: usize) -> CreatedRanges {
        let mut ranges = self.clone();
        ranges.removed.clear();
        for (_, creator) in ranges.ranges.values_mut() {
            creator.owner.get_or_insert(parent);
        }
        ranges
    }

    /// The creator of the range containing `address`.
    pub fn creator(&self, address: u64) -> Option<Creator> {
        let (_, &(end, creator)) = self.ranges.range(..=address).next_back()?;
        (address < end).then_some(creator)
    }

    /// The creator of snapshot mapping [start, end), whose read began at `read_from_ns`:
    /// that of the range holding `start` now, or else that of one range unmapped since
    /// then that held the whole mapping (a mapping an unrecorded call made where a larger
    /// one was unmapped gets none).
    pub fn creator_in_snapshot(&self, start: u64, end: u64, read_from_ns: u64) -> Option<Creator> {
        self.creator(start).or_else(|| {
            let (_, &(removed_end, (creator, removed_ns))) =
                self.removed.range(..=start).next_back()?;
            (end <= removed_end && removed_ns >= read_from_ns).then_some(creator)
        })
    }

    /// A new mapping replaces whatever overlapped it (MAP_FIXED).
    fn insert(&mut self, start: u64, length: u64, creator: Creator) {
        let end = start.saturating_add(page_round(length));
        if end <= start {
            return;
        }
        cut_span(&mut self.ranges, start, end);
        self.ranges.insert(start, (end, creator));
    }

    fn remove(&mut self, start: u64, length: u64) {
        let end = start.saturating_add(page_round(length));
        for (piece_start, piece_end, creator) in cut_span(&mut self.ranges, start, end) {
            self.note_removed(piece_start, piece_end, creator);
        }
    }

    /// Remembers that [start, end), made by `creator`, was unmapped now.
    fn note_removed(&mut self, start: u64, end: u64, creator: Creator) {
        if self.removed.len() >= self.prune_at.max(REMOVED_PRUNED_AT) {
            let oldest_kept = self.now_ns.saturating_sub(REMOVED_KEPT_NS);
            self.removed
                .retain(|_, &mut (_, (_, when))| when >= oldest_kept);
            self.prune_at = 2 * self.removed.len();
        }
        cut_span(&mut self.removed, start, end);
        self.removed.insert(start, (end, (creator, self.now_ns)));
    }
}

fn page_round(length: u64) -> u64 {
    length.saturating_add(PAGE - 1) & !(PAGE - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap(ranges: &mut CreatedRanges, time_ns: u64, start: u64, length: u64, stack: StackId) {
        let args = [0, length, 3, 0x02, 3, 0];
        ranges.apply(time_ns, MapCall::Mmap, &args, start as i64, stack);
    }

    fn munmap(ranges: &mut CreatedRanges, time_ns: u64, start: u64, length: u64) {
        let args = [start, length, 0, 0, 0, 0];
        ranges.apply(time_ns, MapCall::Munmap, &args, 0, 0);
    }

    fn stack_of(creator: Option<Creator>) -> Option<StackId> {
        creator.map(|creator| creator.stack)
    }

    /// The stack that made snapshot mapping [start, end) read from `read_from_ns`.
    fn in_snapshot(
        ranges: &CreatedRanges,
        start: u64,
        end: u64,
        read_from_ns: u64,
    ) -> Option<StackId> {
        stack_of(ranges.creator_in_snapshot(start, end, read_from_ns))
    }

    #[test]
    fn an_unmapped_range_keeps_its_creator_for_snapshots_read_since() {
        let mut ranges = CreatedRanges::default();
        mmap(&mut ranges, 10, 0x10000, 0x3000, 1);
        mmap(&mut ranges, 20, 0x20000, 0x1000, 2);
        munmap(&mut ranges, 30, 0x11000, 0x1000);
        // The middle page is gone now; a read begun before 30 may still have seen it.
        assert_eq!(stack_of(ranges.creator(0x11000)), None);
        assert_eq!(stack_of(ranges.creator(0x12000)), Some(1));
        assert_eq!(in_snapshot(&ranges, 0x11800, 0x11900, 25), Some(1));
        assert_eq!(in_snapshot(&ranges, 0x11800, 0x11900, 30), Some(1));
        assert_eq!(in_snapshot(&ranges, 0x11800, 0x11900, 31), None);
        // What is mapped now wins over what was unmapped there.
        mmap(&mut ranges, 40, 0x11000, 0x1000, 3);
        assert_eq!(in_snapshot(&ranges, 0x11000, 0x12000, 0), Some(3));
        munmap(&mut ranges, 50, 0x10000, 0x20000);
        assert_eq!(in_snapshot(&ranges, 0x10000, 0x11000, 45), Some(1));
        assert_eq!(in_snapshot(&ranges, 0x11000, 0x12000, 45), Some(3));
        assert_eq!(in_snapshot(&ranges, 0x20000, 0x21000, 45), Some(2));
        assert_eq!(in_snapshot(&ranges, 0x30000, 0x31000, 0), None);
        // A mapping reaching past what was unmapped was made by a call not recorded.
        assert_eq!(in_snapshot(&ranges, 0x20000, 0x22000, 45), None);
        // A fork child's address space never held what its parent unmapped.
        let child = ranges.inherited(7);
        assert_eq!(in_snapshot(&child, 0x10000, 0x11000, 0), None);
    }

    #[test]
    fn unmapped_ranges_are_forgotten_once_many_and_old() {
        let mut ranges = CreatedRanges::default();
        for index in 0..REMOVED_PRUNED_AT as u64 {
            let start = 0x100000 + index * 0x2000;
            mmap(&mut ranges, index, start, 0x1000, 1);
            munmap(&mut ranges, index, start, 0x1000);
        }
        assert_eq!(ranges.removed.len(), REMOVED_PRUNED_AT);
        let late = REMOVED_KEPT_NS + 10;
        mmap(&mut ranges, late, 0x10, 0x1000, 2);
        munmap(&mut ranges, late, 0x10, 0x1000);
        // The 10 removed before `late - REMOVED_KEPT_NS` are gone, the rest and the new one
        // stay; the next prune waits until twice as many as were kept.
        assert_eq!(ranges.removed.len(), REMOVED_PRUNED_AT - 10 + 1);
        assert_eq!(ranges.prune_at, 2 * (REMOVED_PRUNED_AT - 10));
    }
}
