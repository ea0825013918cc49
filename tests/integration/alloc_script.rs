//! fixtures/alloc_script.c: a fixed malloc/free script with a known peak, leaks and call sites.

use std::path::Path;

use crate::common::expect::SiteExpectation;
use crate::common::*;

/// The fixture's stdout, natively and under memsup.
pub const ALLOC_SCRIPT_STDOUT: &str =
    "alloc_script checksum=3107620982\nalloc_script leaked 1128 bytes in 3 blocks\n";

fn expected_heap() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 9), ("free", 7)]),
        returned_calls: 9,
        allocations: 9,
        bytes_allocated: 9000 + 3 * 1000 + 5000 + 2500 + 2 * 64,
        frees: 6,
        null_frees: 1,
        peak_live_bytes: 10500,
        peak_live_blocks: 5,
        live_bytes_at_exit: 1128,
        live_blocks_at_exit: 3,
        largest_allocation: 9000,
        ..Default::default()
    }
}

/// The heap numbers and leading sites of `variant` (shared with the step-over tests). gcc
/// unrolls main's loop of three make_buffer calls: three call sites, one block each.
pub fn alloc_script_expectation(
    variant: Variant,
    fixture: &Path,
) -> (HeapExpectation, Vec<SiteExpectation>) {
    let buffer = site(Some("make_buffer"), 1000, 1).with_totals(1, 1000);
    let mut sites = vec![
        site(Some("make_record"), 5000, 1).with_totals(1, 5000),
        site(Some("main"), 2500, 1).with_totals(1, 2500),
    ];
    let expected = match variant {
        Variant::Dynamic | Variant::Musl => expected_heap(),
        Variant::Static => {
            sites.push(site(Some("_dl_new_object"), 1225, 1).with_totals(1, 1225));
            expected_heap().plus_static_startup(GlibcStaticStartup::of(fixture))
        }
    };
    sites.extend([buffer.clone(), buffer.clone(), buffer]);
    (expected, sites)
}

/// Runs alloc_script (every variant) with `options`, checks its output and numbers, and hands
/// each image to `check_costs` with the heap expectation.
pub fn check_alloc_script(
    options: &[&str],
    check_costs: impl Fn(&serde_json::Value, &HeapExpectation),
) {
    for_each_variant("alloc_script", |variant, fixture| {
        let recording = record_with_options(options, fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            ALLOC_SCRIPT_STDOUT
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let (expected, sites) = alloc_script_expectation(variant, fixture);
        assert_heap(image, &expected);
        assert_sites(image, &sites);
        check_costs(image, &expected);
    });
}

#[test]
fn alloc_script_numbers_peak_and_call_sites() {
    check_alloc_script(&[], |image, expected| {
        assert_probe_costs(image, expected, 0, 0)
    });
}
