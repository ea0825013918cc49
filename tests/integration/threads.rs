//! fixtures/threads.c: 8 threads of malloc/free pairs, a barrier-made deterministic peak, and
//! glibc's tcache shutdown frees at thread exit.

use std::path::Path;

use crate::common::expect::SiteExpectation;
use crate::common::*;

/// The program's own calls: 8 x 500 pairs in the loops, 8 results freed by main.
fn own_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 4008), ("free", 4008)]),
        returned_calls: 4008,
        allocations: 4008,
        bytes_allocated: 8 * 125 * (24 + 72 + 136 + 264) + 8 * 4096,
        frees: 4008,
        peak_live_bytes: 8 * 4096,
        peak_live_blocks: 8,
        largest_allocation: 4096,
        ..Default::default()
    }
}

/// glibc adds, for the 8 threads: a 272-byte DTV calloc in pthread_create (kept: the stacks
/// stay cached), and at each thread's exit 4 frees of tcache chunks plus 1 of the tcache
/// itself (unknown frees), and in the dynamic libc 2 free(NULL) per thread.
fn glibc_numbers(null_frees_per_thread: u64) -> HeapExpectation {
    let own = own_numbers();
    let thread_exit_frees = 8 * (5 + null_frees_per_thread);
    HeapExpectation {
        calls: calls(&[
            ("malloc", 4008),
            ("calloc", 8),
            ("free", 4008 + thread_exit_frees),
        ]),
        returned_calls: own.returned_calls + 8,
        allocations: own.allocations + 8,
        bytes_allocated: own.bytes_allocated + 8 * 272,
        null_frees: 8 * null_frees_per_thread,
        unknown_frees: 40,
        peak_live_bytes: own.peak_live_bytes + 8 * 272,
        peak_live_blocks: 16,
        live_bytes_at_exit: 8 * 272,
        live_blocks_at_exit: 8,
        ..own
    }
}

/// The fixture's stdout, natively and under memsup.
pub const THREADS_STDOUT: &str = "threads: 8 threads x 500 pairs, checksum 1005376\n";

/// Threads the fixture creates (for the life-cycle stop allowance).
pub const THREADS_CREATED: u64 = 8;

/// The heap numbers and leading sites of `variant` (shared with the step-over tests).
pub fn threads_expectation(
    variant: Variant,
    fixture: &Path,
) -> (HeapExpectation, Vec<SiteExpectation>) {
    let worker = site(Some("worker"), 8 * 4096, 8).with_totals(8, 8 * 4096);
    match variant {
        // The DTV's call site is in ld.so; its name depends on ld.so's symbols.
        Variant::Dynamic => (glibc_numbers(2), vec![worker, site(None, 8 * 272, 8)]),
        Variant::Static => (
            glibc_numbers(0).plus_static_startup(GlibcStaticStartup::of(fixture)),
            vec![
                worker,
                site(Some("_dl_allocate_tls"), 8 * 272, 8).with_totals(8, 8 * 272),
                site(Some("_dl_new_object"), 1225, 1),
            ],
        ),
        Variant::Musl => (own_numbers(), vec![worker]),
    }
}

/// Runs threads (every variant) with `options`, checks its output and numbers, and hands
/// each image to `check_costs` with the heap expectation.
pub fn check_threads(options: &[&str], check_costs: impl Fn(&serde_json::Value, &HeapExpectation)) {
    for_each_variant("threads", |variant, fixture| {
        let recording = record_with_options(options, fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            THREADS_STDOUT
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let (expected, sites) = threads_expectation(variant, fixture);
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        check_costs(image, &expected);
    });
}

#[test]
fn threads_totals_peak_and_thread_exit_frees() {
    check_threads(&[], |image, expected| {
        assert_probe_costs(image, expected, THREADS_CREATED, 0);
        // Every unknown free is a thread cache's, freed at the thread's exit.
        assert_eq!(
            number(image, "/unknown_free_sources/thread_exit"),
            expected.unknown_frees,
            "unknown frees at thread exit"
        );
    });
}
