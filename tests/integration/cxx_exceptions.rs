//! fixtures/cxx_exceptions.cpp: operator new/delete, vector growth, exceptions thrown through
//! allocating frames, and libstdc++'s emergency pool allocated before main.

use crate::common::expect::SiteExpectation;
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

/// Where the vectors of throw_through allocate once operator new and std::allocator's frames
/// are dropped: the vector's own code, inlined into throw_through.
const VECTOR_ALLOCATE: &str =
    "std::_Vector_base<int, std::allocator<int> >::_M_allocate(unsigned long)";

/// The sites by peak bytes: operator new, std::allocator and __cxa_allocate_exception frames
/// dropped, so each `new`, vector and throw is a site of its own. Static, glibc's and libgcc's
/// sites come first (the exception object, 192 bytes, ranks after glibc's 320-byte block).
fn expected_sites(variant: Variant) -> Vec<SiteExpectation> {
    let vector = site(Some(VECTOR_ALLOCATE), 256, 1).with_totals(3, 768);
    let vectors = [vector.clone(), vector.clone(), vector.clone(), vector];
    match variant {
        Variant::Static => {
            let mut sites = vec![
                site(Some("_GLOBAL__sub_I_eh_alloc.cc"), EMERGENCY_POOL, 1),
                site(Some("search_object"), SORTED_FDES, 1),
                site(Some("search_object"), SORTED_FDES, 1),
                site(Some("_dl_new_object"), 1225, 1),
                site(Some("_dl_init_paths"), 320, 1),
            ];
            sites.extend(vectors);
            sites
        }
        _ => {
            // The pool's constructor has no symbol in libstdc++.so.
            let mut sites = vec![site(None, EMERGENCY_POOL, 1).with_totals(1, EMERGENCY_POOL)];
            sites.extend(vectors);
            sites.extend([
                site(Some("throw_through"), 192, 1).with_totals(3, 3 * 192),
                site(Some(VECTOR_ALLOCATE), 0, 0).with_totals(8, 1020),
                site(Some("main"), 0, 0).with_totals(1, 400),
                site(Some("main"), 0, 0).with_totals(1, 77),
                site(Some("main"), 0, 0).with_totals(1, 4),
            ]);
            sites
        }
    }
}

/// The four vector sites are throw_through's recursion depths: 1 to 4 throw_through frames.
fn assert_one_site_per_depth(image: &serde_json::Value) {
    let mut depths: Vec<usize> = image["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .filter(|site| leaf_function(site) == VECTOR_ALLOCATE && site["peak_bytes"] == 256)
        .map(|site| {
            let stack = site["stack"].as_array().expect("a stack");
            stack
                .iter()
                .filter(|frame| frame["function"] == "throw_through")
                .count()
        })
        .collect();
    depths.sort_unstable();
    assert_eq!(
        depths,
        vec![1, 2, 3, 4],
        "throw_through frames per vector site"
    );
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
        let expected = match variant {
            Variant::Static => static_numbers(GlibcStaticStartup::of(fixture)),
            _ => dynamic_numbers(),
        };
        assert_heap(image, &expected);
        let sites = expected_sites(variant);
        assert_sites(image, &sites);
        if variant == Variant::Dynamic {
            assert_eq!(image["sites"].as_array().map(Vec::len), Some(sites.len()));
        } else {
            assert_site_listed(
                image,
                &site(Some("throw_through"), 192, 1).with_totals(3, 576),
            );
        }
        assert_one_site_per_depth(image);
        assert_probe_costs(image, &expected, 0, 0);
    });
}
