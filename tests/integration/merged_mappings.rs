//! A program's mapping and its allocator's that the kernel merged into one mapping of smaps
//! are counted apart: the sampler cuts the mapping where the recorded calls' ranges meet.

use crate::common::report::resident_at;
use crate::common::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// merged_mappings lays 16 MiB of its own beside an 8 MiB block's mapping (musl's brk area),
/// both written whole: at its exit the arenas hold the block's mapping alone (8 MiB, a page
/// more for glibc's chunk header, and a few pages of a `[heap]` when the C library made
/// one), the allocator's overhead a page or so, and the program's mapping is its own:
/// app's, or unknown's under musl, whose mmap's stack stops truncated at the system call
/// (no unwind tables).
#[test]
fn a_mapping_merged_with_an_allocator_s_is_counted_apart() {
    for_each_variant("merged_mappings", |variant, program| {
        let recording = record(program, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "block 8 MiB, mapping 16 MiB beside it: merged\n"
        );
        assert_eq!(recording.native.status.code(), Some(0));
        let image = launched_image(&recording.report, program, &[]);
        let what = format!("merged_mappings {variant:?}");
        showing_on_failure(&image["snapshots"], || {
            let snapshots = image["snapshots"].as_array().expect("snapshots");
            let exit = snapshots
                .iter()
                .find(|snapshot| snapshot["reason"] == "exit")
                .expect("an exit snapshot");
            let arena_rss = number(exit, "/arena_rss");
            assert!(
                (8 * MIB..=8 * MIB + 64 * KIB).contains(&arena_rss),
                "{what}: {arena_rss}"
            );
            let overhead = number(exit, "/arena_overhead_rss");
            assert!(overhead <= 64 * KIB, "{what}: {overhead}");
            let time_ns = number(exit, "/time_ns");
            let (app, unknown) = (
                resident_at(image, "app", time_ns),
                resident_at(image, "unknown", time_ns),
            );
            // The block is app's either way, and so are the program's own pages: a few
            // dozen, or a few hundred with the C library linked in.
            let (mapping_holder, own_pages) = match variant {
                Variant::Musl => (unknown, 0),
                Variant::Static => (app.saturating_sub(8 * MIB), MIB),
                _ => (app.saturating_sub(8 * MIB), 256 * KIB),
            };
            assert!(
                (16 * MIB..=16 * MIB + own_pages).contains(&mapping_holder),
                "{what}: app {app}, unknown {unknown}"
            );
        });
    });
}
