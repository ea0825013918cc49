//! Mappings the kernel merged, cut again. Neighbouring private anonymous mappings of the
//! same permissions become one in smaps and maps, whoever made them: a program's buffer
//! mapped beside a block its allocator mapped would be counted whole as the allocator's, and
//! an MPI library's beside the program's as one of the two. Where the ranges the recorded
//! calls mapped meet inside such a mapping, it is cut there, and its residency is shared
//! out by what /proc/PID/pagemap finds in each piece, so that the pieces add up to what
//! smaps said of the whole.

use std::fs::File;

use crate::proc::pagemap::{count_ranges, PageCounts, PAGE};
use crate::trace::format::{MappingResidency, MAPPING_SHARED};

const HEAP: &str = "[heap]";

/// `mappings` of `pid`, each private anonymous one (or `[heap]`, which a mapping laid
/// beside the brk area joins) cut where the ranges `made_inside` gives for it begin and end
/// inside it. Unchanged when there are none, or pagemap cannot be read.
pub fn cut_merged(
    pid: i32,
    mappings: Vec<MappingResidency>,
    made_inside: impl Fn(u64, u64) -> Vec<(u64, u64)>,
) -> Vec<MappingResidency> {
    let mut buffer = Vec::new();
    cut(mappings, made_inside, |ranges| {
        let pagemap = File::open(format!("/proc/{pid}/pagemap")).ok()?;
        Some(count_ranges(&pagemap, ranges, &mut buffer))
    })
}

/// A piece of a mapping cut, and whether a recorded call made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    start: u64,
    end: u64,
    made: bool,
}

/// `cut_merged` with the pages of the pieces counted by `count` (every piece at once, in
/// address order).
fn cut(
    mappings: Vec<MappingResidency>,
    made_inside: impl Fn(u64, u64) -> Vec<(u64, u64)>,
    count: impl FnOnce(&[(u64, u64)]) -> Option<Vec<PageCounts>>,
) -> Vec<MappingResidency> {
    // Each mapping's pieces, and where they begin among all pieces.
    let mut pieces: Vec<Piece> = Vec::new();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    for (index, mapping) in mappings.iter().enumerate() {
        let anonymous = mapping.path.is_empty() || mapping.path == HEAP;
        let holds = mapping.rss + mapping.swap > 0;
        if !anonymous || mapping.flags & MAPPING_SHARED != 0 || !holds {
            continue;
        }
        let made = made_inside(mapping.start, mapping.end);
        let whole = [(mapping.start, mapping.end)];
        if made.is_empty() || made == whole {
            continue;
        }
        cuts.push((index, pieces.len()));
        let mut at = mapping.start;
        for (start, end) in made {
            if start > at {
                pieces.push(Piece {
                    start: at,
                    end: start,
                    made: false,
                });
            }
            pieces.push(Piece {
                start,
                end,
                made: true,
            });
            at = end;
        }
        if at < mapping.end {
            pieces.push(Piece {
                start: at,
                end: mapping.end,
                made: false,
            });
        }
    }
    if cuts.is_empty() {
        return mappings;
    }
    // Each mapping's largest piece is what smaps found less the others: its pages, often
    // nearly all of the mapping's, are not walked again.
    let largest: Vec<usize> = (cuts.iter().enumerate())
        .map(|(number, &(_, first))| {
            let last = cuts.get(number + 1).map_or(pieces.len(), |&(_, next)| next);
            (first..last)
                .max_by_key(|&index| pieces[index].end - pieces[index].start)
                .expect("a cut mapping has pieces")
        })
        .collect();
    let counted: Vec<usize> = (0..pieces.len())
        .filter(|index| largest.binary_search(index).is_err())
        .collect();
    let ranges: Vec<(u64, u64)> = (counted.iter())
        .map(|&index| (pieces[index].start, pieces[index].end))
        .collect();
    let Some(found) = count(&ranges) else {
        return mappings;
    };
    let mut counts: Vec<Option<PageCounts>> = vec![None; pieces.len()];
    for (&index, found) in counted.iter().zip(found) {
        counts[index] = Some(found);
    }
    let mut cut_mappings = Vec::with_capacity(mappings.len() + pieces.len());
    let mut next_cut = cuts.iter().peekable();
    for (index, mapping) in mappings.into_iter().enumerate() {
        let Some(&(_, first)) = next_cut.next_if(|&&(cut_index, _)| cut_index == index) else {
            cut_mappings.push(mapping);
            continue;
        };
        let last = match next_cut.peek() {
            Some(&&(_, next_first)) => next_first,
            None => pieces.len(),
        };
        cut_mappings.extend(shared_out(
            &mapping,
            &pieces[first..last],
            &counts[first..last],
        ));
    }
    cut_mappings
}

