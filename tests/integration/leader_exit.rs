//! fixtures/leader_exit.c: the main thread ends with pthread_exit and a worker allocates
//! afterwards; memsup must reach the process's memory through a live thread (through the
//! main thread's ID it no longer can) and not hang.
//!
//! Numbers from the gdb oracle (fixtures/tools/gdb_allocation_oracle.py), identical for the
//! three builds; besides the worker's 10 malloc(100)/free pairs and kept malloc(300), glibc's
//! pthread_exit loads libgcc_s for its unwinder, which allocates inside the dynamic linker.

use crate::common::*;

fn glibc_dynamic() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 16), ("calloc", 3), ("free", 11)]),
        returned_calls: 19,
        allocations: 19,
        bytes_allocated: 5706,
        frees: 11,
        peak_live_bytes: 4698,
        peak_live_blocks: 8,
        live_bytes_at_exit: 4698,
        live_blocks_at_exit: 8,
        largest_allocation: 2304,
        ..Default::default()
    }
}

/// Without the start-up blocks of static glibc (added for the build's directory).
fn glibc_static_after_startup() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 13), ("calloc", 1), ("free", 12)]),
        returned_calls: 14,
        allocations: 14,
        bytes_allocated: 20756,
        frees: 12,
        peak_live_bytes: 19456,
        peak_live_blocks: 3,
        live_bytes_at_exit: 572,
        live_blocks_at_exit: 2,
        largest_allocation: 9592,
        ..Default::default()
    }
}

/// musl's pthread_exit needs no unwinder library: only the worker's own calls.
fn musl() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 11), ("free", 10)]),
        returned_calls: 11,
        allocations: 11,
        bytes_allocated: 1300,
        frees: 10,
        peak_live_bytes: 300,
        peak_live_blocks: 1,
        live_bytes_at_exit: 300,
        live_blocks_at_exit: 1,
        largest_allocation: 300,
        ..Default::default()
    }
}

#[test]
fn a_main_thread_ending_first_does_not_stop_the_recording() {
    for_each_variant("leader_exit", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "leader_exit: worker done, sum 45\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let expected = match variant {
            Variant::Dynamic => glibc_dynamic(),
            Variant::Static => {
                glibc_static_after_startup().plus_static_startup(GlibcStaticStartup::of(fixture))
            }
            Variant::Musl => musl(),
        };
        assert_heap(image, &expected);
        assert_probe_costs(image, &expected, 1, 0);
    });
}
