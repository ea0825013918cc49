//! The live heap blocks of one process image, and what each raw stack's blocks did.
//!
//! The blocks live at the peak are found exactly in one pass ("lazy peak"): a block allocated
//! at or before the peak event that is released later is set aside until a higher peak makes
//! it irrelevant, so at the end the still-live early blocks plus the set-aside ones are exactly
//! the blocks that were live at the peak.

use std::collections::HashMap;

use super::local_peak::LiveChanges;
use super::temporary::TemporaryRule;
use super::{ProcessAnalysis, SiteMetrics};
use crate::trace::format::AllocFunction;
use crate::trace::stacks::StackId;

/// Where and when a heap event happened.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeapEvent {
    /// Position of the record in the profile; orders events within an image.
    pub sequence: u64,
    /// Relative to the start of the image.
    pub time_ns: u64,
    /// The allocator call's stack (not used by frees, which carry none).
    pub stack: StackId,
}

#[derive(Debug, Clone, Copy)]
struct LiveBlock {
    size: u64,
    stack: StackId,
    /// Sequence of the event that created the block.
    sequence: u64,
    time_ns: u64,
}

/// What the heap of an image left per raw stack, for the call sites.
#[derive(Debug, Default)]
pub(super) struct StackHeap {
    pub metrics: HashMap<StackId, SiteMetrics>,
    pub changes: LiveChanges,
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
    temporary: TemporaryRule,
    stacks: StackHeap,
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

    pub fn free(&mut self, image: &mut ProcessAnalysis, address: u64, time_ns: u64) {
        *image.calls.entry(AllocFunction::Free).or_default() += 1;
        if address == 0 {
            image.null_frees += 1;
        } else {
            self.free_block(image, address, time_ns);
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
                self.free_block(image, old_address, event.time_ns);
            }
            self.create_block(image, new_address, size, event);
        } else if size == 0 {
            if old_address != 0 {
                self.free_block(image, old_address, event.time_ns);
            }
        } else {
            image.failed_allocations += 1;
        }
        self.update_peak(image, event);
    }

    /// Fills what is live now, and hands over what each raw stack did, with its share of the
    /// peak and what it leaked.
    pub fn close(mut self, image: &mut ProcessAnalysis) -> StackHeap {
        image.live_bytes_at_exit = self.live_bytes;
        image.live_blocks_at_exit = self.live.len() as u64;
        for block in self.blocks_at_peak() {
            let metrics = self.stacks.metrics.entry(block.stack).or_default();
            metrics.peak_bytes += block.size;
            metrics.peak_blocks += 1;
        }
        for block in self.live.values() {
            let metrics = self.stacks.metrics.entry(block.stack).or_default();
            metrics.leaked_bytes += block.size;
            metrics.leaked_blocks += 1;
        }
        self.stacks
    }

    fn create_block(
        &mut self,
        image: &mut ProcessAnalysis,
        address: u64,
        size: u64,
        event: HeapEvent,
    ) {
        // A block handed out again while we think it is live means its free was missed: it
        // leaves the heap with no lifetime (its free time is unknown).
        if let Some(block) = self.release_block(image, address) {
            self.stacks.changes.shrank(block.stack, block.size);
        }
        self.live.insert(
            address,
            LiveBlock {
                size,
                stack: event.stack,
                sequence: event.sequence,
                time_ns: event.time_ns,
            },
        );
        self.live_bytes += size;
        image.allocations += 1;
        image.bytes_allocated += size;
        image.largest_allocation = image.largest_allocation.max(size);
        self.stacks
            .metrics
            .entry(event.stack)
            .or_default()
            .allocated(size);
        self.stacks.changes.grew(event.stack, size);
        self.temporary.allocated(address);
    }

    /// A recorded free (or a realloc's release) of `address` at `time_ns`.
    fn free_block(&mut self, image: &mut ProcessAnalysis, address: u64, time_ns: u64) {
        let temporary = self.temporary.freed(address);
        let Some(block) = self.release_block(image, address) else {
            image.unknown_frees += 1;
            return;
        };
        let lifetime_ns = time_ns.saturating_sub(block.time_ns);
        self.stacks.metrics.entry(block.stack).or_default().freed(
            block.size,
            lifetime_ns,
            temporary,
        );
        self.stacks.changes.shrank(block.stack, block.size);
    }

    /// Takes the block at `address` out of the live set; None when it is not live.
    fn release_block(&mut self, image: &mut ProcessAnalysis, address: u64) -> Option<LiveBlock> {
        let block = self.live.remove(&address)?;
        image.frees += 1;
        self.live_bytes -= block.size;
        if self
            .peak_sequence
            .is_some_and(|peak| block.sequence <= peak)
        {
            self.released_since_peak.push(block);
        }
        Some(block)
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

    /// The blocks that were live at the first moment of the peak.
    fn blocks_at_peak(&self) -> Vec<LiveBlock> {
        let Some(peak) = self.peak_sequence else {
            return Vec::new();
        };
        let still_live = self.live.values().filter(|block| block.sequence <= peak);
        still_live
            .chain(&self.released_since_peak)
            .copied()
            .collect()
    }
}
