//! Walks the records in order, splitting them into process images and feeding each image's
//! heap and mapping events to its counters; call sites are worked out at the end, once every
//! image's symbols are known. Records are taken one at a time: nothing is kept per event.

use super::mapped_peak::MappedPeak;
use std::collections::HashMap;

use super::components::{self, ClosedImage, ImageSamples, ImageTracker, Images, Sample, Samples};
use super::frames::AddressSymbol;
use super::heap::HeapState;
use super::mappings::MappingCall;
use super::mmap_threshold::ThresholdTracker;
use super::mpi_calls::{residency_at_stops, MpiTracker};
use super::roles::merge_role;
use super::unknown_frees::UnknownFreeTracker;

use super::moments;
use super::sites::{heap_sites, mapping_sites, source_site_of_stacks, ImageStacks, SiteIdentity};
use super::threads::{thread_groups, ProcessSnapshot, RecordedThread, SnapshotThread};
use super::{ImageExit, ModuleSpan, ProcessAnalysis, SampleOrder, Settings};
use crate::events::heap::heap_event;
use crate::events::heap::{ExecEffect, ImageLifecycle, IntegerMap, LiveHeap, Outcome};
use crate::trace::census_format::HeapCensus;
use crate::trace::format::{
    AllocFunction, ExitKind, MapCall, ProbeCounters, Record, RecordMode, StartCause,
};
use crate::trace::stacks::{StackId, StackNode};

/// What a snapshot (or an attach's census) recorded of one image: its threads, how long
/// it was stopped, and glibc's heap with the time it was read.
#[derive(Default)]
struct SnapshotParts {
    threads: Vec<RecordedThread>,
    stopped_ns: u64,
    census: Option<(u64, HeapCensus)>,
}
/// Replay state of an image that has not ended yet.
#[derive(Debug)]
struct OpenImage {
    /// Position in `Replay::processes`.
    index: usize,
    heap: LiveHeap,
    metrics: HeapState,
    lifecycle: ImageLifecycle,
    stacks: ImageStacks,
    /// Program break after the last brk; None before the first.
    previous_break: Option<u64>,
    components: ImageTracker,
    /// Residency samples taken during the image.
    samples: ImageSamples,
    mpi: MpiTracker,
    /// glibc's mmap threshold as the records show it (`mmap_threshold`).
    threshold: ThresholdTracker,
    unknown_frees: UnknownFreeTracker,
    /// Anonymous mapped memory and its peak (`mapped_peak`).
    mapped: MappedPeak,
}

/// Where an ended image lay in time, for samples that reach the replay after it ended.
#[derive(Debug, Clone, Copy)]
struct ClosedSpan {
    index: usize,
    start_ns: u64,
    end_ns: u64,
    live_bytes: u64,
}

pub(super) struct Replay {
    mode: RecordMode,
    order: SampleOrder,
    processes: Vec<ProcessAnalysis>,
    open: IntegerMap<u32, OpenImage>,
    /// The stacks of ended images, by position in `processes`.
    closed: HashMap<usize, ImageStacks>,
    /// What ended images leave for their components, by position in `processes`.
    closed_components: HashMap<usize, ClosedImage>,
    /// The sampler's records not yet reached, by PID and time.
    samples: Samples,
    /// Where each PID's ended images lay, oldest first.
    closed_spans: HashMap<u32, Vec<ClosedSpan>>,
    /// Newest image of each PID, open or closed.
    latest_image: HashMap<u32, usize>,
    /// Latest time of any record: where images the recording never saw end are cut.
    last_time_ns: u64,
    /// What snapshots recorded of each image's threads (by position in `processes`), and
    /// how long they stopped it.
    snapshots: HashMap<usize, SnapshotParts>,
    /// The recording's MPI function names, by number.
    mpi_names: HashMap<u32, String>,
}

impl Replay {
    pub fn new(mode: RecordMode, order: SampleOrder) -> Self {
        Replay {
            mode,
            order,
            processes: Vec::new(),
            open: IntegerMap::default(),
            closed: HashMap::new(),
            closed_components: HashMap::new(),
            samples: Samples::default(),
            closed_spans: HashMap::new(),
            latest_image: HashMap::new(),
            last_time_ns: 0,
            snapshots: HashMap::new(),
            mpi_names: HashMap::new(),
        }
    }

