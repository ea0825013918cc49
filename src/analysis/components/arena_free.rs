//! Free memory inside glibc's arenas, from the live blocks in each arena mapping: the
//! reasons arena pages no live block accounts for stay resident (free chunks among live
//! ones, the top, a thread arena per thread).

use super::chunk_gaps::{continues_an_arena, ChunkGaps};
use super::tracker::PendingMapping;
use crate::trace::format::{MappingResidency, MAPPING_READ, MAPPING_SHARED, MAPPING_WRITE};

/// glibc's `HEAP_MAX_SIZE` on 64-bit: a thread arena's heap is a mapping of this size,
/// aligned to it, made writable as it grows (the rest shows as a mapping without access).
const THREAD_HEAP_SIZE: u64 = 64 << 20;

/// Free memory inside the arenas at one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArenaFree {
    /// The snapshot's time: the one where arena pages no live block accounts for were most.
    pub time_ns: u64,
    /// The main arena (`[heap]`).
    pub main: ChunkGaps,
    /// Thread arenas, and the free space between their live blocks. An arena grown past
    /// one heap counts once per heap, unless a live block shows a heap continues an arena
    /// (`continues_an_arena`).
    pub thread_arenas: u64,
    pub threads: ChunkGaps,
    /// Resident bytes of the thread arenas that no live block accounts for.
    pub thread_overhead_rss: u64,
}

/// Which of glibc's arenas a mapping is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArenaKind {
    /// `[heap]`.
    Main,
    Thread,
}

impl ArenaFree {
    /// Adds an arena mapping whose resident bytes no live block accounts for are
    /// `overhead_rss`.
    pub(super) fn add(&mut self, mapping: &PendingMapping, overhead_rss: u64) {
        let Some(gaps) = &mapping.gaps else {
            return;
        };
        match mapping.arena {
            Some(ArenaKind::Main) => self.main.add(gaps),
            Some(ArenaKind::Thread) => {
                self.thread_arenas += gaps.heaps.saturating_sub(gaps.later_heaps);
                self.threads.add(gaps);
                self.thread_overhead_rss += overhead_rss;
            }
            None => {}
        }
    }

    pub fn is_empty(&self) -> bool {
        self.main == ChunkGaps::default() && self.thread_arenas == 0
    }
}

/// What `mappings[index]` is of glibc's arenas (`mappings` in address order, as smaps lists
/// them; `has_blocks`: a live block starts inside it): `[heap]` is the main arena's; a
/// thread arena's heap is a private, readable and writable anonymous mapping at a multiple
/// of `THREAD_HEAP_SIZE`, either that long or followed at once by the inaccessible rest of
/// its reservation (less than a heap). An arena's next heap may lie right after a full one,
/// and the kernel then shows both as one mapping: a multiple of heaps, or heaps and a
/// growing one; a mapping that long is taken for heaps only with a live block inside, as
/// many other mappings are that long and aligned (a large block's, another runtime's heap).
pub(super) fn arena_kind(
    mappings: &[MappingResidency],
    index: usize,
    has_blocks: bool,
) -> Option<ArenaKind> {
    let mapping = &mappings[index];
    if mapping.path == "[heap]" {
        return Some(ArenaKind::Main);
    }
    let next = mappings.get(index + 1);
    let length = mapping.end - mapping.start;
    let whole_heaps = |length: u64| length > 0 && length % THREAD_HEAP_SIZE == 0;
    let reserved_rest = next.is_some_and(|next| {
        next.start == mapping.end
            && next.flags == 0
            && next.path.is_empty()
            && next.end - next.start < THREAD_HEAP_SIZE
            && whole_heaps(next.end - mapping.start)
    });
    let writable = mapping.flags & (MAPPING_READ | MAPPING_WRITE | MAPPING_SHARED)
        == MAPPING_READ | MAPPING_WRITE;
    let one_heap = length <= THREAD_HEAP_SIZE || has_blocks;
    let thread = mapping.path.is_empty()
        && writable
        && mapping.start % THREAD_HEAP_SIZE == 0
        && one_heap
        && (whole_heaps(length) || reserved_rest);
    thread.then_some(ArenaKind::Thread)
}

