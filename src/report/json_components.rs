//! The components of a process image in the JSON report (docs/report-json.md): who held its
//! memory over time, its smaps snapshots and its process-wide timeline.

use crate::analysis::components::{
    Component, Components, HighAtSnapshot, PeakSplit, ProcessTimeline, SnapshotSummary, TimePoint,
};

#[derive(serde::Serialize)]
pub(super) struct ComponentJson<'a> {
    name: &'a str,
    peak_requested_bytes: u64,
    peak_rss_bytes: u64,
    peak_pss_bytes: u64,
    peak_swap_bytes: u64,
    /// [time_ns, bytes]
    requested_timeline: Vec<(u64, u64)>,
    /// [time_ns, rss, pss, swap]
    resident_timeline: Vec<(u64, u64, u64, u64)>,
}

impl<'a> ComponentJson<'a> {
    pub(super) fn new(component: &'a Component) -> Self {
        ComponentJson {
            name: &component.name,
            peak_requested_bytes: component.peak_requested_bytes,
            peak_rss_bytes: component.peak_rss_bytes,
            peak_pss_bytes: component.peak_pss_bytes,
            peak_swap_bytes: component.peak_swap_bytes,
            requested_timeline: pairs(&component.requested),
            resident_timeline: component
                .resident
                .iter()
                .map(|point| (point.time_ns, point.rss, point.pss, point.swap))
                .collect(),
        }
    }

    pub(super) fn list(components: &'a Components) -> Vec<Self> {
        components.components.iter().map(Self::new).collect()
    }
}

#[derive(serde::Serialize)]
pub(super) struct SnapshotJson {
    time_ns: u64,
    reason: &'static str,
    cost_ns: u64,
    mappings: u64,
    rss: u64,
    pss: u64,
    swap: u64,
    arena_rss: u64,
    arena_requested: u64,
    arena_overhead_rss: u64,
    requested: u64,
    high: Option<HighJson>,
    /// An estimate: mappings changed since the last snapshot counted from pagemap.
    estimated: bool,
    pagemap_mappings: Option<u64>,
}

#[derive(serde::Serialize)]
struct HighJson {
    kind: &'static str,
    bytes: u64,
    delay_ns: u64,
    held: bool,
}

impl HighJson {
    fn new(high: HighAtSnapshot) -> Self {
        HighJson {
            kind: high.kind,
            bytes: high.bytes,
            delay_ns: high.delay_ns,
            held: high.held,
        }
    }
}

#[derive(serde::Serialize)]
pub(super) struct PeakSplitJson {
    measured: bool,
    peak_rss_bytes: u64,
    snapshot_time_ns: u64,
    snapshot_rss_bytes: u64,
    estimated: bool,
}

impl PeakSplitJson {
    pub(super) fn new(split: PeakSplit) -> Self {
        PeakSplitJson {
            measured: split.measured,
            peak_rss_bytes: split.peak_rss,
            snapshot_time_ns: split.snapshot_time_ns,
            snapshot_rss_bytes: split.snapshot_rss,
            estimated: split.estimated,
        }
    }
}

impl SnapshotJson {
    pub(super) fn new(snapshot: &SnapshotSummary) -> Self {
        SnapshotJson {
            time_ns: snapshot.time_ns,
            reason: snapshot.reason.name(),
            cost_ns: snapshot.cost_ns,
            mappings: snapshot.mappings,
            rss: snapshot.rss,
            pss: snapshot.pss,
            swap: snapshot.swap,
            arena_rss: snapshot.arena_rss,
            arena_requested: snapshot.arena_requested,
            arena_overhead_rss: snapshot.arena_overhead_rss,
            requested: snapshot.requested,
            high: snapshot.high.map(HighJson::new),
            estimated: snapshot.pagemap_mappings.is_some(),
            pagemap_mappings: snapshot.pagemap_mappings,
        }
    }
}

#[derive(serde::Serialize)]
pub(super) struct TimelineJson {
    requested: Vec<(u64, u64)>,
    rss: Vec<(u64, u64)>,
    pss: Vec<(u64, u64)>,
    swap: Vec<(u64, u64)>,
}

impl TimelineJson {
    pub(super) fn new(timeline: &ProcessTimeline) -> Self {
        TimelineJson {
            requested: pairs(&timeline.requested),
            rss: pairs(&timeline.rss),
            pss: pairs(&timeline.pss),
            swap: pairs(&timeline.swap),
        }
    }
}

fn pairs(points: &[TimePoint]) -> Vec<(u64, u64)> {
    points
        .iter()
        .map(|point| (point.time_ns, point.bytes))
        .collect()
}
