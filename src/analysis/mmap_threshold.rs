//! glibc's dynamic mmap threshold, inferred from the records: a reason memory stays resident
//! that a user can act on. glibc serves a request of 128 KiB or more with a mapping of its
//! own, whose chunk header puts the block 16 bytes past the mapping's start; freeing such a
//! chunk raises the threshold to the chunk's size (up to 32 MiB) and the trim threshold to
//! twice that (malloc.c, `__libc_free`), unless the user fixed either. Later requests below
//! the new threshold come from the arena, and what the arena frees stays resident below the
//! trim threshold. Reported only when a later block did come from the arena: other
//! allocators (musl maps every large block again; jemalloc's blocks start elsewhere) never
//! show that.

use std::collections::HashMap;

use crate::trace::format::MapCall;

/// glibc's `DEFAULT_MMAP_THRESHOLD_MIN`: the threshold a process starts with.
const DEFAULT_MMAP_THRESHOLD: u64 = 128 << 10;
/// `DEFAULT_MMAP_THRESHOLD_MAX` on 64-bit: the threshold never rises above it.
const MMAP_THRESHOLD_MAX: u64 = 32 << 20;
/// Where a mapped chunk's block starts: after its prev_size and size fields.
const CHUNK_HEADER: u64 = 16;
const MAP_ANONYMOUS: u64 = 0x20;
const PAGE: u64 = 4096;

/// What the rise of the threshold did in one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MmapThresholdRise {
    /// The threshold at the end (the size of the largest mapped chunk freed, within the
    /// maximum), and when it reached it.
    pub threshold_bytes: u64,
    pub time_ns: u64,
    /// Times a free raised it.
    pub rises: u64,
    /// Blocks allocated after a rise that the starting threshold would have mapped, served
    /// from the arena instead, and their requested bytes.
    pub blocks_from_arena: u64,
    pub bytes_from_arena: u64,
}

impl MmapThresholdRise {
    /// The trim threshold glibc set with it.
    pub fn trim_threshold_bytes(&self) -> u64 {
        2 * self.threshold_bytes
    }
}

#[derive(Debug)]
pub(super) struct ThresholdTracker {
    /// Anonymous mappings by start address: their length.
    anonymous: HashMap<u64, u64>,
    /// Live blocks served by a mapping of their own: their chunk size.
    mapped_blocks: HashMap<u64, u64>,
    threshold: u64,
    rise: MmapThresholdRise,
}

impl Default for ThresholdTracker {
    fn default() -> Self {
        ThresholdTracker {
            anonymous: HashMap::new(),
            mapped_blocks: HashMap::new(),
            threshold: DEFAULT_MMAP_THRESHOLD,
            rise: MmapThresholdRise::default(),
        }
    }
}

impl ThresholdTracker {
    /// A mapping system call (arguments as `MapCall` documents them).
    pub fn mapping(&mut self, call: MapCall, args: &[u64; 6], result: i64) {
        if result < 0 && call != MapCall::Brk {
            return;
        }
        match call {
            MapCall::Mmap if args[3] & MAP_ANONYMOUS != 0 => {
                self.anonymous.insert(result as u64, page_rounded(args[1]));
            }
            MapCall::Munmap => {
                let (start, end) = (args[0], args[0].saturating_add(page_rounded(args[1])));
                self.anonymous
                    .retain(|&address, _| address < start || address >= end);
            }
            MapCall::Mremap if self.anonymous.remove(&args[0]).is_some() => {
                self.anonymous.insert(result as u64, page_rounded(args[2]));
            }
            _ => {}
        }
    }

    /// A block the allocator handed out at `time_ns`.
    pub fn created(&mut self, address: u64, size: u64) {
        // Smaller requests are never mapped by glibc: no lookup on the common path.
        if chunk_size(size) < DEFAULT_MMAP_THRESHOLD {
            return;
        }
        let chunk = address
            .checked_sub(CHUNK_HEADER)
            .and_then(|start| self.anonymous.get(&start));
        match chunk {
            Some(&length) if length >= size + CHUNK_HEADER => {
                self.mapped_blocks.insert(address, length);
            }
            // Below the raised threshold, above the starting one (checked above): glibc's
            // arena served it because of the rise.
            _ if self.rise.rises > 0 && chunk_size(size) < self.threshold => {
                self.rise.blocks_from_arena += 1;
                self.rise.bytes_from_arena += size;
            }
            _ => {}
        }
    }

