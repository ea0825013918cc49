//! Counting a range's pages in /proc/PID/pagemap: 8 bytes a page, with flags an unprivileged
//! reader sees (the frame numbers are hidden without CAP_SYS_ADMIN, the flags are not). It
//! walks only the page tables of the range asked for, which is what makes it cheap next to
//! smaps, which walks them all.

use std::fs::File;
use std::os::unix::fs::FileExt;

pub const PAGE: u64 = 4096;
/// Pages read at once: 64 KiB of entries.
const BATCH: usize = 8192;

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
/// A page of a file or of shared anonymous memory (not private anonymous).
const FILE_OR_SHARED: u64 = 1 << 61;
/// Mapped by this process only (Linux 4.2 and later).
const EXCLUSIVE: u64 = 1 << 56;

/// Pages of a range, by what pagemap says of each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCounts {
    /// In RAM.
    pub present: u64,
    /// Of those, mapped by this process alone.
    pub exclusive: u64,
    /// Of those, private anonymous (not a file's page, not shared anonymous memory).
    pub anonymous: u64,
    /// Of those, mapped by this process alone. A private anonymous page that is not is the
    /// kernel's zero page (read, never written: smaps counts it nowhere) or a page shared
    /// with a fork parent or child until either writes it; pagemap does not tell which
    /// without the privilege to see frame numbers.
    pub anonymous_exclusive: u64,
    /// Swapped out.
    pub swapped: u64,
}

impl PageCounts {
    fn add(&mut self, entry: u64) {
        if entry & PRESENT != 0 {
            self.present += 1;
            let exclusive = entry & EXCLUSIVE != 0;
            let anonymous = entry & FILE_OR_SHARED == 0;
            self.exclusive += u64::from(exclusive);
            self.anonymous += u64::from(anonymous);
            self.anonymous_exclusive += u64::from(anonymous && exclusive);
        } else if entry & SWAPPED != 0 {
            self.swapped += 1;
        }
    }
}

/// Counts the pages of `[start, end)` (page-aligned) in `pagemap`, the process's open
/// /proc/PID/pagemap; `buffer` is reused between calls.
pub fn count_pages(
    pagemap: &File,
    start: u64,
    end: u64,
    buffer: &mut Vec<u8>,
) -> std::io::Result<PageCounts> {
    let mut counts = PageCounts::default();
    let mut page = start / PAGE;
    let last = end.div_ceil(PAGE);
    while page < last {
        let pages = (last - page).min(BATCH as u64) as usize;
        buffer.resize(pages * 8, 0);
        pagemap.read_exact_at(buffer, page * 8)?;
        for entry in buffer.chunks_exact(8) {
            counts.add(u64::from_le_bytes(entry.try_into().expect("8 bytes")));
        }
        page += pages as u64;
    }
    Ok(counts)
}

/// Counts the pages of each of `ranges` (page-aligned, sorted, not overlapping); a range
/// that cannot be read counts nothing. Ranges near one another are read together, so that
/// thousands of one-page mappings take a few reads, not one each.
pub fn count_ranges(
    pagemap: &File,
    ranges: &[(u64, u64)],
    buffer: &mut Vec<u8>,
) -> Vec<PageCounts> {
    let mut counts = vec![PageCounts::default(); ranges.len()];
    let mut first = 0;
    while first < ranges.len() {
        let span_start = ranges[first].0 / PAGE;
        // The ranges that end within a batch of pages from the first one's start.
        let mut last = first;
        while last + 1 < ranges.len()
            && ranges[last + 1].1.div_ceil(PAGE) - span_start <= BATCH as u64
        {
            last += 1;
        }
        let span_end = ranges[last].1.div_ceil(PAGE);
        if last == first && span_end - span_start > BATCH as u64 {
            counts[first] =
                count_pages(pagemap, ranges[first].0, ranges[first].1, buffer).unwrap_or_default();
        } else {
            buffer.resize((span_end - span_start) as usize * 8, 0);
            if pagemap.read_exact_at(buffer, span_start * 8).is_ok() {
                for (index, &(start, end)) in ranges.iter().enumerate().take(last + 1).skip(first) {
                    let from = (start / PAGE - span_start) as usize * 8;
                    let to = (end.div_ceil(PAGE) - span_start) as usize * 8;
                    for entry in buffer[from..to].chunks_exact(8) {
                        counts[index].add(u64::from_le_bytes(entry.try_into().expect("8 bytes")));
                    }
                }
            } else {
                // Beyond the address space (the process is going): read each alone.
                for index in first..=last {
                    let (start, end) = ranges[index];
                    counts[index] = count_pages(pagemap, start, end, buffer).unwrap_or_default();
                }
            }
        }
        first = last + 1;
    }
    counts
}

