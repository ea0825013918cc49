//! Chunks glibc mapped on their own. They are in no list, so they are found by their
//! header: at a page boundary of an anonymous writable mapping, prev_size 0 and a size that
//! is a whole number of pages with only IS_MMAPPED set (memalign may have moved the
//! program's chunk further up, and mremap may have resized it since: see `locate_chunk`).
//! Headers are read 512 pages to a `process_vm_readv`, of resident pages only. Mappings
//! that hold no such chunk (heaps of the arenas, libc's data, the threads' stacks) are left
//! out.

use std::io::IoSliceMut;

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use super::arenas::HeapRange;
use super::layout::{CHUNK_HEADER, IS_MMAPPED, MINIMUM_CHUNK, PAGE, SIZE_FLAGS};
use super::residency::Pages;
use crate::proc::maps::MapEntry;
use crate::trace::census_format::Blocks;

const PAGES_PER_READ: usize = 512;

/// What the scan skips: the arenas' heaps, libc's data, the threads' stacks.
pub struct Excluded<'a> {
    pub heaps: &'a [HeapRange],
    pub data: &'a [(u64, u64)],
    pub stack_pointers: &'a [u64],
}

/// The mmapped chunks' totals; each chunk goes into `blocks` too when given, as (user
/// address, usable bytes).
pub fn find_mmapped(
    pid: i32,
    maps: &[MapEntry],
    excluded: &Excluded,
    mut blocks: Option<&mut Vec<(u64, u64)>>,
) -> Blocks {
    let mut found = Blocks::default();
    for entry in maps.iter().filter(|entry| scanned(entry, excluded)) {
        // Only resident pages: a header was written there; reading others would map them.
        let Some(resident) = Pages::read(pid, entry.start, entry.end) else {
            continue;
        };
        let pages: Vec<u64> = (entry.start..entry.end)
            .step_by(PAGE as usize)
            .filter(|&page| resident.is_present(page) && !in_heap(page, excluded.heaps))
            .collect();
        // Pages inside a chunk already found are not headers.
        let mut inside_until = 0;
        for batch in pages.chunks(PAGES_PER_READ) {
            let headers = read_headers(pid, batch);
            for (&page, header) in batch.iter().zip(headers) {
                if page < inside_until {
                    continue;
                }
                let Some((0, size_field)) = header else {
                    continue;
                };
                let size = size_field & !SIZE_FLAGS;
                if size_field & SIZE_FLAGS != IS_MMAPPED || size == 0 || size % PAGE != 0 {
                    continue;
                }
                let Some(chunk) = locate_chunk(pid, page, size, entry.end, &resident) else {
                    continue;
                };
                found.add(chunk.extent);
                if let Some(blocks) = blocks.as_deref_mut() {
                    let start = page + chunk.offset;
                    blocks.push((
                        start + CHUNK_HEADER,
                        chunk.extent - chunk.offset - CHUNK_HEADER,
                    ));
                }
                inside_until = page + chunk.extent;
            }
        }
    }
    found
}

/// Where the program's chunk lies in a mapping that starts with an mmapped chunk's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MappedChunk {
    /// From the mapping's start to the program's chunk: 0, or what memalign skipped.
    offset: u64,
    /// The mapping's bytes: the offset and the program's chunk.
    extent: u64,
}

/// The chunk of a mapping at `page` whose first header says `size` bytes. memalign may have
/// moved the program's chunk up to an aligned address: glibc then writes a new header there
/// (prev_size: the distance from the mapping's start; size: the rest, IS_MMAPPED) and leaves
/// the old one at the start, and the bytes between them are never written. A realloc of
/// that chunk by mremap resizes the mapping and rewrites only the new header, so the old
/// one's size is stale then: the moved header gives the extent.
fn locate_chunk(pid: i32, page: u64, size: u64, end: u64, resident: &Pages) -> Option<MappedChunk> {
    let room = end - page;
    // The moved header lies inside the chunk memalign was given, whose size the old header
    // keeps.
    let offsets: Vec<u64> = memalign_offsets(page, size.min(room))
        .into_iter()
        .filter(|&offset| resident.is_present(page + offset))
        .collect();
    let addresses: Vec<u64> = offsets.iter().map(|&offset| page + offset).collect();
    let headers = read_headers(pid, &addresses);
    let candidates: Vec<(u64, (u64, u64))> = offsets
        .into_iter()
        .zip(headers)
        .filter_map(|(offset, header)| Some((offset, header?)))
        .collect();
    choose_chunk(size, room, &candidates, |offset| {
        skipped_bytes_are_clear(pid, page, offset, resident)
    })
}

