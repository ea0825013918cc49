//! A snapshot's arenas split by the heap census. Without history the arena pages no known
//! block accounts for are `unknown`; the census tells which of them glibc holds free (free
//! chunks in its bins, its caches, the tops): those are the allocator's `overhead`, and
//! what stays `unknown` is in use by the program.

use super::build::{holds_anything, sort_components};
use super::classify::UNKNOWN;
use super::{Component, Components, ResidentPoint, OVERHEAD};
use crate::trace::census_format::CensusTotals;

/// Moves what the census taken at `census_ns` found free in the arenas from `unknown` to
/// `overhead` in the snapshot taken with it (the first at or after it: an attach's start
/// snapshot; else the last: a snapshot's), at most the arena pages `unknown` holds there.
pub(in crate::analysis) fn split_by_census(
    components: &mut Components,
    census: &CensusTotals,
    census_ns: u64,
) {
    let snapshots = &components.snapshots;
    let Some(point) = (snapshots.iter().position(|s| s.time_ns >= census_ns))
        .or_else(|| snapshots.len().checked_sub(1))
    else {
        return;
    };
    let summary = &snapshots[point];
    let residency = &census.residency;
    let list = &mut components.components;
    let Some(unknown) = list.iter().position(|component| component.name == UNKNOWN) else {
        return;
    };
    let Some(&held) = list[unknown].resident.get(point) else {
        return;
    };
    let free = residency.free + residency.cache + residency.top;
    let moved_rss = free.min(summary.arena_overhead_rss).min(held.rss);
    if moved_rss == 0 {
        return;
    }
    let moved_pss = (u128::from(held.pss) * u128::from(moved_rss) / u128::from(held.rss)) as u64;
    let times: Vec<u64> = components
        .snapshots
        .iter()
        .map(|snapshot| snapshot.time_ns)
        .collect();
    let overhead = match list.iter().position(|component| component.name == OVERHEAD) {
        Some(index) => index,
        None => {
            list.push(Component {
                name: OVERHEAD.to_string(),
                resident: times
                    .iter()
                    .map(|&time_ns| ResidentPoint {
                        time_ns,
                        rss: 0,
                        pss: 0,
                        swap: 0,
                    })
                    .collect(),
                ..Component::default()
            });
            list.len() - 1
        }
    };
    // A user rule named `overhead` may hold requested bytes only: no resident points.
    if list[overhead].resident.len() <= point {
        return;
    }
    let unknown_point = &mut list[unknown].resident[point];
    unknown_point.rss -= moved_rss;
    unknown_point.pss -= moved_pss;
    let overhead_point = &mut list[overhead].resident[point];
    overhead_point.rss += moved_rss;
    overhead_point.pss += moved_pss;
    for component in [unknown, overhead] {
        let component = &mut list[component];
        let points = &component.resident;
        component.peak_rss_bytes = points.iter().map(|point| point.rss).max().unwrap_or(0);
        component.peak_pss_bytes = points.iter().map(|point| point.pss).max().unwrap_or(0);
    }
    list.retain(holds_anything);
    sort_components(list);
}
