//! `--step-over out-of-line` and `--step-over stop-the-world` force the fallback mechanisms
//! of DESIGN.md §5 on every probe: fixtures/alloc_script.c and fixtures/threads.c must give
//! exactly the numbers of the default run, and the probe counters must show that every entry
//! hit went through the forced mechanism. `--step-over` is how int3 probes are passed, so
//! these runs choose the int3 engine whatever engine the suite runs under.

use crate::common::expect::{assert_forced_step_over, ForcedStepOver};

fn check_alloc_script(mode: ForcedStepOver) {
    crate::alloc_script::check_alloc_script(
        &["--engine", "int3", "--step-over", mode.option()],
        |image, expected| assert_forced_step_over(image, expected, mode),
    );
}

fn check_threads(mode: ForcedStepOver) {
    crate::threads::check_threads(
        &["--engine", "int3", "--step-over", mode.option()],
        |image, expected| assert_forced_step_over(image, expected, mode),
    );
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
