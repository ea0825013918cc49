//! Estimates of a process's residency at a high, for when its full smaps snapshot costs more
//! than the budget pays for yet (tens of ms on thousands of mappings or GiBs resident). What
//! a high adds is mostly in mappings that changed (a block's own mapping, a grown heap), so:
//! /proc/PID/maps lists the mappings as they are (no page walk: about a tenth of smaps'
//! cost), those unchanged since the process's last snapshot keep the residency it gave them,
//! and the others are counted page by page from /proc/PID/pagemap, which walks only their
//! page tables.

use std::fs::File;

use super::snapshot::{read_through_a_live_thread, unmeasured};
use crate::proc::maps::{parse_maps, MapEntry};
use crate::proc::pagemap::{count_ranges, PageCounts, PAGE};
use crate::proc::smaps::read_into;
use crate::trace::format::{MappingResidency, MAPPING_EXECUTE, MAPPING_READ, MAPPING_WRITE};

/// The mappings of `pid` now, estimated from `base` (its last snapshot, sorted by address) and
/// pagemap; with how many were counted from pagemap. None when the process is gone.
pub fn take(
    pid: i32,
    base: &[MappingResidency],
    buffer: &mut Vec<u8>,
) -> Option<(Vec<MappingResidency>, u32)> {
    read_into(&format!("/proc/{pid}/maps"), buffer).ok()?;
    if buffer.is_empty() {
        // A main thread that ended with pthread_exit shows no mappings; the others do.
        read_through_a_live_thread(pid, "maps", buffer)?;
    }
    let maps = parse_maps(&String::from_utf8_lossy(buffer));
    if maps.is_empty() {
        return None;
    }
    let pagemap = File::open(format!("/proc/{pid}/pagemap")).ok()?;
    let mut entries = Vec::new();
    let estimate = compose(maps, base, |ranges| {
        count_ranges(&pagemap, ranges, &mut entries)
    });
    Some(estimate)
}

/// Each of `maps` with the residency `base` gave the same mapping; else, for a mapping that
/// grew over mappings of `base` (neighbours merged into one, a heap extended), their
/// residency plus what `count` finds in the pages around them; else what `count` finds in
/// all its pages. `count` gets every range to count at once, in address order.
pub fn compose(
    maps: Vec<MapEntry>,
    base: &[MappingResidency],
    count: impl FnOnce(&[(u64, u64)]) -> Vec<PageCounts>,
) -> (Vec<MappingResidency>, u32) {
    let mut gaps: Vec<(u64, u64)> = Vec::new();
    // The mapping each range to count belongs to.
    let mut owners: Vec<usize> = Vec::new();
    let mut mappings: Vec<MappingResidency> = maps
        .into_iter()
        .enumerate()
        .map(|(index, map)| {
            let mut mapping = unmeasured(map);
            let parts = parts_inside(base, &mapping);
            if let [only] = parts {
                if (only.start, only.end, only.offset)
                    == (mapping.start, mapping.end, mapping.offset)
                {
                    return only.clone();
                }
            }
            // Inaccessible ranges (guard pages, reserved address space) hold nothing: their
            // page tables are not walked, however large they are.
            if mapping.flags & (MAPPING_READ | MAPPING_WRITE | MAPPING_EXECUTE) == 0 {
                return mapping;
            }
            let mut at = mapping.start;
            let mut gap = |start: u64, end: u64| {
                gaps.push((start, end));
                owners.push(index);
            };
            for part in parts {
                if part.start > at {
                    gap(at, part.start);
                }
                add_residency(&mut mapping, part);
                at = part.end;
            }
            if at < mapping.end {
                gap(at, mapping.end);
            }
            mapping
        })
        .collect();
    let counted = count(&gaps);
    for (&owner, counts) in owners.iter().zip(counted) {
        add_counts(&mut mappings[owner], counts);
    }
    let mut sampled = owners;
    sampled.dedup();
    (mappings, sampled.len() as u32)
}

/// The mappings of `base` that overlap `mapping`, when each lies wholly inside it and is of
/// the same kind (permissions, file and the file's part, path); else none.
fn parts_inside<'a>(
    base: &'a [MappingResidency],
    mapping: &MappingResidency,
) -> &'a [MappingResidency] {
    let first = base.partition_point(|old| old.end <= mapping.start);
    let last = base.partition_point(|old| old.start < mapping.end);
    let overlapping = &base[first..last.max(first)];
    let inside = overlapping.iter().all(|old| {
        mapping.start <= old.start
            && old.end <= mapping.end
            && (old.flags, old.inode) == (mapping.flags, mapping.inode)
            && (old.inode == 0 || old.offset == mapping.offset + (old.start - mapping.start))
            && old.path == mapping.path
    });
    if inside {
        overlapping
    } else {
        &[]
    }
}

