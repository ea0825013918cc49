//! What was live at chosen moments of an image, by call site merged by source location: the
//! peak, the highest RSS sample and 20 evenly spaced times, for the HTML report's flame
//! graph of a moment picked on the timeline (memray's `--temporal`, heaptrack_gui's
//! consumption view). Replayed from the image's live-byte changes (`local_peak`): exact for
//! images of up to a million allocator calls; past that, a moment inside a folded stretch of
//! changes sees the live bytes from before the stretch.

use crate::events::heap::IntegerMap;

use super::local_peak::LiveChanges;
use super::ProcessAnalysis;
use crate::trace::stacks::StackId;

/// Evenly spaced moments per image, the last at its end.
pub const EVEN_MOMENTS: u64 = 20;

/// Why a moment was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MomentKind {
    /// The peak of live requested bytes (its sites' bytes are their `peak_bytes`).
    Peak,
    /// The highest RSS sample.
    PeakRss,
    /// One of the evenly spaced times.
    Even,
}

/// The live bytes of every source site at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moment {
    /// Relative to the image's start.
    pub time_ns: u64,
    pub kind: MomentKind,
    /// By index in `ProcessAnalysis::source_sites`.
    pub live_bytes: Vec<u64>,
}

/// The moments of `image`, by time (the peak before an even moment at the same time), its
/// source sites already made; `site_of_stack` maps each raw stack to one of them.
pub(super) fn moments(
    image: &ProcessAnalysis,
    changes: &LiveChanges,
    site_of_stack: &IntegerMap<StackId, usize>,
) -> Vec<Moment> {
    let sites = image.source_sites.len();
    if sites == 0 {
        return Vec::new();
    }
    let mut chosen: Vec<(u64, MomentKind)> = (1..=EVEN_MOMENTS)
        .map(|step| (image.duration_ns * step / EVEN_MOMENTS, MomentKind::Even))
        .collect();
    chosen.push((image.peak_time_ns, MomentKind::Peak));
    let rss = &image.components.timeline.rss;
    if let Some(highest) = rss
        .iter()
        .max_by_key(|point| (point.bytes, u64::MAX - point.time_ns))
    {
        let time = highest.time_ns.saturating_sub(image.start_ns);
        chosen.push((time, MomentKind::PeakRss));
    }
    chosen.sort_by_key(|&(time, kind)| (time, kind as u8));
    let times: Vec<u64> = chosen
        .iter()
        .map(|&(time, _)| image.start_ns + time)
        .collect();
    // Stacks no site holds (none, when the sites were made from the same stacks) go to a
    // group of their own, left out.
    let group_of = |stack: StackId| site_of_stack.get(&stack).copied().unwrap_or(sites);
    let live = changes.live_at(&times, sites + 1, group_of);
    chosen
        .into_iter()
        .zip(live)
        .map(|((time_ns, kind), mut live_bytes)| {
            live_bytes.truncate(sites);
            if kind == MomentKind::Peak {
                live_bytes = (image.source_sites.iter())
                    .map(|site| site.metrics.peak_bytes)
                    .collect();
            }
            Moment {
                time_ns,
                kind,
                live_bytes,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::analysis::site_tests::sites_profile;
    use crate::analysis::{analyze_with, SkipFrames};

    #[test]
    fn each_moment_holds_what_was_live_then_by_source_site() {
        let analysis = analyze_with(
            &sites_profile(),
            Path::new("s.msup"),
            &SkipFrames::default(),
        );
        let image = &analysis.processes[0];
        let names: Vec<String> = (image.source_sites.iter())
            .map(|site| site.stack[0].name())
            .collect();
        assert_eq!(
            names,
            [
                "fill_values(std::vector<int, std::allocator<int> >&)",
                "main",
                "build_index"
            ]
        );
        let moments: Vec<(u64, MomentKind, Vec<u64>)> = (image.moments.iter())
            .map(|moment| (moment.time_ns, moment.kind, moment.live_bytes.clone()))
            .collect();
        assert_eq!(
            moments.len(),
            21,
            "20 evenly spaced and the peak (no RSS sample)"
        );
        let at = |time: u64| {
            moments
                .iter()
                .find(|(at, kind, _)| *at == time && *kind == MomentKind::Even)
                .map(|(_, _, live)| live.clone())
                .unwrap_or_else(|| panic!("no moment at {time}: {moments:?}"))
        };
        // The schedule of site_tests::sites_profile, image from 0 to 1500 ns.
        assert_eq!(at(75), [0, 0, 0]);
        assert_eq!(at(150), [400, 0, 0]);
        assert_eq!(at(450), [400, 0, 100]);
        assert_eq!(
            at(525),
            [1000, 0, 100],
            "both operator new stacks are one site"
        );
        assert_eq!(
            at(825),
            [600, 350, 0],
            "the realloc moved build_index's block to main"
        );
        assert_eq!(at(900), [600, 350, 250]);
        assert_eq!(at(1050), [600, 350, 0]);
        assert_eq!(at(1500), [200, 300, 0], "the leaks");
        let peak = moments
            .iter()
            .position(|m| m.1 == MomentKind::Peak)
            .unwrap();
        assert_eq!(moments[peak], (900, MomentKind::Peak, vec![600, 350, 250]));
        assert_eq!(
            moments[peak + 1].0,
            900,
            "before the even moment at the same time"
        );
        let times: Vec<u64> = moments.iter().map(|m| m.0).collect();
        assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");
    }
}