/// `mapping` as `pieces`, its resident bytes shared out by their resident pages and its
/// swapped ones by their swapped pages, each piece's share at most its size. The piece not
/// counted (None: the largest) weighs what smaps found less what the others weigh. Whole
/// when that leaves no weight for what smaps found (pages moved between the reads). A
/// private page another process maps too is the zero page (read, never written), which
/// smaps does not count, unless smaps found pages shared (with a fork parent or child):
/// then every present page weighs, zero pages being rare beside those.
fn shared_out(
    mapping: &MappingResidency,
    pieces: &[Piece],
    counts: &[Option<PageCounts>],
) -> Vec<MappingResidency> {
    let zero_pages = |count: &PageCounts| match mapping.shared {
        0 => count.anonymous - count.anonymous_exclusive,
        _ => 0,
    };
    let weights = |weight: &dyn Fn(&PageCounts) -> u64, total: u64| {
        let counted: u64 = counts.iter().flatten().map(weight).sum();
        let rest = (total / PAGE).saturating_sub(counted);
        let each = counts
            .iter()
            .map(|count| count.as_ref().map_or(rest, weight));
        each.collect::<Vec<u64>>()
    };
    let resident = weights(&|count| count.present - zero_pages(count), mapping.rss);
    let swapped = weights(&|count| count.swapped, mapping.swap);
    let found = |total: u64, weights: &[u64]| total == 0 || weights.iter().sum::<u64>() > 0;
    if !found(mapping.rss, &resident) || !found(mapping.swap, &swapped) {
        return vec![mapping.clone()];
    }
    let sizes: Vec<u64> = pieces.iter().map(|piece| piece.end - piece.start).collect();
    let share = |total: u64, weights: &[u64]| share(total, weights, &sizes);
    let rss = share(mapping.rss, &resident);
    let pss = share(mapping.pss, &resident);
    let shared = share(mapping.shared, &resident);
    let private_dirty = share(mapping.private_dirty, &resident);
    let anonymous = share(mapping.anonymous, &resident);
    let swap = share(mapping.swap, &swapped);
    let swap_pss = share(mapping.swap_pss, &swapped);
    pieces
        .iter()
        .enumerate()
        .map(|(index, piece)| MappingResidency {
            start: piece.start,
            end: piece.end,
            offset: mapping.offset + (piece.start - mapping.start),
            // What a call mapped beside the brk area is not of it.
            path: match piece.made {
                true => String::new(),
                false => mapping.path.clone(),
            },
            rss: rss[index],
            pss: pss[index],
            shared: shared[index],
            private_dirty: private_dirty[index],
            anonymous: anonymous[index],
            swap: swap[index],
            swap_pss: swap_pss[index],
            ..*mapping
        })
        .collect()
}

