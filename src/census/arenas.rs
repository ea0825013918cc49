//! The arenas and the heaps to walk: the main arena (in libc's data, its chunks in the brk
//! area) and every other arena, each in heaps of at most 64 MiB that start with a
//! `heap_info`. With symbols the main arena's address is known; without, it is found from
//! another arena's `next` link, or by its top chunk and the shape of its bins.

use super::allocator::Allocator;
use super::layout::{arena, heap, parameters, CHUNK_HEADER, PAGE, SIZE_FLAGS};
use super::reader::{word, WindowReader};
use super::residency::Pages;
use crate::proc::maps::MapEntry;

/// More arenas or heaps than this is taken for a loop in corrupt links.
const MAXIMUM_LINKS: usize = 65_536;

/// One arena with its `malloc_state` as read.
pub struct Arena {
    pub address: u64,
    pub main: bool,
    pub state: Vec<u8>,
    pub heaps: Vec<HeapRange>,
}

impl Arena {
    pub fn top(&self) -> u64 {
        word(&self.state, arena::TOP)
    }

    pub fn system(&self) -> u64 {
        word(&self.state, arena::SYSTEM_MEM)
    }

    pub fn fastbin(&self, index: usize) -> u64 {
        word(&self.state, arena::FASTBINS + 8 * index as u64)
    }
}

/// A stretch of chunks: from its first chunk to the end of its heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapRange {
    /// Where the heap's memory starts (its heap_info for a non-main arena).
    pub mapped: u64,
    pub first_chunk: u64,
    pub end: u64,
}

/// `mp_` fields the census uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Parameters {
    pub sbrk_base: Option<u64>,
    pub mmaps: Option<(u64, u64)>,
    pub tcache_count: Option<u64>,
}

pub fn read_parameters(reader: &mut WindowReader, allocator: &Allocator) -> Parameters {
    let Some(bytes) = allocator
        .parameters
        .and_then(|address| reader.read_bytes(address, parameters::SIZE as usize))
    else {
        return Parameters::default();
    };
    let int = |offset: u64| word(&bytes, offset) & 0xffff_ffff;
    Parameters {
        sbrk_base: Some(word(&bytes, parameters::SBRK_BASE)),
        mmaps: Some((
            int(parameters::N_MMAPS),
            word(&bytes, parameters::MMAPPED_MEM),
        )),
        tcache_count: Some(word(&bytes, parameters::TCACHE_COUNT)),
    }
}

/// Every arena, main first, with the heaps to walk.
pub fn find_arenas(
    reader: &mut WindowReader,
    allocator: &Allocator,
    maps: &[MapEntry],
    sbrk_base: Option<u64>,
) -> Result<Vec<Arena>, String> {
    let brk = maps
        .iter()
        .find(|entry| entry.path.as_deref() == Some("[heap]"));
    let main_address = match allocator.main_arena {
        Some(address) => address,
        None => main_arena_by_shape(reader, allocator, maps, brk)?,
    };
    let mut arenas = Vec::new();
    let mut address = main_address;
    loop {
        let state = reader
            .read_bytes(address, arena::SIZE as usize)
            .ok_or_else(|| format!("arena at {address:#x} cannot be read"))?;
        let main = address == main_address;
        let next = word(&state, arena::NEXT);
        let mut found = Arena {
            address,
            main,
            state,
            heaps: Vec::new(),
        };
        found.heaps = if main {
            main_heap(&found, sbrk_base.or(brk.map(|entry| entry.start)))
        } else {
            arena_heaps(reader, &found)?
        };
        arenas.push(found);
        if next == main_address {
            return Ok(arenas);
        }
        if arenas.len() > MAXIMUM_LINKS || next == 0 {
            return Err(format!("the arena list does not close (at {address:#x})"));
        }
        address = next;
    }
}

/// The main arena's chunks run from the start of the brk area to the end of its top chunk.
fn main_heap(main: &Arena, sbrk_base: Option<u64>) -> Vec<HeapRange> {
    match sbrk_base {
        Some(base) if main.system() > 0 => {
            let first_chunk = (base + 15) & !15;
            vec![HeapRange {
                mapped: base,
                first_chunk,
                end: base + main.system(),
            }]
        }
        // Nothing allocated from the arena yet.
        _ => Vec::new(),
    }
}

/// A non-main arena's heaps: the one holding its top, then each `prev`, in address order.
fn arena_heaps(reader: &mut WindowReader, found: &Arena) -> Result<Vec<HeapRange>, String> {
    let mut heaps = Vec::new();
    let mut address = found.top() & !(heap::MAXIMUM - 1);
    while address != 0 {
        let info = read_heap_info(reader, address)
            .filter(|info| info.arena == found.address)
            .ok_or_else(|| {
                format!(
                    "heap at {address:#x} of arena {:#x} does not check",
                    found.address
                )
            })?;
        let first_chunk = if info.arena == address + heap::HEADER {
            address + heap::FIRST_CHUNK
        } else {
            address + heap::HEADER
        };
        heaps.push(HeapRange {
            mapped: address,
            first_chunk,
            end: address + info.size,
        });
        if heaps.len() > MAXIMUM_LINKS {
            return Err(format!("the heaps of arena {:#x} loop", found.address));
        }
        address = info.previous;
    }
    heaps.sort_by_key(|range| range.first_chunk);
    Ok(heaps)
}

