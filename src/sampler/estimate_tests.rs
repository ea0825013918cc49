use super::*;
use crate::events::EventKind;
use crate::proc::maps::parse_maps;
use crate::proc::pagemap::TestMapping;
use crate::sampler::snapshot;
use crate::trace::format::SnapshotReason;

const MIB: u64 = 1 << 20;
const READ_WRITE: u8 = MAPPING_READ | MAPPING_WRITE;

const MAPS: &str = "\
55d000000000-55d000001000 r--p 00000000 08:01 42 /usr/bin/program
55d000100000-55d000900000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0004001000 rw-p 00000000 00:00 0
7f0010000000-7f0014000000 ---p 00000000 00:00 0
7f0020000000-7f0020100000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
";

fn mapping(start: u64, end: u64, flags: u8, path: &str, rss: u64) -> MappingResidency {
    MappingResidency {
        start,
        end,
        flags,
        offset: 0,
        inode: 0,
        path: path.to_string(),
        rss,
        pss: rss,
        shared: 0,
        private_dirty: rss,
        anonymous: rss,
        swap: 0,
        swap_pss: 0,
    }
}

/// Counts as if `present(range)` pages of each range were present, private and written.
fn counting<'a>(
    counted: &'a mut Vec<(u64, u64)>,
    present: impl Fn(&(u64, u64)) -> u64 + 'a,
) -> impl FnOnce(&[(u64, u64)]) -> Option<Vec<PageCounts>> + 'a {
    move |ranges| {
        counted.extend_from_slice(ranges);
        let counts = |range: &(u64, u64)| PageCounts {
            present: present(range),
            exclusive: present(range),
            anonymous: present(range),
            anonymous_exclusive: present(range),
            swapped: 0,
        };
        Some(ranges.iter().map(counts).collect())
    }
}

fn pages(&(start, end): &(u64, u64)) -> u64 {
    (end - start) / PAGE
}

