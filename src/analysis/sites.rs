//! Call sites: raw stacks with the allocator and C-library frames dropped from their innermost
//! end, so that a site's leaf is the function that called the allocator. Raw stacks that differ
//! only in dropped frames are one site; their numbers are added.

use std::collections::HashMap;

use super::frames::{address_frames, Frame, ImageSymbols};
use super::heap::StackHeap;
use super::skip::SkipFrames;
use super::source_location::{source_chain, SourceLocation};
use super::{MappingSite, MappingStats, Site, SiteMetrics};
use crate::events::heap::IntegerMap;
use crate::trace::stacks::{StackId, StackTable, EMPTY_STACK};

/// What an image's stacks left, kept until the end of the profile (a `Symbol` record may
/// arrive after the record that ends its image).
#[derive(Debug, Default)]
pub(super) struct ImageStacks {
    pub table: StackTable,
    pub symbols: ImageSymbols,
    pub heap: StackHeap,
    pub mappings: HashMap<StackId, MappingStats>,
}

/// A site's identity by address: the node of the return address holding its innermost kept
/// frame, and how many inlined frames of that address were dropped.
type SiteKey = (StackId, usize);

/// What makes two raw stacks one site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SiteIdentity {
    /// The same kept return addresses (and inlined frames).
    Address,
    /// The same (function, file, line) chain of kept frames.
    Source,
}

#[derive(Debug, PartialEq, Eq, Hash)]
enum GroupKey {
    Address(SiteKey),
    Source(Vec<SourceLocation>),
}

/// Heap call sites, by peak bytes, then bytes allocated, then allocations (then stack).
pub(super) fn heap_sites(
    stacks: &ImageStacks,
    skip: &SkipFrames,
    identity: SiteIdentity,
) -> Vec<Site> {
    let skips = |function: &str| skip.skips_heap_frame(function);
    let mut grouping = Grouping {
        identity,
        ..Grouping::default()
    };
    let mut metrics: Vec<SiteMetrics> = Vec::new();
    let mut site_of_stack: IntegerMap<StackId, usize> = IntegerMap::default();
    let mut raw_stacks: Vec<(&StackId, &SiteMetrics)> = stacks.heap.metrics.iter().collect();
    raw_stacks.sort_unstable_by_key(|(stack, _)| **stack);
    for (&stack, stack_metrics) in raw_stacks {
        let site = grouping.site(stack, stacks, &skips);
        if site == metrics.len() {
            metrics.push(SiteMetrics::default());
        }
        metrics[site].add(stack_metrics);
        site_of_stack.insert(stack, site);
    }
    let peaks = stacks
        .heap
        .changes
        .local_peaks(metrics.len(), |stack| site_of_stack[&stack]);
    let mut sites: Vec<Site> = grouping
        .frames
        .into_iter()
        .zip(metrics)
        .zip(peaks)
        .map(|((stack, mut metrics), local_peak)| {
            metrics.local_peak_bytes = local_peak;
            Site { stack, metrics }
        })
        .collect();
    sites.sort_by(|left, right| {
        let rank = |site: &Site| {
            let metrics = &site.metrics;
            (
                metrics.peak_bytes,
                metrics.bytes_allocated,
                metrics.allocations,
            )
        };
        rank(right)
            .cmp(&rank(left))
            .then_with(|| left.stack.cmp(&right.stack))
    });
    sites
}

/// Mapping call sites, by bytes mapped (mmap and break growth), then calls (then stack).
pub(super) fn mapping_sites(stacks: &ImageStacks, skip: &SkipFrames) -> Vec<MappingSite> {
    let skips = |function: &str| skip.skips_mapping_frame(function);
    let mut grouping = Grouping::default();
    let mut totals: Vec<MappingStats> = Vec::new();
    let mut raw_stacks: Vec<(&StackId, &MappingStats)> = stacks.mappings.iter().collect();
    raw_stacks.sort_unstable_by_key(|(stack, _)| **stack);
    for (&stack, stack_mappings) in raw_stacks {
        let site = grouping.site(stack, stacks, &skips);
        if site == totals.len() {
            totals.push(MappingStats::default());
        }
        totals[site].add(stack_mappings);
    }
    let mut sites: Vec<MappingSite> = grouping
        .frames
        .into_iter()
        .zip(totals)
        .map(|(stack, mappings)| MappingSite { stack, mappings })
        .collect();
    sites.sort_by(|left, right| {
        let rank = |site: &MappingSite| {
            let mappings = &site.mappings;
            (mappings.bytes_mapped(), mappings.total_calls())
        };
        rank(right)
            .cmp(&rank(left))
            .then_with(|| left.stack.cmp(&right.stack))
    });
    sites
}

