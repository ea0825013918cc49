//! Walks one heap chunk by chunk: each header's size leads to the next chunk, and a chunk is
//! in use exactly when the next one's PREV_INUSE bit is set. The walk ends at the arena's
//! top chunk, or, in an older heap of a non-main arena, at the fenceposts glibc left at its
//! end (a 16-byte chunk, then a header of size 0).

use super::arenas::HeapRange;
use super::layout::{CHUNK_HEADER, IS_MMAPPED, MINIMUM_CHUNK, PREV_INUSE, SIZE_FLAGS};
use super::reader::WindowReader;
use super::residency::Pages;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Chunk {
        address: u64,
        size: u64,
        in_use: bool,
    },
    Top {
        address: u64,
        size: u64,
    },
    /// The fencepost chunk closing an older heap.
    Fence {
        address: u64,
        size: u64,
    },
}

/// Visits every chunk of `range`; `top` is the arena's top chunk. Fails, naming the chunk,
/// at a header no heap can have.
pub fn walk(
    reader: &mut WindowReader,
    range: HeapRange,
    pages: Option<Pages>,
    top: u64,
    visit: &mut dyn FnMut(Piece),
) -> Result<(), String> {
    reader.limit_to(range.mapped, range.end, pages);
    let unreadable = |address: u64| format!("the chunk at {address:#x} cannot be read");
    let mut address = range.first_chunk;
    let mut size_field = reader
        .u64_at(address + 8)
        .ok_or_else(|| unreadable(address))?;
    loop {
        let size = size_field & !SIZE_FLAGS;
        if address == top {
            if address + size > range.end {
                return Err(format!("the top chunk at {address:#x} runs past its heap"));
            }
            visit(Piece::Top { address, size });
            return Ok(());
        }
        if size == 0 {
            return Ok(());
        }
        if size == CHUNK_HEADER {
            visit(Piece::Fence { address, size });
        } else if size_field & IS_MMAPPED != 0
            || size % 16 != 0
            || size < MINIMUM_CHUNK
            || address + size > range.end
        {
            return Err(format!(
                "the chunk at {address:#x} has an impossible size field {size_field:#x}"
            ));
        }
        let next = address + size;
        if next + CHUNK_HEADER > range.end {
            return Err(format!(
                "the chunks run past the heap's end at {:#x}",
                range.end
            ));
        }
        let next_field = reader.u64_at(next + 8).ok_or_else(|| unreadable(next))?;
        if size >= MINIMUM_CHUNK {
            let in_use = next_field & PREV_INUSE != 0;
            visit(Piece::Chunk {
                address,
                size,
                in_use,
            });
        }
        address = next;
        size_field = next_field;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptrace::memory::SliceMemory;

    /// A heap at 0x10000 of headers (size fields) at the given offsets.
    fn heap(headers: &[(u64, u64)], length: usize) -> SliceMemory {
        let mut bytes = vec![0u8; length];
        for &(offset, field) in headers {
            let at = offset as usize + 8;
            bytes[at..at + 8].copy_from_slice(&field.to_le_bytes());
        }
        SliceMemory {
            base: 0x10000,
            bytes,
        }
    }

    fn pieces(memory: &SliceMemory, top: u64, length: u64) -> Result<Vec<Piece>, String> {
        let mut reader = WindowReader::new(memory, 0);
        let range = HeapRange {
            mapped: 0x10000,
            first_chunk: 0x10000,
            end: 0x10000 + length,
        };
        let mut seen = Vec::new();
        walk(&mut reader, range, None, top, &mut |piece| seen.push(piece))?;
        Ok(seen)
    }

    #[test]
    fn a_chunk_is_in_use_when_the_next_one_says_so_and_the_walk_ends_at_top() {
        // 0x20 in use, 0x30 free (the next lacks PREV_INUSE), 0x20 in use, top.
        let memory = heap(
            &[(0, 0x21), (0x20, 0x31), (0x50, 0x20), (0x70, 0x91)],
            0x100,
        );
        let seen = pieces(&memory, 0x10070, 0x100).unwrap();
        let chunk = |address, size, in_use| Piece::Chunk {
            address,
            size,
            in_use,
        };
        assert_eq!(
            seen,
            vec![
                chunk(0x10000, 0x20, true),
                chunk(0x10020, 0x30, false),
                chunk(0x10050, 0x20, true),
                Piece::Top {
                    address: 0x10070,
                    size: 0x90
                },
            ]
        );
    }

    #[test]
    fn an_older_heap_ends_at_its_fenceposts_and_a_bad_size_is_named() {
        let memory = heap(&[(0, 0x41), (0x40, 0x11), (0x50, 0x1)], 0x100);
        let seen = pieces(&memory, 0, 0x100).unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[1],
            Piece::Fence {
                address: 0x10040,
                size: 0x10
            }
        );
        let broken = heap(&[(0, 0x41), (0x40, 0x1001)], 0x100);
        assert_eq!(
            pieces(&broken, 0, 0x100).unwrap_err(),
            "the chunk at 0x10040 has an impossible size field 0x1001"
        );
    }
}
