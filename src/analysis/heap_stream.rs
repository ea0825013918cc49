//! The heap events of one process image, one by one, for exports that need the event stream
//! (heaptrack's data file) where the analysis keeps per-site totals only. Two passes over
//! the profile with the streaming reader: the first gathers the image's stack nodes and
//! symbols (symbols are written when the image ends, after its events), the second feeds its
//! heap records to the same heap model the replay uses, so every outcome is the replay's.
//! Memory is that of the live heap and the stacks, never of the events.

use std::collections::HashMap;
use std::path::Path;

use super::frames::{AddressSymbol, Frame};
use super::sites::{kept_frames, ImageStacks};
use super::{ProcessAnalysis, SkipFrames};
use crate::events::heap::{heap_event, LiveHeap, Outcome};
use crate::trace::format::Record;
use crate::trace::reader::ProfileReader;
use crate::trace::stacks::{StackId, StackNode};

/// The kept frames (the call site, innermost first) of the image's raw stacks, worked out
/// once per stack.
pub struct SiteFrames {
    stacks: ImageStacks,
    skip: SkipFrames,
    cache: HashMap<StackId, Vec<Frame>>,
}

impl SiteFrames {
    /// The call site of raw stack `stack`: its frames less the allocator's, innermost first.
    pub fn frames(&mut self, stack: StackId) -> &[Frame] {
        let (stacks, skip) = (&self.stacks, &self.skip);
        self.cache.entry(stack).or_insert_with(|| {
            let skips = |function: &str| skip.skips_heap_frame(function);
            kept_frames(stack, stacks, &skips).1
        })
    }
}

/// Calls `visit` with each heap event of `image` (of the profile at `path`) in order: its
/// absolute time, what it did to the live blocks, and the sites of the image's stacks.
pub fn replay_image_heap(
    path: &Path,
    image: &ProcessAnalysis,
    skip: &SkipFrames,
    visit: &mut dyn FnMut(u64, &Outcome, &mut SiteFrames),
) -> crate::error::Result<()> {
    replay_images_heap(path, &[image], skip, &mut |_, time_ns, outcome, sites| {
        visit(time_ns, outcome, sites)
    })
}

/// As `replay_image_heap` for every image of `images` in two passes over the file whatever
/// their number: `visit` gets the index of the image in `images` first.
pub fn replay_images_heap(
    path: &Path,
    images: &[&ProcessAnalysis],
    skip: &SkipFrames,
    visit: &mut dyn FnMut(usize, u64, &Outcome, &mut SiteFrames),
) -> crate::error::Result<()> {
    let mut sites: Vec<SiteFrames> = image_stacks(path, images)?
        .into_iter()
        .map(|stacks| SiteFrames {
            stacks,
            skip: skip.clone(),
            cache: HashMap::new(),
        })
        .collect();
    let mut heaps: Vec<LiveHeap> = images.iter().map(|_| LiveHeap::default()).collect();
    let mut windows = Windows::new(images);
    for record in ProfileReader::open(path)? {
        let Some(index) = windows.holder(&record) else {
            continue;
        };
        if let Some((_, _, event)) = heap_event(&record) {
            let outcome = heaps[index].apply(event);
            visit(index, event.time_ns, &outcome, &mut sites[index]);
        }
    }
    Ok(())
}

/// The first pass: each image's stack nodes and symbols.
fn image_stacks(
    path: &Path,
    images: &[&ProcessAnalysis],
) -> crate::error::Result<Vec<ImageStacks>> {
    let mut stacks: Vec<ImageStacks> = images.iter().map(|_| ImageStacks::default()).collect();
    let mut windows = Windows::new(images);
    for record in ProfileReader::open(path)? {
        let Some(index) = windows.holder(&record) else {
            continue;
        };
        let stacks = &mut stacks[index];
        match record {
            Record::StackNode {
                id,
                parent,
                address,
                ..
            } => {
                stacks.table.add(StackNode {
                    id,
                    parent,
                    address,
                });
            }
            Record::Symbol {
                address,
                function,
                offset,
                module,
                frames,
                ..
            } => {
                let symbol = AddressSymbol {
                    function,
                    offset,
                    module,
                    frames,
                };
                stacks.symbols.insert(address, symbol);
            }
            _ => {}
        }
    }
    Ok(stacks)
}

/// The windows of several images: a record is the first holder's (an image's records are
/// its PID's within its own time, so at most one holds it); every window sees every record,
/// to follow its PID's timed records.
struct Windows(Vec<Window>);

impl Windows {
    fn new(images: &[&ProcessAnalysis]) -> Self {
        Windows(images.iter().map(|image| Window::new(image)).collect())
    }

    fn holder(&mut self, record: &Record) -> Option<usize> {
        let mut holder = None;
        for (index, window) in self.0.iter_mut().enumerate() {
            if window.holds(record) && holder.is_none() {
                holder = Some(index);
            }
        }
        holder
    }
}

/// Which records of the file are the image's: its PID's between its start and its end, the
/// records without a time (stack nodes, symbols) going with the PID's last timed record.
/// An exec at the image's end starts the next image.
struct Window {
    pid: u32,
    start_ns: u64,
    end_ns: u64,
    inside: bool,
}

impl Window {
    fn new(image: &ProcessAnalysis) -> Self {
        Window {
            pid: image.pid,
            start_ns: image.start_ns,
            end_ns: image.start_ns + image.duration_ns,
            inside: false,
        }
    }

    fn holds(&mut self, record: &Record) -> bool {
        if record.pid() != Some(self.pid) {
            return false;
        }
        // Samples may be written apart from the tracer's records (format version 2).
        let sample = matches!(
            record,
            Record::StatusSample { .. }
                | Record::RollupSample { .. }
                | Record::SmapsSnapshot { .. }
                | Record::SamplerCosts(_)
        );
        if let (false, Some(time_ns)) = (sample, record.time_ns()) {
            let ends_image = matches!(record, Record::Exec { .. })
                && time_ns == self.end_ns
                && time_ns > self.start_ns;
            self.inside = self.start_ns <= time_ns && time_ns <= self.end_ns && !ends_image;
        }
        self.inside
    }
}
