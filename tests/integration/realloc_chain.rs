//! fixtures/realloc_chain.c: realloc chains, realloc(NULL), realloc(p, 0), reallocarray and
//! failing allocations.

use crate::common::*;

fn glibc_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[
            ("malloc", 2),
            ("realloc", 11),
            ("reallocarray", 3),
            ("free", 1),
        ]),
        // realloc(NULL) -> malloc; reallocarray(NULL) -> realloc -> malloc;
        // reallocarray(q) -> realloc; realloc(p, 0) -> free.
        nested_calls: 5,
        returned_calls: 16,
        allocations: 12,
        bytes_allocated: 100 + 200 + 400 + 800 + 1600 + 3200 + 1000 + 50 + 300 + 600 + 64 + 96,
        frees: 11,
        failed_allocations: 3,
        peak_live_bytes: 3200,
        peak_live_blocks: 1,
        live_bytes_at_exit: 96,
        live_blocks_at_exit: 1,
        largest_allocation: 3200,
        ..Default::default()
    }
}

/// musl's realloc(p, 0) returns a new 0-byte block (one more allocation, leaked), and its
/// realloc(NULL, n) does not go through the public malloc. Nested calls: reallocarray ->
/// realloc twice, plus the 10 reallocs of a live block, each releasing the old block through
/// `__libc_free` (probed, because musl's own code frees through it, not the public `free`).
fn musl_numbers() -> HeapExpectation {
    HeapExpectation {
        nested_calls: 12,
        allocations: 13,
        live_blocks_at_exit: 2,
        ..glibc_numbers()
    }
}

#[test]
fn realloc_chain_counts_moves_failures_and_realloc_zero() {
    for_each_variant("realloc_chain", |variant, fixture| {
        let recording = record(fixture, &[], None);
        let realloc_zero = if variant == Variant::Musl {
            "non-null"
        } else {
            "null"
        };
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            format!(
                "realloc_chain checksum=2323511758 overflow=null realloc0={realloc_zero} \
                 huge=null too_big=null\n"
            )
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let mut sites = vec![site(Some("grow_chain"), 3200, 1).with_totals(5, 6200)];
        let expected = match variant {
            Variant::Dynamic => glibc_numbers(),
            Variant::Static => {
                sites.push(site(Some("_dl_new_object"), 1225, 1));
                glibc_numbers().plus_static_startup(GlibcStaticStartup::of(fixture))
            }
            Variant::Musl => musl_numbers(),
        };
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        assert_probe_costs(image, &expected, 0, 0);
    });
}