/// The chunk given the first header's `size`, the bytes to the mapping's end (`room`), the
/// headers read at memalign's offsets (smallest offset first) and whether the bytes below an
/// offset are as memalign leaves them (`clear_below`). The lowest header that reads as a
/// moved one, with nothing written below it, is the program's chunk: a real one has only
/// untouched bytes below it, while the program's own bytes may happen to look like a
/// header. Without one the chunk starts at the mapping, if it fits.
fn choose_chunk(
    size: u64,
    room: u64,
    candidates: &[(u64, (u64, u64))],
    clear_below: impl Fn(u64) -> bool,
) -> Option<MappedChunk> {
    let moved = candidates
        .iter()
        .find_map(|&(offset, (prev_size, size_field))| {
            let rest = size_field & !SIZE_FLAGS;
            let extent = offset + rest;
            (prev_size == offset
                && size_field & SIZE_FLAGS == IS_MMAPPED
                && rest >= MINIMUM_CHUNK
                && extent % PAGE == 0
                && extent <= room)
                .then_some(MappedChunk { offset, extent })
        })
        .filter(|chunk| clear_below(chunk.offset));
    moved.or_else(|| {
        (size <= room).then_some(MappedChunk {
            offset: 0,
            extent: size,
        })
    })
}

/// Whether the bytes memalign skipped below `offset` in the mapping at `page` (after the old
/// header) are all zero, as mmap gave them: checked on the resident pages of the last 64 KiB
/// below the moved header (pages never touched are zero).
fn skipped_bytes_are_clear(pid: i32, page: u64, offset: u64, resident: &Pages) -> bool {
    const CHECKED: u64 = 64 << 10;
    let end = page + offset;
    let start = (page + CHUNK_HEADER).max(end.saturating_sub(CHECKED));
    let mut at = start;
    let mut buffer = Vec::new();
    while at < end {
        let page_end = (at / PAGE + 1) * PAGE;
        let until = page_end.min(end);
        if resident.is_present(at) {
            buffer.resize((until - at) as usize, 0);
            let remote = [RemoteIoVec {
                base: at as usize,
                len: buffer.len(),
            }];
            let mut local = [IoSliceMut::new(&mut buffer)];
            let read = process_vm_readv(Pid::from_raw(pid), &mut local, &remote).unwrap_or(0);
            if read != buffer.len() || buffer.iter().any(|&byte| byte != 0) {
                return false;
            }
        }
        at = until;
    }
    true
}