pub struct HeapInfo {
    pub arena: u64,
    pub previous: u64,
    pub size: u64,
}

/// The `heap_info` at `address`, if it looks like one.
pub fn read_heap_info(reader: &mut WindowReader, address: u64) -> Option<HeapInfo> {
    let bytes = reader.read_bytes(address, heap::HEADER as usize)?;
    let size = word(&bytes, heap::SIZE);
    let protected = word(&bytes, heap::MPROTECT_SIZE);
    let previous = word(&bytes, heap::PREVIOUS);
    let plausible = size > 0
        && size <= heap::MAXIMUM
        && protected >= size
        && size % PAGE == 0
        && protected % PAGE == 0
        && word(&bytes, heap::PAGE_SIZE) == PAGE
        && previous % heap::MAXIMUM == 0
        && word(&bytes, heap::ARENA) != 0;
    plausible.then(|| HeapInfo {
        arena: word(&bytes, heap::ARENA),
        previous,
        size,
    })
}

/// Without symbols: another arena's list leads back to the main one (the first link that
/// points into libc's data); with no other arena, the main arena is the spot in libc's data
/// that points at the brk area's top chunk and whose bins are empty or point into the brk
/// area.
fn main_arena_by_shape(
    reader: &mut WindowReader,
    allocator: &Allocator,
    maps: &[MapEntry],
    brk: Option<&MapEntry>,
) -> Result<u64, String> {
    let in_data = |address: u64| {
        allocator
            .data
            .iter()
            .any(|&(start, end)| start <= address && address < end)
    };
    for heap_address in heap_candidates(maps) {
        let Some(info) = read_heap_info(reader, heap_address) else {
            continue;
        };
        let mut address = info.arena;
        for _ in 0..MAXIMUM_LINKS {
            if in_data(address) {
                return Ok(address);
            }
            match reader.read_single(address + arena::NEXT) {
                Some(next) if next != 0 && next != info.arena => address = next,
                _ => break,
            }
        }
    }
    let brk = brk.ok_or("no heap to read yet: no brk area and no arena heap")?;
    let top = top_of_brk(reader, brk).ok_or("the brk area's chunks do not reach its end")?;
    for &(start, end) in &allocator.data {
        let bytes = reader
            .read_bytes(start, (end - start) as usize)
            .unwrap_or_default();
        for offset in (0..bytes.len().saturating_sub(8)).step_by(8) {
            let base = (start + offset as u64).wrapping_sub(arena::TOP);
            if word(&bytes, offset as u64) == top && bins_look_right(reader, base, brk) {
                return Ok(base);
            }
        }
    }
    Err("main_arena not found without symbols".to_string())
}

/// 64 MiB-aligned addresses inside anonymous writable mappings: where heaps of non-main
/// arenas start (a heap may share its mapping with a neighbouring one).
pub fn heap_candidates(maps: &[MapEntry]) -> Vec<u64> {
    let mut candidates = Vec::new();
    for entry in maps
        .iter()
        .filter(|entry| entry.path.is_none() && entry.writable)
    {
        let mut address = entry.start.div_ceil(heap::MAXIMUM) * heap::MAXIMUM;
        while address < entry.end {
            candidates.push(address);
            address += heap::MAXIMUM;
        }
    }
    candidates
}

/// The chunk whose end is the brk area's end.
fn top_of_brk(reader: &mut WindowReader, brk: &MapEntry) -> Option<u64> {
    let pages = Pages::read(reader.pid(), brk.start, brk.end);
    reader.limit_to(brk.start, brk.end, pages);
    let mut address = (brk.start + 15) & !15;
    while address + CHUNK_HEADER <= brk.end {
        let size = reader.u64_at(address + 8)? & !SIZE_FLAGS;
        if size == 0 {
            return None;
        }
        if address + size == brk.end {
            return Some(address);
        }
        address += size;
    }
    None
}

/// At least 120 of the 127 bins point at themselves (empty) or into the brk area.
fn bins_look_right(reader: &mut WindowReader, base: u64, brk: &MapEntry) -> bool {
    let Some(bins) = reader.read_bytes(base + arena::BINS, arena::BIN_POINTERS * 8) else {
        return false;
    };
    let good = (0..127u64)
        .filter(|&bin| {
            let forward = word(&bins, bin * 16);
            let own = base + arena::BINS + bin * 16 - 16;
            forward == own || brk.contains(forward)
        })
        .count();
    good >= 120
}
