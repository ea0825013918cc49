//! The job table from hand-built analyses: rows by rank, launchers apart, the split at each
//! rank's peak RSS grouped, and statistics equal to what the rows give.

use std::path::Path;

use super::*;
use crate::analysis::components::{Component, Components, PeakSplit, ResidentPoint};
use crate::analysis::mpi_calls::MpiFunctionStats;
use crate::analysis::tests::heap_profile;
use crate::analysis::{analyze, Analysis, ResidencySummary};
use crate::trace::format::MpiRank;

pub(crate) fn rank_role(rank: u32, world_size: u32) -> ProcessRole {
    ProcessRole::Rank(MpiRank {
        rank,
        world_size: Some(world_size),
        job: "job-7".to_string(),
        source: "PMI_RANK".to_string(),
    })
}

fn component(name: &str, points: &[(u64, u64, u64)]) -> Component {
    Component {
        name: name.to_string(),
        resident: points
            .iter()
            .map(|&(time_ns, rss, pss)| ResidentPoint {
                time_ns,
                rss,
                pss,
                swap: 0,
            })
            .collect(),
        ..Component::default()
    }
}

/// Snapshots at 100 and 200 ns; the one at 200 has the highest RSS. `scale` multiplies the
/// bytes at 200 ns: app 4 KiB·scale RSS / 3 KiB·scale PSS, mpi 8/4, mpi:shm 2/1, libc
/// 16/8, libmpi_extra.so (→ mpi) 1/1, stacks 1/1 and overhead 2/2 (→ other).
pub(crate) fn rank_components(scale: u64) -> Components {
    let kib = |n: u64| n * 1024 * scale;
    let at = |rss: u64, pss: u64| [(100, 1024, 1024), (200, kib(rss), kib(pss))];
    Components {
        components: vec![
            component("app", &at(4, 3)),
            component("mpi", &at(8, 4)),
            component("mpi:shm", &at(2, 1)),
            component("libc", &at(16, 8)),
            component("mpi:extra", &at(1, 1)),
            component("stacks", &at(1, 1)),
            // No point at the peak snapshot: left out.
            component("unknown", &[(100, 4096, 4096)]),
            component("overhead", &at(2, 2)),
        ],
        peak_split: Some(PeakSplit {
            peak_rss: kib(34),
            snapshot_time_ns: 200,
            snapshot_rss: kib(34),
            measured: scale != 3,
            estimated: scale == 1,
        }),
        ..Components::default()
    }
}

/// A profile on `host` whose one image has `role` and the given peaks.
pub(crate) fn profile_with(
    host: &str,
    pid: u32,
    role: Option<ProcessRole>,
    peaks: (u64, u64, u64),
    components: Components,
) -> Analysis {
    let mut analysis = analyze(&heap_profile(), Path::new(&format!("{host}.{pid}.msup")));
    analysis.profile.host = host.to_string();
    let image = &mut analysis.processes[0];
    image.pid = pid;
    image.role = role;
    image.peak_live_bytes = peaks.0;
    image.residency = ResidencySummary {
        peak_rss_bytes: peaks.1,
        peak_pss_bytes: peaks.2,
        ..ResidencySummary::default()
    };
    image.components = components;
    analysis
}

/// Ranks 0..4 given out of order; rank 2 holds the most, rank 3 has no snapshot.
pub(crate) fn four_rank_job() -> Vec<Analysis> {
    let launcher = ProcessRole::Launcher {
        program: "mpiexec.hydra".to_string(),
    };
    vec![
        profile_with(
            "node2",
            302,
            Some(rank_role(2, 4)),
            (8000, 40_000, 30_000),
            rank_components(3),
        ),
        profile_with(
            "node1",
            300,
            Some(rank_role(0, 4)),
            (2000, 10_000, 6000),
            rank_components(1),
        ),
        profile_with(
            "node1",
            299,
            Some(launcher),
            (100, 5000, 4000),
            Components::default(),
        ),
        profile_with(
            "node2",
            303,
            Some(rank_role(3, 4)),
            (6000, 20_000, 12_000),
            Components::default(),
        ),
        profile_with(
            "node1",
            301,
            Some(rank_role(1, 4)),
            (4000, 30_000, 20_000),
            rank_components(2),
        ),
        profile_with("node1", 298, None, (0, 0, 0), Components::default()),
    ]
}

