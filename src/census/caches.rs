//! The free chunks glibc keeps looking in use: each thread's tcache (found through the
//! thread's TLS: fs_base plus the offset libc's GOT holds for `tcache`) and each arena's
//! fastbins. Their lists are followed with glibc's safe-linking undone and checked against
//! their counts; a list that does not check is a doubt, not a failure (a thread stopped
//! inside malloc may be halfway through changing it).

use std::collections::HashMap;

use super::allocator::{Allocator, TcacheLocation};
use super::arenas::Arena;
use super::layout::{arena, bin_chunk_size, reveal, tcache, CHUNK_HEADER};
use super::reader::WindowReader;

/// Longest list followed: far more than any real fastbin.
const MAXIMUM_CHAIN: usize = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cached {
    Tcache,
    Fastbin,
    /// A thread's `tcache_perthread_struct` itself.
    TcacheStruct,
}

/// Cached chunks by address, with the chunk size their list implies.
#[derive(Default)]
pub struct Caches {
    pub chunks: HashMap<u64, (Cached, u64)>,
    pub doubts: Vec<String>,
}

/// A stopped thread: its id and thread pointer.
#[derive(Debug, Clone, Copy)]
pub struct ThreadPointer {
    pub tid: i32,
    pub fs_base: u64,
}

pub fn find_caches(
    reader: &mut WindowReader,
    allocator: &Allocator,
    arenas: &[Arena],
    threads: &[ThreadPointer],
    tcache_count: Option<u64>,
) -> Caches {
    let mut caches = Caches::default();
    let maximum = tcache_count.unwrap_or(u64::from(u16::MAX));
    let structs = thread_caches(reader, &allocator.tcache, threads, maximum);
    for (tid, address) in structs {
        match tcache_entries(reader, address, maximum) {
            Ok(entries) => {
                caches.chunks.insert(
                    address - CHUNK_HEADER,
                    (Cached::TcacheStruct, tcache::CHUNK),
                );
                for (chunk, size) in entries {
                    caches.chunks.insert(chunk, (Cached::Tcache, size));
                }
            }
            Err(why) => caches.doubts.push(format!("thread {tid}'s tcache: {why}")),
        }
    }
    for found in arenas {
        for index in 0..arena::FASTBIN_COUNT {
            if let Err(why) = fastbin(reader, found.fastbin(index), index, &mut caches) {
                let at = found.address;
                caches
                    .doubts
                    .push(format!("arena {at:#x} fastbin {index}: {why}"));
            }
        }
    }
    caches
}

/// Each thread's tcache struct (its user data address), when it has one.
fn thread_caches(
    reader: &mut WindowReader,
    location: &TcacheLocation,
    threads: &[ThreadPointer],
    maximum: u64,
) -> Vec<(i32, u64)> {
    let through_offset = |reader: &mut WindowReader, offset: i64| -> Vec<(i32, u64)> {
        threads
            .iter()
            .filter_map(|thread| {
                let slot = thread.fs_base.wrapping_add(offset as u64);
                let pointer = reader.read_single(slot)?;
                (pointer != 0).then_some((thread.tid, pointer))
            })
            .collect()
    };
    match location {
        TcacheLocation::Offset(offset) => through_offset(reader, *offset),
        TcacheLocation::Slot(slot) => match reader.read_single(*slot) {
            Some(offset) => through_offset(reader, offset as i64),
            None => Vec::new(),
        },
        // Without symbols: the TLS slot whose pointers lead to tcache structs that check.
        TcacheLocation::Candidates(slots) => {
            for &slot in slots {
                let Some(offset) = reader.read_single(slot) else {
                    continue;
                };
                let found = through_offset(reader, offset as i64);
                let checks = found.iter().all(|&(_, address)| {
                    looks_like_tcache_chunk(reader, address)
                        && tcache_entries(reader, address, maximum).is_ok()
                });
                if !found.is_empty() && checks {
                    return found;
                }
            }
            Vec::new()
        }
        TcacheLocation::Unknown => Vec::new(),
    }
}

fn looks_like_tcache_chunk(reader: &mut WindowReader, address: u64) -> bool {
    address % 16 == 0
        && reader
            .read_single(address.wrapping_sub(8))
            .is_some_and(|size| size & !7 == tcache::CHUNK)
}