fn add_residency(mapping: &mut MappingResidency, part: &MappingResidency) {
    mapping.rss += part.rss;
    mapping.pss += part.pss;
    mapping.shared += part.shared;
    mapping.private_dirty += part.private_dirty;
    mapping.anonymous += part.anonymous;
    mapping.swap += part.swap;
    mapping.swap_pss += part.swap_pss;
}

/// Adds residency from page counts. A private anonymous page that another process maps
/// too is taken to be the zero page (only read), which smaps counts nowhere: the pages
/// counted changed since the last snapshot, so they are rarely still shared with a fork
/// parent or child. A file's page mapped by others too counts half in PSS (it has two
/// holders at least: an upper bound); swap counts whole in SwapPss; private dirty pages are
/// taken to be the exclusive anonymous ones.
fn add_counts(mapping: &mut MappingResidency, counts: PageCounts) {
    let zero_pages = counts.anonymous - counts.anonymous_exclusive;
    let file = counts.present - counts.anonymous;
    let file_shared = file - (counts.exclusive - counts.anonymous_exclusive);
    mapping.rss += (counts.present - zero_pages) * PAGE;
    mapping.pss += counts.exclusive * PAGE + file_shared * PAGE / 2;
    mapping.shared += file_shared * PAGE;
    mapping.private_dirty += counts.anonymous_exclusive * PAGE;
    mapping.anonymous += counts.anonymous_exclusive * PAGE;
    mapping.swap += counts.swapped * PAGE;
    mapping.swap_pss += counts.swapped * PAGE;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::maps::parse_maps;
    use crate::proc::pagemap::TestMapping;

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

    #[test]
    fn unchanged_mappings_keep_their_residency_and_only_new_pages_are_counted() {
        const MIB: u64 = 1 << 20;
        let read_write = MAPPING_READ | MAPPING_WRITE;
        let mut program = mapping(0x55d0_0000_0000, 0x55d0_0000_1000, MAPPING_READ, "", 4096);
        (program.path, program.inode) = ("/usr/bin/program".to_string(), 42);
        let base = vec![
            program.clone(),
            // The heap grew since: only its new end is counted.
            mapping(
                0x55d0_0010_0000,
                0x55d0_0050_0000,
                read_write,
                "[heap]",
                MIB,
            ),
            // Gone since: not in the estimate.
            mapping(0x7eff_0000_0000, 0x7eff_0001_0000, read_write, "", 65536),
            // A block's mapping that a new one below merged with: kept, the rest counted.
            mapping(0x7f00_0300_0000, 0x7f00_0400_1000, read_write, "", 2 * MIB),
            // Reaches below a mapping of now: that one is counted whole.
            mapping(0x7f00_1ff0_0000, 0x7f00_2008_0000, read_write, "", 3 * MIB),
            mapping(
                0x7ffd_0000_0000,
                0x7ffd_0002_1000,
                read_write,
                "[stack]",
                8192,
            ),
        ];
        let mut counted = Vec::new();
        let (mappings, sampled) = compose(parse_maps(MAPS), &base, |ranges| {
            counted.extend_from_slice(ranges);
            let half = |(start, end): &(u64, u64)| (end - start) / PAGE / 2;
            // Half the pages present, 2 of them only read (the zero page).
            let counts = |range| PageCounts {
                present: half(range),
                exclusive: half(range) - 2,
                anonymous: half(range),
                anonymous_exclusive: half(range) - 2,
                swapped: 3,
            };
            ranges.iter().map(counts).collect()
        });
        // Not the inaccessible reservation.
        assert_eq!(sampled, 3);
        let expected = [
            (0x55d0_0050_0000, 0x55d0_0090_0000),
            (0x7f00_0000_0000, 0x7f00_0300_0000),
            (0x7f00_2000_0000, 0x7f00_2010_0000),
        ];
        assert_eq!(counted, expected);
        assert_eq!(mappings.len(), 6);
        assert_eq!(mappings[0], program);
        assert_eq!(mappings[5], base[5]);
        // 1 MiB kept; of 1024 new pages 512 present, 2 of them the zero page.
        let heap = &mappings[1];
        let written = 3 * MIB - 2 * PAGE;
        assert_eq!((heap.rss, heap.pss, heap.shared), (written, written, 0));
        assert_eq!((heap.swap, heap.anonymous), (3 * PAGE, written));
        let merged = &mappings[2];
        let written = 2 * MIB + 24 * MIB - 2 * PAGE;
        assert_eq!((merged.path.as_str(), merged.rss), ("", written));
        let reserved = &mappings[3];
        assert_eq!((reserved.flags, reserved.rss), (0, 0));
        assert_eq!(mappings[4].rss, MIB / 2 - 2 * PAGE);
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
        let (mappings, sampled) = compose(parse_maps(MAPS), &[file, anonymous], |ranges| {
            counted.extend_from_slice(ranges);
            vec![PageCounts::default(); ranges.len()]
        });
        assert_eq!(sampled, 2);
        let whole = [
            (0x7f00_0000_0000, 0x7f00_0000_4000),
            (0x7f00_0000_4000, 0x7f00_0000_8000),
        ];
        assert_eq!(counted, whole);
        assert_eq!((mappings[0].rss, mappings[1].rss), (0, 0));
    }

    #[test]
    fn the_estimate_of_this_process_counts_the_written_pages_of_a_new_mapping() {
        const PAGES: u64 = 300;
        let pid = std::process::id() as i32;
        let mut buffer = Vec::new();
        let (before, _) = take(pid, &[], &mut buffer).expect("this process");
        // Executable too, so that the kernel merges it with no neighbour.
        let protection = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        let map = TestMapping::new(PAGES, protection);
        (0..100).for_each(|index| map.write(index));
        let (after, sampled) = take(pid, &before, &mut buffer).expect("this process");
        let start = map.start;
        drop(map);
        let holding = after
            .iter()
            .find(|mapping| mapping.start == start)
            .expect("the new mapping");
        assert_eq!(holding.end - holding.start, PAGES * PAGE);
        let counted = (holding.rss, holding.pss, holding.anonymous, holding.shared);
        assert_eq!(counted, (100 * PAGE, 100 * PAGE, 100 * PAGE, 0));
        // Other threads of the tests map and unmap meanwhile; most mappings stayed put.
        assert!(
            sampled >= 1 && (sampled as usize) < after.len(),
            "{sampled}"
        );
    }
}