/// `total` bytes shared out by `weights` in whole pages, each share at most its `cap`: what
/// rounding and the caps leave goes to the last pieces with room. Shares add up to `total`
/// (when the caps allow), and a weight in pages that matches the total in pages gets
/// exactly its pages.
fn share(total: u64, weights: &[u64], caps: &[u64]) -> Vec<u64> {
    let sum: u64 = weights.iter().sum::<u64>().max(1);
    let mut shares: Vec<u64> = (weights.iter().zip(caps))
        .map(|(&weight, &cap)| {
            let part = (u128::from(total) * u128::from(weight) / u128::from(sum)) as u64;
            (part / PAGE * PAGE).min(cap)
        })
        .collect();
    let mut left = total - shares.iter().sum::<u64>();
    for (share, &cap) in shares.iter_mut().zip(caps).rev() {
        let added = left.min(cap - *share);
        *share += added;
        left -= added;
    }
    if let Some(last) = shares.last_mut() {
        *last += left;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::pagemap::TestMapping;

    const MIB: u64 = 1 << 20;

    fn anonymous(start: u64, end: u64, rss: u64) -> MappingResidency {
        MappingResidency {
            start,
            end,
            flags: 3,
            rss,
            pss: rss,
            private_dirty: rss,
            anonymous: rss,
            ..MappingResidency::default()
        }
    }

    fn present(pages: u64) -> PageCounts {
        PageCounts {
            present: pages,
            ..PageCounts::default()
        }
    }

    #[test]
    fn a_merged_mapping_is_cut_where_the_recorded_ranges_begin_and_end() {
        let file = MappingResidency {
            path: "/usr/lib/libc.so.6".into(),
            ..anonymous(0x1000, 0x5000, 0x4000)
        };
        let merged = anonymous(0x10000, 0x10000 + 24 * MIB, 17 * MIB);
        let alone = anonymous(0x4000000, 0x4001000, 0x1000);
        let edge = 0x10000 + 16 * MIB;
        // Each mapping holds made ranges: the file's is not cut, nor the one that a single
        // call made whole.
        let made = |start: u64, end: u64| match start {
            0x10000 => vec![(start, edge), (edge, end)],
            0x4000000 => vec![(start, end)],
            _ => vec![(start, (start + end) / 2)],
        };
        let mappings = vec![file, merged.clone(), alone];
        let cut_mappings = cut(mappings, made, |ranges| {
            // The largest piece, the program's 16 MiB written whole, is what smaps found
            // less the rest: 1 MiB of the allocator's block, counted.
            assert_eq!(ranges, [(edge, merged.end)]);
            Some(vec![present(MIB / PAGE)])
        });
        let rss: Vec<(u64, u64, u64, u64)> = cut_mappings
            .iter()
            .map(|mapping| (mapping.start, mapping.end, mapping.rss, mapping.pss))
            .collect();
        assert_eq!(
            rss,
            [
                (0x1000, 0x5000, 0x4000, 0x4000),
                (0x10000, edge, 16 * MIB, 16 * MIB),
                (edge, merged.end, MIB, MIB),
                (0x4000000, 0x4001000, 0x1000, 0x1000),
            ]
        );
        assert_eq!(cut_mappings[2].offset, 16 * MIB);
        assert_eq!(cut_mappings[2].flags, 3);
    }

    #[test]
    fn a_mapping_beside_the_brk_area_is_cut_from_the_heap() {
        let heap = MappingResidency {
            path: HEAP.into(),
            ..anonymous(0x100000, 0x400000, 0x300000)
        };
        // Mapped right below the brk area, which begins at 0x200000.
        let made = |start: u64, _| vec![(start, 0x200000)];
        let counts = |_: &[(u64, u64)]| Some(vec![present(0x100)]);
        let cut_mappings = cut(vec![heap], made, counts);
        let pieces: Vec<(u64, u64, u64, &str)> = cut_mappings
            .iter()
            .map(|mapping| {
                (
                    mapping.start,
                    mapping.end,
                    mapping.rss,
                    mapping.path.as_str(),
                )
            })
            .collect();
        assert_eq!(
            pieces,
            [
                (0x100000, 0x200000, 0x100000, ""),
                (0x200000, 0x400000, 0x200000, HEAP)
            ]
        );
    }

    #[test]
    fn shares_add_up_to_the_whole_in_pages_each_at_most_its_piece() {
        let room = [u64::MAX; 3];
        assert_eq!(
            share(10 * PAGE, &[1, 1, 1], &room),
            [3 * PAGE, 3 * PAGE, 4 * PAGE]
        );
        assert_eq!(share(5 * PAGE, &[2, 3], &room), [2 * PAGE, 3 * PAGE]);
        // smaps read a page more than pagemap found a moment later.
        assert_eq!(share(6 * PAGE, &[2, 3], &room), [2 * PAGE, 4 * PAGE]);
        assert_eq!(share(0, &[2, 3], &room), [0, 0]);
        // 16 pages of the first piece were unmapped between the reads: the second, a page
        // long, keeps its page, and the first takes the rest.
        assert_eq!(
            share(17 * PAGE, &[0, 1], &[16 * PAGE, PAGE]),
            [16 * PAGE, PAGE]
        );
    }

    #[test]
    fn pieces_are_weighed_without_zero_pages() {
        let merged = anonymous(0x10000, 0x40000, 0x4000);
        // The first piece only read (16 zero pages), the second written (its page); the
        // third, the largest, holds what smaps found less those: 3 pages.
        let read_only = PageCounts {
            present: 16,
            anonymous: 16,
            ..PageCounts::default()
        };
        let written = PageCounts {
            present: 1,
            anonymous: 1,
            anonymous_exclusive: 1,
            exclusive: 1,
            ..PageCounts::default()
        };
        let made = |start, _| vec![(start, 0x20000), (0x20000, 0x21000)];
        let counts = |ranges: &[(u64, u64)]| {
            assert_eq!(ranges, [(0x10000, 0x20000), (0x20000, 0x21000)]);
            Some(vec![read_only, written])
        };
        let rss: Vec<u64> = (cut(vec![merged], made, counts).iter())
            .map(|mapping| mapping.rss)
            .collect();
        assert_eq!(rss, [0, 0x1000, 0x3000]);
    }

    #[test]
    fn pages_shared_with_a_fork_parent_weigh_when_smaps_found_shared_pages() {
        // A fork child's copy: 4 MiB of the program's and 4 MiB of a block, all still
        // shared with the parent but a page of the block, which the child wrote; beside
        // them 16 MiB never touched, the largest piece, which holds what is left.
        let merged = MappingResidency {
            shared: 8 * MIB - PAGE,
            ..anonymous(0x10000, 0x10000 + 24 * MIB, 8 * MIB)
        };
        let (first, second) = (0x10000 + 4 * MIB, 0x10000 + 8 * MIB);
        let made = |start, end| vec![(start, first), (first, second), (second, end)];
        let shared_pages = |pages: u64, written: u64| PageCounts {
            present: pages,
            anonymous: pages,
            anonymous_exclusive: written,
            exclusive: written,
            ..PageCounts::default()
        };
        let counts = |_: &[(u64, u64)]| {
            let pages = 4 * MIB / PAGE;
            Some(vec![shared_pages(pages, 0), shared_pages(pages, 1)])
        };
        let rss: Vec<u64> = (cut(vec![merged], made, counts).iter())
            .map(|mapping| mapping.rss)
            .collect();
        assert_eq!(rss, [4 * MIB, 4 * MIB, 0]);
    }

    #[test]
    fn unreadable_pages_leave_the_mappings_whole() {
        let merged = anonymous(0x10000, 0x30000, 0x1000);
        let made = |start, _| vec![(start, 0x20000)];
        let cut_mappings = cut(vec![merged.clone()], made, |_| None);
        assert_eq!(cut_mappings, [merged]);
    }

    #[test]
    fn pieces_of_this_process_get_their_own_resident_pages() {
        // One mapping, cut in halves as if two recorded ranges met in it.
        let pages = 64;
        let mapping = TestMapping::new(2 * pages, libc::PROT_READ | libc::PROT_WRITE);
        let edge = mapping.start + pages * PAGE;
        // SAFETY: the first 3 pages, inside the test's own mapping. The halves are as large:
        // the second, the last, is the one not counted.
        unsafe { std::ptr::write_bytes(mapping.start as *mut u8, 1, 3 * PAGE as usize) };
        let whole = anonymous(mapping.start, mapping.start + 2 * pages * PAGE, 3 * PAGE);
        let pid = std::process::id() as i32;
        let cut_mappings = cut_merged(pid, vec![whole], |start, _| vec![(start, edge)]);
        let rss: Vec<u64> = cut_mappings.iter().map(|mapping| mapping.rss).collect();
        assert_eq!(rss, [3 * PAGE, 0]);
    }
}
