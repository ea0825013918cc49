//! The free space between the live blocks of one mapping, as glibc lays its chunks out: each
//! block's chunk starts 16 bytes before it and spans `request2size` of its requested size,
//! so what lies between one live chunk's end and the next one's start is free to the
//! program (free chunks in the bins, or cached by the allocator), and what lies after the
//! last live chunk up to the mapping's end is the arena's top.

use crate::analysis::mmap_threshold::chunk_size;

/// glibc's chunk header before a block.
const CHUNK_HEADER: u64 = 16;
/// glibc's `MINSIZE`: no free chunk is smaller.
const MINIMUM_CHUNK: u64 = 32;

/// What one mapping's live blocks leave free between them, or a sum of such.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkGaps {
    /// Runs of free space between two live chunks.
    pub chunks: u64,
    pub bytes: u64,
    /// After the last live chunk, to the mapping's end.
    pub top: u64,
    /// Free bytes by size class: (log2 of the run's size, bytes), by class.
    pub classes: Vec<(u8, u64)>,
    /// Thread arena heaps.
    pub heaps: u64,
    /// Those of them shown to be an arena's second or later one (`continues_an_arena`).
    pub later_heaps: u64,
}

impl ChunkGaps {
    /// The gaps between `blocks` (address, requested size) inside a mapping that ends at
    /// `end`; sorts `blocks`. None without blocks.
    pub fn between(blocks: &mut [(u64, u64)], end: u64) -> Option<ChunkGaps> {
        blocks.sort_unstable();
        let mut gaps = ChunkGaps::default();
        let mut previous_end: Option<u64> = None;
        for &(address, size) in blocks.iter() {
            let start = address.saturating_sub(CHUNK_HEADER);
            if let Some(previous_end) = previous_end {
                let gap = start.saturating_sub(previous_end);
                if gap >= MINIMUM_CHUNK {
                    gaps.add_run(gap);
                }
            }
            let chunk_end = start + chunk_size(size);
            previous_end = Some(previous_end.map_or(chunk_end, |end| end.max(chunk_end)));
        }
        gaps.top = end.saturating_sub(previous_end?);
        Some(gaps)
    }

    /// A mapping with no live block: all of it is top.
    pub fn empty(length: u64) -> ChunkGaps {
        ChunkGaps {
            top: length,
            ..ChunkGaps::default()
        }
    }

    fn add_run(&mut self, bytes: u64) {
        self.chunks += 1;
        self.bytes += bytes;
        self.add_to_class(bytes.ilog2() as u8, bytes);
    }

    fn add_to_class(&mut self, class: u8, bytes: u64) {
        match self
            .classes
            .binary_search_by_key(&class, |&(known, _)| known)
        {
            Ok(index) => self.classes[index].1 += bytes,
            Err(index) => self.classes.insert(index, (class, bytes)),
        }
    }

    pub fn add(&mut self, other: &ChunkGaps) {
        self.heaps += other.heaps;
        self.later_heaps += other.later_heaps;
        self.chunks += other.chunks;
        self.bytes += other.bytes;
        self.top += other.top;
        for &(class, bytes) in &other.classes {
            self.add_to_class(class, bytes);
        }
    }

    /// The size class holding the most free bytes, as its bounds [2^k, 2^(k+1)).
    pub fn main_class(&self) -> Option<(u64, u64)> {
        let &(class, _) = self
            .classes
            .iter()
            .max_by(|one, other| one.1.cmp(&other.1).then(other.0.cmp(&one.0)))?;
        Some((1 << class, 1 << (class + 1)))
    }
}

/// glibc puts a thread arena's own state (`heap_info`, then `malloc_state`, 2,200 bytes
/// since 2.26) at the start of its first heap, so its first block lies at 0x8d0 or above;
/// a later heap holds only `heap_info`, and its first block lies at 0x30. A live block
/// below 0x8d0 in a heap starting at `heap` shows that heap continues an arena. (Not seeing
/// one shows nothing: that heap's first blocks may be free.)
pub fn continues_an_arena(heap: u64, blocks: &[(u64, u64)]) -> bool {
    const FIRST_HEAP_FIRST_BLOCK: u64 = 0x8d0;
    blocks
        .iter()
        .any(|&(address, _)| address >= heap && address < heap + FIRST_HEAP_FIRST_BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_freed_block_is_a_free_chunk_and_the_rest_is_top() {
        // A fence, then four 16 KiB blocks of which the first and third were freed.
        let base = 0x1000_0010;
        let fence = (base, 24);
        let block = |index: u64| base + 32 + index * 16400;
        let mut blocks = vec![(block(3), 16384), fence, (block(1), 16384)];
        let end = block(3) - 16 + 16400 + 4096;
        let gaps = ChunkGaps::between(&mut blocks, end).unwrap();
        assert_eq!(
            gaps,
            ChunkGaps {
                chunks: 2,
                bytes: 2 * 16400,
                top: 4096,
                classes: vec![(14, 2 * 16400)],
                heaps: 0,
                later_heaps: 0,
            }
        );
        assert_eq!(gaps.main_class(), Some((16 << 10, 32 << 10)));
        // Adjacent chunks leave nothing between them.
        let mut packed = vec![(base, 24), (base + 32, 100)];
        let packed = ChunkGaps::between(&mut packed, base + 32 + 112 - 16).unwrap();
        assert_eq!((packed.chunks, packed.bytes, packed.top), (0, 0, 0));
        assert_eq!(ChunkGaps::between(&mut [], 0), None);
    }

    #[test]
    fn sums_keep_their_classes_apart() {
        let mut total = ChunkGaps::default();
        let small = ChunkGaps {
            chunks: 3,
            bytes: 3 * 48,
            top: 10,
            classes: vec![(5, 3 * 48)],
            heaps: 0,
            later_heaps: 0,
        };
        let large = ChunkGaps {
            chunks: 1,
            bytes: 1 << 20,
            top: 20,
            classes: vec![(20, 1 << 20)],
            heaps: 0,
            later_heaps: 0,
        };
        total.add(&large);
        total.add(&small);
        total.add(&small);
        assert_eq!(
            total,
            ChunkGaps {
                chunks: 7,
                bytes: 6 * 48 + (1 << 20),
                top: 40,
                classes: vec![(5, 6 * 48), (20, 1 << 20)],
                heaps: 0,
                later_heaps: 0,
            }
        );
        assert_eq!(total.main_class(), Some((1 << 20, 2 << 20)));
    }

    #[test]
    fn a_block_where_a_first_heap_holds_the_arena_shows_a_later_heap() {
        let heap = 0x7f00_0400_0000;
        // A later heap's first block, right after heap_info.
        assert!(continues_an_arena(
            heap,
            &[(heap + 0x1000, 24), (heap + 0x30, 80)]
        ));
        // A first heap's first block lies after the arena's state; blocks of other
        // mappings say nothing.
        assert!(!continues_an_arena(
            heap,
            &[(heap + 0x8d0, 24), (heap + 0x2000, 80)]
        ));
        assert!(!continues_an_arena(heap, &[(heap - 0x100, 24)]));
        assert!(!continues_an_arena(heap, &[]));
    }
}