#[test]
fn unchanged_mappings_keep_their_residency_and_only_new_pages_are_counted() {
    let mut program = mapping(0x55d0_0000_0000, 0x55d0_0000_1000, MAPPING_READ, "", 4096);
    (program.path, program.inode) = ("/usr/bin/program".to_string(), 42);
    let base = vec![
        program.clone(),
        // The heap grew since: only its new end is counted.
        mapping(
            0x55d0_0010_0000,
            0x55d0_0050_0000,
            READ_WRITE,
            "[heap]",
            MIB,
        ),
        // Gone since: not in the estimate.
        mapping(0x7eff_0000_0000, 0x7eff_0001_0000, READ_WRITE, "", 65536),
        // A block's mapping that a new one below merged with: kept, the rest counted.
        mapping(0x7f00_0300_0000, 0x7f00_0400_1000, READ_WRITE, "", 2 * MIB),
        // Reaches below a mapping of now: that one is counted whole.
        mapping(0x7f00_1ff0_0000, 0x7f00_2008_0000, READ_WRITE, "", 3 * MIB),
        mapping(
            0x7ffd_0000_0000,
            0x7ffd_0002_1000,
            READ_WRITE,
            "[stack]",
            8192,
        ),
    ];
    let mut counted = Vec::new();
    let half = |range: &(u64, u64)| pages(range) / 2;
    // Half the pages present, 2 of them only read (the zero page), 3 swapped.
    let count = |ranges: &[(u64, u64)]| {
        counted.extend_from_slice(ranges);
        let counts = |range| PageCounts {
            present: half(range),
            exclusive: half(range) - 2,
            anonymous: half(range),
            anonymous_exclusive: half(range) - 2,
            swapped: 3,
        };
        Some(ranges.iter().map(counts).collect())
    };
    let estimate = compose(&parse_maps(MAPS), &base, Trust::Every, count).expect("counted");
    // Not the inaccessible reservation.
    assert_eq!(estimate.sampled, 3);
    // The 48 MiB below the merged block in pieces of 32 MiB at most.
    let expected = [
        (0x55d0_0050_0000, 0x55d0_0090_0000),
        (0x7f00_0000_0000, 0x7f00_0200_0000),
        (0x7f00_0200_0000, 0x7f00_0300_0000),
        (0x7f00_2000_0000, 0x7f00_2010_0000),
    ];
    assert_eq!(counted, expected);
    let mappings = &estimate.mappings;
    assert_eq!(mappings.len(), 6);
    assert_eq!(mappings[0], program);
    assert_eq!(mappings[5], base[5]);
    // 1 MiB kept; of 1024 new pages 512 present, 2 of them the zero page.
    let heap = &mappings[1];
    let written = 3 * MIB - 2 * PAGE;
    assert_eq!((heap.rss, heap.pss, heap.shared), (written, written, 0));
    assert_eq!((heap.swap, heap.anonymous), (3 * PAGE, written));
    let merged = &mappings[2];
    let written = 2 * MIB + 16 * MIB + 8 * MIB - 4 * PAGE;
    assert_eq!((merged.path.as_str(), merged.rss), ("", written));
    let reserved = &mappings[3];
    assert_eq!((reserved.flags, reserved.rss), (0, 0));
    assert_eq!(mappings[4].rss, MIB / 2 - 2 * PAGE);
    // The next estimate's base: what was taken, and the reservation; the ranges counted
    // were half resident, so they are counted again.
    let places: Vec<(u64, u64, u64)> = estimate
        .pieces
        .iter()
        .map(|piece| (piece.start, piece.end, piece.rss))
        .collect();
    let kept = [
        (0x55d0_0000_0000, 0x55d0_0000_1000, 4096),
        (0x55d0_0010_0000, 0x55d0_0050_0000, MIB),
        (0x7f00_0300_0000, 0x7f00_0400_1000, 2 * MIB),
        (0x7f00_1000_0000, 0x7f00_1400_0000, 0),
        (0x7ffd_0000_0000, 0x7ffd_0002_1000, 8192),
    ];
    assert_eq!(places, kept);
}

#[test]
fn a_file_mapped_again_at_another_offset_or_with_other_permissions_is_counted_whole() {
    const MAPS: &str = "\
7f0000000000-7f0000004000 r--p 00002000 08:01 42 /usr/lib/data
7f0000004000-7f0000008000 rw-p 00000000 00:00 0
";
    let mut file = mapping(0x7f00_0000_0000, 0x7f00_0000_4000, MAPPING_READ, "", 16384);
    (file.path, file.inode, file.offset) = ("/usr/lib/data".to_string(), 42, 0x1000);
    let anonymous = mapping(0x7f00_0000_4000, 0x7f00_0000_8000, MAPPING_READ, "", 16384);
    let mut counted = Vec::new();
    let count = counting(&mut counted, |_| 0);
    let base = [file, anonymous];
    let estimate = compose(&parse_maps(MAPS), &base, Trust::Every, count).expect("counted");
    assert_eq!(estimate.sampled, 2);
    let whole = [
        (0x7f00_0000_0000, 0x7f00_0000_4000),
        (0x7f00_0000_4000, 0x7f00_0000_8000),
    ];
    assert_eq!(counted, whole);
    let mappings = &estimate.mappings;
    assert_eq!((mappings[0].rss, mappings[1].rss), (0, 0));
}

