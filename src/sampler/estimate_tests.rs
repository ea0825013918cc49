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

/// A private anonymous mapping as a snapshot gives it, `rss` written.
fn mapping(start: u64, end: u64, flags: u8, path: &str, rss: u64) -> MappingResidency {
    MappingResidency {
        start,
        end,
        flags,
        path: path.to_string(),
        rss,
        pss: rss,
        private_dirty: rss,
        anonymous: rss,
        ..MappingResidency::default()
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

/// `compose` where no mapping holds hugetlb pages.
fn compose_ordinary(
    maps: &[MapEntry],
    base: &[MappingResidency],
    trust: Trust,
    count: impl FnOnce(&[(u64, u64)]) -> Option<Vec<PageCounts>>,
) -> Option<Estimate> {
    compose(maps, (base, &[]), trust, &HugetlbDevices::default(), count)
}

fn wholly_resident(part: &MappingResidency) -> bool {
    part.rss >= part.end - part.start
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
    let estimate =
        compose_ordinary(&parse_maps(MAPS), &base, Trust::Every, count).expect("counted");
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
    // The next estimate's base: what was taken, the reservation, and the new mapping
    // counted whole; the ranges counted where the heap and the merged block grew were half
    // resident, so they are counted again.
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
        (0x7f00_2000_0000, 0x7f00_2010_0000, MIB / 2 - 2 * PAGE),
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
    let estimate =
        compose_ordinary(&parse_maps(MAPS), &base, Trust::Every, count).expect("counted");
    assert_eq!(estimate.sampled, 2);
    let whole = [
        (0x7f00_0000_0000, 0x7f00_0000_4000),
        (0x7f00_0000_4000, 0x7f00_0000_8000),
    ];
    assert_eq!(counted, whole);
    let mappings = &estimate.mappings;
    assert_eq!((mappings[0].rss, mappings[1].rss), (0, 0));
}

/// A mapping growing downwards by blocks, estimated three times: a range counted while the
/// mapping grew and found not wholly resident is counted again by the next estimate, and
/// only that range and what is new.
#[test]
fn a_chained_estimate_counts_again_only_what_was_not_wholly_resident() {
    let places = |estimate: &Estimate| -> Vec<(u64, u64)> {
        let pieces = estimate.pieces.iter();
        pieces.map(|piece| (piece.start, piece.end)).collect()
    };
    let maps = |text: &str| parse_maps(&text.replace('_', ""));
    // 32 MiB, new and written whole.
    let first_maps = maps("7f00_00000000-7f00_02000000 rw-p 00000000 00:00 0\n");
    let mut counted = Vec::new();
    let count = counting(&mut counted, pages);
    let first = compose_ordinary(&first_maps, &[], Trust::Every, count).expect("counted");
    assert_eq!(places(&first), [(0x7f00_0000_0000, 0x7f00_0200_0000)]);
    // Grown by 96 MiB below, of which the top 32 MiB written, the next half, the last not.
    let grown = maps("7eff_fa000000-7f00_02000000 rw-p 00000000 00:00 0\n");
    let written = |&(start, end): &(u64, u64)| match start {
        0x7eff_fe00_0000 => pages(&(start, end)),
        0x7eff_fc00_0000 => pages(&(start, end)) / 2,
        _ => 0,
    };
    let mut counted = Vec::new();
    let count = counting(&mut counted, written);
    let second = compose_ordinary(&grown, &first.pieces, Trust::Every, count).expect("counted");
    let below = [
        (0x7eff_fa00_0000, 0x7eff_fc00_0000),
        (0x7eff_fc00_0000, 0x7eff_fe00_0000),
        (0x7eff_fe00_0000, 0x7f00_0000_0000),
    ];
    assert_eq!(counted, below);
    assert_eq!((second.sampled, second.mappings[0].rss), (1, 80 * MIB));
    let whole = [below[2], (0x7f00_0000_0000, 0x7f00_0200_0000)];
    assert_eq!(places(&second), whole);
    // Then all written: only the two ranges left out are counted.
    let mut counted = Vec::new();
    let count = counting(&mut counted, pages);
    let third = compose_ordinary(&grown, &second.pieces, Trust::Every, count).expect("counted");
    assert_eq!(counted, below[..2]);
    assert_eq!((third.sampled, third.mappings[0].rss), (1, 128 * MIB));
    assert_eq!(third.pieces.len(), 4);
    assert!(third.pieces.iter().all(wholly_resident));
}

/// glibc's mmapped chunks of 64 MiB + a page, merged into one mapping as they are made
/// below one another, each with its top page never written: the written ones are kept as
/// pieces however the 32 MiB ranges fall across them, so the next estimate counts only
/// what is new.
#[test]
fn a_range_short_of_a_few_pages_is_kept_as_written() {
    const BLOCK: u64 = (64 << 20) + PAGE;
    let top = 0x7f00_0000_0000u64;
    let grown = |blocks: u64| MapEntry {
        start: top - blocks * BLOCK,
        end: top,
        ..parse_maps("7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n")[0].clone()
    };
    // Every page written but each block's top one.
    let written = |&(start, end): &(u64, u64)| {
        let tops = (start..end)
            .step_by(PAGE as usize)
            .filter(|page| (top - page) % BLOCK == PAGE)
            .count() as u64;
        pages(&(start, end)) - tops
    };
    let count_bytes =
        |counted: &[(u64, u64)]| -> u64 { counted.iter().map(|(start, end)| end - start).sum() };
    let mut counted = Vec::new();
    let count = counting(&mut counted, written);
    let first = compose_ordinary(&[grown(2)], &[], Trust::Every, count).expect("counted");
    assert_eq!(first.mappings[0].rss, 2 * (BLOCK - PAGE));
    // Two blocks more, twice: each time only their pages are counted, since the ranges
    // counted the time before were kept.
    let mut base = first.pieces;
    for blocks in [4, 6] {
        let mut counted = Vec::new();
        let count = counting(&mut counted, written);
        let next = compose_ordinary(&[grown(blocks)], &base, Trust::Every, count).expect("counted");
        assert_eq!(count_bytes(&counted), 2 * BLOCK);
        assert_eq!(next.mappings[0].rss, blocks * (BLOCK - PAGE));
        base = next.pieces;
    }
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
    let every = compose_ordinary(&maps, &base, Trust::Every, count).expect("counted");
    assert_eq!((every.sampled, every.mappings[1].rss), (0, MIB));
    assert!(counted.is_empty());
    let count = counting(&mut counted, pages);
    let whole = compose_ordinary(&maps, &base, Trust::Whole, count).expect("counted");
    assert_eq!(counted, [(0x7f00_0020_0000, 0x7f00_0040_0000)]);
    assert_eq!((whole.sampled, whole.mappings[1].rss), (1, 2 * MIB));
    assert_eq!(whole.mappings[0], base[0]);
}

/// A recount trusts a glibc block short of its last page, and counts a one-page mapping
/// never written: thousands of those could have gained a page each.
#[test]
fn a_recount_trusts_parts_short_of_a_64th_and_not_of_a_page() {
    const MAPS: &str = "\
7f0000000000-7f0004001000 rw-p 00000000 00:00 0
7f0010000000-7f0010001000 rw-p 00000000 00:00 0
";
    let block = (0x7f00_0000_0000, 0x7f00_0400_1000);
    let base = [
        mapping(block.0, block.1, READ_WRITE, "", 64 * MIB),
        mapping(0x7f00_1000_0000, 0x7f00_1000_1000, READ_WRITE, "", 0),
    ];
    let mut counted = Vec::new();
    let count = counting(&mut counted, pages);
    let whole = compose_ordinary(&parse_maps(MAPS), &base, Trust::Whole, count).expect("counted");
    assert_eq!(counted, [(0x7f00_1000_0000, 0x7f00_1000_1000)]);
    assert_eq!(whole.mappings[0].rss, 64 * MIB);
    assert_eq!(whole.mappings[1].rss, PAGE);
}

#[test]
fn an_estimate_agrees_with_the_status_reads_from_a_64th_below_to_a_16th_above() {
    let error = counter_error();
    // 256 KiB on this machine's 2 CPUs at least, 64 pages a CPU at the least.
    assert!(error >= 64 * PAGE && error % (64 * PAGE) == 0, "{error}");
    // 320 MiB before and after: 5 MiB below, 20 MiB above.
    let at = |estimated| compare(estimated, 320 * MIB, 320 * MIB);
    let (below, above) = (5 * MIB + error, 20 * MIB + error);
    assert_eq!(at(320 * MIB - below), Comparison::Agrees);
    assert_eq!(at(320 * MIB - below - 1), Comparison::Short);
    assert_eq!(at(320 * MIB + above), Comparison::Agrees);
    assert_eq!(at(320 * MIB + above + 1), Comparison::Over);
    // The 64 MiB block written after the base: 4 MiB short of 68 MiB is short.
    assert_eq!(compare(64 * MIB, 68 * MIB, 68 * MIB), Comparison::Short);
    // A small process: 2 MiB either way.
    let small = |estimated| compare(estimated, 10 * MIB, 10 * MIB);
    assert_eq!(small(8 * MIB - error), Comparison::Agrees);
    assert_eq!(small(8 * MIB - error - 1), Comparison::Short);
    assert_eq!(small(12 * MIB + error + 1), Comparison::Over);
    // Grown from 100 to 200 MiB meanwhile: anything between, 3.125 MiB below, 12.5 above.
    let (below, above) = (MIB * 25 / 8 + error, MIB * 25 / 2 + error);
    let grown = |estimated| compare(estimated, 100 * MIB, 200 * MIB);
    assert_eq!(grown(100 * MIB - below), Comparison::Agrees);
    assert_eq!(grown(100 * MIB - below - 1), Comparison::Short);
    assert_eq!(grown(200 * MIB + above), Comparison::Agrees);
    assert_eq!(grown(200 * MIB + above + 1), Comparison::Over);
    // The reads in either order.
    assert_eq!(
        compare(200 * MIB + above + 1, 200 * MIB, 100 * MIB),
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
    let refused = compose_ordinary(&parse_maps(MAPS), &[], Trust::Every, |_| None);
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
    let estimate = take(
        pid,
        (&before, &[]),
        status_rss_of(pid),
        &HugetlbDevices::default(),
        &mut buffer,
    )
    .expect("this process");
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

/// A child process holding one mapping, which it writes whole or releases when told: what
/// is estimated is its memory, which no other test changes meanwhile.
struct Holder {
    pid: i32,
    commands: i32,
    replies: i32,
    start: u64,
}

impl Holder {
    const WRITE: u8 = b'w';
    const RELEASE: u8 = b'r';
    const QUIT: u8 = b'q';

    fn new(pages: u64) -> Holder {
        let (mut commands, mut replies) = ([0; 2], [0; 2]);
        // SAFETY: pipes into valid arrays; the child runs only system calls (no allocation
        // or lock another thread of this process could hold) and ends with _exit.
        unsafe {
            // Closed at an exec: a test that spawns a program meanwhile keeps no end open.
            assert_eq!(libc::pipe2(commands.as_mut_ptr(), libc::O_CLOEXEC), 0);
            assert_eq!(libc::pipe2(replies.as_mut_ptr(), libc::O_CLOEXEC), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                libc::close(commands[1]);
                libc::close(replies[0]);
                hold(pages, commands[0], replies[1]);
            }
            libc::close(commands[0]);
            libc::close(replies[1]);
            let mut start = [0u8; 8];
            let read = libc::read(replies[0], start.as_mut_ptr().cast(), 8);
            assert_eq!(read, 8);
            Holder {
                pid,
                commands: commands[1],
                replies: replies[0],
                start: u64::from_ne_bytes(start),
            }
        }
    }

    /// Has the child do `command` and waits until it has.
    fn ask(&self, command: u8) {
        let mut reply = 0u8;
        // SAFETY: one byte each way over the holder's own pipes.
        unsafe {
            assert_eq!(
                libc::write(self.commands, (&command as *const u8).cast(), 1),
                1
            );
            assert_eq!(
                libc::read(self.replies, (&mut reply as *mut u8).cast(), 1),
                1
            );
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.ask(Holder::QUIT);
        // SAFETY: the holder's own descriptors and child, which has answered its last.
        unsafe {
            libc::close(self.commands);
            libc::close(self.replies);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The child's side of `Holder`: maps `pages` pages (executable too, so that no neighbour
/// merges with them), sends their address, then does each command and answers it.
///
/// # Safety
/// Runs in a fork child, where only system calls are safe.
unsafe fn hold(pages: u64, commands: i32, replies: i32) -> ! {
    let bytes = (pages * PAGE) as usize;
    let protection = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let map = libc::mmap(std::ptr::null_mut(), bytes, protection, flags, -1, 0);
    let start = (map as u64).to_ne_bytes();
    libc::write(replies, start.as_ptr().cast(), 8);
    let mut command = 0u8;
    while libc::read(commands, (&mut command as *mut u8).cast(), 1) == 1 {
        match command {
            Holder::WRITE => (0..pages).for_each(|page| {
                std::ptr::write_volatile((map as *mut u8).add((page * PAGE) as usize), 1)
            }),
            Holder::RELEASE => _ = libc::madvise(map, bytes, libc::MADV_DONTNEED),
            _ => break,
        }
        libc::write(replies, (&command as *const u8).cast(), 1);
    }
    libc::write(replies, (&command as *const u8).cast(), 1);
    libc::_exit(0)
}

/// 128 MiB written, then released, inside a mapping that keeps its shape: the status reads
/// show the estimate short, then over, and the mapping is counted again each time.
#[test]
fn a_mapping_written_or_released_in_place_is_counted_again() {
    const PAGES: u64 = 32 * 1024;
    let holder = Holder::new(PAGES);
    let pid = holder.pid;
    let unwritten = snapshot_of(pid);
    holder.ask(Holder::WRITE);
    let mut buffer = Vec::new();
    let written = take(
        pid,
        (&unwritten, &[]),
        status_rss_of(pid),
        &HugetlbDevices::default(),
        &mut buffer,
    )
    .expect("the child");
    let all = PAGES * PAGE;
    assert_eq!(residency_of(&written, holder.start), (all, all, all, 0));
    assert!(written.recounted);
    let resident = snapshot_of(pid);
    holder.ask(Holder::RELEASE);
    let estimate = take(
        pid,
        (&resident, &[]),
        status_rss_of(pid),
        &HugetlbDevices::default(),
        &mut buffer,
    )
    .expect("the child");
    assert_eq!(residency_of(&estimate, holder.start), (0, 0, 0, 0));
    assert!(estimate.recounted);
}

#[test]
fn mappings_out_of_address_order_still_find_their_parts() {
    let base = vec![
        mapping(0x1000_0000, 0x1010_0000, READ_WRITE, "", MIB),
        mapping(0x2000_0000, 0x2010_0000, READ_WRITE, "", MIB / 2),
        mapping(0x3000_0000, 0x3010_0000, READ_WRITE, "", MIB / 4),
    ];
    let maps = parse_maps(
        "30000000-30100000 rw-p 00000000 00:00 0\n\
         10000000-10100000 rw-p 00000000 00:00 0\n\
         20000000-20100000 rw-p 00000000 00:00 0\n",
    );
    let mut counted = Vec::new();
    let estimate =
        compose_ordinary(&maps, &base, Trust::Every, counting(&mut counted, pages)).unwrap();
    assert_eq!(counted, []);
    let rss: Vec<u64> = estimate
        .mappings
        .iter()
        .map(|mapping| mapping.rss)
        .collect();
    assert_eq!(rss, [MIB / 4, MIB, MIB / 2]);
}

#[test]
fn mappings_of_hugetlb_pages_are_not_counted() {
    let maps = parse_maps(
        "10000000-10800000 rw-p 00000000 00:11 5 /anon_hugepage (deleted)\n\
         10800000-11000000 rw-s 00000000 00:22 6 /memfd:pool (deleted)\n\
         11000000-11100000 rw-p 00000000 00:00 0\n",
    );
    let hugetlb = HugetlbDevices::of(&[(0, 0x22)]);
    let mut counted = Vec::new();
    let count = counting(&mut counted, pages);
    let estimate = compose(&maps, (&[], &[]), Trust::Every, &hugetlb, count).unwrap();
    assert_eq!(counted, [(0x1100_0000, 0x1110_0000)]);
    let rss: Vec<u64> = estimate
        .mappings
        .iter()
        .map(|mapping| mapping.rss)
        .collect();
    assert_eq!(rss, [0, 0, MIB]);
    // Kept for the next estimate as they are, so not counted then either.
    let kept: Vec<u64> = estimate.pieces.iter().map(|piece| piece.start).collect();
    assert_eq!(kept, [0x1000_0000, 0x1080_0000, 0x1100_0000]);
}

/// A 16 MiB block freed (munmapped) and a 24 MiB one mapped where it lay, its top over the
/// old block's place, and a block freed and mapped again at the same address and size: in
/// the maps text the first looks grown, the second unchanged. Neither takes the old
/// block's residency, where the new pages may not be written yet; a mapping untouched
/// keeps its own.
#[test]
fn a_mapping_laid_where_one_was_unmapped_is_counted_not_taken_from_the_base() {
    const MAPS: &str = "\
7f0000000000-7f0001801000 rw-p 00000000 00:00 0
7f0002000000-7f0002401000 rw-p 00000000 00:00 0
7f0003000000-7f0003401000 rw-p 00000000 00:00 0
";
    let old = 0x7f00_0080_0000;
    let base = [
        mapping(old, old + 16 * MIB + PAGE, READ_WRITE, "", 16 * MIB),
        mapping(0x7f00_0200_0000, 0x7f00_0240_1000, READ_WRITE, "", 4 * MIB),
        mapping(0x7f00_0300_0000, 0x7f00_0340_1000, READ_WRITE, "", 4 * MIB),
    ];
    let unmapped = [
        (old, old + 16 * MIB + PAGE),
        (0x7f00_0200_0000, 0x7f00_0240_1000),
    ];
    let mut counted = Vec::new();
    let count = counting(&mut counted, |_| 0);
    let hugetlb = HugetlbDevices::default();
    let maps = parse_maps(MAPS);
    let estimate =
        compose(&maps, (&base, &unmapped), Trust::Every, &hugetlb, count).expect("counted");
    let big = 0x7f00_0000_0000;
    assert_eq!(
        counted,
        [
            (big, 0x7f00_0180_1000),
            (0x7f00_0200_0000, 0x7f00_0240_1000)
        ]
    );
    let rss: Vec<u64> = estimate
        .mappings
        .iter()
        .map(|mapping| mapping.rss)
        .collect();
    assert_eq!(rss, [0, 0, 4 * MIB]);
    // Without the log, the old residency is taken: what the estimate got wrong.
    let mut counted = Vec::new();
    let count = counting(&mut counted, |_| 0);
    let estimate = compose(&maps, (&base, &[]), Trust::Every, &hugetlb, count).unwrap();
    let rss: Vec<u64> = estimate
        .mappings
        .iter()
        .map(|mapping| mapping.rss)
        .collect();
    assert_eq!(rss, [16 * MIB, 4 * MIB, 4 * MIB]);
}