    pub fn apply(&mut self, record: Record) {
        let time_ns = record.time_ns();
        if let Some(time_ns) = time_ns {
            self.last_time_ns = self.last_time_ns.max(time_ns);
        }
        let Some(record) = self.samples.hold(record) else {
            // In time order, the sample is due now: nothing that comes later is earlier.
            if let (SampleOrder::InTimeOrder, Some(time_ns)) = (self.order, time_ns) {
                self.release_held(time_ns.saturating_add(1));
            }
            return;
        };
        if let Some(time_ns) = time_ns {
            // Every tracer record earlier than this one, of every PID, has been read.
            self.release_held(time_ns);
        }
        match &record {
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
                self.heap_record(&record)
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
            Record::ProbeSites {
                pid,
                engine,
                sites,
                hooks,
                ..
            } => {
                if let Some(state) = self.open.get(pid) {
                    let image = &mut self.processes[state.index];
                    image.engine = *engine;
                    image.probe_sites = sites.clone();
                    image.hooks = *hooks;
                }
            }
            Record::HookStacks { pid, costs, .. } => {
                if let Some(state) = self.open.get(pid) {
                    self.processes[state.index].hook_stacks = Some(*costs);
                }
            }
            Record::HookCalls { pid, costs, .. } => {
                if let Some(state) = self.open.get(pid) {
                    self.processes[state.index].hook_calls = Some(*costs);
                }
            }
            Record::Module {
                pid,
                path,
                start,
                end,
                ..
            } => {
                if let Some(state) = self.open.get_mut(pid) {
                    state.components.module(path, *start);
                    let span = ModuleSpan {
                        path: path.clone(),
                        start: *start,
                        end: *end,
                    };
                    let modules = &mut self.processes[state.index].modules;
                    if !modules.contains(&span) {
                        modules.push(span);
                    }
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
            Record::ThreadState {
                time_ns,
                pid,
                tid,
                activity,
                kernel_state,
                wchan,
                stack,
            } => {
                let thread = SnapshotThread {
                    tid: *tid,
                    activity: *activity,
                    kernel_state: *kernel_state,
                    wchan: wchan.clone(),
                };
                let index = self.image_of(*time_ns, *pid);
                let recorded = RecordedThread {
                    thread,
                    stack: *stack,
                };
                self.snapshots.entry(index).or_default().threads.push(recorded);
            }
            Record::SnapshotStop {
                time_ns,
                pid,
                stopped_ns,
                ..
            } => {
                let index = self.image_of(*time_ns, *pid);
                self.snapshots.entry(index).or_default().stopped_ns = *stopped_ns;
            }
            Record::HeapCensus {
                time_ns,
                pid,
                census,
            } => {
                let index = self.image_of(*time_ns, *pid);
                self.snapshots.entry(index).or_default().census = Some((*time_ns, census.clone()));
            }
            Record::BlocksAtAttach {
                time_ns,
                pid,
                blocks,
            } => {
                self.ensure_open(*time_ns, *pid);
                let state = self.open.get_mut(pid).expect("opened above");
                state.unknown_frees.census_blocks(blocks);
            }
            Record::ProcessRole { time_ns, pid, role } => {
                let index = self.image_of(*time_ns, *pid);
                let image = &mut self.processes[index];
                let (merged, warning) = merge_role(image.role.as_ref(), role);
                image.role = Some(merged);
                image.warnings.extend(warning);
            }
            Record::MpiFunction { function, name, .. } => {
                self.mpi_names.entry(*function).or_insert_with(|| name.clone());
            }
            Record::MpiCall {
                time_ns,
                pid,
                tid,
                function,
                entry,
            } => self.mpi_call(*time_ns, *pid, *tid, *function, *entry),
            Record::MpiCalls {
                time_ns,
                pid,
                tid,
                function,
                calls,
                inside_ns,
            } => {
                self.ensure_open(*time_ns, *pid);
                let state = self.open.get_mut(pid).expect("opened above");
                let name = self.mpi_names.get(function).map_or("", String::as_str);
                state.mpi.add_calls(*tid, *function, name, *calls, *inside_ns);
            }
            Record::ThreadExit { pid, tid, .. } => {
                if let Some(state) = self.open.get_mut(pid) {
                    state.unknown_frees.thread_exit(*tid);
                }
            }
            Record::ThreadStart { .. }
            | Record::UnwindCosts(_)
            // `Samples` holds these until the replay reaches their time.
            | Record::StatusSample { .. }
            | Record::RollupSample { .. }
            | Record::SamplerCosts(_)
            | Record::RecorderCosts(_)
            | Record::SmapsSnapshot { .. }
            | Record::End { .. } => {}
        }
    }

    /// How many samples and snapshots wait for the replay to reach their time.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.samples.held()
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

    fn mpi_call(&mut self, time_ns: u64, pid: u32, tid: u32, function: u32, entry: bool) {
        self.ensure_open(time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        let live_bytes = state.heap.live_bytes();
        if entry {
            let name = self.mpi_names.get(&function).map_or("", String::as_str);
            state.mpi.enter(tid, function, name, time_ns, live_bytes);
        } else {
            state.mpi.leave(tid, time_ns, live_bytes);
        }
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
    pub fn finish(mut self, settings: &Settings) -> Vec<ProcessAnalysis> {
        let skip = &settings.skip;
        let mut still_open: Vec<u32> = self.open.keys().copied().collect();
        still_open.sort_unstable();
        for pid in still_open {
            self.close_image(pid, ImageExit::Unknown, self.last_time_ns, None);
        }
        for (pid, sample) in self.samples.remaining() {
            self.route_sample(pid, sample);
        }
        let stacks_by_image = std::mem::take(&mut self.closed);
        let exes: Vec<String> = self.processes.iter().map(|p| p.exe.clone()).collect();
        let images = Images {
            stacks: &stacks_by_image,
            exes: &exes,
        };
        for (&index, stacks) in &stacks_by_image {
            let image = &mut self.processes[index];
            image.sites = heap_sites(stacks, skip, SiteIdentity::Address);
            image.source_sites = heap_sites(stacks, skip, SiteIdentity::Source);
            image.mapping_sites = mapping_sites(stacks, skip);
            let closed = self.closed_components.remove(&index).unwrap_or_default();
            components::build(image, stacks, closed, settings, &images);
            let site_of_stack = source_site_of_stacks(stacks, skip, &image.source_sites);
            image.moments = moments::moments(image, &stacks.heap.changes, &site_of_stack);
            let snapshots = &image.components.snapshots;
            residency_at_stops(&mut image.mpi_calls, snapshots, &self.mpi_names);
            if let Some(parts) = self.snapshots.remove(&index) {
                let SnapshotParts {
                    threads,
                    stopped_ns,
                    census,
                } = parts;
                // Only where the arena pages no known block accounts for are `unknown`.
                if let (false, Some((time_ns, HeapCensus::Walked(totals)))) =
                    (image.every_block_seen, &census)
                {
                    components::split_by_census(&mut image.components, totals, *time_ns);
                }
                let heap_census = census.map(|(_, census)| census);
                // A snapshot shows its threads; an attached recording has only the census
                // taken at the attach.
                if threads.is_empty() {
                    image.census_at_attach = heap_census;
                } else {
                    image.snapshot = Some(ProcessSnapshot {
                        stopped_ns,
                        groups: thread_groups(&threads, stacks),
                        heap_census,
                    });
                }
            }
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
            image.modules = self.processes[parent_index].modules.clone();
            image.joined_running = self.processes[parent_index].joined_running;
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
            heap: LiveHeap::default(),
            metrics: HeapState::default(),
            lifecycle: ImageLifecycle::default(),
            stacks: ImageStacks::default(),
            previous_break: None,
            components: ImageTracker::default(),
            samples: ImageSamples::default(),
            mpi: MpiTracker::default(),
            threshold: ThresholdTracker::default(),
            unknown_frees: UnknownFreeTracker::default(),
            mapped: MappedPeak::default(),
        };
        self.open.insert(pid, state);
    }

    /// Makes sure `pid` has an open image, for records that arrive without a process start.
    fn ensure_open(&mut self, time_ns: u64, pid: u32) {
        if !self.open.contains_key(&pid) {
            let cause = match self.mode {
                RecordMode::Run => StartCause::Launch,
                RecordMode::Attach | RecordMode::Snapshot => StartCause::Attach,
            };
            self.start_image(time_ns, pid, None, cause);
        }
    }

    /// The exec rule of `ImageLifecycle`: the first exec of a fresh image names it; any other
    /// ends the image and starts a new one for the same PID.
    fn exec(&mut self, time_ns: u64, pid: u32, exe: &str, argv: &[String]) {
        self.ensure_open(time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        let index = state.index;
        let effect = state.lifecycle.exec();
        let lifecycle = state.lifecycle;
        if effect == ExecEffect::StartsImage {
            let old = &self.processes[index];
            let mut successor = ProcessAnalysis::new(pid, old.parent_pid, old.cause, time_ns);
            // A new program starts a new heap, every block of it seen.
            successor.joined_running = false;
            successor.every_block_seen = true;
            self.close_image(pid, ImageExit::Exec, time_ns, None);
            self.open_image(successor);
        }
        let state = self.open.get_mut(&pid).expect("opened above");
        state.lifecycle = lifecycle;
        // A new program has a new allocator, at its starting threshold.
        state.threshold = ThresholdTracker::default();
        let image = &mut self.processes[state.index];
        if matches!(image.cause, StartCause::Fork | StartCause::Vfork) {
            // The address space is new: what the child inherited, and any snapshot of it
            // taken before the exec, is gone.
            state.components = ImageTracker::default();
            image.modules.clear();
            image.every_block_seen = true;
            self.samples.drop_snapshots_before(pid, time_ns);
        }
        image.exe = exe.to_string();
        image.argv = argv.to_vec();
    }

    fn heap_record(&mut self, record: &Record) {
        let Some((pid, function, event)) = heap_event(record) else {
            return;
        };
        self.reach(pid, event.time_ns);
        let state = self.open.get_mut(&pid).expect("opened by reach");
        let outcome = state.heap.apply(event);
        if let Record::Alloc { tid, .. } | Record::Free { tid, .. } | Record::Realloc { tid, .. } =
            record
        {
            state.mpi.heap(*tid, &outcome);
            state.unknown_frees.heap(*tid, &outcome);
        }
        threshold_heap(&mut state.threshold, function, &outcome, event.time_ns);
        let image = &mut self.processes[state.index];
        let call = (function, event.time_ns);
        state.metrics.apply(image, call, &outcome, &state.heap);
    }

    /// An allocator or mapping event of `pid` at `time_ns` is next: opens its image if need
    /// be, and hands it the snapshots from before then and at it (the samples from before
    /// then are handed over already, as every record's time releases them).
    fn reach(&mut self, pid: u32, time_ns: u64) {
        self.ensure_open(time_ns, pid);
        let state = self.open.get_mut(&pid).expect("opened above");
        state.lifecycle.event();
        let span = (self.processes[state.index].start_ns, time_ns);
        let taker = (&mut state.components, &state.heap);
        self.samples.take_snapshots(pid, span, false, taker);
    }

    /// Hands over every PID's samples and snapshots earlier than `time_ns`: each sees its
    /// image as it is now, which is as it was at the sample's time.
    fn release_held(&mut self, time_ns: u64) {
        let pids = self.samples.pids_holding_before(time_ns);
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            for sample in self.samples.due(pid, time_ns, false) {
                self.route_sample(pid, sample);
            }
            match self.open.get_mut(&pid) {
                Some(state) => {
                    let span = (self.processes[state.index].start_ns, time_ns - 1);
                    let taker = (&mut state.components, &state.heap);
                    self.samples.take_snapshots(pid, span, false, taker);
                }
                // Not of an image the replay will see again: a later one starts after them.
                None => self.samples.drop_snapshots_before(pid, time_ns),
            }
        }
        self.samples.settle();
    }

    /// Counts a sample in the image of its PID whose time span holds it: the open one, else
    /// the newest ended one (a sample that reached the replay late).
    fn route_sample(&mut self, pid: u32, sample: Sample) {
        let time_ns = sample.time_ns();
        if let Some(state) = self.open.get_mut(&pid) {
            let image = &mut self.processes[state.index];
            if image.start_ns <= time_ns {
                image.residency.add(sample);
                if let Sample::Status { rss, .. } = sample {
                    state.mpi.rss(rss);
                }
                let requested = state.heap.live_bytes();
                state.samples.add(sample, requested);
                return;
            }
        }
        let spans = self.closed_spans.get(&pid).map_or(&[][..], Vec::as_slice);
        let holding = spans
            .iter()
            .rev()
            .find(|span| span.start_ns <= time_ns && time_ns <= span.end_ns);
        let Some(span) = holding.copied() else {
            return;
        };
        self.processes[span.index].residency.add(sample);
        if let Some(closed) = self.closed_components.get_mut(&span.index) {
            closed.samples.add(sample, span.live_bytes);
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
        self.reach(pid, time_ns);
        let state = self.open.get_mut(&pid).expect("opened by reach");
        state.components.mapping(time_ns, call, args, result, stack);
        state.threshold.mapping(call, args, result);
        state.mapped.apply(call, args, result, stack);
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

    /// The position of `pid`'s open image, opened if need be.
    fn image_of(&mut self, time_ns: u64, pid: u32) -> usize {
        self.ensure_open(time_ns, pid);
        self.open[&pid].index
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
        let by_exec = exit == ImageExit::Exec;
        // A sample at the time of an exec belongs to the image the exec starts.
        for sample in self.samples.due(pid, time_ns, !by_exec) {
            self.route_sample(pid, sample);
        }
        let Some(mut state) = self.open.remove(&pid) else {
            return;
        };
        let image = &mut self.processes[state.index];
        image.exit = exit;
        image.duration_ns = time_ns.saturating_sub(image.start_ns);
        if let Some(counters) = counters {
            image.probes = image.probes.plus(counters);
        }
        let (mapped_peak, at_peak) = std::mem::take(&mut state.mapped).finish();
        image.mappings.peak_bytes = mapped_peak;
        for (stack, bytes) in at_peak {
            state.stacks.mappings.entry(stack).or_default().peak_bytes = bytes;
        }
        let threshold = std::mem::take(&mut state.threshold);
        image.mmap_threshold = threshold.finish();
        let mpi = std::mem::take(&mut state.mpi);
        image.mpi_calls = mpi.finish(time_ns, state.heap.live_bytes());
        state.stacks.heap = state.metrics.close(image, &state.heap);
        let unknown_frees = std::mem::take(&mut state.unknown_frees);
        image.unknown_free_sources = unknown_frees.finish(image);
        let span = (image.start_ns, time_ns);
        let taker = (&mut state.components, &state.heap);
        self.samples.take_snapshots(pid, span, by_exec, taker);
        self.closed_spans.entry(pid).or_default().push(ClosedSpan {
            index: state.index,
            start_ns: span.0,
            end_ns: span.1,
            live_bytes: state.heap.live_bytes(),
        });
        let closed = ClosedImage {
            tracker: state.components,
            samples: state.samples,
        };
        self.closed_components.insert(state.index, closed);
        self.closed.insert(state.index, state.stacks);
    }
}

/// What an allocator call tells the threshold tracker: a free (or a realloc to size 0, which
/// frees) is where glibc adjusts its threshold; a realloc that moves a block is not.
fn threshold_heap(
    tracker: &mut ThresholdTracker,
    function: AllocFunction,
    outcome: &Outcome,
    time_ns: u64,
) {
    if let Some(block) = outcome.replaced {
        tracker.released(block.address, false, time_ns);
    }
    if let Some(block) = outcome.released {
        let freed = function == AllocFunction::Free || outcome.created.is_none();
        tracker.released(block.address, freed, time_ns);
    }
    if let Some(block) = outcome.created {
        tracker.created(block.address, block.size);
    }
}
