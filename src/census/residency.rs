//! Which pages of a heap are resident, from /proc/PID/pagemap (bit 63 of each page's entry:
//! present in RAM), so that the census can say how much of the arenas' RSS each kind of
//! chunk holds.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::layout::PAGE;

#[derive(Clone)]
pub struct Pages {
    start: u64,
    present: Vec<bool>,
}

impl Pages {
    /// The pages of `[start, end)` (page-aligned outward); None when pagemap is unreadable.
    pub fn read(pid: i32, start: u64, end: u64) -> Option<Pages> {
        let start = start / PAGE * PAGE;
        let count = end.div_ceil(PAGE) - start / PAGE;
        let file = File::open(format!("/proc/{pid}/pagemap")).ok()?;
        let mut bytes = vec![0u8; count as usize * 8];
        file.read_exact_at(&mut bytes, start / PAGE * 8).ok()?;
        let present = bytes
            .chunks_exact(8)
            .map(|entry| u64::from_le_bytes(entry.try_into().expect("8")) >> 63 == 1)
            .collect();
        Some(Pages { start, present })
    }

    /// Resident bytes of `[start, end)`.
    pub fn resident(&self, start: u64, end: u64) -> u64 {
        let mut total = 0;
        let mut address = start;
        while address < end {
            let page_end = (address / PAGE + 1) * PAGE;
            let stop = page_end.min(end);
            if self.is_present(address) {
                total += stop - address;
            }
            address = stop;
        }
        total
    }

    /// Resident bytes of the whole pages inside `[start, end)`.
    pub fn whole_pages(&self, start: u64, end: u64) -> u64 {
        let first = start.div_ceil(PAGE) * PAGE;
        let last = end / PAGE * PAGE;
        if first >= last {
            return 0;
        }
        self.resident(first, last)
    }

    /// From `address` to the end of its run of resident pages, at most `limit` bytes; 0 when
    /// its page is not resident.
    pub fn resident_run(&self, address: u64, limit: u64) -> u64 {
        let mut end = address;
        while end < address + limit && self.is_present(end) {
            end = (end / PAGE + 1) * PAGE;
        }
        end.min(address + limit) - address
    }

    pub fn is_present(&self, address: u64) -> bool {
        let index = (address.saturating_sub(self.start) / PAGE) as usize;
        address >= self.start && self.present.get(index).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_and_whole_pages_count_only_where_present() {
        let pages = Pages {
            start: 0x1000,
            present: vec![true, false, true],
        };
        assert_eq!(pages.resident(0x1800, 0x3800), 0x800 + 0x800);
        assert_eq!(pages.whole_pages(0x1800, 0x4000), 0x1000);
        assert_eq!(pages.whole_pages(0x1800, 0x1900), 0);
    }
}
