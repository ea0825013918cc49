//! A hand-built analysis with known components, shared by the renderers' tests.
//!
//! One image (pid 100, started 1000 ns into the recording) with three components:
//!
//! | component | requested (t ns: bytes)         | resident at 1500 / 2500 ns (rss, pss, swap)  |
//! |-----------|---------------------------------|-----------------------------------------------|
//! | app       | 1000: 1000, 2000: 3000, 3000: 2000 | (4096, 4096, 0) / (8192, 6144, 0)          |
//! | libc      | 1000: 500, 2000: 500, 3000: 0   | (4096, 2048, 0) / (4096, 2048, 4096)          |
//! | overhead  | none                            | (0, 0, 0) / (2048, 2048, 0)                   |
//!
//! Stacked requested bytes: 1500, 3500, 2000 (highest 3500 at 2000 ns); stacked RSS: 8192,
//! 14336 (highest at 2500 ns). Process totals: requested 1500, 3500, 2000; RSS 10000, 20000,
//! 16000; PSS 9000, 18000, 15000; swap 0, 4096, 4096 at 1000, 2000, 3000 ns.

use std::path::Path;

use crate::analysis::components::{
    Component, Components, HighAtSnapshot, PeakSplit, ProcessTimeline, ResidentPoint,
    SnapshotSummary, TimePoint, OVERHEAD,
};
use crate::analysis::tests::heap_profile;
use crate::analysis::{analyze, Analysis, Frame, ProcessSnapshot, SnapshotThread, ThreadGroup};
use crate::trace::format::{SnapshotReason, ThreadActivity};

pub(crate) fn points(values: &[(u64, u64)]) -> Vec<TimePoint> {
    values
        .iter()
        .map(|&(time_ns, bytes)| TimePoint { time_ns, bytes })
        .collect()
}

pub(crate) fn resident(values: &[(u64, u64, u64, u64)]) -> Vec<ResidentPoint> {
    values
        .iter()
        .map(|&(time_ns, rss, pss, swap)| ResidentPoint {
            time_ns,
            rss,
            pss,
            swap,
        })
        .collect()
}

pub(crate) fn component(
    name: &str,
    requested: &[(u64, u64)],
    residency: &[(u64, u64, u64, u64)],
) -> Component {
    let requested = points(requested);
    let resident = resident(residency);
    Component {
        name: name.to_string(),
        peak_requested_bytes: requested.iter().map(|p| p.bytes).max().unwrap_or(0),
        peak_rss_bytes: resident.iter().map(|p| p.rss).max().unwrap_or(0),
        peak_pss_bytes: resident.iter().map(|p| p.pss).max().unwrap_or(0),
        peak_swap_bytes: resident.iter().map(|p| p.swap).max().unwrap_or(0),
        requested,
        resident,
    }
}

pub(crate) fn sample_components() -> Components {
    Components {
        components: vec![
            component(
                "app",
                &[(1000, 1000), (2000, 3000), (3000, 2000)],
                &[(1500, 4096, 4096, 0), (2500, 8192, 6144, 0)],
            ),
            component(
                "libc",
                &[(1000, 500), (2000, 500), (3000, 0)],
                &[(1500, 4096, 2048, 0), (2500, 4096, 2048, 4096)],
            ),
            component(OVERHEAD, &[], &[(1500, 0, 0, 0), (2500, 2048, 2048, 0)]),
        ],
        snapshots: vec![
            SnapshotSummary {
                time_ns: 1500,
                reason: SnapshotReason::Start,
                cost_ns: 300_000,
                mappings: 40,
                rss: 8192,
                pss: 6144,
                swap: 0,
                arena_rss: 4096,
                arena_requested: 1500,
                arena_overhead_rss: 0,
                requested: 1500,
                high: None,
                pagemap_mappings: None,
            },
            SnapshotSummary {
                time_ns: 2500,
                reason: SnapshotReason::Exit,
                cost_ns: 200_000,
                mappings: 42,
                rss: 14336,
                pss: 10240,
                swap: 4096,
                arena_rss: 6144,
                arena_requested: 3500,
                arena_overhead_rss: 2048,
                requested: 3500,
                high: Some(HighAtSnapshot {
                    kind: "rss",
                    bytes: 20000,
                    delay_ns: 500,
                    held: true,
                }),
                pagemap_mappings: Some(3),
            },
        ],
        peak_split: Some(PeakSplit {
            peak_rss: 20000,
            snapshot_time_ns: 2500,
            snapshot_rss: 14336,
            measured: true,
            estimated: true,
        }),
        timeline: ProcessTimeline {
            requested: points(&[(1000, 1500), (2000, 3500), (3000, 2000)]),
            rss: points(&[(1000, 10000), (2000, 20000), (3000, 16000)]),
            pss: points(&[(1000, 9000), (2000, 18000), (3000, 15000)]),
            swap: points(&[(1000, 0), (2000, 4096), (3000, 4096)]),
        },
    }
}

/// The analysis of the scripted heap profile, its one image given `sample_components()`.
pub(crate) fn components_analysis() -> Analysis {
    let mut analysis = analyze(&heap_profile(), Path::new("run.msup"));
    assert_eq!(analysis.processes.len(), 1);
    assert_eq!(analysis.processes[0].pid, 100);
    assert_eq!(analysis.processes[0].start_ns, 1000);
    analysis.processes[0].components = sample_components();
    analysis
}

/// A snapshot of three threads in two stacks: threads 5 and 6 in `futex` under
/// `wait_here` (t.c:3) and `worker` (t.c:9), thread 4 running in `spin` (t.c:20), stopped
/// 1.5 ms.
pub(crate) fn two_stack_snapshot() -> ProcessSnapshot {
    let thread = |tid, activity, wchan: &str| SnapshotThread {
        tid,
        activity,
        kernel_state: 'S',
        wchan: wchan.to_string(),
    };
    let frame = |function: &str, line| Frame {
        function: function.to_string(),
        file: Some("t.c".to_string()),
        line: Some(line),
        module: "/bin/t".to_string(),
        address: 0x1000,
        offset: 0,
        inlined: false,
    };
    ProcessSnapshot {
        stopped_ns: 1_500_000,
        groups: vec![
            ThreadGroup {
                stack: vec![frame("wait_here", 3), frame("worker", 9)],
                threads: vec![
                    thread(5, ThreadActivity::SystemCall(202), "futex_wait_queue"),
                    thread(6, ThreadActivity::SystemCall(202), "futex_wait_queue"),
                ],
            },
            ThreadGroup {
                stack: vec![frame("spin", 20)],
                threads: vec![thread(4, ThreadActivity::Running, "")],
            },
        ],
        heap_census: None,
    }
}
