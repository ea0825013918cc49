//! The allocations a thread made most recently and has not freed yet: a free usually
//! releases one of them, and its rank in this short list takes fewer bits than its address.

/// Allocations remembered per thread; a free of an older one is stored by address.
pub const RECENT_ALLOCATIONS: usize = 32;

/// Most recent last; a bounded list, so the oldest falls out when a new one comes.
#[derive(Default, Clone, Copy)]
pub struct RecentAllocations {
    addresses: [u64; RECENT_ALLOCATIONS],
    length: usize,
}

impl RecentAllocations {
    pub fn push(&mut self, address: u64) {
        if self.length == RECENT_ALLOCATIONS {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_count_from_the_most_recent_and_taking_forgets() {
        let mut recent = RecentAllocations::default();
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
        let mut recent = RecentAllocations::default();
        for address in 1..=RECENT_ALLOCATIONS as u64 + 1 {
            recent.push(address);
        }
        assert_eq!(recent.take_address(1), None);
        assert_eq!(recent.take_address(2), Some(RECENT_ALLOCATIONS - 1));
        assert_eq!(recent.take_rank(RECENT_ALLOCATIONS - 2), Some(3));
    }
}
