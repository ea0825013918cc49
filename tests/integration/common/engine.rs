//! What depends on the engine that recorded an image: the suite runs once per engine
//! (scripts/test: memsup's default, the hook engine, then MEMSUP_ENGINE=int3). Both record
//! the same whole call stacks; the hook engine takes no stop per allocator call, so
//! assertions about probe stops have a hook-engine form.

use serde_json::Value;

use super::expect::{HeapExpectation, LIFECYCLE_STOPS_PER_IMAGE};
use super::expect::{LIFECYCLE_STOPS_PER_SIGNAL, LIFECYCLE_STOPS_PER_THREAD};
use super::report::number;
use super::tools::record_skip;

/// Whether `image` was recorded by the hook engine.
pub fn recorded_by_hooks(image: &Value) -> bool {
    image["engine"] == "hooks"
}

/// Whether the suite runs under the hook engine: memsup's default, unless MEMSUP_ENGINE
/// names the int3 engine.
pub fn suite_engine_is_hooks() -> bool {
    std::env::var("MEMSUP_ENGINE").map_or(true, |engine| engine != "int3")
}

/// The engine that records an image whose hooks could be placed, under this suite run.
pub fn suite_engine() -> &'static str {
    if suite_engine_is_hooks() {
        "hooks"
    } else {
        "int3"
    }
}

/// The smallest hook area on this machine, in MiB as memsup's reasons give it.
pub fn least_area_mib() -> u64 {
    use memsup::hooks::budget::LEAST_REGION_BYTES;
    use memsup::hooks::drain::{ring_capacity, ring_count};
    let full = memsup::hooks::layout::Shape::full(ring_count(), ring_capacity());
    (full.fixed_bytes() + 2 * LEAST_REGION_BYTES).div_ceil(1 << 20)
}

/// The hook engine's side of `assert_probe_costs`: no allocator call stopped (no entry or
/// return hit, no step), every call is one record read whole (nested ones included), none
/// lost or torn; the stops left are the mapping calls' and the life cycle's. A record is
/// late only where a flush for a snapshot overtook a thread between its clock reading and
/// its claim: at most one per thread and snapshot, and one per signal (a handler that
/// allocates holds the interrupted hook in that window).
pub fn assert_hook_costs(image: &Value, expected: &HeapExpectation, threads: u64, signals: u64) {
    let total_calls: u64 = expected.calls.iter().sum();
    let probes = &image["probes"];
    let exact = [
        ("/probes/entry_hits", 0),
        ("/probes/return_hits", 0),
        ("/probes/single_steps", 0),
        ("/probes/stop_the_world", 0),
        ("/probes/foreign_patches", 0),
        ("/hooks/records", total_calls + expected.nested_calls),
        ("/hooks/nested", expected.nested_calls),
        ("/hooks/dropped", 0),
        ("/hooks/torn", 0),
        ("/hooks/invalid", 0),
    ];
    let mut mismatches: Vec<String> = exact
        .iter()
        .filter(|&&(pointer, want)| number(image, pointer) != want)
        .map(|&(pointer, want)| {
            format!("{pointer}: expected {want}, got {}", number(image, pointer))
        })
        .collect();
    let late_allowed = late_allowance(image, threads, signals);
    let late = number(image, "/hooks/late");
    if late > late_allowed {
        mismatches.push(format!(
            "/hooks/late: {late}, more than {late_allowed} (snapshots, {threads} threads, \
             {signals} signals)"
        ));
    }
    let syscall_stops = number(probes, "/syscall_stops");
    let allowance = LIFECYCLE_STOPS_PER_IMAGE
        + LIFECYCLE_STOPS_PER_THREAD * threads
        + LIFECYCLE_STOPS_PER_SIGNAL * signals;
    let stops = number(probes, "/stops");
    if stops < syscall_stops || stops > syscall_stops + allowance {
        mismatches.push(format!(
            "stops {stops} outside [{syscall_stops}, {}] (syscall stops plus at most \
             {allowance} life-cycle stops)",
            syscall_stops + allowance
        ));
    }
    assert!(
        mismatches.is_empty(),
        "hook costs of {} (pid {}):\n  {}\nimage: {image:#}",
        image["exe"],
        image["pid"],
        mismatches.join("\n  ")
    );
}

/// How many records of `image` may be late: a flush for a snapshot can overtake each thread
/// (`threads` besides the main one) caught between its clock reading and its claim, and a
/// signal handler that allocates holds the hook it interrupted in that window.
pub fn late_allowance(image: &Value, threads: u64, signals: u64) -> u64 {
    let snapshots = image["snapshots"].as_array().map_or(0, Vec::len) as u64;
    snapshots * (threads + 1) + signals
}

/// What memsup says when it leaves its hook pages mapped at detach.
pub const HOOK_PAGES_LEFT: &str =
    "memsup: warning: a thread may still be inside memsup's hook code: it stays mapped, switched off";

/// How the note of an attach that removed what an earlier memsup left begins.
pub const EARLIER_MEMSUP_REMOVED: &str = "an earlier memsup left its code here";

/// `memsup_lines` without the hook engine's warning that it left its pages mapped at detach
/// (a thread stopped inside a hooked call, or a stale word on a stack that looks like one:
/// the check is conservative), recording that the clean detach was not shown. Under the
/// int3 engine the warning stays: it has no hook pages to leave.
pub fn without_hook_pages_left(memsup_lines: Vec<String>) -> Vec<String> {
    if !suite_engine_is_hooks() || !memsup_lines.iter().any(|line| line == HOOK_PAGES_LEFT) {
        return memsup_lines;
    }
    record_skip("a clean detach: memsup left its hook pages mapped, switched off");
    memsup_lines
        .into_iter()
        .filter(|line| line != HOOK_PAGES_LEFT)
        .collect()
}
