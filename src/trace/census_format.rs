//! What a `HeapCensus` record holds: the glibc heap of a process as `memsup snapshot` read
//! it while the process was stopped (see `census`). Sizes are chunk sizes (header included),
//! as glibc counts them.

use serde::{Deserialize, Serialize};

/// A process's heap census, or why its heap could not be read.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum HeapCensus {
    Walked(Box<CensusTotals>),
    /// One line: not glibc malloc, a layout memsup does not know, a heap that is corrupt.
    Untrusted {
        reason: String,
    },
}

/// A number of chunks and their bytes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Blocks {
    pub count: u64,
    pub bytes: u64,
}

impl Blocks {
    pub fn add(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
    }

    pub fn merge(&mut self, other: Blocks) {
        self.count += other.count;
        self.bytes += other.bytes;
    }
}

/// Where the addresses of `main_arena`, `mp_` and `tcache` came from.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SymbolSource {
    /// libc's separate debug file, found by build-id.
    DebugFile,
    /// A static executable's own symbol table.
    SymbolTable,
    /// No symbols: found by the shape of the structures (DESIGN.md §4b).
    #[default]
    Heuristics,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CensusTotals {
    pub symbols: SymbolSource,
    pub arenas: Vec<ArenaCensus>,
    /// Chunks glibc mapped on their own (requests at or above the mmap threshold).
    pub mmapped: Blocks,
    /// Heap chunks by size class.
    pub histogram: Vec<SizeClass>,
    /// glibc's own totals, as `mallinfo2()` would give them now.
    pub mallinfo: Mallinfo,
    pub residency: CensusResidency,
    /// Things that did not add up (a list that did not validate, a count that disagrees),
    /// each one line; the census is still given.
    pub doubts: Vec<String>,
}

/// One arena: the main one (in libc's data, growing with brk) or one of the others (in
/// heaps of at most 64 MiB that it maps).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ArenaCensus {
    pub address: u64,
    pub main: bool,
    pub heaps: u32,
    /// `system_mem`: the bytes the arena got from the system.
    pub system: u64,
    /// In use by the program (or by libc itself: stdio buffers, thread vectors).
    pub in_use: Blocks,
    /// Free, held in some thread's cache (tcache).
    pub tcache: Blocks,
    /// The threads' `tcache_perthread_struct`s.
    pub tcache_structs: Blocks,
    /// Free, held in the arena's fastbins.
    pub fastbins: Blocks,
    /// Free in the arena's bins (unsorted, small, large).
    pub free: Blocks,
    /// The top chunk's size.
    pub top: u64,
    /// Largest free chunk in the bins.
    pub largest_free: u64,
}

/// Heap chunks whose size is in `(up_to / 2, up_to]`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct SizeClass {
    pub up_to: u64,
    pub in_use: Blocks,
    /// In tcache or fastbins.
    pub cached: Blocks,
    pub free: Blocks,
}

/// The fields of glibc's `struct mallinfo2`, summed over arenas as glibc sums them.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mallinfo {
    pub arena: u64,
    pub ordblks: u64,
    pub smblks: u64,
    pub hblks: u64,
    pub hblkhd: u64,
    pub fsmblks: u64,
    pub uordblks: u64,
    pub fordblks: u64,
    pub keepcost: u64,
}

/// The arenas' resident bytes (from /proc/PID/pagemap) by what the chunks on those pages
/// are.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CensusResidency {
    /// Resident bytes of the arenas' heaps.
    pub resident: u64,
    /// In use, with the arenas' own headers and the tcache structs.
    pub in_use: u64,
    /// Free chunks in bins.
    pub free: u64,
    /// tcache and fastbins.
    pub cache: u64,
    pub top: u64,
    /// What `malloc_trim(0)` would give back, estimated: the resident whole pages inside free
    /// chunks (bins, and fastbins it would consolidate first) and in each top beyond its
    /// first page.
    pub trimmable: u64,
}

/// The blocks glibc held in use for the program when memsup attached, sorted by address.
/// Each is kept as its distance from the block before (the first from 0) and its usable
/// bytes: a profile carries a large heap's blocks in a few bytes each.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveBlocks {
    deltas: Vec<(u64, u64)>,
}

