//! Estimates of a process's residency at a high, for when its full smaps snapshot costs more
//! than the budget pays for yet (tens of ms on thousands of mappings or GiBs resident). What
//! a high adds is mostly in mappings that changed (a block's own mapping, a grown heap), so:
//! /proc/PID/maps lists the mappings as they are (no page walk: about a tenth of smaps'
//! cost), those unchanged since the process's last snapshot or estimate keep the residency
//! it gave them, and the others are counted page by page from /proc/PID/pagemap, which walks
//! only their page tables. A mapping can change its residency without changing its shape (a
//! reserved range written later, pages released with madvise, a mapping replaced by one of
//! the same place): when the estimate's RSS falls short of the status reads around it, what
//! the base did not show resident (but for a 64th) is counted again, and when it is over
//! them, every mapping is.

use std::fs::File;

use super::snapshot::{read_through_a_live_thread, unmeasured};
use crate::events::unmapped;
use crate::proc::hugetlb::HugetlbDevices;
use crate::proc::maps::{parse_maps_bytes, MapEntry};
use crate::proc::pagemap::{count_ranges, PageCounts, PAGE};
use crate::proc::smaps::read_into;
use crate::proc::status::parse_status_memory;
use crate::trace::format::{MappingResidency, MAPPING_EXECUTE, MAPPING_READ, MAPPING_WRITE};

/// The mappings of `pid` now, estimated from `base` (its last snapshot, or the pieces of its
/// last estimate, sorted by address, and the ranges unmapped since it was read) and
/// pagemap, given its status RSS read just before.
/// None when the process is gone, or when counting what changed would cost more than a
/// snapshot.
pub fn take(
    pid: i32,
    base: (&[MappingResidency], &[(u64, u64)]),
    rss_before: u64,
    hugetlb: &HugetlbDevices,
    buffer: &mut Vec<u8>,
) -> Option<Estimate> {
    read_into(&format!("/proc/{pid}/maps"), buffer).ok()?;
    if buffer.is_empty() {
        // A main thread that ended with pthread_exit shows no mappings; the others do.
        read_through_a_live_thread(pid, "maps", buffer)?;
    }
    let maps = parse_maps_bytes(buffer);
    if maps.is_empty() {
        return None;
    }
    let pagemap = File::open(format!("/proc/{pid}/pagemap")).ok()?;
    let mut entries = Vec::new();
    let mut count = |ranges: &[(u64, u64)]| {
        affordable(ranges, rss_before).then(|| count_ranges(&pagemap, ranges, &mut entries))
    };
    let estimate = compose(&maps, base, Trust::Every, hugetlb, &mut count)?;
    let rss_after = status_rss(pid, buffer).unwrap_or(rss_before);
    let recount = match compare(total_rss(&estimate.mappings), rss_before, rss_after) {
        Comparison::Agrees => return Some(estimate),
        // Pages were written inside mappings that kept their shape: what the base did not
        // show nearly whole is counted.
        Comparison::Short => compose(&maps, base, Trust::Whole, hugetlb, count),
        // Pages were released inside them: every mapping is counted.
        Comparison::Over => compose(&maps, (&[], &[]), Trust::Every, hugetlb, count),
    }?;
    Some(Estimate {
        recounted: true,
        ..recount
    })
}

/// Whether counting `ranges` may be cheaper than a snapshot of a process `rss` resident:
/// pagemap walks every page asked for, where smaps walks only the resident ones, but a page
/// not resident costs a tenth of one that is (about 1 ms a GiB against 10), so at most 8
/// times the resident memory (256 MiB at least) is counted. A vast reservation (a sanitizer's
/// shadow, a runtime's arena) is not.
fn affordable(ranges: &[(u64, u64)], rss: u64) -> bool {
    const LEAST_RSS: u64 = 256 << 20;
    let bytes: u64 = ranges.iter().map(|(start, end)| end - start).sum();
    bytes <= 8 * rss.max(LEAST_RSS)
}

/// VmRSS of `pid` now, in bytes.
fn status_rss(pid: i32, buffer: &mut Vec<u8>) -> Option<u64> {
    read_into(&format!("/proc/{pid}/status"), buffer).ok()?;
    Some(parse_status_memory(buffer)?.rss)
}

fn total_rss(mappings: &[MappingResidency]) -> u64 {
    mappings.iter().map(|mapping| mapping.rss).sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Agrees,
    Short,
    Over,
}

/// How an estimate's RSS compares with the status reads before and after it: it agrees
/// from a 64th below the range they span to a 16th above it (2 MiB at least either way),
/// plus what the kernel's per-CPU counters behind VmRSS may be off by (`counter_error`).
/// The program may write or free meanwhile, and a block being written when the base was
/// read is as it was then: an estimate at a high must show it within the 64th by which a
/// snapshot is said to hold its high, or the last 4 MiB of a 64 MiB block written after
/// the base go missing. Above, a 16th: pages swapped out or reclaimed in mappings that kept
/// their shape are no high, and counting every mapping again for them would be dear.
fn compare(estimated: u64, before: u64, after: u64) -> Comparison {
    const MIB: u64 = 1 << 20;
    let (low, high) = (before.min(after), before.max(after));
    let short_slack = (high / 64).max(2 * MIB) + counter_error();
    let over_slack = (high / 16).max(2 * MIB) + counter_error();
    if estimated + short_slack < low {
        Comparison::Short
    } else if estimated > high + over_slack {
        Comparison::Over
    } else {
        Comparison::Agrees
    }
}

