use super::*;
use crate::events::heap::Block;

fn created(address: u64, size: u64) -> Outcome {
    Outcome {
        created: Some(Block {
            address,
            size,
            stack: Default::default(),
            time_ns: 0,
            sequence: 0,
        }),
        ..Outcome::default()
    }
}

fn released(address: u64, size: u64) -> Outcome {
    Outcome {
        released: created(address, size).created,
        ..Outcome::default()
    }
}

const INIT: u32 = 0;
const ALLTOALL: u32 = 1;
const FINALIZE_NUMBER: u32 = 2;

#[test]
fn allocations_inside_a_call_are_its_functions_and_outside_ones_are_nobodys() {
    let mut mpi = MpiTracker::default();
    mpi.heap(7, &created(0x100, 10)); // before MPI_Init: the program's
    mpi.enter(7, INIT, "MPI_Init", 1_000, 10);
    mpi.heap(7, &created(0x200, 100));
    mpi.heap(8, &created(0x300, 1_000)); // another thread, not in a call
    mpi.heap(7, &created(0x400, 50));
    mpi.heap(7, &released(0x400, 50));
    mpi.leave(7, 4_000, 1_110);
    let stats = mpi.finish(9_000, 1_110);
    assert_eq!(stats.len(), 1);
    let init = &stats[0];
    assert_eq!(init.function, "MPI_Init");
    assert_eq!((init.calls, init.time_ns), (1, 3_000));
    assert_eq!((init.allocations, init.allocated_bytes), (2, 150));
    assert_eq!(
        (init.live_blocks_at_finalize, init.live_bytes_at_finalize),
        (1, 100)
    );
    assert_eq!(init.delta_bytes, 1_100);
    assert_eq!(
        (init.largest_delta_bytes, init.smallest_delta_bytes),
        (1_100, 1_100)
    );
}

#[test]
fn what_is_live_is_counted_when_finalize_returns_and_deltas_add_up_per_call() {
    let mut mpi = MpiTracker::default();
    mpi.rss(5_000);
    mpi.enter(1, INIT, "MPI_Init", 0, 0);
    mpi.heap(1, &created(0x10, 64));
    mpi.heap(1, &created(0x20, 32));
    mpi.leave(1, 10, 96);
    mpi.rss(6_000);
    for (start, live_before, live_after) in [(20, 96, 196), (40, 196, 146)] {
        mpi.enter(1, ALLTOALL, "MPI_Alltoall", start, live_before);
        mpi.leave(1, start + 5, live_after);
    }
    mpi.enter(1, FINALIZE_NUMBER, "MPI_Finalize", 100, 146);
    mpi.heap(1, &released(0x20, 32));
    mpi.heap(1, &created(0x30, 8));
    mpi.leave(1, 110, 122);
    // Released after MPI_Finalize: still counted as left behind by it.
    mpi.heap(1, &released(0x10, 64));
    mpi.rss(7_000);
    let stats = mpi.finish(200, 58);
    let names: Vec<&str> = stats.iter().map(|s| s.function.as_str()).collect();
    assert_eq!(names, ["MPI_Init", "MPI_Alltoall", "MPI_Finalize"]);
    assert_eq!(
        (
            stats[0].live_blocks_at_finalize,
            stats[0].live_bytes_at_finalize
        ),
        (1, 64)
    );
    assert_eq!(
        (stats[0].rss_before_bytes, stats[0].rss_after_bytes),
        (Some(5_000), Some(6_000))
    );
    let alltoall = &stats[1];
    assert_eq!(
        (alltoall.calls, alltoall.time_ns, alltoall.allocations),
        (2, 10, 0)
    );
    assert_eq!(alltoall.delta_bytes, 50);
    assert_eq!(
        (alltoall.largest_delta_bytes, alltoall.smallest_delta_bytes),
        (100, -50)
    );
    assert_eq!(
        (alltoall.rss_before_bytes, alltoall.rss_after_bytes),
        (Some(6_000), Some(7_000))
    );
    let finalize = &stats[2];
    assert_eq!((finalize.allocations, finalize.allocated_bytes), (1, 8));
    assert_eq!(
        (
            finalize.live_blocks_at_finalize,
            finalize.live_bytes_at_finalize
        ),
        (1, 8)
    );
    assert_eq!(finalize.delta_bytes, -24);
}

#[test]
fn a_return_without_entry_is_not_a_call_and_an_unfinished_call_ends_with_the_image() {
    let mut mpi = MpiTracker::default();
    mpi.leave(3, 50, 0); // a fork child leaving its parent's call
    mpi.enter(3, INIT, "MPI_Init", 100, 0);
    mpi.heap(3, &created(0x10, 16));
    let stats = mpi.finish(400, 16);
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (stats[0].calls, stats[0].time_ns, stats[0].delta_bytes),
        (1, 300, 16)
    );
    assert_eq!(
        (
            stats[0].live_blocks_at_finalize,
            stats[0].live_bytes_at_finalize
        ),
        (1, 16)
    );
}

