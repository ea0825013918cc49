//! What a thread allocated and freed recently, to store addresses as short ranks: a free
//! usually releases one of the thread's latest allocations, and an allocation usually reuses
//! a block of the same rounded size that the thread freed lately (allocators keep such blocks
//! in per-thread last-in first-out caches).

use crate::events::heap::IntegerMap;

/// Allocations remembered per thread in version 3, and freed blocks per thread and size; a
/// free of an older one is stored by address.
pub const RECENT_ALLOCATIONS: usize = 32;
/// Allocations remembered per thread from version 4: a compiler frees a third of its blocks
/// more than 32 allocations later, many of them within 128.
pub const RECENT_ALLOCATIONS_V4: usize = 128;

/// Most recent last; a bounded list, so the oldest falls out when a new one comes.
#[derive(Clone, Copy)]
pub struct RecentAllocations<const N: usize = RECENT_ALLOCATIONS> {
    addresses: [u64; N],
    length: usize,
}

impl<const N: usize> Default for RecentAllocations<N> {
    fn default() -> Self {
        RecentAllocations {
            addresses: [0; N],
            length: 0,
        }
    }
}

impl<const N: usize> RecentAllocations<N> {
    pub fn push(&mut self, address: u64) {
        self.push_within(address, N);
    }

    /// Pushes, keeping at most `limit` (at most N) allocations.
    pub fn push_within(&mut self, address: u64, limit: usize) {
        if self.length >= limit.min(N) {
            self.addresses.copy_within(1.., 0);
            self.length -= 1;
        }
        self.addresses[self.length] = address;
        self.length += 1;
    }

    /// Finds and forgets `address`: its rank, 0 for the most recent.
    pub fn take_address(&mut self, address: u64) -> Option<usize> {
        let index = self.addresses[..self.length]
            .iter()
            .rposition(|&candidate| candidate == address)?;
        self.remove(index);
        Some(self.length - index)
    }

    /// Finds and forgets the allocation of `rank` (0 for the most recent), if there is one.
    pub fn take_rank(&mut self, rank: usize) -> Option<u64> {
        let index = self.length.checked_sub(rank + 1)?;
        let address = self.addresses[index];
        self.remove(index);
        Some(address)
    }

    fn remove(&mut self, index: usize) {
        self.addresses.copy_within(index + 1..self.length, index);
        self.length -= 1;
    }
}

/// Live blocks of a block's allocations whose sizes are remembered, so their frees can be
/// filed by size (a bound on what a damaged or hostile block makes the reader keep).
const MAX_SIZED_BLOCKS: usize = 65536;

/// The blocks each thread freed lately, by rounded size.
#[derive(Default)]
pub struct ReusedBlocks {
    sizes: IntegerMap<u64, u64>,
    freed: IntegerMap<((u32, u32), u64), RecentAllocations>,
}

/// The size glibc's malloc rounds a request to (16-byte chunks with an 8-byte header, 32 at
/// least): blocks of one such size replace each other. Another allocator only changes how
/// often the guess holds.
pub(super) fn rounded_size(size: u64) -> u64 {
    (size.saturating_add(8 + 15) & !15).max(32)
}

impl ReusedBlocks {
    pub fn allocated(&mut self, address: u64, size: u64) {
        if self.sizes.len() < MAX_SIZED_BLOCKS || self.sizes.contains_key(&address) {
            self.sizes.insert(address, size);
        }
    }

    pub fn freed(&mut self, thread: (u32, u32), address: u64) {
        if let Some(size) = self.sizes.remove(&address) {
            let key = (thread, rounded_size(size));
            self.freed.entry(key).or_default().push(address);
        }
    }

    /// The rank of `address` among the blocks of its rounded size the thread freed lately.
    pub fn take_address(&mut self, thread: (u32, u32), size: u64, address: u64) -> Option<usize> {
        let list = self.freed.get_mut(&(thread, rounded_size(size)))?;
        list.take_address(address)
    }

    pub fn take_rank(&mut self, thread: (u32, u32), size: u64, rank: usize) -> Option<u64> {
        let list = self.freed.get_mut(&(thread, rounded_size(size)))?;
        list.take_rank(rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_count_from_the_most_recent_and_taking_forgets() {
        let mut recent = RecentAllocations::<RECENT_ALLOCATIONS>::default();
        for address in [10, 20, 30, 40] {
            recent.push(address);
        }
        assert_eq!(recent.take_address(40), Some(0));
        assert_eq!(recent.take_address(20), Some(1));
        assert_eq!(recent.take_address(20), None);
        assert_eq!(recent.take_rank(1), Some(10));
        assert_eq!(recent.take_rank(1), None);
        assert_eq!(recent.take_rank(0), Some(30));
        assert_eq!(recent.take_rank(0), None);
    }

    #[test]
    fn the_oldest_falls_out_when_the_list_is_full() {
        let mut recent = RecentAllocations::<RECENT_ALLOCATIONS>::default();
        for address in 1..=RECENT_ALLOCATIONS as u64 + 1 {
            recent.push(address);
        }
        assert_eq!(recent.take_address(1), None);
        assert_eq!(recent.take_address(2), Some(RECENT_ALLOCATIONS - 1));
        assert_eq!(recent.take_rank(RECENT_ALLOCATIONS - 2), Some(3));
    }

    #[test]
    fn a_limit_below_the_capacity_keeps_as_many_as_version_3() {
        let mut recent = RecentAllocations::<RECENT_ALLOCATIONS_V4>::default();
        for address in 1..=RECENT_ALLOCATIONS as u64 + 1 {
            recent.push_within(address, RECENT_ALLOCATIONS);
        }
        assert_eq!(recent.take_address(1), None);
        assert_eq!(recent.take_address(2), Some(RECENT_ALLOCATIONS - 1));
        for address in 100..100 + RECENT_ALLOCATIONS_V4 as u64 {
            recent.push(address);
        }
        assert_eq!(recent.take_address(100), Some(RECENT_ALLOCATIONS_V4 - 1));
        assert_eq!(recent.take_address(3), None, "fell out");
    }

    #[test]
    fn a_freed_block_is_found_by_its_rounded_size_and_thread() {
        let mut reused = ReusedBlocks::default();
        let thread = (1, 1);
        reused.allocated(0x100, 24);
        reused.allocated(0x200, 20);
        reused.allocated(0x300, 40);
        reused.freed(thread, 0x100);
        reused.freed(thread, 0x200);
        reused.freed(thread, 0x300);
        reused.freed(thread, 0x999);
        // 20 and 24 bytes both take 32-byte chunks; 40 bytes a 48-byte one.
        assert_eq!(reused.take_address((1, 2), 17, 0x100), None);
        assert_eq!(reused.take_address(thread, 17, 0x100), Some(1));
        assert_eq!(reused.take_rank(thread, 0, 0), Some(0x200));
        assert_eq!(reused.take_rank(thread, 0, 0), None);
        assert_eq!(reused.take_address(thread, 40, 0x300), Some(0));
        assert_eq!(reused.take_address(thread, 40, 0x999), None);
    }
}
