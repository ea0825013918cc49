//! What each raw stack's blocks did in one process image, from the heap model's outcomes.
//!
//! The blocks live at the peak are found exactly in one pass ("lazy peak"): a block allocated
//! at or before the peak event that is released later is set aside until a higher peak makes
//! it irrelevant, so at the end the still-live early blocks plus the set-aside ones are exactly
//! the blocks that were live at the peak.

use crate::events::heap::IntegerMap;

use super::local_peak::LiveChanges;
use super::temporary::TemporaryRule;
use super::{ProcessAnalysis, SiteMetrics};
use crate::events::heap::{Block, LiveHeap, Outcome};
use crate::trace::format::AllocFunction;
use crate::trace::stacks::StackId;

/// What the heap of an image left per raw stack, for the call sites and components.
#[derive(Debug, Default)]
pub(super) struct StackHeap {
    pub metrics: IntegerMap<StackId, SiteMetrics>,
    /// Live-byte changes by stack, at their recorded times.
    pub changes: LiveChanges,
}

/// Per-site metrics and peak bookkeeping of one image, from the heap model's outcomes.
#[derive(Debug, Default)]
pub(super) struct HeapState {
    /// Sequence of the event that first reached the current peak; None before any peak.
    peak_sequence: Option<u64>,
    /// Blocks live at the current peak that were released after it.
    released_since_peak: Vec<Block>,
    temporary: TemporaryRule,
    stacks: StackHeap,
}

impl HeapState {
    /// Counts what one call of `function` at `time_ns` (absolute) did: `outcome`, from
    /// `heap`, which it left as it is now.
    pub fn apply(
        &mut self,
        image: &mut ProcessAnalysis,
        (function, time_ns): (AllocFunction, u64),
        outcome: &Outcome,
        heap: &LiveHeap,
    ) {
        *image.calls.entry(function).or_default() += 1;
        image.null_frees += u64::from(outcome.null_free);
        image.failed_allocations += u64::from(outcome.failed);
        if let Some(address) = outcome.unknown_free {
            self.temporary.freed(address);
            image.unknown_frees += 1;
        }
        if let Some(block) = outcome.released {
            self.released(image, time_ns, block);
            let temporary = self.temporary.freed(block.address);
            let lifetime_ns = time_ns.saturating_sub(block.time_ns);
            let metrics = self.stacks.metrics.entry(block.stack).or_default();
            metrics.freed(block.size, lifetime_ns, temporary);
        }
        // A block handed out again while thought live: its free was missed, so it leaves the
        // heap with no lifetime.
        if let Some(block) = outcome.replaced {
            self.released(image, time_ns, block);
        }
        if let Some(block) = outcome.created {
            self.created(image, block);
        }
        if outcome.created.is_some() {
            self.update_peak(image, outcome.sequence, time_ns, heap);
        }
    }

    /// Fills what is live now, and hands over what each raw stack did, with its share of the
    /// peak and what it leaked.
    pub fn close(mut self, image: &mut ProcessAnalysis, heap: &LiveHeap) -> StackHeap {
        image.live_bytes_at_exit = heap.live_bytes();
        image.live_blocks_at_exit = heap.live_blocks();
        if let Some(peak) = self.peak_sequence {
            let still_live = heap.blocks().filter(|block| block.sequence <= peak);
            for block in still_live.chain(self.released_since_peak.iter().copied()) {
                let metrics = self.stacks.metrics.entry(block.stack).or_default();
                metrics.peak_bytes += block.size;
                metrics.peak_blocks += 1;
            }
        }
        for block in heap.blocks() {
            image.size_histogram.live(block.size);
            let metrics = self.stacks.metrics.entry(block.stack).or_default();
            metrics.leaked_bytes += block.size;
            metrics.leaked_blocks += 1;
        }
        self.stacks
    }

    fn released(&mut self, image: &mut ProcessAnalysis, time_ns: u64, block: Block) {
        image.frees += 1;
        self.stacks.changes.shrank(time_ns, block.stack, block.size);
        if self
            .peak_sequence
            .is_some_and(|peak| block.sequence <= peak)
        {
            self.released_since_peak.push(block);
        }
    }

    fn created(&mut self, image: &mut ProcessAnalysis, block: Block) {
        image.allocations += 1;
        image.bytes_allocated += block.size;
        image.largest_allocation = image.largest_allocation.max(block.size);
        image.size_histogram.allocated(block.size);
        self.stacks
            .metrics
            .entry(block.stack)
            .or_default()
            .allocated(block.size);
        self.stacks
            .changes
            .grew(block.time_ns, block.stack, block.size);
        self.temporary.allocated(block.address);
    }

    fn update_peak(
        &mut self,
        image: &mut ProcessAnalysis,
        sequence: u64,
        time_ns: u64,
        heap: &LiveHeap,
    ) {
        if heap.live_bytes() <= image.peak_live_bytes {
            return;
        }
        image.peak_live_bytes = heap.live_bytes();
        image.peak_live_blocks = heap.live_blocks();
        image.peak_time_ns = time_ns.saturating_sub(image.start_ns);
        self.peak_sequence = Some(sequence);
        self.released_since_peak.clear();
    }
}
