//! `--step-over out-of-line` and `--step-over stop-the-world` force the fallback mechanisms
//! of DESIGN.md §5 on every probe: fixtures/alloc_script.c and fixtures/threads.c must give
//! exactly the numbers of the default run, and the probe counters must show that every entry
//! hit went through the forced mechanism.

use crate::alloc_script::{alloc_script_expectation, ALLOC_SCRIPT_STDOUT};
use crate::common::expect::{assert_forced_step_over, ForcedStepOver};
use crate::common::*;
use crate::threads::{threads_expectation, THREADS_STDOUT};

fn check_alloc_script(mode: ForcedStepOver) {
    for_each_variant("alloc_script", |variant, fixture| {
        let recording = record_with_options(&["--step-over", mode.option()], fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            ALLOC_SCRIPT_STDOUT
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let (expected, sites) = alloc_script_expectation(variant, fixture);
        assert_heap(image, &expected);
        assert_top_sites(image, &sites);
        assert_forced_step_over(image, &expected, mode);
    });
}

fn check_threads(mode: ForcedStepOver) {
    for_each_variant("threads", |variant, fixture| {
        let recording = record_with_options(&["--step-over", mode.option()], fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            THREADS_STDOUT
        );
        let image = launched_image(&recording.report, fixture, &[]);
        assert_exit(image, "code", Some(0));
        let (expected, sites) = threads_expectation(variant, fixture);
        assert_heap(image, &expected);
        assert_top_sites(image, &sites);
        assert_forced_step_over(image, &expected, mode);
    });
}

#[test]
fn alloc_script_out_of_line_same_numbers() {
    check_alloc_script(ForcedStepOver::OutOfLine);
}

#[test]
fn alloc_script_stop_the_world_same_numbers() {
    check_alloc_script(ForcedStepOver::StopTheWorld);
}

#[test]
fn threads_out_of_line_same_numbers() {
    check_threads(ForcedStepOver::OutOfLine);
}

#[test]
fn threads_stop_the_world_same_numbers() {
    check_threads(ForcedStepOver::StopTheWorld);
}
