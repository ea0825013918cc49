//! The "bytes allocated" profile of an image in time order, so that speedscope's Time Order
//! view is a timeline: which call sites allocated in which phase of the run. The heap
//! events are replayed from the profile (`analysis::heap_stream`); the run is cut into
//! `TIME_SLICES` equal slices, and within a slice the allocations of one call site are one
//! sample (its bytes added), samples in the order of their site's first allocation there.
//! The file stays bounded by slices × sites however many allocations the run made, and the
//! order is exact to a slice (a thousandth of the run).

use std::collections::HashMap;
use std::path::Path;

use super::Frames;
use crate::analysis::heap_stream::replay_images_heap;
use crate::analysis::{Frame, ProcessAnalysis, SkipFrames};
use crate::trace::stacks::StackId;

/// Slices of an image's run within which allocations merge by site.
pub const TIME_SLICES: u64 = 1000;

/// The allocations of one image in time order, their stacks not yet in the file's frames.
pub struct TimeOrder {
    /// Each distinct call site's frames (innermost first), in order of its first allocation.
    stacks: Vec<Vec<Frame>>,
    slices: Slices,
}

impl TimeOrder {
    /// The samples (frame indices root first) and weights (bytes), the frames added to
    /// `frames` in order of first use.
    pub fn samples(self, frames: &mut Frames) -> (Vec<Vec<usize>>, Vec<u64>) {
        let (order, weights) = self.slices.finish();
        let mut indices: HashMap<usize, Vec<usize>> = HashMap::new();
        let samples = order
            .into_iter()
            .map(|stack| {
                let stacks = &self.stacks;
                indices
                    .entry(stack)
                    .or_insert_with(|| frames.stack(&stacks[stack]))
                    .clone()
            })
            .collect();
        (samples, weights)
    }
}

/// The allocations of each of `images` in time order, read from the profile at `path` in
/// one replay for all of them.
pub fn allocations_in_time_order(
    path: &Path,
    images: &[&ProcessAnalysis],
    skip: &SkipFrames,
) -> crate::error::Result<Vec<TimeOrder>> {
    let mut orders: Vec<TimeOrder> = images
        .iter()
        .map(|image| TimeOrder {
            stacks: Vec::new(),
            slices: Slices::new(image),
        })
        .collect();
    let mut stack_of: Vec<HashMap<StackId, usize>> =
        images.iter().map(|_| HashMap::new()).collect();
    replay_images_heap(path, images, skip, &mut |index, time_ns, outcome, sites| {
        let Some(block) = outcome.created else {
            return;
        };
        let order = &mut orders[index];
        let stack = *stack_of[index].entry(block.stack).or_insert_with(|| {
            order.stacks.push(sites.frames(block.stack).to_vec());
            order.stacks.len() - 1
        });
        order.slices.add(time_ns, stack, block.size);
    })?;
    Ok(orders)
}

/// The samples made so far and those of the current slice, merged by stack.
struct Slices {
    start_ns: u64,
    duration_ns: u64,
    current: u64,
    /// Position in `order` of each stack's sample in the current slice.
    in_current: HashMap<usize, usize>,
    order: Vec<usize>,
    weights: Vec<u64>,
}

impl Slices {
    fn new(image: &ProcessAnalysis) -> Self {
        Slices {
            start_ns: image.start_ns,
            duration_ns: image.duration_ns.max(1),
            current: 0,
            in_current: HashMap::new(),
            order: Vec::new(),
            weights: Vec::new(),
        }
    }

    fn slice_of(&self, time_ns: u64) -> u64 {
        let elapsed = u128::from(time_ns.saturating_sub(self.start_ns));
        let slice = elapsed * u128::from(TIME_SLICES) / u128::from(self.duration_ns);
        (slice as u64).min(TIME_SLICES - 1)
    }

    fn add(&mut self, time_ns: u64, stack: usize, bytes: u64) {
        // Events come in time order; a later slice starts a new set of samples.
        let slice = self.slice_of(time_ns).max(self.current);
        if slice != self.current {
            self.current = slice;
            self.in_current.clear();
        }
        match self.in_current.get(&stack) {
            Some(&position) => self.weights[position] += bytes,
            None => {
                self.in_current.insert(stack, self.order.len());
                self.order.push(stack);
                self.weights.push(bytes);
            }
        }
    }

    fn finish(self) -> (Vec<usize>, Vec<u64>) {
        (self.order, self.weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::StartCause;

    fn image() -> ProcessAnalysis {
        let mut image = ProcessAnalysis::new(7, None, StartCause::Launch, 1_000);
        image.duration_ns = 1_000_000;
        image
    }

    #[test]
    fn allocations_merge_by_site_within_a_slice_and_keep_the_order_of_slices() {
        let mut slices = Slices::new(&image());
        // Slice 0 (the first microsecond): sites 0, 1, 0; slice 5: site 1, then 0.
        slices.add(1_000, 0, 10);
        slices.add(1_500, 1, 20);
        slices.add(1_999, 0, 30);
        slices.add(6_000, 1, 40);
        slices.add(6_100, 0, 50);
        slices.add(6_200, 1, 60);
        // After the end: the last slice.
        slices.add(5_000_000, 1, 70);
        let (order, weights) = slices.finish();
        assert_eq!(order, [0, 1, 1, 0, 1]);
        assert_eq!(weights, [40, 20, 100, 50, 70]);
    }
}
