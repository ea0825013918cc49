//! The hook engine under pressure (issue 12, item 5): a signal handler that allocates while
//! the interrupted thread is inside a hook, 64 threads on a machine of a few CPUs, and rings
//! so small (`MEMSUP_TEST_RING_RECORDS`) that they are full all the time. Exact numbers,
//! nothing lost, torn or late unless `--ring-full drop` says so and counts it, no deadlock
//! (every run is bounded by the harness's timeout), the program's native output and status.

use std::path::Path;

use crate::common::engine::assert_hook_costs;
use crate::common::run::record_with_environment;
use crate::common::*;
use crate::engines::{
    assert_fixture_engines_agree_on, assert_recorded_by_hooks_losslessly, EXACT_FIELDS,
};
use crate::threads::{threads_expectation, THREADS_CREATED, THREADS_STDOUT};

/// Ring size that keeps rings full: 16 records for threads that make thousands of calls.
const TINY_RING: &str = "16";

/// `memsup run --engine hooks --stacks caller --ring-full POLICY` of `fixture args`, with
/// rings of `ring_records` records when given; checked against a native run.
fn record_hooks(
    fixture: &Path,
    args: &[&str],
    ring_records: Option<&str>,
    ring_full: &str,
) -> Recording {
    let options = [
        "--engine",
        "hooks",
        "--stacks",
        "caller",
        "--ring-full",
        ring_full,
    ];
    let environment: Vec<(&str, &str)> = ring_records
        .map(|records| ("MEMSUP_TEST_RING_RECORDS", records))
        .into_iter()
        .collect();
    record_with_environment(&options, &environment, fixture, args, None)
}

/// Bytes of signal_alloc's first `pairs` loop blocks: 24 + (i % 8) * 8 for pair i.
fn loop_bytes(pairs: u64) -> u64 {
    let (rounds, rest) = (pairs / 8, pairs % 8);
    24 * pairs + 8 * (28 * rounds + rest * rest.saturating_sub(1) / 2)
}

#[test]
fn a_signal_handler_allocating_inside_a_hook_loses_nothing() {
    const SIGNALS: u64 = 2000;
    const HANDLER_BLOCK: u64 = 48;
    for_each_variant("signal_alloc", |variant, fixture| {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let pairs_file = directory.path().join("pairs");
        let pairs_path = pairs_file.to_str().expect("a UTF-8 path");
        let recording = record_hooks(fixture, &[pairs_path], None, "wait");
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "signal_alloc: 2000 signals handled, arena 96000 bytes, 2000 frees\n"
        );
        // The pairs of the run under memsup (the file was written last by that run).
        let pairs: u64 = std::fs::read_to_string(&pairs_file)
            .expect("the pairs file")
            .trim()
            .parse()
            .expect("a count of pairs");
        let image = launched_image(&recording.report, fixture, &[pairs_path]);
        assert_exit(image, "code", Some(0));
        let calls_each = pairs + SIGNALS;
        let program = HeapExpectation {
            calls: calls(&[("malloc", calls_each), ("free", calls_each)]),
            returned_calls: calls_each,
            allocations: calls_each,
            bytes_allocated: loop_bytes(pairs) + SIGNALS * HANDLER_BLOCK,
            frees: calls_each,
            largest_allocation: if pairs >= 8 { 80 } else { HANDLER_BLOCK },
            // Where the signals land decides whether a handler's block and a loop block
            // were ever live together: checked apart, within bounds (assert_peak_within).
            peak_live_bytes: number(image, "/peak_live_bytes"),
            peak_live_blocks: number(image, "/peak_live_blocks"),
            ..Default::default()
        };
        let expected = match variant {
            Variant::Static => {
                let (peak_bytes, peak_blocks) = (program.peak_live_bytes, program.peak_live_blocks);
                let startup = GlibcStaticStartup::of(fixture);
                let mut expected = program.plus_static_startup(startup);
                expected.peak_live_bytes = peak_bytes;
                expected.peak_live_blocks = peak_blocks;
                expected
            }
            _ => program,
        };
        assert_heap(image, &expected);
        // At most one loop block (up to 80 bytes) and one handler block live at once, above
        // what stays live (static glibc's start-up blocks); the 80-byte block alone once.
        let lowest = if pairs >= 8 { 80 } else { 24 };
        assert_peak_within(image, &expected, lowest..=80 + HANDLER_BLOCK, 1..=2);
        assert_hook_costs(image, &expected, 0, SIGNALS);
        assert_recorded_by_hooks_losslessly(image);
        let handler = image["sites"]
            .as_array()
            .expect("sites")
            .iter()
            .find(|site| leaf_function(site) == "on_usr1")
            .unwrap_or_else(|| panic!("no site in on_usr1: {:#}", image["sites"]));
        assert_eq!(number(handler, "/allocations"), SIGNALS);
        assert_eq!(number(handler, "/bytes_allocated"), SIGNALS * HANDLER_BLOCK);
    });
}