/// What VmRSS may be off by: the kernel keeps it in per-CPU counters, each allowed to hold
/// back up to max(32, 2 × CPUs) pages (64 pages a thread on kernels before 6.2, less on
/// few CPUs). 256 KiB on 2 CPUs, 128 MiB on 128.
fn counter_error() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    cpus * (2 * cpus).max(32) * PAGE
}

/// Which of the base's residency an estimate takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// All of it, for mappings unchanged or grown over.
    Every,
    /// Only that of parts the base showed resident but for a 64th (`nearly_whole`): what
    /// they can have gained is a 63rd of what they hold at most, however many they are.
    Whole,
}

impl Trust {
    fn takes(self, part: &MappingResidency) -> bool {
        match self {
            Trust::Every => true,
            Trust::Whole => nearly_whole(part),
        }
    }
}

/// Ranges are counted in pieces of this size at most: a block being written is then a
/// piece of its own, which the next estimate counts again (`pieces`), not the whole range
/// counted with it.
const CHUNK: u64 = 32 << 20;

/// An estimate of a process's mappings.
#[derive(Debug)]
pub struct Estimate {
    pub mappings: Vec<MappingResidency>,
    /// How many mappings were counted, wholly or in part, from pagemap.
    pub sampled: u32,
    /// The base for the next estimate: the mappings cut into the parts taken from the base
    /// and the ranges counted, each with its own residency, sorted by address. Left out: a
    /// range counted in a mapping that grew over the base's parts and found not `written`
    /// (a block being written as a heap or merged mapping grows), which the next
    /// estimate counts again instead of the whole mapping it merged into.
    pub pieces: Vec<MappingResidency>,
    /// Whether the status reads disagreed with the first count and the mappings were
    /// counted again: a dearer estimate than the next one, which starts from this one's
    /// pieces, is expected to be.
    pub recounted: bool,
}

/// Each of `maps` with the residency `base` gave the same mapping; else, for a mapping that
/// grew over parts of `base` (neighbours merged into one, a heap extended), their residency
/// plus what `count` finds in the pages around them; else what `count` finds in all its
/// pages; parts of `base` that `trust` does not take, or that lie where the process
/// unmapped since (`base.1`: a new mapping in an old one's place), are counted too.
/// `count` gets every range to count at once, in address order. Mappings of hugetlb pages
/// are not counted: smaps counts none of their pages in Rss, nor VmRSS.
pub fn compose(
    maps: &[MapEntry],
    (base, unmapped): (&[MappingResidency], &[(u64, u64)]),
    trust: Trust,
    hugetlb: &HugetlbDevices,
    count: impl FnOnce(&[(u64, u64)]) -> Option<Vec<PageCounts>>,
) -> Option<Estimate> {
    let mut gaps: Vec<(u64, u64)> = Vec::new();
    // The mapping each range to count belongs to, and whether it grew over parts taken.
    let mut owners: Vec<usize> = Vec::new();
    let mut growing: Vec<bool> = Vec::new();
    let mut pieces: Vec<MappingResidency> = Vec::new();
    let mut cursor = 0;
    let mut mappings: Vec<MappingResidency> = maps
        .iter()
        .enumerate()
        .map(|(index, map)| {
            let mut mapping = unmeasured(map.clone());
            let parts = parts_inside(base, &mapping, &mut cursor);
            // Inaccessible ranges (guard pages, reserved address space) hold nothing: their
            // page tables are not walked, however large they are.
            let inaccessible =
                mapping.flags & (MAPPING_READ | MAPPING_WRITE | MAPPING_EXECUTE) == 0;
            if inaccessible || hugetlb.holds(map) {
                pieces.push(mapping.clone());
                return mapping;
            }
            let mut at = mapping.start;
            let taken = || {
                parts.iter().filter(|part| {
                    trust.takes(part) && !unmapped::overlaps(unmapped, part.start, part.end)
                })
            };
            let grew = trust == Trust::Every && taken().next().is_some();
            let mut gap = |start: u64, end: u64| {
                for chunk_start in (start..end).step_by(CHUNK as usize) {
                    gaps.push((chunk_start, end.min(chunk_start + CHUNK)));
                    owners.push(index);
                    growing.push(grew);
                }
            };
            for part in taken() {
                if part.start > at {
                    gap(at, part.start);
                }
                add_residency(&mut mapping, part);
                pieces.push(part.clone());
                at = part.end;
            }
            if at < mapping.end {
                gap(at, mapping.end);
            }
            mapping
        })
        .collect();
    let counted = count(&gaps)?;
    let ranges = owners.iter().zip(growing).zip(gaps);
    for (((&owner, grew), (start, end)), counts) in ranges.zip(counted) {
        let mapping = &mut mappings[owner];
        add_counts(mapping, counts);
        let mut piece = MappingResidency {
            start,
            end,
            flags: mapping.flags,
            offset: mapping.offset + (start - mapping.start),
            inode: mapping.inode,
            path: mapping.path.clone(),
            ..MappingResidency::default()
        };
        add_counts(&mut piece, counts);
        if !grew || written(&piece) {
            pieces.push(piece);
        }
    }
    pieces.sort_unstable_by_key(|piece| piece.start);
    let mut sampled = owners;
    sampled.dedup();
    Some(Estimate {
        mappings,
        sampled: sampled.len() as u32,
        pieces,
        recounted: false,
    })
}