/// A mapping growing by blocks, estimated twice: the second estimate keeps the piece the
/// first found wholly resident and counts again the one it found being written.
#[test]
fn a_chained_estimate_counts_again_only_what_was_not_wholly_resident() {
    const FIRST: &str = "7f0000000000-7f0006000000 rw-p 00000000 00:00 0\n";
    let mut counted = Vec::new();
    // Of three pieces of 32 MiB: the first written whole, the second half, the third not.
    let written = |&(start, end): &(u64, u64)| match start {
        0x7f00_0000_0000 => pages(&(start, end)),
        0x7f00_0200_0000 => pages(&(start, end)) / 2,
        _ => 0,
    };
    let count = counting(&mut counted, written);
    let first = compose(&parse_maps(FIRST), &[], Trust::Every, count).expect("counted");
    assert_eq!(first.mappings[0].rss, 48 * MIB);
    let pieces: Vec<(u64, u64)> = first.pieces.iter().map(|p| (p.start, p.end)).collect();
    assert_eq!(pieces, [(0x7f00_0000_0000, 0x7f00_0200_0000)]);
    // Then the mapping grew by 32 MiB below, written whole, and the rest was written too.
    const SECOND: &str = "7eff_fe000000-7f0006000000 rw-p 00000000 00:00 0\n";
    let mut counted = Vec::new();
    let count = counting(&mut counted, pages);
    let maps = parse_maps(&SECOND.replace('_', ""));
    let second = compose(&maps, &first.pieces, Trust::Every, count).expect("counted");
    let expected = [
        (0x7eff_fe00_0000, 0x7f00_0000_0000),
        (0x7f00_0200_0000, 0x7f00_0400_0000),
        (0x7f00_0400_0000, 0x7f00_0600_0000),
    ];
    assert_eq!(counted, expected);
    assert_eq!((second.sampled, second.mappings[0].rss), (1, 128 * MIB));
    // All four pieces wholly resident now: the next estimate counts nothing of them.
    assert_eq!(second.pieces.len(), 4);
    assert!(second.pieces.iter().all(wholly_resident));
}

#[test]
fn trusting_only_whole_parts_counts_again_what_the_base_showed_partly_resident() {
    const MAPS: &str = "\
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
7f0000200000-7f0000400000 rw-p 00000000 00:00 0
";
    let base = [
        mapping(0x7f00_0000_0000, 0x7f00_0010_0000, READ_WRITE, "", MIB),
        mapping(0x7f00_0020_0000, 0x7f00_0040_0000, READ_WRITE, "", MIB),
    ];
    let maps = parse_maps(MAPS);
    let mut counted = Vec::new();
    let count = counting(&mut counted, pages);
    let every = compose(&maps, &base, Trust::Every, count).expect("counted");
    assert_eq!((every.sampled, every.mappings[1].rss), (0, MIB));
    assert!(counted.is_empty());
    let count = counting(&mut counted, pages);
    let whole = compose(&maps, &base, Trust::Whole, count).expect("counted");
    assert_eq!(counted, [(0x7f00_0020_0000, 0x7f00_0040_0000)]);
    assert_eq!((whole.sampled, whole.mappings[1].rss), (1, 2 * MIB));
    assert_eq!(whole.mappings[0], base[0]);
}

#[test]
fn an_estimate_agrees_with_the_status_reads_within_a_sixteenth() {
    // 320 MiB before and after: 20 MiB either way.
    let at = |estimated| compare(estimated, 320 * MIB, 320 * MIB);
    assert_eq!(at(300 * MIB), Comparison::Agrees);
    assert_eq!(at(300 * MIB - 1), Comparison::Short);
    assert_eq!(at(340 * MIB), Comparison::Agrees);
    assert_eq!(at(340 * MIB + 1), Comparison::Over);
    // A small process: 2 MiB.
    assert_eq!(compare(8 * MIB, 10 * MIB, 10 * MIB), Comparison::Agrees);
    assert_eq!(compare(8 * MIB - 1, 10 * MIB, 10 * MIB), Comparison::Short);
    // Grown from 100 to 200 MiB meanwhile: anything between, 12.5 MiB either way.
    assert_eq!(
        compare(100 * MIB - MIB * 25 / 2, 200 * MIB, 100 * MIB),
        Comparison::Agrees
    );
    assert_eq!(
        compare(100 * MIB - MIB * 25 / 2 - 1, 100 * MIB, 200 * MIB),
        Comparison::Short
    );
    assert_eq!(
        compare(200 * MIB + MIB * 25 / 2 + 1, 100 * MIB, 200 * MIB),
        Comparison::Over
    );
}

