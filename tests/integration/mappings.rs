//! fixtures/mappings.c: mmap, munmap, mremap, shmat and shmdt seen at system-call level in run
//! mode, including the dynamic loader's and the C library's own calls.

use crate::common::strace::{strace_mapping_totals, MappingTotals};
use crate::common::*;

/// What "full" adds over "baseline" (see the comment at the top of fixtures/mappings.c).
fn fixture_contribution() -> MappingTotals {
    MappingTotals {
        // mmap (one of the four fails), munmap, mremap, brk, shmat, shmdt
        calls: [4, 3, 1, 0, 1, 1],
        mmap_bytes: 69632 + 12288 + 8192,
        munmap_bytes: 69632 + 20480 + 12288,
        brk_growth_bytes: 0,
    }
}

#[test]
fn mapping_calls_are_counted_exactly() {
    for_each_variant("mappings", |variant, fixture| {
        let baseline = record(fixture, &["baseline"], None);
        let full = record(fixture, &["full"], None);
        assert_eq!(
            String::from_utf8_lossy(&baseline.native.stdout),
            "mappings: baseline done\n"
        );
        assert_eq!(
            String::from_utf8_lossy(&full.native.stdout),
            "mappings: full done\n"
        );
        let baseline_image = launched_image(&baseline.report, fixture, &["baseline"]);
        let full_image = launched_image(&full.report, fixture, &["full"]);
        assert_exit(baseline_image, "code", Some(0));
        assert_exit(full_image, "code", Some(0));

        let baseline_totals = MappingTotals::from_image(baseline_image);
        let full_totals = MappingTotals::from_image(full_image);
        assert_eq!(
            full_totals.minus(&baseline_totals),
            fixture_contribution(),
            "the fixture's own mapping calls (full: {full_totals:?}, baseline: {baseline_totals:?})"
        );
        // Start-up mappings (loader, TLS, malloc's brk) are deterministic for a given binary
        // and /etc/ld.so.cache: the totals must equal strace's count of the native run.
        if require_tool("strace") {
            assert_eq!(
                baseline_totals,
                strace_mapping_totals(fixture, &["baseline"]),
                "mapping totals of the baseline run against strace"
            );
            assert_eq!(
                full_totals,
                strace_mapping_totals(fixture, &["full"]),
                "mapping totals of the full run against strace"
            );
        }

        // The fixture never uses the heap.
        let heap = match variant {
            Variant::Static => {
                HeapExpectation::default().plus_static_startup(GlibcStaticStartup::of(fixture))
            }
            _ => HeapExpectation::default(),
        };
        for image in [baseline_image, full_image] {
            assert_heap(image, &heap);
            assert_probe_costs(image, &heap, 0, 0);
        }
    });
}
