//! The numbers kept per stack and per call site, and how two stacks' numbers add up.

/// What the allocations of one call site (or one raw stack) did over a process image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SiteMetrics {
    /// Blocks created (a realloc's new block included).
    pub allocations: u64,
    pub bytes_allocated: u64,
    /// Smallest and largest request; 0 without allocations.
    pub min_size: u64,
    pub max_size: u64,
    /// Blocks released by a recorded free or realloc (their lifetime is known).
    pub freed_blocks: u64,
    /// Sum, smallest and largest lifetime of those blocks (release time minus creation time).
    pub total_lifetime_ns: u64,
    pub min_lifetime_ns: u64,
    pub max_lifetime_ns: u64,
    /// Bytes and blocks live at the image's peak (its first moment).
    pub peak_bytes: u64,
    pub peak_blocks: u64,
    /// Highest sum of this site's own live bytes.
    pub local_peak_bytes: u64,
    /// Blocks freed with no other allocation or free in between (heaptrack's rule).
    pub temporary_allocations: u64,
    pub temporary_bytes: u64,
    /// Still live when the image ended.
    pub leaked_bytes: u64,
    pub leaked_blocks: u64,
}

impl SiteMetrics {
    /// A block of `size` bytes was created.
    pub(super) fn allocated(&mut self, size: u64) {
        self.min_size = if self.allocations == 0 {
            size
        } else {
            self.min_size.min(size)
        };
        self.max_size = self.max_size.max(size);
        self.allocations += 1;
        self.bytes_allocated += size;
    }

    /// A block of `size` bytes created `lifetime_ns` earlier was released.
    pub(super) fn freed(&mut self, size: u64, lifetime_ns: u64, temporary: bool) {
        self.min_lifetime_ns = if self.freed_blocks == 0 {
            lifetime_ns
        } else {
            self.min_lifetime_ns.min(lifetime_ns)
        };
        self.max_lifetime_ns = self.max_lifetime_ns.max(lifetime_ns);
        self.freed_blocks += 1;
        self.total_lifetime_ns = self.total_lifetime_ns.saturating_add(lifetime_ns);
        if temporary {
            self.temporary_allocations += 1;
            self.temporary_bytes += size;
        }
    }

    /// Adds another stack's numbers. The local peak is left alone: the sum of two stacks'
    /// peaks is not the peak of their sum (see `local_peak`).
    pub(super) fn add(&mut self, other: &SiteMetrics) {
        if other.allocations > 0 {
            self.min_size = if self.allocations == 0 {
                other.min_size
            } else {
                self.min_size.min(other.min_size)
            };
        }
        if other.freed_blocks > 0 {
            self.min_lifetime_ns = if self.freed_blocks == 0 {
                other.min_lifetime_ns
            } else {
                self.min_lifetime_ns.min(other.min_lifetime_ns)
            };
        }
        self.allocations += other.allocations;
        self.bytes_allocated += other.bytes_allocated;
        self.max_size = self.max_size.max(other.max_size);
        self.freed_blocks += other.freed_blocks;
        self.total_lifetime_ns = self
            .total_lifetime_ns
            .saturating_add(other.total_lifetime_ns);
        self.max_lifetime_ns = self.max_lifetime_ns.max(other.max_lifetime_ns);
        self.peak_bytes += other.peak_bytes;
        self.peak_blocks += other.peak_blocks;
        self.temporary_allocations += other.temporary_allocations;
        self.temporary_bytes += other.temporary_bytes;
        self.leaked_bytes += other.leaked_bytes;
        self.leaked_blocks += other.leaked_blocks;
    }

    /// Bytes allocated per allocation, rounded down; 0 without allocations.
    pub fn average_size(&self) -> u64 {
        self.bytes_allocated
            .checked_div(self.allocations)
            .unwrap_or(0)
    }

    /// Smallest, average (rounded down) and largest lifetime of the freed blocks; None when
    /// no block of the site was freed.
    pub fn lifetimes_ns(&self) -> Option<(u64, u64, u64)> {
        let average = self.total_lifetime_ns.checked_div(self.freed_blocks)?;
        Some((self.min_lifetime_ns, average, self.max_lifetime_ns))
    }

    /// Bytes allocated over the local peak (MALT's recycling ratio: how many times the
    /// site's peak memory was allocated over again); None when the local peak is 0.
    pub fn recycling_ratio(&self) -> Option<f64> {
        (self.local_peak_bytes > 0)
            .then(|| self.bytes_allocated as f64 / self.local_peak_bytes as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_keeps_minima_of_the_stacks_that_have_them() {
        let mut site = SiteMetrics::default();
        site.allocated(40);
        site.freed(40, 900, false);
        let mut other = SiteMetrics::default();
        other.allocated(10);
        other.allocated(70);
        other.freed(10, 300, true);
        let unfreed = {
            let mut metrics = SiteMetrics::default();
            metrics.allocated(50);
            metrics
        };
        site.add(&other);
        site.add(&unfreed);
        site.add(&SiteMetrics::default());
        assert_eq!((site.allocations, site.bytes_allocated), (4, 170));
        assert_eq!(
            (site.min_size, site.average_size(), site.max_size),
            (10, 42, 70)
        );
        assert_eq!(site.freed_blocks, 2);
        assert_eq!(site.lifetimes_ns(), Some((300, 600, 900)));
        assert_eq!((site.temporary_allocations, site.temporary_bytes), (1, 10));
        assert_eq!(site.recycling_ratio(), None, "no local peak yet");
        site.local_peak_bytes = 100;
        assert_eq!(site.recycling_ratio(), Some(1.7));
        assert_eq!(SiteMetrics::default().lifetimes_ns(), None);
    }
}
