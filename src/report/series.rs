//! The timelines of a process image as flat series, for the CSV and Perfetto renderers:
//! every component's requested bytes, RSS, PSS and swap, then the process totals.

use crate::analysis::components::{Component, Components, TimePoint};

/// The name process totals go under.
pub const TOTAL: &str = "total";

/// The metrics of a series, in output order.
pub const METRICS: [&str; 4] = ["requested", "rss", "pss", "swap"];

/// One timeline: (time_ns since the recording started, bytes), in time order.
pub struct Series<'a> {
    pub component: &'a str,
    pub metric: &'static str,
    pub points: Vec<(u64, u64)>,
}

/// Every non-empty series of an image: each component in the analysis's order with its
/// metrics in `METRICS` order, then the totals.
pub fn image_series(components: &Components) -> Vec<Series<'_>> {
    let mut series = Vec::new();
    for component in &components.components {
        for metric in METRICS {
            push(
                &mut series,
                &component.name,
                metric,
                component_points(component, metric),
            );
        }
    }
    let timeline = &components.timeline;
    let totals: [&[TimePoint]; 4] = [
        &timeline.requested,
        &timeline.rss,
        &timeline.pss,
        &timeline.swap,
    ];
    for (metric, points) in METRICS.into_iter().zip(totals) {
        let points = points.iter().map(|p| (p.time_ns, p.bytes)).collect();
        push(&mut series, TOTAL, metric, points);
    }
    series
}

fn component_points(component: &Component, metric: &str) -> Vec<(u64, u64)> {
    if metric == "requested" {
        return component
            .requested
            .iter()
            .map(|p| (p.time_ns, p.bytes))
            .collect();
    }
    component
        .resident
        .iter()
        .map(|p| {
            let bytes = match metric {
                "rss" => p.rss,
                "pss" => p.pss,
                _ => p.swap,
            };
            (p.time_ns, bytes)
        })
        .collect()
}

fn push<'a>(
    series: &mut Vec<Series<'a>>,
    component: &'a str,
    metric: &'static str,
    mut points: Vec<(u64, u64)>,
) {
    if points.is_empty() {
        return;
    }
    // Stable: points of one time keep their order.
    points.sort_by_key(|&(time, _)| time);
    series.push(Series {
        component,
        metric,
        points,
    });
}
