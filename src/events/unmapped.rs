//! The address ranges a process unmapped (or mapped over) as its calls are sent, numbered
//! in that order: an estimate does not take a base's residency where a range was unmapped
//! after the base was read, as a new mapping laid over an old one's place looks, in the
//! maps text, like that mapping grown or unchanged.

use crate::trace::format::MapCall;

const PAGE: u64 = 4096;
const MAP_FIXED: u64 = 0x10;
const MREMAP_FIXED: u64 = 2;
/// Entries kept before they are merged: a program that unmaps in a loop (glibc's large
/// blocks) unmaps the same few places over and over.
const MERGE_ABOVE: usize = 4096;

/// One process's ranges, each with its number (the log's count when it came; merged ones
/// keep the highest of theirs, so that a mark sees the whole of a merge it has part of).
#[derive(Debug, Default, Clone)]
pub struct UnmappedLog {
    entries: Vec<(u64, u64, u64)>,
    next: u64,
    /// Numbers below this were forgotten: a mark older than it is not answered.
    forgotten: u64,
    /// Entries past which the next merge comes: twice what the last one left, so that
    /// thousands of ranges apart are not sorted again at every call.
    merge_above: usize,
}

impl UnmappedLog {
    /// The ranges a mapping call that returned `result` (not an error) took away from
    /// where they were: a munmap's, a moved mremap's old one (and its new one when fixed),
    /// an mmap's at a fixed address. shmdt says not how much it detached: left out.
    pub fn call(&mut self, call: MapCall, args: &[u64; 6], result: i64) {
        let result = result as u64;
        let mut add = |start: u64, length: u64| self.add(start, start.saturating_add(length));
        match call {
            MapCall::Munmap => add(args[0], args[1]),
            MapCall::Mmap if args[3] & MAP_FIXED != 0 => add(result, args[1]),
            MapCall::Mremap if result != args[0] => {
                add(args[0], args[1]);
                if args[3] & MREMAP_FIXED != 0 {
                    add(result, args[2]);
                }
            }
            // Shrunk in place: its tail (grown in place, nothing).
            MapCall::Mremap => {
                let kept = page_end(args[2]);
                add(args[0].saturating_add(kept), args[1].saturating_sub(kept));
            }
            _ => {}
        }
    }

    fn add(&mut self, start: u64, end: u64) {
        let end = page_end(end);
        if start >= end {
            return;
        }
        self.entries.push((self.next, start, end));
        self.next += 1;
        if self.entries.len() > self.merge_above.max(MERGE_ABOVE) {
            self.merge();
            self.merge_above = 2 * self.entries.len();
        }
    }

    /// Overlapping and touching ranges become one, numbered as the latest of them.
    fn merge(&mut self) {
        self.entries.sort_unstable_by_key(|&(_, start, _)| start);
        let mut merged: Vec<(u64, u64, u64)> = Vec::with_capacity(self.entries.len());
        for &(number, start, end) in &self.entries {
            match merged.last_mut() {
                Some(last) if start <= last.2 => {
                    last.0 = last.0.max(number);
                    last.2 = last.2.max(end);
                }
                _ => merged.push((number, start, end)),
            }
        }
        self.entries = merged;
    }

    /// What `since` is later asked from: taken before reading the maps a base comes from.
    pub fn mark(&self) -> u64 {
        self.next
    }

    /// The ranges unmapped since `mark` (and perhaps some before, merged with them),
    /// sorted and merged; None when some of them were forgotten.
    pub fn since(&self, mark: u64) -> Option<Vec<(u64, u64)>> {
        if mark < self.forgotten {
            return None;
        }
        let mut ranges: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter(|&&(number, _, _)| number >= mark)
            .map(|&(_, start, end)| (start, end))
            .collect();
        ranges.sort_unstable();
        ranges.dedup_by(|next, last| {
            let touching = next.0 <= last.1;
            if touching {
                last.1 = last.1.max(next.1);
            }
            touching
        });
        Some(ranges)
    }

    /// A base read after `mark` replaced the older ones: what came before it is not asked
    /// for again.
    pub fn forget_before(&mut self, mark: u64) {
        self.entries.retain(|&(number, _, _)| number >= mark);
        self.forgotten = self.forgotten.max(mark);
    }
}

/// `address` rounded up to a page boundary.
fn page_end(address: u64) -> u64 {
    address.saturating_add(PAGE - 1) & !(PAGE - 1)
}

