//! What the replay keeps of one open image for its components: the ranges its mapping calls
//! created, and its smaps snapshots as they stood at their time (with the image's live heap
//! blocks inside each mapping). Live-byte changes over time are the heap's (`StackHeap`).

use std::collections::{BTreeSet, HashMap};

use super::arena_free::{arena_kind, thread_heap_gaps, ArenaKind};
use super::chunk_gaps::ChunkGaps;
use super::ranges::{CreatedRanges, Creator};
use crate::events::heap::{Block, LiveHeap};
use crate::trace::format::{MapCall, MappingResidency, SnapshotReason};
use crate::trace::stacks::StackId;

/// One mapping of a snapshot, with what the image's state said about it at the time.
#[derive(Debug, Clone)]
pub(super) struct PendingMapping {
    pub start: u64,
    pub end: u64,
    pub flags: u8,
    pub path: String,
    pub rss: u64,
    pub pss: u64,
    pub swap: u64,
    /// The recorded call that created the range holding `start`.
    pub creator: Option<Creator>,
    /// Live requested bytes of the blocks starting inside, by allocating stack.
    pub live: Vec<(StackId, u64)>,
    /// Which of glibc's arenas the mapping looks like.
    pub arena: Option<ArenaKind>,
    /// The free space between those blocks, as glibc lays them out (all of a thread arena's
    /// heap without blocks): for an arena of the
    /// image's snapshot with the highest `free_score` (the first of equal ones, and some
    /// before it); else None.
    pub gaps: Option<ChunkGaps>,
    /// For anonymous memory right after a file's mapping: that file (a module's `.bss`).
    pub follows: Option<String>,
    /// A thread's stack top lies in (start, end]: the mapping holds that thread's stack.
    pub thread_stack: bool,
}

#[derive(Debug, Clone)]
pub(super) struct PendingSnapshot {
    pub time_ns: u64,
    pub reason: SnapshotReason,
    pub cost_ns: u64,
    /// The image's live requested bytes at the snapshot.
    pub requested: u64,
    /// Resident bytes of the arenas that the blocks inside do not account for.
    pub free_score: u64,
    pub mappings: Vec<PendingMapping>,
}

/// Per-image state kept during the replay.
#[derive(Debug, Default)]
pub(in crate::analysis) struct ImageTracker {
    ranges: CreatedRanges,
    pub(super) scratch_pages: Vec<u64>,
    /// An address just above each thread's stack pointer (`ThreadStack`), unmapped ones dropped.
    thread_stacks: BTreeSet<u64>,
    pub(super) modules: BTreeSet<String>,
    /// The recorded call that mapped each module's first page (the dlopen that loaded it).
    pub(super) module_creators: HashMap<String, Creator>,
    pub(super) snapshots: Vec<PendingSnapshot>,
    /// The highest `free_score` of the snapshots so far.
    best_free_score: u64,
}

impl ImageTracker {
    /// A fork child of the image tracked by `parent` (at `parent_index`): a copy of its
    /// address space, so of the ranges its calls created, its modules and memsup's page.
    pub fn forked_from(parent: &ImageTracker, parent_index: usize) -> ImageTracker {
        ImageTracker {
            ranges: parent.ranges.inherited(parent_index),
            scratch_pages: parent.scratch_pages.clone(),
            modules: parent.modules.clone(),
            module_creators: parent
                .module_creators
                .iter()
                .map(|(path, &creator)| {
                    let mut creator = creator;
                    creator.owner.get_or_insert(parent_index);
                    (path.clone(), creator)
                })
                .collect(),
            ..ImageTracker::default()
        }
    }

    pub fn mapping(
        &mut self,
        time_ns: u64,
        call: MapCall,
        args: &[u64; 6],
        result: i64,
        stack: StackId,
    ) {
        self.ranges.apply(time_ns, call, args, result, stack);
        if call == MapCall::Munmap && result == 0 {
            let (start, length) = (args[0], args[1]);
            let end = start.saturating_add(length.saturating_add(4095) & !4095);
            self.thread_stacks
                .retain(|&top| !(start < top && top <= end));
        }
    }

    pub fn thread_stack(&mut self, address: u64) {
        // glibc reuses cached stacks: the same top comes again for each new thread.
        self.thread_stacks.insert(address);
    }

    pub fn scratch_page(&mut self, address: u64) {
        self.scratch_pages.push(address);
    }

    /// A module mapped from `start`: the call that created the range holding `start` is
    /// the one that loaded it, when it was recorded.
    pub fn module(&mut self, path: &str, start: u64) {
        if !self.modules.contains(path) {
            self.modules.insert(path.to_string());
            if let Some(creator) = self.ranges.creator(start) {
                self.module_creators.insert(path.to_string(), creator);
            }
        }
    }

