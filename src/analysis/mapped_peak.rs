//! The peak of an image's anonymous mapped memory (mmap'd with MAP_ANONYMOUS, resized by
//! mremap, cut by munmap: the memory of GC heaps, interpreter arenas, large arrays) and the
//! bytes each mapping stack held at it, for the HTML report's "mapped" flame graph. File
//! mappings (the program's libraries) are left out: they are files, not memory the program
//! asked for. Lengths are rounded to pages, as the kernel maps them.

use std::collections::{BTreeMap, HashMap};

use crate::trace::format::MapCall;
use crate::trace::stacks::StackId;

const PAGE: u64 = 4096;
const MAP_ANONYMOUS: u64 = 0x20;

/// The live anonymous ranges of one image and their highest total so far.
#[derive(Debug, Default)]
pub(super) struct MappedPeak {
    /// By start address: (end, stack of the call that made it).
    ranges: BTreeMap<u64, (u64, StackId)>,
    by_stack: HashMap<StackId, u64>,
    total: u64,
    peak: u64,
    /// `by_stack` at the peak; None while the current total is the peak and not yet copied
    /// (copied only when the total is about to fall, so a rising run copies once).
    at_peak: Option<HashMap<StackId, u64>>,
}

impl MappedPeak {
    pub fn apply(&mut self, call: MapCall, args: &[u64; 6], result: i64, stack: StackId) {
        if (-4095..=-1).contains(&result) {
            return;
        }
        let address = result as u64;
        match call {
            MapCall::Mmap => {
                // A fixed mapping replaces what it overlaps, anonymous or not.
                self.remove(address, args[1]);
                if args[3] & MAP_ANONYMOUS != 0 {
                    self.insert(address, args[1], stack);
                }
            }
            MapCall::Mremap => {
                let anonymous = self.covers(args[0]);
                self.remove(args[0], args[1]);
                self.remove(address, args[2]);
                if anonymous {
                    self.insert(address, args[2], stack);
                }
            }
            MapCall::Munmap => self.remove(args[0], args[1]),
            MapCall::Brk | MapCall::Shmat | MapCall::Shmdt => {}
        }
    }

    /// The highest total of anonymous mapped bytes, and each stack's bytes at that moment.
    pub fn finish(self) -> (u64, HashMap<StackId, u64>) {
        let at_peak = self.at_peak.unwrap_or(self.by_stack);
        (self.peak, at_peak)
    }

    fn covers(&self, address: u64) -> bool {
        (self.ranges.range(..=address).next_back()).is_some_and(|(_, &(end, _))| address < end)
    }

    fn insert(&mut self, start: u64, length: u64, stack: StackId) {
        let end = start.saturating_add(page_round(length));
        if end <= start {
            return;
        }
        self.ranges.insert(start, (end, stack));
        self.change(stack, (end - start) as i64);
        if self.total > self.peak {
            self.peak = self.total;
            self.at_peak = None;
        }
    }

    /// Removes [start, start + length), cutting ranges that straddle either end.
    fn remove(&mut self, start: u64, length: u64) {
        let end = start.saturating_add(page_round(length));
        let overlapping: Vec<(u64, u64, StackId)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(range_end, _))| range_end > start)
            .map(|(&range_start, &(range_end, stack))| (range_start, range_end, stack))
            .collect();
        if overlapping.is_empty() {
            return;
        }
        if self.at_peak.is_none() && self.total == self.peak {
            self.at_peak = Some(self.by_stack.clone());
        }
        for (range_start, range_end, stack) in overlapping {
            self.ranges.remove(&range_start);
            let kept_start = range_start.max(start);
            let kept_end = range_end.min(end);
            self.change(stack, -((kept_end - kept_start) as i64));
            if range_start < start {
                self.ranges.insert(range_start, (start, stack));
            }
            if range_end > end {
                self.ranges.insert(end, (range_end, stack));
            }
        }
    }

    fn change(&mut self, stack: StackId, bytes: i64) {
        let held = self.by_stack.entry(stack).or_default();
        *held = held.saturating_add_signed(bytes);
        self.total = self.total.saturating_add_signed(bytes);
        if *held == 0 {
            self.by_stack.remove(&stack);
        }
    }
}

fn page_round(length: u64) -> u64 {
    length.saturating_add(PAGE - 1) & !(PAGE - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap(peak: &mut MappedPeak, address: u64, length: u64, flags: u64, stack: StackId) {
        peak.apply(
            MapCall::Mmap,
            &[0, length, 3, flags, 0, 0],
            address as i64,
            stack,
        );
    }

    #[test]
    fn the_peak_keeps_each_stack_s_anonymous_bytes_at_that_moment() {
        let private_anonymous = 0x22;
        let mut peak = MappedPeak::default();
        mmap(&mut peak, 0x10000, 69632, private_anonymous, 1);
        mmap(&mut peak, 0x40000, 8192, 0x02, 2); // a file: not counted
        mmap(&mut peak, 0x80000, 100, private_anonymous, 3); // one page
        peak.apply(MapCall::Munmap, &[0x10000, 4096, 0, 0, 0, 0], 0, 9);
        // 65536 + 4096 left; then stack 3's page grows by mremap to 3 pages elsewhere.
        let mremap = [0x80000, 4096, 12288, 1, 0, 0];
        peak.apply(MapCall::Mremap, &mremap, 0x90000, 4);
        mmap(&mut peak, 0x10000, 4096, private_anonymous, 5); // refills the cut page
        assert_eq!(peak.total, 65536 + 12288 + 4096);
        let failed = [0, 4096, 3, private_anonymous, 0, 0];
        peak.apply(MapCall::Mmap, &failed, -12, 6);
        let (highest, by_stack) = peak.finish();
        assert_eq!(highest, 81920);
        assert_eq!(by_stack, HashMap::from([(1, 65536), (4, 12288), (5, 4096)]));
    }

    #[test]
    fn a_peak_followed_by_a_fall_keeps_the_peak_s_split() {
        let mut peak = MappedPeak::default();
        mmap(&mut peak, 0x10000, 8192, 0x22, 1);
        mmap(&mut peak, 0x20000, 4096, 0x22, 2);
        peak.apply(MapCall::Munmap, &[0x10000, 8192, 0, 0, 0, 0], 0, 9);
        mmap(&mut peak, 0x30000, 4096, 0x22, 3);
        let (highest, by_stack) = peak.finish();
        assert_eq!(highest, 12288);
        assert_eq!(by_stack, HashMap::from([(1, 8192), (2, 4096)]));
    }
}