/// The chunks in the tcache struct at `address`, with their sizes.
fn tcache_entries(
    reader: &mut WindowReader,
    address: u64,
    maximum: u64,
) -> Result<Vec<(u64, u64)>, String> {
    let bytes = reader
        .read_bytes(address, tcache::SIZE as usize)
        .ok_or("unreadable")?;
    let mut entries = Vec::new();
    for bin in 0..tcache::BINS {
        let count = u64::from(u16::from_le_bytes([bytes[2 * bin], bytes[2 * bin + 1]]));
        let offset = tcache::ENTRIES as usize + 8 * bin;
        let mut entry = u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8"));
        if count > maximum || (count == 0) != (entry == 0) {
            return Err(format!("bin {bin} counts {count} with head {entry:#x}"));
        }
        for _ in 0..count {
            if entry == 0 || entry % 16 != 0 {
                return Err(format!("bin {bin} is shorter than its count {count}"));
            }
            entries.push((entry - CHUNK_HEADER, bin_chunk_size(bin)));
            let stored = reader.read_single(entry).ok_or("an entry cannot be read")?;
            entry = reveal(entry, stored);
        }
        if entry != 0 {
            return Err(format!("bin {bin} is longer than its count {count}"));
        }
    }
    Ok(entries)
}

/// One fastbin's chunks.
fn fastbin(
    reader: &mut WindowReader,
    head: u64,
    index: usize,
    caches: &mut Caches,
) -> Result<(), String> {
    let mut chunk = head;
    for _ in 0..MAXIMUM_CHAIN {
        if chunk == 0 {
            return Ok(());
        }
        if chunk % 16 != 0 {
            return Err(format!("a link to {chunk:#x} is misaligned"));
        }
        caches
            .chunks
            .insert(chunk, (Cached::Fastbin, bin_chunk_size(index)));
        let link = chunk + CHUNK_HEADER;
        let stored = reader.read_single(link).ok_or("a chunk cannot be read")?;
        chunk = reveal(link, stored);
    }
    Err("it does not end".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptrace::memory::SliceMemory;

    const BASE: u64 = 0x5555_0000_0000;

    /// A tcache struct at BASE + 0x10 whose bin 1 (chunks of 0x30) holds two entries,
    /// linked the way glibc links them (safe-linked), and whose bin 2 says 1 but is empty.
    fn memory(second_count: u16) -> SliceMemory {
        let mut bytes = vec![0u8; 0x1000];
        let mut put = |address: u64, value: &[u8]| {
            let at = (address - BASE) as usize;
            bytes[at..at + value.len()].copy_from_slice(value);
        };
        let structure = BASE + 0x10;
        let (first, second) = (BASE + 0x400, BASE + 0x500);
        put(structure + 2, &2u16.to_le_bytes());
        put(structure + 4, &second_count.to_le_bytes());
        put(structure + tcache::ENTRIES + 8, &first.to_le_bytes());
        put(first, &((first >> 12) ^ second).to_le_bytes());
        put(second, &(second >> 12).to_le_bytes());
        SliceMemory { base: BASE, bytes }
    }

    #[test]
    fn a_tcache_chain_is_followed_through_safe_linking_and_checked_against_its_count() {
        let good = memory(0);
        let mut reader = WindowReader::new(&good, 0);
        let entries = tcache_entries(&mut reader, BASE + 0x10, 7).unwrap();
        assert_eq!(entries, vec![(BASE + 0x3f0, 0x30), (BASE + 0x4f0, 0x30)]);
        assert_eq!(
            tcache_entries(&mut reader, BASE + 0x10, 1).unwrap_err(),
            "bin 1 counts 2 with head 0x555500000400"
        );
        let bad = memory(1);
        let mut reader = WindowReader::new(&bad, 0);
        assert_eq!(
            tcache_entries(&mut reader, BASE + 0x10, 7).unwrap_err(),
            "bin 2 counts 1 with head 0x0"
        );
    }

    #[test]
    fn a_fastbin_chain_is_followed_to_its_end() {
        let mut bytes = vec![0u8; 0x1000];
        let (first, second) = (BASE + 0x100, BASE + 0x200);
        let link = ((first + 16) >> 12) ^ second;
        bytes[0x110..0x118].copy_from_slice(&link.to_le_bytes());
        let end = (second + 16) >> 12;
        bytes[0x210..0x218].copy_from_slice(&end.to_le_bytes());
        let memory = SliceMemory { base: BASE, bytes };
        let mut reader = WindowReader::new(&memory, 0);
        let mut caches = Caches::default();
        fastbin(&mut reader, first, 1, &mut caches).unwrap();
        assert_eq!(caches.chunks.len(), 2);
        assert_eq!(caches.chunks[&second], (Cached::Fastbin, 0x30));
    }
}
