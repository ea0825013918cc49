//! Walks the records in order, splitting them into process images and feeding each image's
//! heap and mapping events to its counters; call sites are worked out at the end, once every
//! image's symbols are known.

use std::collections::HashMap;

use super::components::{self, ClosedImage, ImageTracker, Images, Samples};
use super::frames::AddressSymbol;
use super::heap::{HeapEvent, HeapState};
use super::mappings::MappingCall;
use super::sites::{heap_sites, mapping_sites, ImageStacks};
use super::{ImageExit, ProcessAnalysis, Settings};
use crate::trace::format::{
    AllocFunction, ExitKind, MapCall, ProbeCounters, Record, RecordMode, StartCause,
};
use crate::trace::stacks::{StackId, StackNode};

/// Replays `records` into one `ProcessAnalysis` per process image, in order of start.
pub(super) fn replay(
    records: &[Record],
    mode: RecordMode,
    settings: &Settings,
) -> Vec<ProcessAnalysis> {
    let mut replay = Replay::new(mode, records);
    for (index, record) in records.iter().enumerate() {
        replay.apply(index as u64, record);
    }
    replay.finish(settings)
}

/// Replay state of an image that has not ended yet.
#[derive(Debug)]
struct OpenImage {
    /// Position in `Replay::processes`.
    index: usize,
    heap: HeapState,
    stacks: ImageStacks,
    had_exec: bool,
    /// Allocator or mapping events seen; after them an exec starts a new image.
    had_events: bool,
    /// Program break after the last brk; None before the first.
    previous_break: Option<u64>,
    components: ImageTracker,
}

struct Replay<'r> {
    mode: RecordMode,
    processes: Vec<ProcessAnalysis>,
    open: HashMap<u32, OpenImage>,
    /// The stacks of ended images, by position in `processes`.
    closed: HashMap<usize, ImageStacks>,
    /// What ended images leave for their components, by position in `processes`.
    closed_components: HashMap<usize, ClosedImage>,
    /// The sampler's records, by PID and time.
    samples: Samples<'r>,
    /// Newest image of each PID, open or closed.
    latest_image: HashMap<u32, usize>,
    /// Latest time of any record: where images the recording never saw end are cut.
    last_time_ns: u64,
}

impl<'r> Replay<'r> {
    fn new(mode: RecordMode, records: &'r [Record]) -> Self {
        Replay {
            mode,
            processes: Vec::new(),
            open: HashMap::new(),
            closed: HashMap::new(),
            closed_components: HashMap::new(),
            samples: Samples::new(records),
            latest_image: HashMap::new(),
            last_time_ns: 0,
        }
    }

    fn apply(&mut self, sequence: u64, record: &Record) {
        if let Some(time_ns) = record_time(record) {
            self.last_time_ns = self.last_time_ns.max(time_ns);
        }
        match record {
            Record::ProcessStart {
                time_ns,
                pid,
                parent_pid,
                cause,
            } => self.start_image(*time_ns, *pid, *parent_pid, *cause),
            Record::Exec {
                time_ns,
                pid,
                exe,
                argv,
            } => self.exec(*time_ns, *pid, exe, argv),
            Record::Alloc { .. } | Record::Free { .. } | Record::Realloc { .. } => {
                self.heap_record(sequence, record)
            }
            Record::Mapping {
                time_ns,
                pid,
                call,
                args,
                result,
                stack,
                ..
            } => self.mapping(*time_ns, *pid, *call, (args, *result), *stack),
            Record::Symbol {
                pid,
                address,
                function,
                offset,
                module,
                frames,
            } => {
                let symbol = AddressSymbol {
                    function: function.clone(),
                    offset: *offset,
                    module: module.clone(),
                    frames: frames.clone(),
                };
                self.symbol(*pid, *address, symbol)
            }
            Record::StackNode {
                pid,
                id,
                parent,
                address,
            } => self.stack_node(*pid, *id, *parent, *address),
            Record::Warning {
                time_ns,
                pid,
                message,
            } => self.warning(*time_ns, *pid, message),
            Record::ProcessExit {
                time_ns,
                pid,
                status,
                counters,
            } => self.process_exit(*time_ns, *pid, *status, counters),
            Record::AbandonedCall {
                time_ns,
                pid,
                function,
                ..
            } => self.abandoned_call(*time_ns, *pid, *function),
            Record::ImageCounters { pid, counters } => self.image_counters(*pid, counters),
            Record::Module { pid, path, .. } => {
                if let Some(state) = self.open.get_mut(pid) {
                    state.components.module(path);
                }
            }
            Record::ScratchPage { pid, address, .. } => {
                if let Some(state) = self.open.get_mut(pid) {
                    state.components.scratch_page(*address);
                }
            }
            Record::ThreadStack { pid, address, .. } => {
                if let Some(state) = self.open.get_mut(pid) {
                    state.components.thread_stack(*address);
                }
            }
            Record::ThreadStart { .. }
            | Record::ThreadExit { .. }
            | Record::UnwindCosts(_)
            // Residency samples are out of time order in the file: `Samples` hands them over.
            | Record::StatusSample { .. }
            | Record::RollupSample { .. }
            | Record::SamplerCosts(_)
            | Record::SmapsSnapshot { .. }
            | Record::End { .. } => {}
        }
    }

