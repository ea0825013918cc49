//! The glibc heap census of `memsup snapshot`: what a stopped process's heap holds, read
//! with `process_vm_readv` alone (nothing written, nothing run in the process). Where the
//! allocator is, and its symbols, is found before the stop (`allocator`); while the process
//! is stopped the arenas are found (`arenas`), the caches' lists followed (`caches`), every
//! heap walked (`walk`, `tally`) and the mmapped chunks found (`mmapped`); `totals` sums it
//! up as glibc's `mallinfo2()` would.

pub mod allocator;
mod arenas;
mod caches;
mod layout;
mod mmapped;
mod reader;
mod residency;
mod tally;
mod totals;
mod walk;

pub use allocator::{locate, Allocator, IGNORE_DEBUG_FILE_VARIABLE};
pub use caches::ThreadPointer;

use crate::proc::maps::MapEntry;
use crate::ptrace::memory::ProcessMemory;
use crate::trace::census_format::{CensusTotals, HeapCensus};

/// The census of process `pid`, stopped, whose mappings are `maps`; `allocator` is what
/// `locate` found (or why it found nothing).
pub fn take(
    pid: i32,
    maps: &[MapEntry],
    allocator: &Result<Allocator, String>,
    threads: &[ThreadPointer],
    stack_pointers: &[u64],
) -> HeapCensus {
    let stopped = Stopped {
        pid,
        maps,
        threads,
        stack_pointers,
    };
    census(&stopped, allocator, None)
}

/// As `take`, with the blocks the program had in use, (user address, usable bytes) in no
/// order (none when the heap was not walked).
pub fn take_with_blocks(
    pid: i32,
    maps: &[MapEntry],
    allocator: &Result<Allocator, String>,
    threads: &[ThreadPointer],
    stack_pointers: &[u64],
) -> (HeapCensus, Vec<(u64, u64)>) {
    let stopped = Stopped {
        pid,
        maps,
        threads,
        stack_pointers,
    };
    let mut blocks = Vec::new();
    let census = census(&stopped, allocator, Some(&mut blocks));
    if matches!(census, HeapCensus::Untrusted { .. }) {
        blocks.clear();
    }
    (census, blocks)
}

/// The stopped process a census reads.
struct Stopped<'a> {
    pid: i32,
    maps: &'a [MapEntry],
    threads: &'a [ThreadPointer],
    stack_pointers: &'a [u64],
}

fn census(
    stopped: &Stopped,
    allocator: &Result<Allocator, String>,
    blocks: Option<&mut Vec<(u64, u64)>>,
) -> HeapCensus {
    let walked = allocator
        .as_ref()
        .map_err(String::clone)
        .and_then(|allocator| walk_heap(stopped, allocator, blocks));
    match walked {
        Ok(totals) => HeapCensus::Walked(Box::new(totals)),
        Err(reason) => HeapCensus::Untrusted { reason },
    }
}

/// Walks the heap; each chunk in use by the program goes into `blocks` when given.
fn walk_heap(
    stopped: &Stopped,
    allocator: &Allocator,
    mut blocks: Option<&mut Vec<(u64, u64)>>,
) -> Result<CensusTotals, String> {
    let Stopped {
        pid,
        maps,
        threads,
        stack_pointers,
    } = *stopped;
    let memory = ProcessMemory::new(nix::unistd::Pid::from_raw(pid));
    let mut reader = reader::WindowReader::new(&memory, pid);
    let parameters = arenas::read_parameters(&mut reader, allocator);
    let found = arenas::find_arenas(&mut reader, allocator, maps, parameters.sbrk_base)?;
    let caches = caches::find_caches(
        &mut reader,
        allocator,
        &found,
        threads,
        parameters.tcache_count,
    );
    let tally = tally::tally(pid, &mut reader, &found, &caches, blocks.as_deref_mut())?;
    let heaps: Vec<arenas::HeapRange> = found
        .iter()
        .filter(|arena| !arena.main)
        .flat_map(|arena| arena.heaps.iter().copied())
        .collect();
    let excluded = mmapped::Excluded {
        heaps: &heaps,
        data: &allocator.data,
        stack_pointers,
    };
    let mmapped = mmapped::find_mmapped(pid, maps, &excluded, blocks);
    let totals = totals::totals(
        allocator.source,
        tally,
        caches.doubts,
        mmapped,
        parameters.mmaps,
    );
    Ok(totals)
}