    /// A block was released: by free (`freed`: glibc adjusts its threshold there) or by a
    /// realloc that moved it (mremap, no adjustment).
    pub fn released(&mut self, address: u64, freed: bool, time_ns: u64) {
        if self.mapped_blocks.is_empty() {
            return;
        }
        let Some(chunk) = self.mapped_blocks.remove(&address) else {
            return;
        };
        if freed && chunk > self.threshold && chunk <= MMAP_THRESHOLD_MAX {
            self.threshold = chunk;
            self.rise.threshold_bytes = chunk;
            self.rise.time_ns = time_ns;
            self.rise.rises += 1;
        }
    }

    /// The rise, when a block came from the arena because of it.
    pub fn finish(self) -> Option<MmapThresholdRise> {
        (self.rise.blocks_from_arena > 0).then_some(self.rise)
    }
}

/// glibc's `request2size`: the chunk a request of `size` bytes needs.
pub(crate) fn chunk_size(size: u64) -> u64 {
    (size + 8 + 15).max(32) & !15
}

fn page_rounded(length: u64) -> u64 {
    length.div_ceil(PAGE) * PAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    /// The mapping glibc makes for a request of 8 MiB.
    const SPIKE_CHUNK: u64 = 8 * MIB + PAGE;

    fn mmap(tracker: &mut ThresholdTracker, address: u64, length: u64) {
        let args = [0, length, 3, 0x22, u64::MAX, 0];
        tracker.mapping(MapCall::Mmap, &args, address as i64);
    }

    #[test]
    fn a_freed_mapped_chunk_raises_the_threshold_and_later_blocks_below_it_come_from_the_arena() {
        let mut tracker = ThresholdTracker::default();
        mmap(&mut tracker, 0x7000_0000, 4 * MIB + PAGE);
        tracker.created(0x7000_0010, 4 * MIB); // held, never freed
        mmap(&mut tracker, 0x7100_0000, SPIKE_CHUNK);
        tracker.created(0x7100_0010, 8 * MIB);
        tracker.released(0x7100_0010, true, 500);
        let args = [0x7100_0000, SPIKE_CHUNK, 0, 0, 0, 0];
        tracker.mapping(MapCall::Munmap, &args, 0);
        tracker.created(0x55_0000_0010, 8 * MIB); // from the heap
        tracker.released(0x55_0000_0010, true, 600);
        tracker.created(0x55_0000_0010, 8 * MIB);
        tracker.created(0x55_0100_0010, 64 << 10); // small: never mapped anyway
        let rise = tracker
            .finish()
            .expect("a rise that served blocks from the arena");
        let expected = MmapThresholdRise {
            threshold_bytes: SPIKE_CHUNK,
            time_ns: 500,
            rises: 1,
            blocks_from_arena: 2,
            bytes_from_arena: 16 * MIB,
        };
        assert_eq!(rise, expected);
        assert_eq!(rise.trim_threshold_bytes(), 2 * SPIKE_CHUNK);
    }

    #[test]
    fn no_reason_without_a_block_from_the_arena_nor_for_moves_and_huge_chunks() {
        // musl maps every large block again: a "rise" with nothing from the arena.
        let mut tracker = ThresholdTracker::default();
        for round in 0..3 {
            let start = 0x7000_0000 + round * 0x100_0000;
            mmap(&mut tracker, start, SPIKE_CHUNK);
            tracker.created(start + CHUNK_HEADER, 8 * MIB);
            tracker.released(start + CHUNK_HEADER, true, round);
        }
        assert_eq!(tracker.finish(), None);
        // A realloc that moves a mapped block, and a chunk above 32 MiB, raise nothing.
        let mut tracker = ThresholdTracker::default();
        mmap(&mut tracker, 0x7000_0000, SPIKE_CHUNK);
        tracker.created(0x7000_0010, 8 * MIB);
        tracker.released(0x7000_0010, false, 1);
        mmap(&mut tracker, 0x7200_0000, 64 * MIB);
        tracker.created(0x7200_0010, 64 * MIB - 64);
        tracker.released(0x7200_0010, true, 2);
        tracker.created(0x55_0000_0010, MIB);
        assert_eq!(tracker.finish(), None);
    }
}