#[test]
fn ranks_come_in_rank_order_and_launchers_and_other_images_apart() {
    let job = Job::of(&four_rank_job());
    assert_eq!(job.profiles, 6);
    let ranks: Vec<(u32, u32, &str)> = job
        .ranks
        .iter()
        .map(|row| (row.rank, row.pid, row.host.as_str()))
        .collect();
    assert_eq!(
        ranks,
        [
            (0, 300, "node1"),
            (1, 301, "node1"),
            (2, 302, "node2"),
            (3, 303, "node2")
        ]
    );
    assert_eq!(job.ranks[1].profile, "node1.301.msup");
    assert_eq!(job.ranks[1].world_size, Some(4));
    assert_eq!(
        job.launchers,
        [LauncherRow {
            host: "node1".to_string(),
            pid: 299,
            program: "mpiexec.hydra".to_string(),
            profile: "node1.299.msup".to_string(),
            peak_requested_bytes: 100,
            peak_rss_bytes: 5000,
            peak_pss_bytes: 4000,
        }]
    );
    assert_eq!(job.other_images, 1);
    assert_eq!(job.hosts(), ["node1", "node2"]);
    assert!(Job::applies_to(&four_rank_job()));
}

#[test]
fn the_split_is_the_snapshot_at_the_peak_rss_grouped() {
    let job = Job::of(&four_rank_job());
    let split = job.ranks[1].split.as_ref().unwrap();
    assert_eq!(split.time_ns, 200);
    assert!(split.measured);
    let kib = |n: u64| n * 2048;
    let groups: Vec<(u64, u64)> = split.groups.iter().map(|g| (g.rss, g.pss)).collect();
    assert_eq!(
        groups,
        [
            (kib(4), kib(3)),
            (kib(8 + 1), kib(4 + 1)),
            (kib(2), kib(1)),
            (kib(16), kib(8)),
            (kib(1 + 2), kib(1 + 2)),
        ]
    );
    assert_eq!(
        split.components.len(),
        7,
        "unknown has no point at the peak"
    );
    assert!(!job.ranks[2].split.as_ref().unwrap().measured);
    let estimated = job
        .ranks
        .iter()
        .map(|row| row.split.as_ref().is_some_and(|s| s.estimated));
    assert_eq!(estimated.collect::<Vec<_>>(), [true, false, false, false]);
    assert_eq!(job.ranks[3].split, None);
    assert_eq!(job.other_components(), ["overhead", "stacks"]);
}

#[test]
fn each_column_has_the_statistics_of_its_ranks() {
    let job = Job::of(&four_rank_job());
    let statistics = |column: Column| {
        let index = COLUMNS.iter().position(|&c| c == column).unwrap();
        job.statistics[index].unwrap()
    };
    // Peak requested 2000, 4000, 8000, 6000: mean 5000, deviations −3, −1, 3, 1 thousand.
    let requested = statistics(Column::PeakRequested);
    assert_eq!(
        (requested.min, requested.max, requested.mean),
        (2000, 8000, 5000.0)
    );
    assert_eq!(requested.standard_deviation, 5_000_000f64.sqrt());
    assert_eq!(
        (requested.max_rank, requested.max_pid, requested.count),
        (2, 302, 4)
    );
    let rss = statistics(Column::PeakRss);
    assert_eq!(
        (rss.min, rss.max, rss.mean, rss.max_rank),
        (10_000, 40_000, 25_000.0, 2)
    );
    // libc's RSS at the peak: 16 KiB × 1, 2, 3 for ranks 0, 1, 2; rank 3 has no split.
    let libc = statistics(Column::SplitRss(3));
    assert_eq!(
        (libc.count, libc.min, libc.max, libc.mean),
        (3, 16384, 49152, 32768.0)
    );
    // Deviations −16, 0, 16 KiB: variance 2/3 · 16 KiB².
    assert_eq!(libc.standard_deviation, (2.0f64 / 3.0).sqrt() * 16384.0);
    assert_eq!(Column::SplitPss(2).key(), "mpi_shm_pss_bytes");
    assert_eq!(Column::PeakRequested.key(), "peak_requested_bytes");
}

