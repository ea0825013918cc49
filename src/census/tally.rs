//! Walks every arena's heaps and counts each chunk in its class (in use, tcache, fastbin,
//! tcache struct, free, top), by size class and by the resident bytes it covers.

use std::collections::{BTreeMap, HashSet};

use super::arenas::Arena;
use super::caches::{Cached, Caches};
use super::layout::{CHUNK_HEADER, MINIMUM_CHUNK, PAGE, SIZE_FIELD};
use super::reader::WindowReader;
use super::residency::Pages;
use super::walk::{walk, Piece};
use crate::trace::census_format::{ArenaCensus, CensusResidency, SizeClass};

/// What the walks found.
#[derive(Default)]
pub struct Tally {
    pub arenas: Vec<ArenaCensus>,
    pub histogram: BTreeMap<u64, SizeClass>,
    pub residency: CensusResidency,
    pub doubts: Vec<String>,
}

/// glibc's smallest header after which a free chunk's pages can be given back: the
/// `malloc_chunk` links (fd, bk, fd_nextsize, bk_nextsize) that stay.
const FREE_CHUNK_HEADER: u64 = 48;

/// Counts every arena's chunks; each chunk in use by the program goes into `blocks` when
/// given, as (user address, usable bytes).
pub fn tally(
    pid: i32,
    reader: &mut WindowReader,
    arenas: &[Arena],
    caches: &Caches,
    mut blocks: Option<&mut Vec<(u64, u64)>>,
) -> Result<Tally, String> {
    let mut tally = Tally::default();
    let mut seen_cached = HashSet::new();
    for found in arenas {
        let mut census = ArenaCensus {
            address: found.address,
            main: found.main,
            heaps: found.heaps.len() as u32,
            system: found.system(),
            ..ArenaCensus::default()
        };
        let top = found.top();
        for &range in &found.heaps {
            let pages = Pages::read(pid, range.mapped, range.end);
            let resident =
                |start: u64, end: u64| pages.as_ref().map_or(0, |p| p.resident(start, end));
            let whole =
                |start: u64, end: u64| pages.as_ref().map_or(0, |p| p.whole_pages(start, end));
            let heap_resident = resident(range.mapped, range.end);
            tally.residency.resident += heap_resident;
            let mut counted = 0;
            let mut failure = None;
            walk(reader, range, pages.clone(), top, &mut |piece| {
                let (address, size) = match piece {
                    Piece::Chunk { address, size, .. }
                    | Piece::Top { address, size }
                    | Piece::Fence { address, size } => (address, size),
                };
                let on_pages = resident(address, address + size);
                counted += on_pages;
                match piece {
                    Piece::Top { .. } => {
                        census.top = size;
                        tally.residency.top += on_pages;
                        if found.main && size > MINIMUM_CHUNK + PAGE {
                            // systrim keeps MINSIZE (+1) and gives back whole pages above.
                            let keep = address + MINIMUM_CHUNK + 1;
                            tally.residency.trimmable += whole(keep, address + size);
                        }
                    }
                    Piece::Fence { .. } => tally.residency.in_use += on_pages,
                    Piece::Chunk { in_use: false, .. } => {
                        census.free.add(size);
                        census.largest_free = census.largest_free.max(size);
                        class(&mut tally.histogram, size).free.add(size);
                        tally.residency.free += on_pages;
                        tally.residency.trimmable +=
                            whole(address + FREE_CHUNK_HEADER, address + size);
                    }
                    Piece::Chunk { in_use: true, .. } => match caches.chunks.get(&address) {
                        Some(&(kind, expected)) => {
                            if expected != size && failure.is_none() {
                                failure = Some(format!(
                                    "a cached chunk at {address:#x} is {size:#x} bytes, its list says {expected:#x}"
                                ));
                            }
                            seen_cached.insert(address);
                            match kind {
                                Cached::Tcache => census.tcache.add(size),
                                Cached::Fastbin => {
                                    census.fastbins.add(size);
                                    tally.residency.trimmable +=
                                        whole(address + FREE_CHUNK_HEADER, address + size);
                                }
                                Cached::TcacheStruct => census.tcache_structs.add(size),
                            }
                            if kind == Cached::TcacheStruct {
                                tally.residency.in_use += on_pages;
                            } else {
                                class(&mut tally.histogram, size).cached.add(size);
                                tally.residency.cache += on_pages;
                            }
                        }
                        None => {
                            if let Some(blocks) = blocks.as_deref_mut() {
                                blocks.push((address + CHUNK_HEADER, size - SIZE_FIELD));
                            }
                            census.in_use.add(size);
                            class(&mut tally.histogram, size).in_use.add(size);
                            tally.residency.in_use += on_pages;
                        }
                    },
                }
            })?;
            tally.doubts.extend(failure);
            // The heap's own headers (heap_info, malloc_state) count as in use, as glibc
            // counts them.
            tally.residency.in_use += heap_resident.saturating_sub(counted);
        }
        tally.arenas.push(census);
    }
    let missing = caches.chunks.len() - seen_cached.len().min(caches.chunks.len());
    if missing > 0 {
        tally.doubts.push(format!(
            "{missing} cached chunks are not where a walk found chunks"
        ));
    }
    Ok(tally)
}

/// The size class of a chunk: the smallest power of two at least its size.
fn class(histogram: &mut BTreeMap<u64, SizeClass>, size: u64) -> &mut SizeClass {
    let up_to = size.next_power_of_two();
    histogram.entry(up_to).or_insert_with(|| SizeClass {
        up_to,
        ..SizeClass::default()
    })
}