/// What an estimate costs on a process with 10,000 mappings, against a full snapshot:
/// `cargo test --release --lib estimate_cost -- --ignored --nocapture`.
#[cfg(test)]
#[test]
#[ignore]
fn estimate_cost() {
    use super::snapshot;
    use crate::events::EventKind;
    use crate::trace::format::SnapshotReason;
    let pid = std::process::id() as i32;
    let full = |buffer: &mut Vec<u8>| match snapshot::take(pid, SnapshotReason::Signal, buffer) {
        Some(EventKind::SmapsSnapshot { mappings, .. }) => mappings,
        _ => panic!("no snapshot"),
    };
    let before = full(&mut Vec::new());
    let page = PAGE as usize;
    for index in 0..10_000 {
        let protection = match index % 2 {
            0 => libc::PROT_READ | libc::PROT_WRITE,
            _ => libc::PROT_READ,
        };
        // SAFETY: a fresh anonymous page, kept until the test process ends.
        let map = unsafe {
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
            libc::mmap(std::ptr::null_mut(), page, protection, flags, -1, 0)
        };
        assert_ne!(map, libc::MAP_FAILED);
    }
    let base = full(&mut Vec::new());
    best_of_10("snapshot", |buffer| full(buffer).len());
    best_of_10("read maps", |buffer| {
        read_into(&format!("/proc/{pid}/maps"), buffer).expect("maps");
        buffer.len()
    });
    best_of_10("estimate", |buffer| {
        take(pid, &base, buffer).expect("estimate").0.len()
    });
    best_of_10("estimate, the 10,000 mappings new", |buffer| {
        take(pid, &before, buffer).expect("estimate").0.len()
    });
}

#[cfg(test)]
fn best_of_10(what: &str, mut run: impl FnMut(&mut Vec<u8>) -> usize) {
    use super::budget::thread_cpu_ns;
    let mut buffer = Vec::new();
    let (mut best, mut size) = (u64::MAX, 0);
    for _ in 0..10 {
        let cpu = thread_cpu_ns();
        size = run(&mut buffer);
        best = best.min(thread_cpu_ns() - cpu);
    }
    println!(
        "{what}: {size} (mappings or bytes), best of 10 {:.2} ms",
        best as f64 / 1e6
    );
}
