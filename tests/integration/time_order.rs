//! The profile is in time order per process, samples included: the sampler and the tracer
//! race on one sink, and nested calls (malloc -> mmap) end before the call around them.

use std::collections::HashMap;

use memsup::trace::format::Record;
use memsup::trace::reader::read_profile;

use crate::common::*;

const BLOCK: u64 = 16 << 20;

/// Checks every process's timed records are in time order; returns how many samples lie
/// between a process's first and last heap record.
fn assert_time_order(records: &[Record], what: &str) -> usize {
    let mut last: HashMap<Option<u32>, (u64, usize)> = HashMap::new();
    for (index, record) in records.iter().enumerate() {
        let Some(time_ns) = record.time_ns() else {
            continue;
        };
        let previous = last.insert(record.pid(), (time_ns, index));
        if let Some((before, at)) = previous {
            assert!(
                before <= time_ns,
                "{what}: record {index} at {time_ns} ns after record {at} at {before} ns: {record:?}"
            );
        }
    }
    let heap = |record: &&Record| matches!(record, Record::Alloc { .. } | Record::Free { .. });
    let first = records.iter().position(|r| heap(&r)).unwrap_or(0);
    let end = records.iter().rposition(|r| heap(&r)).unwrap_or(0);
    records[first..end]
        .iter()
        .filter(|record| matches!(record, Record::StatusSample { .. }))
        .count()
}

#[test]
fn records_of_each_process_are_in_time_order_with_samples_among_them() {
    for variant in variants("residency") {
        let program = fixture("residency", variant);
        let recording = record_with_options(&["--interval", "1"], &program, &[], None);
        let profile = read_profile(&recording.profile).expect("reading the profile");
        let what = format!("residency {variant:?}");
        let samples = assert_time_order(&profile.records, &what);
        // Four steps 100 ms apart at a 1 ms interval: samples fall between the blocks.
        assert!(
            samples >= 10,
            "{what}: {samples} samples among the heap records"
        );
        let blocks = profile
            .records
            .iter()
            .filter(|record| matches!(record, Record::Alloc { size: BLOCK, .. }))
            .count();
        assert_eq!(blocks, 4, "{what}");
    }
}

#[test]
fn threads_racing_the_sampler_leave_the_records_in_time_order() {
    for variant in variants("threads") {
        let program = fixture("threads", variant);
        let recording = record_with_options(&["--interval", "1"], &program, &[], None);
        let profile = read_profile(&recording.profile).expect("reading the profile");
        assert_time_order(&profile.records, &format!("threads {variant:?}"));
    }
}