    /// A call that never returned still counts as a call, with no block.
    fn abandoned_call(&mut self, time_ns: u64, pid: u32, function: AllocFunction) {
        self.ensure_open(time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        *self.processes[state.index]
            .calls
            .entry(function)
            .or_insert(0) += 1;
    }

    fn image_counters(&mut self, pid: u32, counters: &ProbeCounters) {
        // Added, not set: an exec that renames the image (no events before it) keeps it
        // open, and the image's exit adds the new program's costs.
        if let Some(state) = self.open.get(&pid) {
            let image = &mut self.processes[state.index];
            image.probes = image.probes.plus(*counters);
        }
    }

    /// Closes what the recording never saw end, at the last time it saw anything, and works
    /// out every image's call sites.
    fn finish(mut self, settings: &Settings) -> Vec<ProcessAnalysis> {
        let skip = &settings.skip;
        let mut still_open: Vec<u32> = self.open.keys().copied().collect();
        still_open.sort_unstable();
        for pid in still_open {
            self.close_image(pid, ImageExit::Unknown, self.last_time_ns, None);
        }
        let stacks_by_image = std::mem::take(&mut self.closed);
        let exes: Vec<String> = self.processes.iter().map(|p| p.exe.clone()).collect();
        let images = Images {
            stacks: &stacks_by_image,
            exes: &exes,
        };
        for (&index, stacks) in &stacks_by_image {
            let image = &mut self.processes[index];
            image.sites = heap_sites(stacks, skip);
            image.mapping_sites = mapping_sites(stacks, skip);
            let closed = self.closed_components.remove(&index).unwrap_or_default();
            components::build(image, stacks, closed, settings, &images);
        }
        self.processes
    }

    fn start_image(&mut self, time_ns: u64, pid: u32, parent_pid: Option<u32>, cause: StartCause) {
        // A start for a PID still open means its end was lost; the PID was reused.
        if self.open.contains_key(&pid) {
            self.close_image(pid, ImageExit::Unknown, time_ns, None);
        }
        let mut image = ProcessAnalysis::new(pid, parent_pid, cause, time_ns);
        let forked = matches!(cause, StartCause::Fork | StartCause::Vfork);
        let parent_image = parent_pid.and_then(|parent| self.latest_image.get(&parent));
        if let (true, Some(&parent_index)) = (forked, parent_image) {
            image.exe = self.processes[parent_index].exe.clone();
            image.argv = self.processes[parent_index].argv.clone();
        }
        self.open_image(image);
        // The child's mappings are its parent's, made by the parent's calls.
        let parent = parent_pid.and_then(|parent| self.open.get(&parent));
        if let (true, Some(parent)) = (forked, parent) {
            let inherited = ImageTracker::forked_from(&parent.components, parent.index);
            self.open.get_mut(&pid).expect("opened above").components = inherited;
        }
    }

    fn open_image(&mut self, image: ProcessAnalysis) {
        let pid = image.pid;
        let index = self.processes.len();
        self.processes.push(image);
        self.latest_image.insert(pid, index);
        let state = OpenImage {
            index,
            heap: HeapState::default(),
            stacks: ImageStacks::default(),
            had_exec: false,
            had_events: false,
            previous_break: None,
            components: ImageTracker::default(),
        };
        self.open.insert(pid, state);
    }

    /// Makes sure `pid` has an open image, for records that arrive without a process start.
    fn ensure_open(&mut self, time_ns: u64, pid: u32) {
        if !self.open.contains_key(&pid) {
            let cause = match self.mode {
                RecordMode::Run => StartCause::Launch,
                RecordMode::Attach => StartCause::Attach,
            };
            self.start_image(time_ns, pid, None, cause);
        }
    }

    /// The first exec of a fresh image names it; any later one, or one after heap or mapping
    /// events, ends the image and starts a new one for the same PID.
    fn exec(&mut self, time_ns: u64, pid: u32, exe: &str, argv: &[String]) {
        self.ensure_open(time_ns, pid);
        let state = &self.open[&pid];
        let index = state.index;
        if state.had_exec || state.had_events {
            let old = &self.processes[index];
            let successor = ProcessAnalysis::new(pid, old.parent_pid, old.cause, time_ns);
            self.close_image(pid, ImageExit::Exec, time_ns, None);
            self.open_image(successor);
        }
        let state = self.open.get_mut(&pid).expect("opened above");
        let image = &mut self.processes[state.index];
        let forked = matches!(image.cause, StartCause::Fork | StartCause::Vfork);
        if forked && !state.had_exec {
            // The image takes the new program's name, but the address space is new: what the
            // child inherited, and any snapshot of it taken before the exec, is gone.
            state.components = ImageTracker::default();
            self.samples.drop_snapshots_before(pid, time_ns);
        }
        state.had_exec = true;
        image.exe = exe.to_string();
        image.argv = argv.to_vec();
    }

    fn heap_record(&mut self, sequence: u64, record: &Record) {
        let (time_ns, pid) = match record {
            Record::Alloc { time_ns, pid, .. }
            | Record::Free { time_ns, pid, .. }
            | Record::Realloc { time_ns, pid, .. } => (*time_ns, *pid),
            _ => return,
        };
        self.ensure_open(time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        state.had_events = true;
        let image = &mut self.processes[state.index];
        let span = (image.start_ns, time_ns);
        self.samples
            .take_snapshots(pid, span, false, &mut state.components);
        track_heap(&mut state.components, record);
        let relative_time_ns = time_ns.saturating_sub(image.start_ns);
        let event = |stack| HeapEvent {
            sequence,
            time_ns: relative_time_ns,
            stack,
        };
        match *record {
            Record::Alloc {
                function,
                address,
                size,
                stack,
                ..
            } => {
                let event = event(stack);
                state.heap.alloc(image, function, address, size, event)
            }
            Record::Free { address, .. } => state.heap.free(image, address, relative_time_ns),
            Record::Realloc {
                function,
                old_address,
                new_address,
                size,
                stack,
                ..
            } => {
                let event = event(stack);
                let addresses = (old_address, new_address);
                state.heap.realloc(image, function, addresses, size, event)
            }
            _ => {}
        }
    }

    fn mapping(
        &mut self,
        time_ns: u64,
        pid: u32,
        call: MapCall,
        (args, result): (&[u64; 6], i64),
        stack: StackId,
    ) {
        self.ensure_open(time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        state.had_events = true;
        let span = (self.processes[state.index].start_ns, time_ns);
        self.samples
            .take_snapshots(pid, span, false, &mut state.components);
        state.components.mapping(call, args, result, stack);
        let length = args[1];
        let mut brk_growth = 0;
        if call == MapCall::Brk {
            // brk returns the new break (the old one on failure), never -errno.
            let new_break = result as u64;
            if let Some(previous) = state.previous_break {
                brk_growth = new_break.saturating_sub(previous);
            }
            state.previous_break = Some(new_break);
        }
        let mapping = MappingCall {
            call,
            length,
            result,
            brk_growth,
        };
        self.processes[state.index].mappings.count(mapping);
        state
            .stacks
            .mappings
            .entry(stack)
            .or_default()
            .count(mapping);
    }

    fn stack_node(&mut self, pid: u32, id: StackId, parent: StackId, address: u64) {
        self.ensure_open(self.last_time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        state.stacks.table.add(StackNode {
            id,
            parent,
            address,
        });
    }

    /// Symbols are written before the record that closes their image; a late one still names
    /// the call sites of the PID's newest image.
    fn symbol(&mut self, pid: u32, address: u64, symbol: AddressSymbol) {
        let stacks = match self.open.get_mut(&pid) {
            Some(state) => &mut state.stacks,
            None => match self.latest_image.get(&pid) {
                Some(index) => self.closed.entry(*index).or_default(),
                None => return,
            },
        };
        stacks.symbols.insert(address, symbol);
    }

    fn warning(&mut self, time_ns: u64, pid: u32, message: &str) {
        let index = match (self.open.get(&pid), self.latest_image.get(&pid)) {
            (Some(state), _) => state.index,
            (None, Some(&index)) => index,
            (None, None) => {
                self.ensure_open(time_ns, pid);
                self.open[&pid].index
            }
        };
        self.processes[index].warnings.push(message.to_string());
    }

    fn process_exit(&mut self, time_ns: u64, pid: u32, status: ExitKind, counters: &ProbeCounters) {
        if !self.open.contains_key(&pid) {
            return;
        }
        let exit = match status {
            ExitKind::Code(code) => ImageExit::Code(code),
            ExitKind::Signal(signal) => ImageExit::Signal(signal),
            ExitKind::Detached => ImageExit::Detached,
            ExitKind::Unknown => ImageExit::Unknown,
        };
        self.close_image(pid, exit, time_ns, Some(*counters));
    }

    fn close_image(
        &mut self,
        pid: u32,
        exit: ImageExit,
        time_ns: u64,
        counters: Option<ProbeCounters>,
    ) {
        let Some(mut state) = self.open.remove(&pid) else {
            return;
        };
        let image = &mut self.processes[state.index];
        image.exit = exit;
        image.duration_ns = time_ns.saturating_sub(image.start_ns);
        if let Some(counters) = counters {
            image.probes = image.probes.plus(counters);
        }
        state.stacks.heap = state.heap.close(image);
        let span = (image.start_ns, time_ns);
        let by_exec = exit == ImageExit::Exec;
        let closed = self
            .samples
            .close(pid, span, by_exec, std::mem::take(&mut state.components));
        self.closed_components.insert(state.index, closed);
        self.closed.insert(state.index, state.stacks);
    }
}

/// Hands a heap record to the image's component tracker.
fn track_heap(tracker: &mut ImageTracker, record: &Record) {
    match *record {
        Record::Alloc {
            time_ns,
            address,
            size,
            stack,
            ..
        } => tracker.allocated(time_ns, address, size, stack),
        Record::Free {
            time_ns, address, ..
        } => tracker.freed(time_ns, address),
        Record::Realloc {
            time_ns,
            old_address,
            new_address,
            size,
            stack,
            ..
        } => tracker.reallocated(time_ns, (old_address, new_address), size, stack),
        _ => {}
    }
}

fn record_time(record: &Record) -> Option<u64> {
    match record {
        Record::ProcessStart { time_ns, .. }
        | Record::Exec { time_ns, .. }
        | Record::ThreadStart { time_ns, .. }
        | Record::ThreadExit { time_ns, .. }
        | Record::Module { time_ns, .. }
        | Record::Alloc { time_ns, .. }
        | Record::Free { time_ns, .. }
        | Record::Realloc { time_ns, .. }
        | Record::Mapping { time_ns, .. }
        | Record::Warning { time_ns, .. }
        | Record::ProcessExit { time_ns, .. }
        | Record::End { time_ns }
        | Record::AbandonedCall { time_ns, .. }
        | Record::StatusSample { time_ns, .. }
        | Record::RollupSample { time_ns, .. }
        | Record::SmapsSnapshot { time_ns, .. }
        | Record::ScratchPage { time_ns, .. }
        | Record::ThreadStack { time_ns, .. } => Some(*time_ns),
        Record::Symbol { .. }
        | Record::ImageCounters { .. }
        | Record::StackNode { .. }
        | Record::UnwindCosts(_)
        | Record::SamplerCosts(_) => None,
    }
}