    /// Takes a snapshot in at the current heap and mapping state. Its time is the end of
    /// its read: a range unmapped during the read keeps its creator for it.
    pub fn snapshot(
        &mut self,
        (time_ns, reason, cost_ns): (u64, SnapshotReason, u64),
        mappings: &[MappingResidency],
        heap: &LiveHeap,
    ) {
        let mut live = live_by_mapping(mappings, heap);
        let arenas: Vec<Option<ArenaKind>> = (0..mappings.len())
            .map(|index| arena_kind(mappings, index, !live[index].is_empty()))
            .collect();
        // Free space between blocks takes a sort of them: worked out only for a snapshot
        // where the arenas hold more that no block accounts for than at any before.
        let free_score: u64 = (0..mappings.len())
            .filter(|&index| arenas[index].is_some())
            .map(|index| {
                let live: u64 = live[index].iter().map(|&(_, bytes)| bytes).sum();
                mappings[index].rss.saturating_sub(live)
            })
            .sum();
        // An estimate's arenas may be as an earlier snapshot had them: never the picture.
        let estimate = reason.sampled_mappings().is_some();
        let mut gaps = if !estimate && free_score > self.best_free_score {
            self.best_free_score = free_score;
            gaps_by_mapping(mappings, &arenas, heap)
        } else {
            vec![None; mappings.len()]
        };
        let follows = |index: usize| {
            let (mapping, previous) = (&mappings[index], &mappings[index.checked_sub(1)?]);
            let file = !previous.path.is_empty() && !previous.path.starts_with('[');
            (mapping.path.is_empty() && file && previous.end == mapping.start)
                .then(|| previous.path.clone())
        };
        let read_from_ns = time_ns.saturating_sub(read_window_ns(cost_ns));
        let mappings = mappings
            .iter()
            .enumerate()
            .map(|(index, mapping)| PendingMapping {
                follows: follows(index),
                thread_stack: self
                    .thread_stacks
                    .range(mapping.start.saturating_add(1)..=mapping.end)
                    .next()
                    .is_some(),
                start: mapping.start,
                end: mapping.end,
                flags: mapping.flags,
                path: mapping.path.clone(),
                rss: mapping.rss,
                pss: mapping.pss,
                swap: mapping.swap,
                creator: self
                    .ranges
                    .creator_in_snapshot(mapping.start, mapping.end, read_from_ns),
                live: std::mem::take(&mut live[index]),
                arena: arenas[index],
                gaps: gaps[index].take(),
            })
            .collect();
        self.snapshots.push(PendingSnapshot {
            time_ns,
            reason,
            cost_ns,
            requested: heap.live_bytes(),
            free_score,
            mappings,
        });
    }
}

/// How long before its time a snapshot that cost `cost_ns` of CPU may have begun its read:
/// the reader may have waited for a CPU meanwhile, on a busy node many times its cost
/// (no longer than unmapped ranges are remembered).
fn read_window_ns(cost_ns: u64) -> u64 {
    const AT_LEAST_NS: u64 = 100_000_000;
    cost_ns
        .saturating_mul(20)
        .clamp(AT_LEAST_NS, super::ranges::REMOVED_KEPT_NS)
}

/// Live requested bytes of the blocks starting inside each mapping, by allocating stack.
fn live_by_mapping(mappings: &[MappingResidency], heap: &LiveHeap) -> Vec<Vec<(StackId, u64)>> {
    let mut sums: Vec<HashMap<StackId, u64>> = vec![HashMap::new(); mappings.len()];
    for_each_block_inside(mappings, heap, |index, block| {
        *sums[index].entry(block.stack).or_default() += block.size;
    });
    sums.into_iter()
        .map(|by_stack| {
            let mut live: Vec<(StackId, u64)> = by_stack.into_iter().collect();
            live.sort_unstable();
            live
        })
        .collect()
}

/// The free space between the live blocks of each of the `arenas` mappings.
fn gaps_by_mapping(
    mappings: &[MappingResidency],
    arenas: &[Option<ArenaKind>],
    heap: &LiveHeap,
) -> Vec<Option<ChunkGaps>> {
    let mut blocks: Vec<Vec<(u64, u64)>> = vec![Vec::new(); mappings.len()];
    for_each_block_inside(mappings, heap, |index, block| {
        if arenas[index].is_some() {
            blocks[index].push((block.address, block.size));
        }
    });
    // A `[heap]` without live blocks need not be glibc's (musl's holds no blocks).
    blocks
        .iter_mut()
        .zip(mappings)
        .zip(arenas)
        .map(|((blocks, mapping), arena)| match arena {
            Some(ArenaKind::Main) => ChunkGaps::between(blocks, mapping.end),
            Some(ArenaKind::Thread) => Some(thread_heap_gaps(mapping.start, mapping.end, blocks)),
            None => None,
        })
        .collect()
}

/// Calls `each` with the index of the mapping each live block starts in.
fn for_each_block_inside(
    mappings: &[MappingResidency],
    heap: &LiveHeap,
    mut each: impl FnMut(usize, &Block),
) {
    let mut by_start: Vec<usize> = (0..mappings.len()).collect();
    by_start.sort_unstable_by_key(|&index| mappings[index].start);
    for block in heap.blocks() {
        let after = by_start.partition_point(|&index| mappings[index].start <= block.address);
        let Some(&index) = after
            .checked_sub(1)
            .and_then(|position| by_start.get(position))
        else {
            continue;
        };
        if block.address < mappings[index].end {
            each(index, &block);
        }
    }
}
