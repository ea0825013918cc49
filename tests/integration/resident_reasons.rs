//! Why memory stays resident: fixtures/spikes.c holds 4 MiB and three times allocates and
//! frees 8 MiB. glibc maps the first 8 MiB block, raises its mmap threshold to that chunk
//! (8 MiB and a page) when it is freed, and serves the next two from the arena, which keeps
//! the memory. The report says so once, with the numbers and the knob; musl (which maps each
//! block) and a fixed threshold (MALLOC_MMAP_THRESHOLD_) give no such line.

use serde_json::{json, Value};

use crate::common::report::report_output;
use crate::common::run::record_with_environment;
use crate::common::*;

const MIB: u64 = 1 << 20;
/// The mapping glibc makes for a request of 8 MiB: the block, its header, to the page.
const SPIKE_CHUNK: u64 = 8 * MIB + 4096;
const PRINTED: &str = "held 4 MiB, 3 spikes of 8 MiB\n";

fn why_resident_lines(profile: &std::path::Path) -> Vec<String> {
    let text = report_output(profile, &[]);
    text.lines()
        .filter(|line| line.trim_start().starts_with("why resident"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_raised_mmap_threshold_is_named_once_with_its_knob() {
    for_each_variant("spikes", |variant, program| {
        let what = format!("spikes {variant:?}");
        let recording = record(program, &[], None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), PRINTED);
        assert_eq!(recording.native.status.code(), Some(0));
        let image = launched_image(&recording.report, program, &[]);
        if variant == Variant::Musl {
            assert_eq!(image["mmap_threshold"], Value::Null, "{what}");
            assert!(why_resident_lines(&recording.profile).is_empty(), "{what}");
            return;
        }
        let rise = &image["mmap_threshold"];
        let time_ns = rise["time_ns"].clone();
        let expected = json!({
            "threshold_bytes": SPIKE_CHUNK, "trim_threshold_bytes": 2 * SPIKE_CHUNK,
            "time_ns": time_ns, "rises": 1, "blocks_from_arena": 2,
            "bytes_from_arena": 16 * MIB,
        });
        assert_eq!(rise, &expected, "{what}");
        let lines = why_resident_lines(&recording.profile);
        assert_eq!(lines.len(), 1, "{what}: {lines:?}");
        // Every word and number but the time of the rise, which the run decides.
        let (before, rest) = lines[0].split_once(" at ").expect("the time of the rise");
        let after = rest.split_once(" (").map(|(_, after)| after);
        assert_eq!(
            (before, after),
            (
                "  why resident         glibc raised its mmap threshold to 8.00 MiB",
                Some(
                    "a mapped block that size was freed): 2 later blocks (16.00 MiB) came from \
                     the arena instead of a mapping of their own, and the arena keeps what is \
                     freed there up to the trim threshold (16.01 MiB); \
                     MALLOC_MMAP_THRESHOLD_=131072 keeps the threshold where it starts"
                )
            ),
            "{what}"
        );
    });
}

#[test]
fn a_fixed_threshold_gives_no_reason() {
    let program = fixture("spikes", Variant::Dynamic);
    let fixed = [("MALLOC_MMAP_THRESHOLD_", "131072")];
    let recording = record_with_environment(&[], &fixed, &program, &[], None);
    assert_eq!(String::from_utf8_lossy(&recording.native.stdout), PRINTED);
    assert_eq!(recording.native.status.code(), Some(0));
    let image = launched_image(&recording.report, &program, &[]);
    assert_eq!(image["mmap_threshold"], Value::Null);
    assert!(why_resident_lines(&recording.profile).is_empty());
}
