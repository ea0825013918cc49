//! The address ranges a process's recorded calls mapped, as its calls are sent: the kernel
//! merges neighbouring anonymous mappings of the same permissions into one, so a mapping of
//! the program laid beside one of its allocator's shows in smaps as a single mapping, which
//! the sampler cuts again where the calls' ranges meet (`sampler::split`).

use std::collections::BTreeMap;

use crate::trace::format::MapCall;

const PAGE: u64 = 4096;

/// Non-overlapping ranges by start address: their ends.
#[derive(Debug, Default, Clone)]
pub struct MadeRanges {
    ranges: BTreeMap<u64, (u64, ())>,
}

impl MadeRanges {
    /// Applies one recorded mapping call that returned `result`; failed calls, brk and
    /// shmat/shmdt (a segment is a mapping of its own) change nothing.
    pub fn call(&mut self, call: MapCall, args: &[u64; 6], result: i64) {
        if (-4095..=-1).contains(&result) {
            return;
        }
        let address = result as u64;
        match call {
            MapCall::Mmap => self.insert(address, args[1]),
            MapCall::Mremap => {
                cut_span(&mut self.ranges, args[0], page_end(args[0], args[1]));
                self.insert(address, args[2]);
            }
            MapCall::Munmap => {
                cut_span(&mut self.ranges, args[0], page_end(args[0], args[1]));
            }
            MapCall::Shmat | MapCall::Shmdt | MapCall::Brk => {}
        }
    }

    fn insert(&mut self, start: u64, length: u64) {
        let end = page_end(start, length);
        if end > start {
            cut_span(&mut self.ranges, start, end);
            self.ranges.insert(start, (end, ()));
        }
    }

    /// The ranges that overlap [start, end), cut to it, in address order.
    pub fn inside(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if end <= start {
            return Vec::new();
        }
        // The range holding `start` may begin before it.
        let before = self.ranges.range(..=start).next_back();
        let after = self.ranges.range(start.saturating_add(1)..end);
        before
            .into_iter()
            .chain(after)
            .filter(|(_, &(range_end, _))| range_end > start)
            .map(|(&range_start, &(range_end, _))| (range_start.max(start), range_end.min(end)))
            .collect()
    }
}

fn page_end(start: u64, length: u64) -> u64 {
    start.saturating_add(length.saturating_add(PAGE - 1) & !(PAGE - 1))
}

/// Removes [start, end) from `ranges` (by start: end first in each value), cutting ranges
/// that straddle either end; returns the pieces removed, as (start, end, the rest).
pub fn cut_span<T: Copy>(
    ranges: &mut BTreeMap<u64, (u64, T)>,
    start: u64,
    end: u64,
) -> Vec<(u64, u64, T)> {
    let mut removed = Vec::new();
    if end <= start {
        return removed;
    }
    let overlapping: Vec<(u64, u64, T)> = ranges
        .range(..end)
        .rev()
        .take_while(|(_, &(range_end, _))| range_end > start)
        .map(|(&range_start, &(range_end, rest))| (range_start, range_end, rest))
        .collect();
    for (range_start, range_end, rest) in overlapping {
        ranges.remove(&range_start);
        if range_start < start {
            ranges.insert(range_start, (start, rest));
        }
        if range_end > end {
            ranges.insert(end, (range_end, rest));
        }
        removed.push((range_start.max(start), range_end.min(end), rest));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap(ranges: &mut MadeRanges, start: u64, length: u64) {
        ranges.call(
            MapCall::Mmap,
            &[0, length, 3, 0x22, u64::MAX, 0],
            start as i64,
        );
    }

    #[test]
    fn the_ranges_inside_a_mapping_are_cut_to_it() {
        let mut ranges = MadeRanges::default();
        mmap(&mut ranges, 0x10000, 0x3000);
        mmap(&mut ranges, 0x13000, 0x2001);
        mmap(&mut ranges, 0x20000, 0x1000);
        // The second's length rounds up to 0x3000: it ends at 0x16000.
        let both = vec![(0x10000, 0x13000), (0x13000, 0x16000)];
        assert_eq!(ranges.inside(0xf000, 0x17000), both);
        assert_eq!(
            ranges.inside(0x11000, 0x14000),
            vec![(0x11000, 0x13000), (0x13000, 0x14000)]
        );
        assert_eq!(ranges.inside(0x16000, 0x20000), vec![]);
        // A failed call changes nothing; a munmap of the middle of the first cuts it.
        ranges.call(MapCall::Mmap, &[0, 0x1000, 3, 0x22, 0, 0], -12);
        ranges.call(MapCall::Munmap, &[0x11000, 0x1000, 0, 0, 0, 0], 0);
        assert_eq!(
            ranges.inside(0x10000, 0x13000),
            vec![(0x10000, 0x11000), (0x12000, 0x13000)]
        );
        // Moved: gone from its old place, whole at its new one.
        ranges.call(
            MapCall::Mremap,
            &[0x13000, 0x3000, 0x4000, 1, 0, 0],
            0x30000,
        );
        assert_eq!(ranges.inside(0x12000, 0x17000), vec![(0x12000, 0x13000)]);
        assert_eq!(ranges.inside(0x2f000, 0x35000), vec![(0x30000, 0x34000)]);
    }
}