impl LiveBlocks {
    /// From (user address, usable bytes) in any order.
    pub fn new(mut blocks: Vec<(u64, u64)>) -> LiveBlocks {
        blocks.sort_unstable();
        let mut previous = 0;
        let deltas = blocks
            .into_iter()
            .map(|(address, bytes)| {
                let delta = address - previous;
                previous = address;
                (delta, bytes)
            })
            .collect();
        LiveBlocks { deltas }
    }

    /// From (user address, usable bytes) in any order, in pieces of at most `per_piece`
    /// blocks: one record each, however large the heap (a profile block has a size limit).
    pub fn pieces(mut blocks: Vec<(u64, u64)>, per_piece: usize) -> Vec<LiveBlocks> {
        blocks.sort_unstable();
        blocks
            .chunks(per_piece.max(1))
            .map(|piece| LiveBlocks::new(piece.to_vec()))
            .collect()
    }

    /// (user address, usable bytes), by address (a damaged record gives wrong addresses,
    /// never a panic).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.deltas.iter().scan(0u64, |address, &(delta, bytes)| {
            *address = address.wrapping_add(delta);
            Some((*address, bytes))
        })
    }

    pub fn len(&self) -> usize {
        self.deltas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use bincode::Options;

    use super::*;
    use crate::trace::format::Record;

    #[test]
    fn blocks_at_an_attach_round_trip_sorted_and_after_every_older_kind() {
        let blocks = LiveBlocks::new(vec![(0x5600_0000_2010, 24), (0x5600_0000_1010, 1000)]);
        assert_eq!(
            blocks.iter().collect::<Vec<_>>(),
            [(0x5600_0000_1010, 1000), (0x5600_0000_2010, 24)]
        );
        let record = Record::BlocksAtAttach {
            time_ns: 9_000,
            pid: 40,
            blocks,
        };
        let encoding = crate::trace::writer::encoding();
        let bytes = encoding.serialize(&record).unwrap();
        assert_eq!(bytes[0], 33);
        // The second block is a short distance from the first: a few bytes, not eight.
        assert!(bytes.len() < 24, "{bytes:?}");
        let back: Record = encoding.deserialize(&bytes).unwrap();
        assert_eq!(back, record);
        let pieces = LiveBlocks::pieces(vec![(0x30, 3), (0x10, 1), (0x20, 2)], 2);
        let listed: Vec<Vec<(u64, u64)>> = pieces.iter().map(|p| p.iter().collect()).collect();
        assert_eq!(listed, [vec![(0x10, 1), (0x20, 2)], vec![(0x30, 3)]]);
    }

    fn census_record(census: HeapCensus) -> Record {
        Record::HeapCensus {
            time_ns: 7_000,
            pid: 40,
            census,
        }
    }

    #[test]
    fn a_census_record_round_trips_and_comes_after_every_older_kind() {
        let arena = ArenaCensus {
            address: 0x7f00_0000_0030,
            heaps: 2,
            system: 1 << 20,
            in_use: Blocks {
                count: 3,
                bytes: 96,
            },
            top: 4096,
            ..ArenaCensus::default()
        };
        let walked = HeapCensus::Walked(Box::new(CensusTotals {
            symbols: SymbolSource::Heuristics,
            arenas: vec![arena],
            mmapped: Blocks {
                count: 1,
                bytes: 200_704,
            },
            histogram: vec![SizeClass {
                up_to: 32,
                ..SizeClass::default()
            }],
            mallinfo: Mallinfo {
                arena: 1 << 20,
                keepcost: u64::MAX,
                ..Mallinfo::default()
            },
            residency: CensusResidency::default(),
            doubts: vec!["naïve doubt".to_string()],
        }));
        let untrusted = HeapCensus::Untrusted {
            reason: "malloc is libjemalloc.so.2's, not glibc's".to_string(),
        };
        let encoding = crate::trace::writer::encoding();
        for census in [walked, untrusted] {
            let record = census_record(census);
            let bytes = encoding.serialize(&record).unwrap();
            // bincode writes the variant's index first: the older kinds keep theirs.
            assert_eq!(bytes[0], 29);
            let back: Record = encoding.deserialize(&bytes).unwrap();
            assert_eq!(back, record);
        }
    }
}