/// Whether `[start, end)` overlaps one of `ranges` (sorted, merged).
pub fn overlaps(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    let after = ranges.partition_point(|&(_, range_end)| range_end <= start);
    ranges
        .get(after)
        .is_some_and(|&(range_start, _)| range_start < end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn args(values: &[u64]) -> [u64; 6] {
        let mut args = [0; 6];
        args[..values.len()].copy_from_slice(values);
        args
    }

    #[test]
    fn unmapping_calls_log_their_ranges_rounded_to_pages() {
        let mut log = UnmappedLog::default();
        let start = log.mark();
        log.call(MapCall::Munmap, &args(&[0x10000, 100]), 0);
        // An mmap where the kernel chose: nothing was there.
        log.call(MapCall::Mmap, &args(&[0, MIB, 3, 0x22]), 0x4000_0000);
        log.call(
            MapCall::Mmap,
            &args(&[0x5000_0000, MIB, 3, 0x32]),
            0x5000_0000,
        );
        // Grown in place: the mapping's shape tells. Shrunk in place: its tail is gone.
        let in_place = 0x6000_0000;
        log.call(
            MapCall::Mremap,
            &args(&[in_place, MIB, 2 * MIB, 1]),
            in_place as i64,
        );
        let shrunk = 0x6800_0000;
        log.call(
            MapCall::Mremap,
            &args(&[shrunk, MIB, 100, 0]),
            shrunk as i64,
        );
        log.call(
            MapCall::Mremap,
            &args(&[0x7000_0000, MIB, 2 * MIB, 1]),
            0x7100_0000,
        );
        let fixed = [0x8000_0000, MIB, 2 * MIB, 3, 0x9000_0000];
        log.call(MapCall::Mremap, &args(&fixed), 0x9000_0000);
        log.call(MapCall::Shmdt, &args(&[0xa000_0000]), 0);
        log.call(MapCall::Brk, &args(&[0xb000_0000]), 0xb000_0000);
        let expected = vec![
            (0x10000, 0x11000),
            (0x5000_0000, 0x5000_0000 + MIB),
            (shrunk + 0x1000, shrunk + MIB),
            (0x7000_0000, 0x7000_0000 + MIB),
            (0x8000_0000, 0x8000_0000 + MIB),
            (0x9000_0000, 0x9000_0000 + 2 * MIB),
        ];
        assert_eq!(log.since(start), Some(expected));
        assert_eq!(log.since(log.mark()), Some(vec![]));
    }

    #[test]
    fn a_mark_sees_only_what_came_after_it_until_it_is_forgotten() {
        let mut log = UnmappedLog::default();
        log.call(MapCall::Munmap, &args(&[0x10000, 0x1000]), 0);
        let mark = log.mark();
        log.call(MapCall::Munmap, &args(&[0x30000, 0x1000]), 0);
        log.call(MapCall::Munmap, &args(&[0x20000, 0x1000]), 0);
        log.call(MapCall::Munmap, &args(&[0x21000, 0x1000]), 0);
        let after = vec![(0x20000, 0x22000), (0x30000, 0x31000)];
        assert_eq!(log.since(mark), Some(after));
        log.forget_before(mark + 1);
        assert_eq!(log.since(mark + 1), Some(vec![(0x20000, 0x22000)]));
        assert_eq!(log.since(mark), None);
    }

    #[test]
    fn many_ranges_merge_and_a_merge_counts_as_its_latest_part() {
        let mut log = UnmappedLog::default();
        // glibc's 32 MiB blocks freed one after the other at two places.
        let (near, far) = (0x7f00_0000_0000, 0x7f00_0000_0000 + 64 * MIB);
        for index in 0..MERGE_ABOVE as u64 {
            let start = if index % 2 == 0 { near } else { far };
            log.call(MapCall::Munmap, &args(&[start, 32 * MIB]), 0);
        }
        let mark = log.mark();
        log.call(MapCall::Munmap, &args(&[near, 32 * MIB]), 0);
        assert_eq!(log.entries.len(), 2);
        assert_eq!(log.since(mark), Some(vec![(near, near + 32 * MIB)]));
        // A mark inside what was merged sees all of it, more than came after it.
        let both = vec![(near, near + 32 * MIB), (far, far + 32 * MIB)];
        assert_eq!(log.since(mark - 1), Some(both));
    }

    #[test]
    fn ranges_apart_merge_again_only_once_they_doubled() {
        let mut log = UnmappedLog::default();
        for index in 0..=MERGE_ABOVE as u64 {
            log.call(MapCall::Munmap, &args(&[index * 2 * PAGE, PAGE]), 0);
        }
        assert_eq!(log.entries.len(), MERGE_ABOVE + 1);
        assert_eq!(log.merge_above, 2 * (MERGE_ABOVE + 1));
        // Between the first two: a merge would make the three one.
        log.call(MapCall::Munmap, &args(&[PAGE, PAGE]), 0);
        assert_eq!(log.entries.len(), MERGE_ABOVE + 2);
        assert_eq!(log.entries.last(), Some(&(log.mark() - 1, PAGE, 2 * PAGE)));
    }

    #[test]
    fn overlaps_finds_a_range_that_touches_any_byte() {
        let ranges = [(0x1000, 0x3000), (0x8000, 0x9000)];
        assert!(overlaps(&ranges, 0x2000, 0x2001));
        assert!(overlaps(&ranges, 0x0, 0x1001));
        assert!(overlaps(&ranges, 0x8fff, 0xa000));
        assert!(!overlaps(&ranges, 0x3000, 0x8000));
        assert!(!overlaps(&ranges, 0x9000, 0xa000));
        assert!(!overlaps(&[], 0, u64::MAX));
    }
}