#[test]
fn sixty_four_threads_are_recorded_alike_by_both_engines() {
    for_each_variant("many_threads", |variant, fixture| {
        // Threads hold their blocks at the same time as the scheduler lets them: the peak
        // differs from run to run, whatever the engine.
        let unscheduled: Vec<&str> = EXACT_FIELDS
            .iter()
            .copied()
            .filter(|field| !field.starts_with("/peak_"))
            .collect();
        let (_, hooks) = assert_fixture_engines_agree_on(fixture, &[], &[], &unscheduled);
        assert_eq!(
            String::from_utf8_lossy(&hooks.native.stdout),
            "many_threads: 64 threads, 32000 pairs\n"
        );
        let image = launched_image(&hooks.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let expected = match variant {
            Variant::Musl => many_threads_musl(image),
            Variant::Dynamic => many_threads_glibc(image),
            // The start-up blocks of static glibc vary with the path: the engines' agreement
            // above is the check.
            Variant::Static => return,
        };
        assert_heap(image, &expected);
        // Each thread holds one block (24 to 528 bytes) at a time, on top of what stays
        // live (glibc's 64 DTVs).
        assert_peak_within(image, &expected, 24..=500 * 64 * 276 / PAIRS, 1..=64);
    });
}

/// many_threads' pairs per thread (fixtures/many_threads.c).
const PAIRS: u64 = 500;

/// Checks that the recorded peak lies `above` what stays live at exit by a number of bytes
/// and blocks within the given ranges: where the scheduler decides the exact peak.
fn assert_peak_within(
    image: &serde_json::Value,
    expected: &HeapExpectation,
    bytes: std::ops::RangeInclusive<u64>,
    blocks: std::ops::RangeInclusive<u64>,
) {
    let peak_bytes = number(image, "/peak_live_bytes") - expected.live_bytes_at_exit;
    let peak_blocks = number(image, "/peak_live_blocks") - expected.live_blocks_at_exit;
    assert!(
        bytes.contains(&peak_bytes),
        "peak bytes above the live at exit: {peak_bytes}, not in {bytes:?}"
    );
    assert!(
        blocks.contains(&peak_blocks),
        "peak blocks above the live at exit: {peak_blocks}, not in {blocks:?}"
    );
}

/// many_threads under glibc (fixtures/many_threads.c): the program's calls, a 272-byte DTV
/// calloc per thread, and at each thread's exit 2 free(NULL) and 2 unknown frees.
fn many_threads_glibc(image: &serde_json::Value) -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 32000), ("calloc", 64), ("free", 32256)]),
        returned_calls: 32064,
        allocations: 32064,
        bytes_allocated: 8_832_000 + 64 * 272,
        frees: 32000,
        null_frees: 128,
        unknown_frees: 128,
        live_bytes_at_exit: 64 * 272,
        live_blocks_at_exit: 64,
        largest_allocation: 528,
        // Checked apart, within bounds (assert_peak_within).
        peak_live_bytes: number(image, "/peak_live_bytes"),
        peak_live_blocks: number(image, "/peak_live_blocks"),
        ..Default::default()
    }
}

/// many_threads under musl: the program's calls and nothing else (fixtures/many_threads.c).
fn many_threads_musl(image: &serde_json::Value) -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 32000), ("free", 32000)]),
        returned_calls: 32000,
        allocations: 32000,
        bytes_allocated: 500 * 64 * 276,
        frees: 32000,
        // Each thread holds one block at a time; how many at once depends on the scheduler:
        // checked apart, within bounds (assert_peak_within).
        peak_live_bytes: number(image, "/peak_live_bytes"),
        peak_live_blocks: number(image, "/peak_live_blocks"),
        largest_allocation: 528,
        ..Default::default()
    }
}

/// Rings of 16 records with `--ring-full wait`: producers wait for the drain all the time,
/// and still every call is recorded, exactly as the int3 engine records it.
#[test]
fn full_rings_make_hooks_wait_and_lose_nothing() {
    for_each_variant("threads", |variant, fixture| {
        let recording = record_hooks(fixture, &[], Some(TINY_RING), "wait");
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            THREADS_STDOUT
        );
        let image = launched_image(&recording.report, fixture, &[]);
        let (expected, _) = threads_expectation(variant, fixture);
        assert_heap(image, &expected);
        assert_hook_costs(image, &expected, THREADS_CREATED, 0);
        assert!(
            number(image, "/hooks/full_waits") > 0,
            "{:#}",
            image["hooks"]
        );
    });
}

/// Rings of 16 records with `--ring-full drop`: calls are dropped, and every one is
/// counted: records read plus records dropped are the program's calls.
#[test]
fn full_rings_with_drop_count_every_dropped_call() {
    for_each_variant("threads", |variant, fixture| {
        let recording = record_hooks(fixture, &[], Some(TINY_RING), "drop");
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let (expected, _) = threads_expectation(variant, fixture);
        let calls: u64 = expected.calls.iter().sum::<u64>() + expected.nested_calls;
        let (records, dropped) = (
            number(image, "/hooks/records"),
            number(image, "/hooks/dropped"),
        );
        assert!(dropped > 0, "no call dropped: {:#}", image["hooks"]);
        assert_eq!(records + dropped, calls, "{:#}", image["hooks"]);
        assert_eq!(number(image, "/hooks/torn"), 0);
        assert_eq!(number(image, "/hooks/invalid"), 0);
        assert_eq!(number(image, "/probes/entry_hits"), 0);
    });
}