/// Sites found so far, numbered in order of discovery.
struct Grouping {
    identity: SiteIdentity,
    index: HashMap<GroupKey, usize>,
    /// The kept frames of each site, innermost first.
    frames: Vec<Vec<Frame>>,
}

impl Default for Grouping {
    fn default() -> Self {
        Grouping {
            identity: SiteIdentity::Address,
            index: HashMap::new(),
            frames: Vec::new(),
        }
    }
}

impl Grouping {
    /// The number of the site of raw stack `stack` (a new one is `frames.len() - 1`).
    fn site(
        &mut self,
        stack: StackId,
        stacks: &ImageStacks,
        skips: &dyn Fn(&str) -> bool,
    ) -> usize {
        let (key, frames) = kept_frames(stack, stacks, skips);
        let key = match self.identity {
            SiteIdentity::Address => GroupKey::Address(key),
            SiteIdentity::Source => GroupKey::Source(source_chain(&frames)),
        };
        *self.index.entry(key).or_insert_with(|| {
            self.frames.push(frames);
            self.frames.len() - 1
        })
    }
}

/// The site key and kept frames of raw stack `stack`: its frames, inlined ones expanded,
/// innermost first, less the leading frames `skips` names. The outermost frame is always
/// kept, so a stack made only of skipped frames still shows where it ends.
pub(super) fn kept_frames(
    stack: StackId,
    stacks: &ImageStacks,
    skips: &dyn Fn(&str) -> bool,
) -> (SiteKey, Vec<Frame>) {
    // (node, frame) for every frame, innermost first.
    let mut frames: Vec<(StackId, Frame)> = Vec::new();
    let mut node = stack;
    while let Some((address, parent)) = stacks.table.node(node) {
        let expanded = address_frames(address, &stacks.symbols);
        frames.extend(expanded.into_iter().map(|frame| (node, frame)));
        node = parent;
    }
    let Some(outermost) = frames.len().checked_sub(1) else {
        return ((EMPTY_STACK, 0), Vec::new());
    };
    let first_kept = frames
        .iter()
        .position(|(_, frame)| !skips(&frame.function))
        .unwrap_or(outermost);
    let key_node = frames[first_kept].0;
    let dropped_at_node = frames[..first_kept]
        .iter()
        .filter(|(node, _)| *node == key_node)
        .count();
    let kept = frames.drain(first_kept..).map(|(_, frame)| frame).collect();
    ((key_node, dropped_at_node), kept)
}

/// The index in `sites` (the image's sites merged by source location, as `heap_sites` made
/// them) of each raw heap stack.
pub(super) fn source_site_of_stacks(
    stacks: &ImageStacks,
    skip: &SkipFrames,
    sites: &[Site],
) -> IntegerMap<StackId, usize> {
    let skips = |function: &str| skip.skips_heap_frame(function);
    let mut grouping = Grouping {
        identity: SiteIdentity::Source,
        ..Grouping::default()
    };
    let by_frames: std::collections::BTreeMap<&[Frame], usize> = sites
        .iter()
        .enumerate()
        .map(|(index, site)| (site.stack.as_slice(), index))
        .collect();
    // In `heap_sites`' order, so that each group's frames are those of the same first stack.
    let mut raw_stacks: Vec<StackId> = stacks.heap.metrics.keys().copied().collect();
    raw_stacks.sort_unstable();
    let mut site_of_stack = IntegerMap::default();
    for stack in raw_stacks {
        let group = grouping.site(stack, stacks, &skips);
        if let Some(&site) = by_frames.get(grouping.frames[group].as_slice()) {
            site_of_stack.insert(stack, site);
        }
    }
    site_of_stack
}
