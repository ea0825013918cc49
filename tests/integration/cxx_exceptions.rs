//! fixtures/cxx_exceptions.cpp: operator new/delete, vector growth, exceptions thrown through
//! allocating frames, and libstdc++'s emergency pool allocated before main.

use crate::common::*;

/// libstdc++'s emergency exception pool (gcc 12), malloc'ed by a static constructor.
const EMERGENCY_POOL: u64 = 72704;
/// Each of libgcc's two sorted-FDE vectors in the static binary (16 + 8 x 1736 FDEs).
const SORTED_FDES: u64 = 13904;

fn dynamic_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 27), ("free", 25)]),
        returned_calls: 27,
        allocations: 27,
        bytes_allocated: EMERGENCY_POOL + 4 + 400 + 1020 + 3 * (4 * 256 + 192) + 77,
        frees: 25,
        peak_live_bytes: EMERGENCY_POOL + 4 * 256 + 192,
        peak_live_blocks: 6,
        live_bytes_at_exit: EMERGENCY_POOL + 77,
        live_blocks_at_exit: 2,
        largest_allocation: EMERGENCY_POOL,
        ..Default::default()
    }
}

/// Statically linked, libgcc's unwinder uses the frame registry: at the first throw it mallocs
/// two vectors for sorting the FDEs, frees one, and frees the other at exit.
fn static_numbers(startup: GlibcStaticStartup) -> HeapExpectation {
    let dynamic = dynamic_numbers();
    HeapExpectation {
        calls: calls(&[("malloc", 29), ("free", 27)]),
        returned_calls: dynamic.returned_calls + 2,
        allocations: dynamic.allocations + 2,
        bytes_allocated: dynamic.bytes_allocated + 2 * SORTED_FDES,
        frees: dynamic.frees + 2,
        peak_live_bytes: dynamic.peak_live_bytes + 2 * SORTED_FDES,
        peak_live_blocks: dynamic.peak_live_blocks + 2,
        ..dynamic
    }
    .plus_static_startup(startup)
}

#[test]
fn cxx_new_delete_vectors_and_exceptions() {
    for_each_variant("cxx_exceptions", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "cxx_exceptions: caught 3, sum 352\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        // All operator new calls share one malloc call site inside operator new; names of
        // libstdc++ internals are not asserted where they depend on demangling or on the
        // shared library's symbol table.
        let new_site = site(None, 4 * 256, 4).with_totals(23, 4 + 400 + 1020 + 12 * 256 + 77);
        let (expected, sites) = match variant {
            Variant::Static => (
                static_numbers(GlibcStaticStartup::of(fixture)),
                vec![
                    site(Some("_GLOBAL__sub_I_eh_alloc.cc"), EMERGENCY_POOL, 1),
                    site(Some("search_object"), SORTED_FDES, 1),
                    site(Some("search_object"), SORTED_FDES, 1),
                    site(Some("_dl_new_object"), 1225, 1),
                    new_site,
                ],
            ),
            _ => (
                dynamic_numbers(),
                vec![
                    site(None, EMERGENCY_POOL, 1).with_totals(1, EMERGENCY_POOL),
                    new_site,
                    site(None, 192, 1).with_totals(3, 3 * 192),
                ],
            ),
        };
        assert_heap(image, &expected);
        assert_top_sites(image, &sites);
        assert_probe_costs(image, &expected, 0, 0);
    });
}