#[test]
fn an_entry_while_a_call_is_open_leaves_that_call_out() {
    // The interpret stage passes an entry while a call is open only when that call
    // returned unseen (its return record dropped): it is not counted.
    let mut mpi = MpiTracker::default();
    mpi.enter(3, INIT, "MPI_Init", 100, 0);
    mpi.enter(3, ALLTOALL, "MPI_Alltoall", 120, 0);
    mpi.heap(3, &created(0x10, 16));
    mpi.leave(3, 170, 16);
    let stats = mpi.finish(400, 16);
    let calls: Vec<(&str, u64, u64, i64)> = stats
        .iter()
        .map(|stats| {
            (
                stats.function.as_str(),
                stats.calls,
                stats.time_ns,
                stats.delta_bytes,
            )
        })
        .collect();
    assert_eq!(calls, [("MPI_Init", 0, 0, 0), ("MPI_Alltoall", 1, 50, 16)]);
}

fn snapshot(reason: SnapshotReason, rss: u64, pss: u64) -> SnapshotSummary {
    SnapshotSummary {
        time_ns: 0,
        reason,
        cost_ns: 0,
        mappings: 0,
        rss,
        pss,
        swap: 0,
        arena_rss: 0,
        arena_requested: 0,
        arena_overhead_rss: 0,
        requested: 0,
        high: None,
        pagemap_mappings: None,
    }
}

#[test]
fn snapshots_at_the_stops_replace_the_sampled_rss_of_their_function_only() {
    let sampled = |name: &str| MpiFunctionStats {
        function: name.to_string(),
        rss_before_bytes: Some(1),
        rss_after_bytes: Some(2),
        ..MpiFunctionStats::default()
    };
    let mut functions = [sampled("MPI_Init"), sampled("MPI_Alltoall")];
    let names: HashMap<u32, String> = [(INIT, "MPI_Init"), (FINALIZE_NUMBER, "MPI_Finalize")]
        .map(|(number, name)| (number, name.to_string()))
        .into();
    let snapshots = [
        snapshot(SnapshotReason::Start, 100, 90),
        snapshot(SnapshotReason::MpiEntry { function: INIT }, 500, 300),
        snapshot(
            SnapshotReason::RssHigh {
                bytes: 1,
                delay_ns: 1,
            },
            900,
            800,
        ),
        snapshot(SnapshotReason::MpiReturn { function: INIT }, 1_700, 1_100),
        // No stats for MPI_Finalize (never returned to the analysis): left alone.
        snapshot(
            SnapshotReason::MpiEntry {
                function: FINALIZE_NUMBER,
            },
            1_800,
            1_200,
        ),
    ];
    residency_at_stops(&mut functions, &snapshots, &names);
    let init = &functions[0];
    assert!(init.residency_at_stops);
    let around = (init.rss_before_bytes, init.rss_after_bytes);
    assert_eq!(around, (Some(500), Some(1_700)));
    let pss = (init.pss_before_bytes, init.pss_after_bytes);
    assert_eq!(pss, (Some(300), Some(1_100)));
    assert_eq!(functions[1], sampled("MPI_Alltoall"));
}

#[test]
fn a_call_snapshotted_at_its_entry_only_has_no_residency_after_it() {
    let mut functions = [MpiFunctionStats {
        function: "MPI_Finalize".to_string(),
        rss_after_bytes: Some(2),
        ..MpiFunctionStats::default()
    }];
    let names: HashMap<u32, String> = [(FINALIZE_NUMBER, "MPI_Finalize".to_string())].into();
    let snapshots = [snapshot(
        SnapshotReason::MpiEntry {
            function: FINALIZE_NUMBER,
        },
        10,
        7,
    )];
    residency_at_stops(&mut functions, &snapshots, &names);
    let finalize = &functions[0];
    assert!(finalize.residency_at_stops);
    assert_eq!(
        (finalize.rss_before_bytes, finalize.rss_after_bytes),
        (Some(10), None)
    );
    assert_eq!(
        (finalize.pss_before_bytes, finalize.pss_after_bytes),
        (Some(7), None)
    );
}

#[test]
fn summed_calls_add_to_the_function_with_no_change_of_live_bytes_each() {
    let mut mpi = MpiTracker::default();
    mpi.rss(1_000);
    mpi.add_calls(7, ALLTOALL, "MPI_Alltoall", 40, 4_000);
    mpi.rss(2_000);
    mpi.enter(7, ALLTOALL, "MPI_Alltoall", 10_000, 500);
    mpi.heap(7, &created(0x100, 300));
    // Thread 7 is inside a call: sums of its calls now were inner calls, part of it.
    mpi.add_calls(7, ALLTOALL, "MPI_Alltoall", 9, 900);
    mpi.leave(7, 10_600, 800);
    mpi.add_calls(8, ALLTOALL, "MPI_Alltoall", 2, 100);
    mpi.rss(3_000);
    let stats = mpi.finish(20_000, 800);
    assert_eq!(stats.len(), 1);
    let alltoall = &stats[0];
    assert_eq!((alltoall.calls, alltoall.time_ns), (43, 4_700));
    assert_eq!((alltoall.allocations, alltoall.allocated_bytes), (1, 300));
    assert_eq!(alltoall.delta_bytes, 300);
    assert_eq!(
        (alltoall.largest_delta_bytes, alltoall.smallest_delta_bytes),
        (300, 0)
    );
    assert_eq!(
        (alltoall.rss_before_bytes, alltoall.rss_after_bytes),
        (Some(1_000), Some(3_000))
    );
}
