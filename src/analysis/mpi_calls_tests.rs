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
    mpi.enter(3, ALLTOALL, "MPI_Alltoall", 120, 0); // nested: part of the outer call
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