#[test]
fn a_profile_of_no_mpi_job_is_no_job_and_a_job_without_ranks_has_no_statistics() {
    let plain = vec![profile_with("h", 1, None, (1, 2, 3), Components::default())];
    assert!(!Job::applies_to(&plain));
    let two = vec![plain[0].clone(), plain[0].clone()];
    assert!(Job::applies_to(&two));
    let job = Job::of(&two);
    assert!(job.ranks.is_empty());
    assert_eq!(job.other_images, 2);
    assert!(job.statistics.iter().all(Option::is_none));
}

/// `calls` calls of `function` that took `time_ns`, allocated `bytes` and left `live` live.
fn mpi_stats(
    function: &str,
    calls: u64,
    time_ns: u64,
    bytes: u64,
    live: u64,
    delta: i64,
) -> MpiFunctionStats {
    MpiFunctionStats {
        function: function.to_string(),
        calls,
        time_ns,
        allocations: calls * 2,
        allocated_bytes: bytes,
        live_blocks_at_finalize: u64::from(live > 0),
        live_bytes_at_finalize: live,
        delta_bytes: delta,
        ..MpiFunctionStats::default()
    }
}

#[test]
fn each_mpi_function_has_the_statistics_of_the_ranks_that_called_it() {
    let mut analyses = four_rank_job();
    let calls_of = |pid| match pid {
        300 => vec![
            mpi_stats("MPI_Init", 1, 4_000, 3000, 1000, 1000),
            mpi_stats("MPI_Alltoall", 4, 800, 0, 0, 0),
        ],
        301 => vec![
            mpi_stats("MPI_Init", 1, 6_000, 3200, 1100, 1100),
            mpi_stats("MPI_Alltoall", 4, 900, 0, 0, 0),
        ],
        302 => vec![mpi_stats("MPI_Init", 1, 5_000, 3100, 900, -200)],
        // Rank 3 has the function with no call: it does not count among its ranks.
        303 => vec![mpi_stats("MPI_Alltoall", 0, 0, 0, 0, 0)],
        _ => vec![mpi_stats("MPI_Init", 9, 9, 9, 9, 9)],
    };
    for analysis in &mut analyses {
        for image in &mut analysis.processes {
            image.mpi_calls = calls_of(image.pid);
        }
    }
    let job = Job::of(&analyses);
    let functions: Vec<(&str, usize, i64)> = job
        .mpi_functions
        .iter()
        .map(|row| (row.function.as_str(), row.ranks, row.delta_bytes))
        .collect();
    assert_eq!(functions, [("MPI_Alltoall", 2, 0), ("MPI_Init", 3, 1900)]);
    let init = &job.mpi_functions[1];
    let column =
        |wanted: MpiColumn| init.statistics[MPI_COLUMNS.iter().position(|c| *c == wanted).unwrap()];
    let time = column(MpiColumn::TimeNs);
    assert_eq!(
        (time.min, time.max, time.mean, time.max_rank),
        (4000, 6000, 5000.0, 1)
    );
    let bytes = column(MpiColumn::AllocatedBytes);
    assert_eq!(
        (
            bytes.min,
            bytes.max,
            bytes.mean,
            bytes.max_rank,
            bytes.max_pid
        ),
        (3000, 3200, 3100.0, 1, 301)
    );
    let live = column(MpiColumn::LiveBytesAtFinalize);
    assert_eq!((live.min, live.max, live.count), (900, 1100, 3));
    assert_eq!(column(MpiColumn::Allocations).max, 2);
    assert_eq!(job.mpi_functions[0].statistics[0].min, 4);
}