/// The offsets memalign can move a chunk mapped at `page` to, smallest first: for each
/// power-of-two alignment above malloc's own, the first aligned user address whose chunk
/// starts at least a minimal chunk above the mapping's start (glibc's `_int_memalign`).
fn memalign_offsets(page: u64, size: u64) -> Vec<u64> {
    let mut offsets: Vec<u64> = Vec::new();
    let mut alignment = 2 * CHUNK_HEADER;
    while alignment < size {
        let mut chunk = (page + CHUNK_HEADER).next_multiple_of(alignment) - CHUNK_HEADER;
        if chunk - page < MINIMUM_CHUNK {
            chunk += alignment;
        }
        let offset = chunk - page;
        if offset + MINIMUM_CHUNK <= size {
            offsets.push(offset);
        }
        alignment *= 2;
    }
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

fn in_heap(page: u64, heaps: &[HeapRange]) -> bool {
    heaps
        .iter()
        .any(|range| range.mapped <= page && page < range.end)
}

fn scanned(entry: &MapEntry, excluded: &Excluded) -> bool {
    let anonymous = entry.path.is_none() && entry.writable && entry.readable && !entry.shared;
    let data = excluded
        .data
        .iter()
        .any(|&(start, end)| start < entry.end && entry.start < end);
    let stack = excluded
        .stack_pointers
        .iter()
        .any(|&pointer| entry.contains(pointer));
    anonymous && !data && !stack
}

/// prev_size and size of each page's first 16 bytes; None for pages that cannot be read.
fn read_headers(pid: i32, pages: &[u64]) -> Vec<Option<(u64, u64)>> {
    let mut buffer = vec![0u8; pages.len() * 16];
    let remote: Vec<RemoteIoVec> = pages
        .iter()
        .map(|&base| RemoteIoVec {
            base: base as usize,
            len: 16,
        })
        .collect();
    let read = {
        let mut local = [IoSliceMut::new(&mut buffer)];
        process_vm_readv(Pid::from_raw(pid), &mut local, &remote).unwrap_or(0)
    };
    (0..pages.len())
        .map(|index| {
            let at = index * 16;
            (at + 16 <= read).then(|| {
                let field = |offset: usize| {
                    u64::from_le_bytes(buffer[offset..offset + 8].try_into().expect("8"))
                };
                (field(at), field(at + 8))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memalign_moves_a_page_aligned_chunk_to_the_first_aligned_spot_a_chunk_above() {
        let page = 0x7f00_0000_1000;
        let offsets = memalign_offsets(page, 50 * PAGE);
        // 32 and 64 both give 48 (16 is too close); 4096 gives 4080; a 64 KiB alignment
        // depends on where the page is.
        assert_eq!(&offsets[..4], &[48, 112, 240, 496]);
        assert!(offsets.contains(&4080));
        assert!(offsets.contains(&(0x7f00_0001_0000 - 16 - page)));
        assert!(offsets
            .iter()
            .all(|&offset| offset + MINIMUM_CHUNK <= 50 * PAGE));
    }

    const SIZE: u64 = 50 * PAGE;
    const CLEAR: fn(u64) -> bool = |_| true;

    #[test]
    fn a_chunk_memalign_moved_is_found_where_its_own_header_says() {
        // Below the moved header at 4080 memalign wrote nothing: 48 reads as zeros.
        let candidates = [(48, (0, 0)), (4080, (4080, (SIZE - 4080) | IS_MMAPPED))];
        assert_eq!(
            choose_chunk(SIZE, 1 << 30, &candidates, CLEAR),
            Some(MappedChunk {
                offset: 4080,
                extent: SIZE
            })
        );
    }

    #[test]
    fn a_moved_chunk_grown_or_shrunk_by_mremap_takes_its_extent_from_the_moved_header() {
        let grown = [(4080, (4080, (75 * PAGE - 4080) | IS_MMAPPED))];
        assert_eq!(
            choose_chunk(SIZE, 75 * PAGE, &grown, CLEAR),
            Some(MappedChunk {
                offset: 4080,
                extent: 75 * PAGE
            })
        );
        // Shrunk below the stale size, which no longer fits the mapping.
        let shrunk = [(4080, (4080, (20 * PAGE - 4080) | IS_MMAPPED))];
        assert_eq!(
            choose_chunk(SIZE, 20 * PAGE, &shrunk, CLEAR),
            Some(MappedChunk {
                offset: 4080,
                extent: 20 * PAGE
            })
        );
        // A moved header that would reach past the mapping is not one.
        assert_eq!(choose_chunk(SIZE, 20 * PAGE, &grown, CLEAR), None);
    }

    #[test]
    fn program_bytes_that_look_like_a_moved_header_do_not_move_the_chunk() {
        // An ordinary chunk whose data at 48 reads (48, one page less 48): the program
        // wrote below it, so it is no header of memalign's.
        let data = [(48, (48, (PAGE - 48) | IS_MMAPPED)), (4080, (0, 0))];
        let written = |_| false;
        assert_eq!(
            choose_chunk(SIZE, SIZE, &data, written),
            Some(MappedChunk {
                offset: 0,
                extent: SIZE
            })
        );
        // Without one the chunk starts at the mapping, if it fits.
        assert_eq!(choose_chunk(SIZE, SIZE - PAGE, &data, written), None);
    }
}
