//! Why memory stays resident: fixtures/spikes.c holds 4 MiB and three times allocates and
//! frees 8 MiB. glibc maps the first 8 MiB block, raises its mmap threshold to that chunk
//! (8 MiB and a page) when it is freed, and serves the next two from the arena, which keeps
//! the memory. The report says so once, with the numbers and the knob; musl (which maps each
//! block) and a fixed threshold (MALLOC_MMAP_THRESHOLD_) give no such line.
//! fixtures/arena_gaps.c frees every other one of 1,024 blocks of 16 KiB, in the main arena
//! or in 4 threads' arenas: 512 free chunks of 16,400 bytes among live blocks, named once
//! as free chunks of the main arena, or as thread arenas, each with its knob; with one
//! thread and 80 KiB blocks, one arena in two heaps.

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

/// glibc's chunks of the 512 freed blocks of 16 KiB: 16,400 bytes each.
const FREED_CHUNKS: u64 = 512;
const FREED_BYTES: u64 = FREED_CHUNKS * 16_400;
/// glibc's thread cache, allocated inside malloc (no call memsup records) from the arena of
/// each thread's first malloc: among live blocks when the threads share the main arena.
const THREAD_CACHE_CHUNK: u64 = 656;

/// arena_gaps with `args` (threads, then the block size in KiB if not 16).
fn record_arena_gaps(
    program: &std::path::Path,
    args: &[&str],
    environment: &[(&str, &str)],
) -> Recording {
    let recording = record_with_environment(&[], environment, program, args, None);
    let (threads, kib) = (args[0], args.get(1).copied().unwrap_or("16"));
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        format!("kept 512 of 1024 blocks of {kib} KiB in {threads} threads\n")
    );
    assert_eq!(recording.native.status.code(), Some(0));
    recording
}

/// The part of a line after its time (" at 57.28 ms,"), which the run decides.
fn after_the_time(line: &str) -> (&str, &str) {
    let (before, rest) = line.split_once(" at ").expect("a time");
    let after = rest.split_once([',', ':']).map_or("", |(_, after)| after);
    (before, after)
}

#[test]
fn free_chunks_among_live_blocks_are_named_once_with_their_knob() {
    for_each_variant("arena_gaps", |variant, program| {
        let what = format!("arena_gaps {variant:?}");
        let recording = record_arena_gaps(program, &["0"], &[]);
        let image = launched_image(&recording.report, program, &["0"]);
        let lines = why_resident_lines(&recording.profile);
        if variant == Variant::Musl {
            // musl's blocks are not glibc's chunks in a [heap]: nothing to say.
            assert_eq!(image["arena_free"], Value::Null, "{what}");
            assert!(lines.is_empty(), "{what}: {lines:?}");
            return;
        }
        let free = &image["arena_free"];
        assert_eq!(
            (&free["main"]["free_chunks"], &free["main"]["free_bytes"]),
            (&json!(FREED_CHUNKS), &json!(FREED_BYTES)),
            "{what}: {free}"
        );
        assert_eq!(free["main"]["main_class"], json!([16384, 32768]), "{what}");
        assert_eq!(free["thread_arenas"], 0, "{what}");
        assert_eq!(lines.len(), 1, "{what}: {lines:?}");
        assert_eq!(
            after_the_time(&lines[0]),
            (
                "  why resident         8.01 MiB free in 512 chunks (most in 16 KiB–32 KiB \
                 ones) among live blocks in the main arena",
                " glibc reuses them for requests that fit, but cannot give back a page a live \
                 block shares; malloc_trim(0) returns their whole free pages"
            ),
            "{what}"
        );
    });
}

#[test]
fn thread_arenas_are_named_once_with_their_knob() {
    let program = fixture("arena_gaps", Variant::Dynamic);
    let recording = record_arena_gaps(&program, &["4"], &[]);
    let image = launched_image(&recording.report, &program, &["4"]);
    let free = &image["arena_free"];
    assert_eq!(free["thread_arenas"], 4, "{free}");
    assert_eq!(
        (
            &free["threads"]["free_chunks"],
            &free["threads"]["free_bytes"]
        ),
        (&json!(FREED_CHUNKS), &json!(FREED_BYTES)),
        "{free}"
    );
    // The freed chunks are resident, and the arenas' own pages too.
    let overhead = free["thread_overhead_rss_bytes"].as_u64().unwrap();
    assert!(
        (FREED_BYTES..FREED_BYTES + (1 << 20)).contains(&overhead),
        "{free}"
    );
    assert_eq!(free["main"]["free_bytes"], 0, "{free}");
    let lines = why_resident_lines(&recording.profile);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let (before, after) = after_the_time(&lines[0]);
    assert!(
        before.starts_with("  why resident         4 thread arenas hold ")
            && before.ends_with(" that no live block accounts for"),
        "{before}"
    );
    assert_eq!(
        after,
        " 8.01 MiB free in 512 chunks (most in 16 KiB–32 KiB ones): glibc gives threads arenas \
         of their own, up to 8 per core, and reuses free memory only within its arena; \
         MALLOC_ARENA_MAX caps how many there are (1: every thread shares the main arena)"
    );
}

/// One thread's 1,024 blocks of 80 KiB (81,936-byte chunks, 80 MiB in all) outgrow its
/// arena's first 64 MiB heap: the arena continues in a second heap and is still one arena.
#[test]
fn an_arena_grown_past_one_heap_is_one_thread_arena() {
    glibc_variants_of("arena_gaps", |variant, program| {
        let args = ["1", "80"];
        let recording = record_arena_gaps(program, &args, &[]);
        let image = launched_image(&recording.report, program, &args);
        let free = &image["arena_free"];
        assert_eq!(free["thread_arenas"], 1, "{variant:?}: {free}");
        // Every other block freed, each between live ones but the last of the first heap's,
        // which merged into what that heap had left.
        assert_eq!(
            (
                &free["threads"]["free_chunks"],
                &free["threads"]["free_bytes"]
            ),
            (&json!(511), &json!(511 * 81_936)),
            "{variant:?}: {free}"
        );
        let lines = why_resident_lines(&recording.profile);
        assert_eq!(lines.len(), 1, "{variant:?}: {lines:?}");
        let (before, _) = after_the_time(&lines[0]);
        assert!(
            before.starts_with("  why resident         1 thread arena holds "),
            "{variant:?}: {before}"
        );
    });
}

#[test]
fn threads_sharing_the_main_arena_leave_its_free_chunks() {
    let program = fixture("arena_gaps", Variant::Dynamic);
    let recording = record_arena_gaps(&program, &["4"], &[("MALLOC_ARENA_MAX", "1")]);
    let image = launched_image(&recording.report, &program, &["4"]);
    let free = &image["arena_free"];
    assert_eq!(free["thread_arenas"], 0, "{free}");
    // Neighbours' freed blocks merge into one chunk: the bytes are exact, not the count.
    let main = &free["main"];
    assert_eq!(
        main["free_bytes"],
        FREED_BYTES + 4 * THREAD_CACHE_CHUNK,
        "{free}"
    );
    let chunks = main["free_chunks"].as_u64().unwrap();
    assert!((1..=FREED_CHUNKS + 4).contains(&chunks), "{free}");
    let lines = why_resident_lines(&recording.profile);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(" among live blocks in the main arena at "),
        "{lines:?}"
    );
}