#[test]
fn an_estimate_counts_at_most_eight_times_the_resident_memory() {
    let two_gib = [(0, 1024 * MIB), (2048 * MIB, 3072 * MIB)];
    assert!(affordable(&two_gib, 0));
    assert!(!affordable(&[(0, 2048 * MIB + PAGE)], 100 * MIB));
    assert!(affordable(&[(0, 8192 * MIB)], 1024 * MIB));
    assert!(!affordable(&[(0, 8192 * MIB + PAGE)], 1024 * MIB));
    let refused = compose(&parse_maps(MAPS), &[], Trust::Every, |_| None);
    assert!(refused.is_none());
}

/// This process's mappings as smaps gives them.
fn snapshot_of(pid: i32) -> Vec<MappingResidency> {
    match snapshot::take(pid, SnapshotReason::Signal, &mut Vec::new()) {
        Some(EventKind::SmapsSnapshot { mappings, .. }) => mappings,
        _ => panic!("no snapshot of this process"),
    }
}

fn residency_of(estimate: &Estimate, start: u64) -> (u64, u64, u64, u64) {
    let holding = estimate
        .mappings
        .iter()
        .find(|mapping| mapping.start == start)
        .expect("the test's mapping");
    (holding.rss, holding.pss, holding.anonymous, holding.shared)
}

fn status_rss_of(pid: i32) -> u64 {
    status_rss(pid, &mut Vec::new()).expect("this process's status")
}

#[test]
fn the_estimate_of_this_process_counts_the_written_pages_of_a_new_mapping() {
    const PAGES: u64 = 300;
    let pid = std::process::id() as i32;
    let before = snapshot_of(pid);
    // Executable too, so that the kernel merges it with no neighbour.
    let protection = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    let map = TestMapping::new(PAGES, protection);
    (0..100).for_each(|index| map.write(index));
    let mut buffer = Vec::new();
    let estimate = take(pid, &before, status_rss_of(pid), &mut buffer).expect("this process");
    let written = 100 * PAGE;
    assert_eq!(
        residency_of(&estimate, map.start),
        (written, written, written, 0)
    );
    // Other threads of the tests map and unmap meanwhile; most mappings stayed put.
    let sampled = estimate.sampled as usize;
    assert!(
        sampled >= 1 && sampled < estimate.mappings.len(),
        "{sampled}"
    );
}

/// 128 MiB written, then released, inside a mapping that keeps its shape: the status reads
/// show the estimate short, then over, and the mapping is counted again each time.
#[test]
fn a_mapping_written_or_released_in_place_is_counted_again() {
    const PAGES: u64 = 32 * 1024;
    let pid = std::process::id() as i32;
    let protection = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    let map = TestMapping::new(PAGES, protection);
    let unwritten = snapshot_of(pid);
    (0..PAGES).for_each(|index| map.write(index));
    let mut buffer = Vec::new();
    let written = take(pid, &unwritten, status_rss_of(pid), &mut buffer).expect("this process");
    let all = PAGES * PAGE;
    assert_eq!(residency_of(&written, map.start), (all, all, all, 0));
    let resident = snapshot_of(pid);
    // SAFETY: the test's own mapping, released, not unmapped.
    let released = unsafe {
        libc::madvise(
            map.start as *mut libc::c_void,
            all as usize,
            libc::MADV_DONTNEED,
        )
    };
    assert_eq!(released, 0);
    let estimate = take(pid, &resident, status_rss_of(pid), &mut buffer).expect("this process");
    assert_eq!(residency_of(&estimate, map.start), (0, 0, 0, 0));
}
