//! fixtures/stdin_lines.c: stdin passes through memsup to the program.

use crate::common::*;

const INPUT: &[u8] = b"alpha\nbe\ngamma delta\n\nz\n";

#[test]
fn stdin_is_passed_through_and_lines_are_counted() {
    for_each_variant("stdin_lines", |variant, fixture| {
        let recording = record(fixture, &[], Some(INPUT));
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "z\n\ngamma delta\nbe\nalpha\nstdin_lines: 5 lines, 24 bytes allocated\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let dynamic = HeapExpectation {
            calls: calls(&[("malloc", 5), ("free", 5)]),
            returned_calls: 5,
            allocations: 5,
            bytes_allocated: 6 + 3 + 12 + 1 + 2,
            frees: 5,
            peak_live_bytes: 24,
            peak_live_blocks: 5,
            largest_allocation: 12,
            ..Default::default()
        };
        let lines = site(Some("copy_line"), 24, 5).with_totals(5, 24);
        let (expected, sites) = match variant {
            // Below these, _dl_get_origin's block (its size depends on the build directory)
            // may rank before or after copy_line's 24 bytes.
            Variant::Static => (
                dynamic.plus_static_startup(GlibcStaticStartup::of(fixture)),
                vec![
                    site(Some("_dl_new_object"), 1225, 1),
                    site(Some("_dl_init_paths"), 320, 1),
                    site(Some("_dl_find_object_init"), 160, 1),
                ],
            ),
            _ => (dynamic, vec![lines.clone()]),
        };
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        assert_site_listed(image, &lines);
        assert_probe_costs(image, &expected, 0, 0);
    });
}
