//! The address ranges an image's recorded mapping calls created, so that a mapping of a later
//! smaps snapshot can be traced to the call (and stack) that made it.

use std::collections::BTreeMap;

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

/// Non-overlapping ranges by start address: (end, creator).
#[derive(Debug, Default, Clone)]
pub(super) struct CreatedRanges {
    ranges: BTreeMap<u64, (u64, Creator)>,
}

impl CreatedRanges {
    /// Applies one recorded mapping call; failed calls and brk change nothing.
    pub fn apply(&mut self, call: MapCall, args: &[u64; 6], result: i64, stack: StackId) {
        if (-4095..=-1).contains(&result) {
            return;
        }
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
                if self.ranges.get(&args[0]).is_some_and(|(_, c)| c.shared) {
                    self.ranges.remove(&args[0]);
                }
            }
            MapCall::Brk => {}
        }
    }

    /// The ranges as a fork child of image `parent` inherits them: its own calls made none.
    pub fn inherited(&self, parent: usize) -> CreatedRanges {
        let mut ranges = self.clone();
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

    /// A new mapping replaces whatever overlapped it (MAP_FIXED).
    fn insert(&mut self, start: u64, length: u64, creator: Creator) {
        let end = start.saturating_add(page_round(length));
        if end <= start {
            return;
        }
        self.remove_span(start, end);
        self.ranges.insert(start, (end, creator));
    }

    fn remove(&mut self, start: u64, length: u64) {
        self.remove_span(start, start.saturating_add(page_round(length)));
    }

    /// Removes [start, end), cutting ranges that straddle either end.
    fn remove_span(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let overlapping: Vec<(u64, u64, Creator)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(range_end, _))| range_end > start)
            .map(|(&range_start, &(range_end, creator))| (range_start, range_end, creator))
            .collect();
        for (range_start, range_end, creator) in overlapping {
            self.ranges.remove(&range_start);
            if range_start < start {
                self.ranges.insert(range_start, (start, creator));
            }
            if range_end > end {
                self.ranges.insert(end, (range_end, creator));
            }
        }
    }
}

fn page_round(length: u64) -> u64 {
    length.saturating_add(PAGE - 1) & !(PAGE - 1)
}
