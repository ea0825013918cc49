//! The warning for a heap that stays resident after its live blocks are freed: freed blocks
//! interleaved with live ones leave pages the allocator cannot give back.

const MIB: u64 = 1 << 20;

/// Watches the status samples of one image in time order, each with the live requested
/// bytes at its time. Warns when at some sample requested bytes fell a lot (at least 1 MiB
/// and a quarter) from their highest sampled value while RSS fell by less than a quarter of
/// that, and names the deepest such fall.
#[derive(Debug, Default, Clone, Copy)]
pub(in crate::analysis) struct FragmentationWatch {
    /// (requested, rss) at the sample with the highest requested bytes so far.
    high: Option<(u64, u64)>,
    /// The deepest fall that kept RSS: (fall, high requested, requested, rss, time).
    deepest: Option<(u64, u64, u64, u64, u64)>,
}

impl FragmentationWatch {
    pub fn sample(&mut self, time_ns: u64, rss: u64, requested: u64) {
        let Some((high_requested, high_rss)) = self.high else {
            self.high = Some((requested, rss));
            return;
        };
        if requested > high_requested {
            self.high = Some((requested, rss));
            return;
        }
        let fall = high_requested - requested;
        let fell_a_lot = fall >= MIB.max(high_requested / 4);
        let deeper = !matches!(self.deepest, Some((deepest_fall, ..)) if deepest_fall >= fall);
        if fell_a_lot && rss >= high_rss.saturating_sub(fall / 4) && deeper {
            self.deepest = Some((fall, high_requested, requested, rss, time_ns));
        }
    }

    /// The warning, for an image that started at `start_ns`, unless the allocator did not
    /// hold the memory: `overhead_after(time)` is the RSS of arena pages no live block
    /// accounts for (the `overhead` component) in the first snapshot at or after `time`.
    /// When that is under a quarter of the fall, the RSS that stayed is memory the program
    /// uses some other way, such as the arenas of its own pool allocator (pymalloc's 1 MiB
    /// arenas, mapped by libpython), not freed blocks the allocator keeps.
    pub fn warning(
        &self,
        start_ns: u64,
        overhead_after: impl Fn(u64) -> Option<u64>,
    ) -> Option<String> {
        let (fall, high_requested, low, rss, time_ns) = self.deepest?;
        if overhead_after(time_ns).is_some_and(|overhead| overhead < fall / 4) {
            return None;
        }
        let mib = |bytes: u64| bytes as f64 / MIB as f64;
        let seconds = time_ns.saturating_sub(start_ns) as f64 / 1e9;
        Some(format!(
            "fragmentation: live requested memory fell from {:.1} MiB to {:.1} MiB at {seconds:.2} s \
             while RSS stayed at {:.1} MiB (freed blocks are interleaved with live ones; the \
             allocator cannot return the pages)",
            mib(high_requested),
            mib(low),
            mib(rss),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requested falls from 8 MiB to 0 while RSS stays at 9 MiB.
    fn fallen() -> FragmentationWatch {
        let mut watch = FragmentationWatch::default();
        watch.sample(1_000_000, 9 * MIB, 8 * MIB);
        watch.sample(2_000_000, 9 * MIB, 0);
        watch
    }

    #[test]
    fn only_memory_the_allocator_holds_is_fragmentation() {
        let watch = fallen();
        // The allocator holds 2 MiB of freed pages: a quarter of the fall.
        assert!(watch.warning(0, |_| Some(2 * MIB)).is_some());
        // Without a snapshot after the fall nothing says otherwise.
        assert!(watch.warning(0, |_| None).is_some());
        // The allocator holds under a quarter: the RSS is the program's own (pool arenas).
        assert_eq!(watch.warning(0, |_| Some(2 * MIB - 1)), None);
    }
}
