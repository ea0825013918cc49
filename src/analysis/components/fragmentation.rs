//! The warning for a heap that stays resident after its live blocks are freed: freed blocks
//! interleaved with live ones leave pages the allocator cannot give back.

use super::build::StatusPoint;

const MIB: u64 = 1 << 20;

/// Walks the status samples in time order, each with the live requested bytes at its time.
/// Warns when at some sample
/// requested bytes fell a lot (at least 1 MiB and a quarter) from their highest sampled
/// value while RSS fell by less than a quarter of that, and names the deepest such fall.
pub(super) fn warning(start_ns: u64, samples: &[StatusPoint]) -> Option<String> {
    // (requested, rss) at the sample with the highest requested bytes so far.
    let mut high: Option<(u64, u64)> = None;
    // The deepest fall that kept RSS: (fall, high requested, requested, rss, time).
    let mut deepest: Option<(u64, u64, u64, u64, u64)> = None;
    for sample in samples {
        let (time_ns, rss, current) = (sample.time_ns, sample.rss, sample.requested);
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
