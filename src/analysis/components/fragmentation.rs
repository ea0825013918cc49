//! The warning for a heap that stays resident after its live blocks are freed: freed blocks
//! interleaved with live ones leave pages the allocator cannot give back.

const MIB: u64 = 1 << 20;

/// Walks the status samples `(time, rss)` in time order against the live requested bytes
/// `requested` (`(time, value from then on)`, in time order). Warns when at some sample
/// requested bytes fell a lot (at least 1 MiB and a quarter) from their highest sampled
/// value while RSS fell by less than a quarter of that, and names the deepest such fall.
pub(super) fn warning(
    start_ns: u64,
    samples: &[(u64, u64)],
    requested: &[(u64, u64)],
) -> Option<String> {
    let mut next_change = 0;
    let mut current = 0;
    // (requested, rss) at the sample with the highest requested bytes so far.
    let mut high: Option<(u64, u64)> = None;
    // The deepest fall that kept RSS: (fall, high requested, requested, rss, time).
    let mut deepest: Option<(u64, u64, u64, u64, u64)> = None;
    for &(time_ns, rss) in samples {
        while next_change < requested.len() && requested[next_change].0 <= time_ns {
            current = requested[next_change].1;
            next_change += 1;
        }
        let Some((high_requested, high_rss)) = high else {
            high = Some((current, rss));
            continue;
        };
        if current > high_requested {
            high = Some((current, rss));
            continue;
        }
        let fall = high_requested - current;
        let fell_a_lot = fall >= MIB.max(high_requested / 4);
        let deeper = !matches!(deepest, Some((deepest_fall, ..)) if deepest_fall >= fall);
        if fell_a_lot && rss >= high_rss.saturating_sub(fall / 4) && deeper {
            deepest = Some((fall, high_requested, current, rss, time_ns));
        }
    }
    let (_, high_requested, low, rss, time_ns) = deepest?;
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