/// Whether a range counted in a growing mapping is written and kept as a piece: resident
/// but for a page and a 64th at most. A block's pages its program never touches (the last
/// page of each of glibc's mmapped chunks, a header's alignment) would otherwise have every
/// block of a merged mapping counted again by every estimate; a block still being written
/// past that point is off by 516 KiB a 32 MiB range at most, which the comparison with the
/// status reads absorbs.
fn written(piece: &MappingResidency) -> bool {
    let size = piece.end - piece.start;
    piece.rss + size / 64 + PAGE >= size
}

/// Whether a part is resident but for a 64th of it at most. Without `written`'s page, so
/// that thousands of one-page mappings never written are not all trusted.
fn nearly_whole(part: &MappingResidency) -> bool {
    let size = part.end - part.start;
    part.rss + size / 64 >= size
}

/// The mappings of `base` that overlap `mapping`, when each lies wholly inside it and is of
/// the same kind (permissions, file and the file's part, path); else none. Mappings are
/// asked for in address order, and `base` is sorted and without overlaps, so the search
/// goes on from `cursor` (where the previous one found its first overlap): one pass over
/// `base` in all, where a binary search per mapping missed the cache at every step on
/// tens of thousands of mappings.
fn parts_inside<'a>(
    base: &'a [MappingResidency],
    mapping: &MappingResidency,
    cursor: &mut usize,
) -> &'a [MappingResidency] {
    let mut first = *cursor;
    // Mappings out of address order would step back.
    while first > 0 && base[first - 1].end > mapping.start {
        first -= 1;
    }
    while base.get(first).is_some_and(|old| old.end <= mapping.start) {
        first += 1;
    }
    *cursor = first;
    let mut last = first;
    while base.get(last).is_some_and(|old| old.start < mapping.end) {
        last += 1;
    }
    let overlapping = &base[first..last];
    let inside = overlapping.iter().all(|old| {
        mapping.start <= old.start
            && old.end <= mapping.end
            && (old.flags, old.inode) == (mapping.flags, mapping.inode)
            && (old.inode == 0 || old.offset == mapping.offset + (old.start - mapping.start))
            && (same_path(&old.path, &mapping.path) || made_beside_the_heap(old, mapping))
    });
    if inside {
        overlapping
    } else {
        &[]
    }
}

/// Whether `old` is a piece of `[heap]` that a call mapped beside the brk area, which the
/// snapshot named apart (`split`).
fn made_beside_the_heap(old: &MappingResidency, mapping: &MappingResidency) -> bool {
    old.path.is_empty() && mapping.path == "[heap]"
}

/// Paths compared without a call to memcmp for the empty path of every anonymous mapping
/// (a third of an estimate's cost on 20,000 of them).
fn same_path(one: &str, other: &str) -> bool {
    (one.is_empty() && other.is_empty()) || one == other
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
#[path = "estimate_tests.rs"]
mod tests;

/// What an estimate costs on a process with 10,000 mappings (`MAPPINGS` more), against a
/// full snapshot, and its parts: `cargo test --release --lib estimate_cost -- --ignored
/// --nocapture`.
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
    let count: usize = std::env::var("MAPPINGS").map_or(10_000, |count| count.parse().unwrap());
    for index in 0..count {
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
    let rss = total_rss(&base);
    best_of_10("snapshot", |buffer| full(buffer).len());
    best_of_10("read maps", |buffer| {
        read_into(&format!("/proc/{pid}/maps"), buffer).expect("maps");
        buffer.len()
    });
    let mut text = Vec::new();
    read_into(&format!("/proc/{pid}/maps"), &mut text).expect("maps");
    best_of_10("parse maps", |_| parse_maps_bytes(&text).len());
    let maps = parse_maps_bytes(&text);
    let hugetlb = HugetlbDevices::default();
    let none_counted = |ranges: &[(u64, u64)]| Some(vec![PageCounts::default(); ranges.len()]);
    best_of_10("compose, all unchanged", |_| {
        compose(&maps, (&base, &[]), Trust::Every, &hugetlb, none_counted)
            .expect("composed")
            .mappings
            .len()
    });
    best_of_10("estimate", |buffer| {
        take(pid, (&base, &[]), rss, &HugetlbDevices::default(), buffer)
            .expect("estimate")
            .mappings
            .len()
    });
    best_of_10("estimate, the mappings new", |buffer| {
        take(pid, (&before, &[]), rss, &HugetlbDevices::default(), buffer)
            .expect("estimate")
            .mappings
            .len()
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
