//! fixtures/longjmp_signal.c: a fault inside posix_memalign, left by siglongjmp from a SIGSEGV
//! handler; the allocations after it must be recorded exactly (not taken for nested calls).

use crate::common::expect::FUNCTIONS;
use crate::common::*;

fn glibc_numbers() -> HeapExpectation {
    HeapExpectation {
        // The posix_memalign call is counted, but it never returned: no allocation, no return
        // trampoline hit.
        calls: calls(&[
            ("malloc", 3),
            ("calloc", 1),
            ("free", 3),
            ("posix_memalign", 1),
        ]),
        returned_calls: 4,
        allocations: 4,
        bytes_allocated: 300 + 700 + 400 + 42,
        frees: 3,
        peak_live_bytes: 1100,
        peak_live_blocks: 2,
        live_bytes_at_exit: 42,
        live_blocks_at_exit: 1,
        largest_allocation: 700,
        ..Default::default()
    }
}

#[test]
fn longjmp_out_of_a_faulting_allocator_call() {
    for_each_variant("longjmp_signal", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "longjmp_signal: faulted inside posix_memalign: yes, sum 198\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        // allocate_filled is called from two lines of main: two call sites.
        let mut sites = vec![
            site(Some("allocate_filled"), 700, 1).with_totals(1, 700),
            site(Some("main"), 400, 1).with_totals(1, 400),
        ];
        let mut expected = match variant {
            Variant::Dynamic => glibc_numbers(),
            Variant::Static => {
                sites.insert(0, site(Some("_dl_new_object"), 1225, 1));
                glibc_numbers().plus_static_startup(GlibcStaticStartup::of(fixture))
            }
            // posix_memalign -> aligned_alloc and calloc -> malloc are nested calls in musl.
            Variant::Musl => HeapExpectation {
                nested_calls: 2,
                ..glibc_numbers()
            },
        };
        if recorded_by_hooks(image) {
            // A hook records posix_memalign at its return, which the siglongjmp abandons:
            // the hook engine counts one call fewer (DESIGN.md §4a, differences from int3).
            let posix_memalign = FUNCTIONS.iter().position(|f| *f == "posix_memalign");
            expected.calls[posix_memalign.expect("a probed function")] -= 1;
        }
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        assert_probe_costs(image, &expected, 0, 1);
    });
}