/// The free space of a thread arena mapping from `start` to `end` around `blocks` (sorted
/// here), heap by heap: each of its heaps has chunks and a top of its own, and may continue
/// an arena. A heap without live blocks is free from end to end (the thread freed
/// everything).
pub(super) fn thread_heap_gaps(start: u64, end: u64, blocks: &mut [(u64, u64)]) -> ChunkGaps {
    blocks.sort_unstable();
    let mut total = ChunkGaps::default();
    let mut rest = blocks;
    let mut heap = start;
    while heap < end {
        let heap_end = heap.saturating_add(THREAD_HEAP_SIZE).min(end);
        let inside = rest.partition_point(|&(address, _)| address < heap_end);
        let (these, later) = std::mem::take(&mut rest).split_at_mut(inside);
        let mut gaps = ChunkGaps::between(these, heap_end)
            .unwrap_or_else(|| ChunkGaps::empty(heap_end - heap));
        gaps.heaps = 1;
        gaps.later_heaps = u64::from(continues_an_arena(heap, these));
        total.add(&gaps);
        rest = later;
        heap = heap_end;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::super::tests::region;
    use super::*;

    const RW: u8 = MAPPING_READ | MAPPING_WRITE;

    fn mapping(start: u64, end: u64, flags: u8, path: &str) -> MappingResidency {
        region(start, end, flags, path, 0, 0)
    }

    /// A snapshot's mapping as `ArenaFree::add` reads it: its arena kind and gaps.
    fn pending(arena: Option<ArenaKind>, gaps: Option<ChunkGaps>) -> PendingMapping {
        PendingMapping {
            start: 0,
            end: 0,
            flags: RW,
            path: String::new(),
            rss: 0,
            pss: 0,
            swap: 0,
            creator: None,
            live: Vec::new(),
            arena,
            gaps,
            follows: None,
            thread_stack: false,
        }
    }

    #[test]
    fn the_heap_is_the_main_arena_and_aligned_reservations_are_thread_arenas() {
        let base = 0x7f00_0000_0000;
        let block_base = base + 3 * THREAD_HEAP_SIZE;
        let mappings = [
            mapping(0x55_0000, 0x95_0000, RW, "[heap]"),
            mapping(base, base + (1 << 20), RW, ""),
            mapping(base + (1 << 20), base + THREAD_HEAP_SIZE, 0, ""),
            mapping(base + THREAD_HEAP_SIZE, base + 2 * THREAD_HEAP_SIZE, RW, ""),
            // A large block's own mapping: not aligned, or not followed by a reservation.
            mapping(block_base + 4096, block_base + (9 << 20), RW, ""),
            mapping(
                block_base + THREAD_HEAP_SIZE,
                block_base + THREAD_HEAP_SIZE + (2 << 20),
                RW,
                "",
            ),
            mapping(0x7fff_0000_0000, 0x7fff_0002_1000, RW, "[stack]"),
        ];
        let kinds: Vec<Option<ArenaKind>> = (0..mappings.len())
            .map(|index| arena_kind(&mappings, index, false))
            .collect();
        use ArenaKind::{Main, Thread};
        assert_eq!(
            kinds,
            [
                Some(Main),
                Some(Thread),
                None,
                Some(Thread),
                None,
                None,
                None
            ]
        );
    }

    /// An arena whose second heap lies right after its full first one: one mapping of a heap
    /// and a bit, then the rest of the second heap's reservation. A mapping longer than a
    /// heap is taken for heaps only with a live block inside.
    #[test]
    fn adjacent_heaps_of_one_arena_are_one_thread_arena_mapping_split_by_heap() {
        const HEAP: u64 = THREAD_HEAP_SIZE;
        let base = 0x7f00_0000_0000;
        let used_end = base + HEAP + (16 << 20);
        let mappings = [
            mapping(base, used_end, RW, ""),
            mapping(used_end, base + 2 * HEAP, 0, ""),
            // Two full heaps.
            mapping(base + 4 * HEAP, base + 6 * HEAP, RW, ""),
            // Not a whole number of heaps, and nothing after.
            mapping(base + 8 * HEAP, used_end + 8 * HEAP, RW, ""),
            // Inaccessible, two heaps long: a reservation.
            mapping(base + 10 * HEAP, base + 12 * HEAP, 0, ""),
            // Followed by an inaccessible rest of a heap or more.
            mapping(base + 12 * HEAP, base + 12 * HEAP + (1 << 20), RW, ""),
            mapping(base + 12 * HEAP + (1 << 20), base + 14 * HEAP, 0, ""),
            // Shared.
            mapping(base + 16 * HEAP, base + 17 * HEAP, RW | MAPPING_SHARED, ""),
        ];
        let kinds = |has_blocks: bool| -> Vec<Option<ArenaKind>> {
            (0..mappings.len())
                .map(|index| arena_kind(&mappings, index, has_blocks))
                .collect()
        };
        use ArenaKind::Thread;
        let thread = Some(Thread);
        assert_eq!(
            kinds(true),
            [thread, None, thread, None, None, None, None, None]
        );
        assert_eq!(kinds(false), [None; 8]);

        // The first heap: its arena's state, then a live block, a freed one and a live one
        // (chunks of 4,112 bytes), and its top. The second: a live block at its start (so it
        // continues the arena), and its top.
        let second = base + THREAD_HEAP_SIZE;
        let mut blocks = vec![
            (second + 0x30, 4096),
            (base + 0x8e0, 4096),
            (base + 0x8e0 + 2 * 4112, 4096),
        ];
        let gaps = thread_heap_gaps(base, used_end, &mut blocks);
        let first_top = THREAD_HEAP_SIZE - (0x8d0 + 3 * 4112);
        let second_top = (16 << 20) - (0x20 + 4112);
        assert_eq!(
            gaps,
            ChunkGaps {
                chunks: 1,
                bytes: 4112,
                top: first_top + second_top,
                classes: vec![(12, 4112)],
                heaps: 2,
                later_heaps: 1,
            }
        );
        let mut free = ArenaFree::default();
        free.add(&pending(Some(Thread), Some(gaps)), 0);
        assert_eq!(free.thread_arenas, 1);
    }

    #[test]
    fn arenas_add_up_by_kind() {
        let gaps = |bytes: u64| ChunkGaps {
            chunks: 1,
            bytes,
            top: 100,
            classes: vec![(bytes.ilog2() as u8, bytes)],
            heaps: 1,
            later_heaps: 0,
        };
        let mut free = ArenaFree::default();
        assert!(free.is_empty());
        free.add(&pending(Some(ArenaKind::Main), Some(gaps(4096))), 10);
        free.add(&pending(Some(ArenaKind::Thread), Some(gaps(8192))), 20);
        free.add(&pending(Some(ArenaKind::Thread), Some(gaps(64))), 30);
        // Not an arena, or an arena of a snapshot whose gaps were not worked out.
        free.add(&pending(None, Some(gaps(1 << 20))), 40);
        free.add(&pending(Some(ArenaKind::Thread), None), 50);
        assert_eq!(free.main, gaps(4096));
        assert_eq!(free.thread_arenas, 2);
        assert_eq!(
            (free.threads.chunks, free.threads.bytes, free.threads.top),
            (2, 8192 + 64, 200)
        );
        assert_eq!(free.thread_overhead_rss, 50);
        assert!(!free.is_empty());
        // A heap that continues an arena adds its bytes, not an arena.
        let later = ChunkGaps {
            later_heaps: 1,
            ..gaps(128)
        };
        free.add(&pending(Some(ArenaKind::Thread), Some(later)), 60);
        assert_eq!(free.thread_arenas, 2);
        assert_eq!(
            (free.threads.bytes, free.threads.later_heaps),
            (8192 + 64 + 128, 1)
        );
        assert_eq!(free.thread_overhead_rss, 110);
    }
}
