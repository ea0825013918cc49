//! The live heap blocks of one process image.
//!
//! The blocks live at the peak are found exactly in one pass ("lazy peak"): a block allocated
//! at or before the peak event that is released later is set aside until a higher peak makes
//! it irrelevant, so at the end the still-live early blocks plus the set-aside ones are exactly
//! the blocks that were live at the peak.

use std::collections::HashMap;

use super::{CallSite, ProcessAnalysis, TOP_SITES};
use crate::trace::format::AllocFunction;

/// Where and when a heap event happened.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeapEvent {
    /// Position of the record in the profile; orders events within an image.
    pub sequence: u64,
    /// Relative to the start of the image.
    pub time_ns: u64,
    /// Return address into the code that called the allocator.
    pub caller: u64,
}

#[derive(Debug, Clone, Copy)]
struct LiveBlock {
    size: u64,
    caller: u64,
    /// Sequence of the event that created the block.
    sequence: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct SiteTotals {
    allocations: u64,
    bytes_allocated: u64,
}

/// Live blocks, live bytes and peak bookkeeping of one image.
#[derive(Debug, Default)]
pub(super) struct HeapState {
    live: HashMap<u64, LiveBlock>,
    live_bytes: u64,
    /// Sequence of the event that first reached the current peak; None before any peak.
    peak_sequence: Option<u64>,
    /// Blocks live at the current peak that were released after it.
    released_since_peak: Vec<LiveBlock>,
    site_totals: HashMap<u64, SiteTotals>,
}

impl HeapState {
    /// malloc, calloc, memalign and friends (`size` is the whole request, nmemb*size for calloc).
    pub fn alloc(
        &mut self,
        image: &mut ProcessAnalysis,
        function: AllocFunction,
        address: u64,
        size: u64,
        event: HeapEvent,
    ) {
        *image.calls.entry(function).or_default() += 1;
        if address != 0 {
            self.create_block(image, address, size, event);
        } else if size > 0 {
            image.failed_allocations += 1;
        }
        self.update_peak(image, event);
    }

    pub fn free(&mut self, image: &mut ProcessAnalysis, address: u64) {
        *image.calls.entry(AllocFunction::Free).or_default() += 1;
        if address == 0 {
            image.null_frees += 1;
        } else {
            self.release_block(image, address);
        }
    }

    /// realloc / reallocarray: a success releases the old block and creates the new one;
    /// NULL with size 0 only frees; NULL with a size is a failure that keeps the old block.
    pub fn realloc(
        &mut self,
        image: &mut ProcessAnalysis,
        function: AllocFunction,
        addresses: (u64, u64),
        size: u64,
        event: HeapEvent,
    ) {
        let (old_address, new_address) = addresses;
        *image.calls.entry(function).or_default() += 1;
        if new_address != 0 {
            if old_address != 0 {
                self.release_block(image, old_address);
            }
            self.create_block(image, new_address, size, event);
        } else if size == 0 {
            if old_address != 0 {
                self.release_block(image, old_address);
            }
        } else {
            image.failed_allocations += 1;
        }
        self.update_peak(image, event);
    }

    /// Fills what is live now and the call sites at the peak (addresses only; names come later).
    pub fn close(&self, image: &mut ProcessAnalysis) {
        image.live_bytes_at_exit = self.live_bytes;
        image.live_blocks_at_exit = self.live.len() as u64;
        image.top_sites = self.sites_at_peak();
    }

    fn create_block(
        &mut self,
        image: &mut ProcessAnalysis,
        address: u64,
        size: u64,
        event: HeapEvent,
    ) {
        // A block handed out again while we think it is live means its free was missed.
        if self.live.contains_key(&address) {
            self.release_block(image, address);
        }
        self.live.insert(
            address,
            LiveBlock {
                size,
                caller: event.caller,
                sequence: event.sequence,
            },
        );
        self.live_bytes += size;
        image.allocations += 1;
        image.bytes_allocated += size;
        image.largest_allocation = image.largest_allocation.max(size);
        let totals = self.site_totals.entry(event.caller).or_default();
        totals.allocations += 1;
        totals.bytes_allocated += size;
    }

    fn release_block(&mut self, image: &mut ProcessAnalysis, address: u64) {
        let Some(block) = self.live.remove(&address) else {
            image.unknown_frees += 1;
            return;
        };
        image.frees += 1;
        self.live_bytes -= block.size;
        if self
            .peak_sequence
            .is_some_and(|peak| block.sequence <= peak)
        {
            self.released_since_peak.push(block);
        }
    }

    fn update_peak(&mut self, image: &mut ProcessAnalysis, event: HeapEvent) {
        if self.live_bytes <= image.peak_live_bytes {
            return;
        }
        image.peak_live_bytes = self.live_bytes;
        image.peak_live_blocks = self.live.len() as u64;
        image.peak_time_ns = event.time_ns;
        self.peak_sequence = Some(event.sequence);
        self.released_since_peak.clear();
    }

    /// The blocks live at the peak grouped by caller: bytes descending, then address ascending.
    fn sites_at_peak(&self) -> Vec<CallSite> {
        let Some(peak) = self.peak_sequence else {
            return Vec::new();
        };
        let live_at_peak = self.live.values().filter(|block| block.sequence <= peak);
        let mut by_caller: HashMap<u64, (u64, u64)> = HashMap::new();
        for block in live_at_peak.chain(&self.released_since_peak) {
            let (bytes, blocks) = by_caller.entry(block.caller).or_default();
            *bytes += block.size;
            *blocks += 1;
        }
        let mut sites: Vec<(u64, u64, u64)> = by_caller
            .into_iter()
            .map(|(caller, (bytes, blocks))| (caller, bytes, blocks))
            .collect();
        sites.sort_by(|left, right| right.1.cmp(&left.1).then(left.0.cmp(&right.0)));
        sites.truncate(TOP_SITES);
        sites
            .into_iter()
            .map(|(address, peak_bytes, peak_blocks)| {
                let totals = self.site_totals.get(&address).copied().unwrap_or_default();
                CallSite {
                    address,
                    function: String::new(),
                    offset: 0,
                    module: String::new(),
                    peak_bytes,
                    peak_blocks,
                    allocations: totals.allocations,
                    bytes_allocated: totals.bytes_allocated,
                }
            })
            .collect()
    }
}