/// A private anonymous mapping for tests, unmapped when dropped.
#[cfg(test)]
pub struct TestMapping {
    pub start: u64,
    pub pages: u64,
}

#[cfg(test)]
impl TestMapping {
    pub fn new(pages: u64, protection: i32) -> TestMapping {
        // SAFETY: a fresh private anonymous mapping, unmapped on drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                (pages * PAGE) as usize,
                protection,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        TestMapping {
            start: map as u64,
            pages,
        }
    }

    pub fn page(&self, index: u64) -> u64 {
        assert!(index <= self.pages);
        self.start + index * PAGE
    }

    pub fn write(&self, index: u64) {
        // SAFETY: a page of the mapping, which is writable.
        unsafe { std::ptr::write_volatile(self.page(index) as *mut u8, 1) };
    }

    pub fn read(&self, index: u64) {
        // SAFETY: a page of the mapping, which is readable.
        _ = unsafe { std::ptr::read_volatile(self.page(index) as *const u8) };
    }
}

#[cfg(test)]
impl Drop for TestMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe {
            libc::munmap(
                self.start as *mut libc::c_void,
                (self.pages * PAGE) as usize,
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ_WRITE: i32 = libc::PROT_READ | libc::PROT_WRITE;

    fn counts_of(mapping: &TestMapping) -> PageCounts {
        let pagemap = File::open("/proc/self/pagemap").expect("pagemap");
        let end = mapping.page(mapping.pages);
        count_pages(&pagemap, mapping.start, end, &mut Vec::new()).expect("readable")
    }

    #[test]
    fn written_pages_of_a_private_mapping_are_present_exclusive_and_anonymous() {
        // Every third page of 40: 14 pages.
        let mapping = TestMapping::new(40, READ_WRITE);
        (0..40).step_by(3).for_each(|index| mapping.write(index));
        let expected = PageCounts {
            present: 14,
            exclusive: 14,
            anonymous: 14,
            anonymous_exclusive: 14,
            swapped: 0,
        };
        assert_eq!(counts_of(&mapping), expected);
    }

    #[test]
    fn pages_only_read_are_present_but_not_exclusive() {
        // Pages 0 to 4 read (the zero page), 5 and 6 written.
        let mapping = TestMapping::new(10, READ_WRITE);
        (0..5).for_each(|index| mapping.read(index));
        (5..7).for_each(|index| mapping.write(index));
        let counts = counts_of(&mapping);
        assert_eq!((counts.present, counts.anonymous), (7, 7));
        assert_eq!((counts.exclusive, counts.anonymous_exclusive), (2, 2));
    }

    #[test]
    fn a_range_longer_than_a_batch_is_read_whole() {
        let mapping = TestMapping::new(BATCH as u64 + 10, READ_WRITE);
        [0, BATCH as u64, BATCH as u64 + 9]
            .into_iter()
            .for_each(|index| mapping.write(index));
        assert_eq!(counts_of(&mapping).present, 3);
    }

    #[test]
    fn ranges_are_counted_apart_whether_read_together_or_alone() {
        let pages = 3 * BATCH as u64;
        let mapping = TestMapping::new(pages, READ_WRITE);
        // Pages 0, 1, 5 and 6, and every page of a range longer than a batch.
        let long = (10, 10 + BATCH as u64 + 5);
        for index in [0, 1, 5, 6].into_iter().chain(long.0..long.1) {
            mapping.write(index);
        }
        let page = |index| mapping.page(index);
        let ranges = [
            (page(0), page(2)),
            (page(2), page(5)),
            (page(5), page(7)),
            (page(long.0), page(long.1)),
            (page(pages - 1), page(pages)),
        ];
        let pagemap = File::open("/proc/self/pagemap").expect("pagemap");
        let counts = count_ranges(&pagemap, &ranges, &mut Vec::new());
        let present: Vec<u64> = counts.iter().map(|counts| counts.present).collect();
        assert_eq!(present, [2, 0, 2, BATCH as u64 + 5, 0]);
    }

    #[test]
    fn each_flag_is_counted_where_it_belongs() {
        let mut counts = PageCounts::default();
        for entry in [PRESENT | EXCLUSIVE, PRESENT | FILE_OR_SHARED, SWAPPED, 0] {
            counts.add(entry);
        }
        let expected = PageCounts {
            present: 2,
            exclusive: 1,
            anonymous: 1,
            anonymous_exclusive: 1,
            swapped: 1,
        };
        assert_eq!(counts, expected);
    }
}
