//! fixtures/ifunc_alloc.c: allocator entry points that are IFUNCs are probed at the function
//! their resolver chose.

use crate::common::*;

#[test]
fn ifunc_allocator_calls_are_recorded() {
    for_each_variant("ifunc_alloc", |variant, fixture| {
        if variant == Variant::Musl {
            return; // musl does not support IFUNC
        }
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "ifunc_alloc: 1648 arena bytes used, 3 frees\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let dynamic = HeapExpectation {
            calls: calls(&[("malloc", 5), ("free", 3)]),
            returned_calls: 5,
            allocations: 5,
            bytes_allocated: 64 + 128 + 192 + 256 + 1000,
            frees: 3,
            peak_live_bytes: 1256,
            peak_live_blocks: 2,
            live_bytes_at_exit: 1256,
            live_blocks_at_exit: 2,
            largest_allocation: 1000,
            ..Default::default()
        };
        let kept = site(Some("main"), 1000, 1).with_totals(1, 1000);
        let made = site(Some("make_blocks"), 256, 1).with_totals(4, 640);
        let expected = match variant {
            Variant::Static => dynamic.plus_static_startup(GlibcStaticStartup::of(fixture)),
            _ => dynamic,
        };
        assert_heap(image, &expected);
        if variant == Variant::Dynamic {
            assert_sites(image, &[kept, made]);
        } else {
            assert_site_listed(image, &kept);
            assert_site_listed(image, &made);
        }
        assert_probe_costs(image, &expected, 0, 0);
    });
}
