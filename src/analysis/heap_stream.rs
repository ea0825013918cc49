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
    let mut sites = SiteFrames {
        stacks: image_stacks(path, image)?,
        skip: skip.clone(),
        cache: HashMap::new(),
    };
    let mut heap = LiveHeap::default();
    let mut window = Window::new(image);
    for record in ProfileReader::open(path)? {
        if !window.holds(&record) {
            continue;
        }
        if let Some((_, _, event)) = heap_event(&record) {
            let outcome = heap.apply(event);
            visit(event.time_ns, &outcome, &mut sites);
        }
    }
    Ok(())
}

/// The first pass: the image's stack nodes and symbols.
fn image_stacks(path: &Path, image: &ProcessAnalysis) -> crate::error::Result<ImageStacks> {
    let mut stacks = ImageStacks::default();
    let mut window = Window::new(image);
    for record in ProfileReader::open(path)? {
        if !window.holds(&record) {
            continue;
        }
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
