//! fixtures/aligned.c: calloc and the aligned allocators, glibc's memalign/aligned_alloc alias.

use crate::common::*;

fn glibc_numbers() -> HeapExpectation {
    HeapExpectation {
        // memalign and aligned_alloc are one function in glibc 2.36: reported as aligned_alloc.
        calls: calls(&[
            ("calloc", 3),
            ("posix_memalign", 1),
            ("aligned_alloc", 3),
            ("valloc", 1),
            ("pvalloc", 1),
            ("free", 7),
        ]),
        // aligned_alloc(16, 40) calls malloc.
        nested_calls: 1,
        returned_calls: 9,
        allocations: 8,
        bytes_allocated: 1000 + 100 + 512 + 300 + 40 + 1000 + 5000,
        frees: 7,
        failed_allocations: 1,
        peak_live_bytes: 7952,
        peak_live_blocks: 8,
        live_bytes_at_exit: 1000,
        live_blocks_at_exit: 1,
        largest_allocation: 5000,
        ..Default::default()
    }
}

/// musl: memalign is its own function (tail-calling aligned_alloc), valloc tail-calls
/// memalign, posix_memalign calls aligned_alloc, calloc calls malloc; no pvalloc (the fixture
/// calls memalign(4096, 5000) instead).
fn musl_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[
            ("calloc", 3),
            ("posix_memalign", 1),
            ("aligned_alloc", 2),
            ("memalign", 2),
            ("valloc", 1),
            ("free", 7),
        ]),
        nested_calls: 7,
        ..glibc_numbers()
    }
}

#[test]
fn aligned_allocators_and_aliases() {
    for_each_variant("aligned", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "aligned: all alignments correct\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        // calloc(10, 100) and valloc(1000) tie at 1000 bytes.
        let main = |bytes| site(Some("main"), bytes, 1).with_totals(1, bytes);
        let (expected, sites) = match variant {
            Variant::Dynamic => (
                glibc_numbers(),
                vec![main(5000), main(1000), main(1000), main(512), main(300)],
            ),
            Variant::Static => (
                glibc_numbers().plus_static_startup(GlibcStaticStartup::of(fixture)),
                vec![
                    main(5000),
                    site(Some("_dl_new_object"), 1225, 1),
                    main(1000),
                    main(1000),
                    main(512),
                ],
            ),
            Variant::Musl => (
                musl_numbers(),
                vec![main(5000), main(1000), main(1000), main(512), main(300)],
            ),
        };
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        assert_probe_costs(image, &expected, 0, 0);
    });
}
