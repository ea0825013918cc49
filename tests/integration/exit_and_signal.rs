//! fixtures/exit3.c and fixtures/segv.c: a non-zero exit status and a death by signal are
//! passed through (memsup exits 3, and 128 + 11), with the leaks at the end.

use crate::common::*;

/// exit3's numbers for `variant` (also used by the fork_exec test for the exec'd child).
pub fn exit3_numbers(variant: Variant, fixture: &std::path::Path) -> HeapExpectation {
    let dynamic = HeapExpectation {
        calls: calls(&[("malloc", 2), ("calloc", 1), ("free", 1)]),
        returned_calls: 3,
        allocations: 3,
        bytes_allocated: 100 + 200 + 200,
        frees: 1,
        peak_live_bytes: 500,
        peak_live_blocks: 3,
        live_bytes_at_exit: 400,
        live_blocks_at_exit: 2,
        largest_allocation: 200,
        ..Default::default()
    };
    match variant {
        Variant::Dynamic => dynamic,
        Variant::Static => dynamic.plus_static_startup(GlibcStaticStartup::of(fixture)),
        // musl's calloc calls malloc.
        Variant::Musl => HeapExpectation {
            nested_calls: 1,
            ..dynamic
        },
    }
}

#[test]
fn exit_status_three_is_passed_through_with_leaks() {
    for_each_variant("exit3", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(recording.native.status.code(), Some(3));
        assert_eq!(recording.supervised.status.code(), Some(3));
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stderr),
            "exit3: this line goes to stderr\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(3));
        let expected = exit3_numbers(variant, fixture);
        assert_heap(image, &expected);
        let main = |bytes| site(Some("main"), bytes, 1).with_totals(1, bytes);
        let sites = match variant {
            // Below these, _dl_get_origin's block (its size depends on the build directory)
            // may rank anywhere among main's.
            Variant::Static => vec![
                site(Some("_dl_new_object"), 1225, 1),
                site(Some("_dl_init_paths"), 320, 1),
            ],
            _ => vec![main(200), main(200), main(100)],
        };
        assert_sites(image, &sites);
        assert_site_listed(image, &main(200));
        assert_site_listed(image, &main(100));
        assert_probe_costs(image, &expected, 0, 0);
    });
}

#[test]
fn death_by_sigsegv_exits_139_with_leaks() {
    for_each_variant("segv", |variant, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(recording.supervised.status.code(), Some(128 + 11));
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "segv: about to dereference NULL, k\n"
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "signal", Some(11));
        let dynamic = HeapExpectation {
            calls: calls(&[("malloc", 2), ("free", 1)]),
            returned_calls: 2,
            allocations: 2,
            bytes_allocated: 4096 + 1000,
            frees: 1,
            peak_live_bytes: 5096,
            peak_live_blocks: 2,
            live_bytes_at_exit: 4096,
            live_blocks_at_exit: 1,
            largest_allocation: 4096,
            ..Default::default()
        };
        let main = |bytes| site(Some("main"), bytes, 1).with_totals(1, bytes);
        let (expected, sites) = match variant {
            Variant::Static => (
                dynamic.plus_static_startup(GlibcStaticStartup::of(fixture)),
                vec![
                    main(4096),
                    site(Some("_dl_new_object"), 1225, 1),
                    main(1000),
                ],
            ),
            _ => (dynamic, vec![main(4096), main(1000)]),
        };
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        assert_probe_costs(image, &expected, 0, 1);
    });
}
