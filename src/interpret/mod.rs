//! The one stage that turns events into profile records, between the sources and the writer:
//! unwinds each event's stack copy (the traced thread already runs on), interns the stacks of
//! each process image in a prefix tree, symbolises every address of the tree once when the
//! image ends (exec, exit, end of recording) so profiles report without the binaries, asks
//! the sampler for snapshots at new highs and execs, and keeps the live counters the progress line
//! shows. Events arrive in time order (the sink stamps them as it queues them), and no record
//! it writes goes back in time.

mod records;
mod requested_peaks;
mod stacks;
mod symbolize;

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use indicatif::MultiProgress;

use crate::events::heap::IntegerMap;
use crate::events::heap::{heap_event, HeapCall, HeapEvent, LiveHeap};
use crate::events::mpi_nesting::MpiNesting;
use crate::events::{CopiesInFlight, CopyWindows, Event, EventBatch, EventKind, RawStack, Watched};
use crate::module::ModuleStore;
use crate::trace::format::{Record, UnwindCosts};
use crate::trace::stacks::{StackId, StackNode, EMPTY_STACK};
use crate::trace::writer::RecordBatch;
use requested_peaks::RequestedPeaks;
use stacks::{Image, StackWalk};
use symbolize::{DebugPreloader, ImageSymbolizer};

pub use stacks::ModuleRange;

/// Counters shared with the progress line.
#[derive(Default)]
pub struct LiveStats {
    pub events: AtomicU64,
    pub processes: AtomicU64,
    pub live_bytes: AtomicI64,
}

/// What the interpret stage shares with the rest of the pipeline.
pub struct Shared {
    pub stats: Arc<LiveStats>,
    pub bars: MultiProgress,
    pub copies: Arc<CopiesInFlight>,
    pub windows: Arc<CopyWindows>,
    pub watched: Arc<Watched>,
    /// The recording's module files, shared with the tracer.
    pub modules: Arc<ModuleStore>,
    /// Time 0 of the records, on the events' clock.
    pub origin_ns: u64,
    /// Records' times are truncated to a multiple of it (`RECORD_TIME_UNIT_NS`).
    pub time_unit_ns: u64,
}

/// Records passed on to the writer in one message at most; fewer when the input runs dry.
const RECORD_BATCH: usize = 4096;
/// When its input runs dry the thread passes its records on and naps this long before it
/// waits for more: the channel's wait spins first, and spinning once per batch took about
/// 5 % of the CPU of a recording (BENCHMARKS.md, "Naps where the pipeline ran dry"); a nap
/// lets the next batches gather.
const DRY_NAP: Duration = Duration::from_micros(100);

struct Interpreter {
    output: Sender<RecordBatch>,
    /// Records not yet passed on to the writer.
    pending: RecordBatch,
    /// A record the writer writes at once (a process exit, the end) is pending.
    pending_urgent: bool,
    /// Change of the live bytes not yet added to `stats` (once per batch, not per event).
    live_bytes_change: i64,
    files: Arc<ModuleStore>,
    images: IntegerMap<u32, Image>,
    /// Live blocks of each process: address -> size.
    heaps: IntegerMap<u32, LiveHeap>,
    /// New highs of live requested bytes, passed on to the sampler.
    peaks: RequestedPeaks,
    /// Open MPI calls per thread: only the outermost are recorded.
    mpi_nesting: MpiNesting,
    symbolizer: ImageSymbolizer,
    preloader: DebugPreloader,
    stats: Arc<LiveStats>,
    windows: Arc<CopyWindows>,
    watched: Arc<Watched>,
    /// Processes started and not yet exited in the event stream.
    in_stream: HashSet<u32>,
    origin_ns: u64,
    time_unit_ns: u64,
    /// The time of the last timed record written.
    last_time_ns: u64,
    new_nodes: Vec<StackNode>,
    costs: UnwindCosts,
}

pub fn spawn(
    input: Receiver<EventBatch>,
    output: Sender<RecordBatch>,
    shared: Shared,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("memsup-interpret".into())
        .spawn(move || {
            let copies = Arc::clone(&shared.copies);
            // Sources waiting for copies to be released stop waiting if this thread dies.
            let _closed = CloseOnDrop(Arc::clone(&copies));
            let mut interpreter = Interpreter::new(output, shared);
            for batch in &input {
                let count = batch.len() as u64;
                interpreter.stats.events.fetch_add(count, Ordering::Relaxed);
                for event in batch {
                    let bytes = event.kind.stack().map_or(0, RawStack::copy_bytes);
                    interpreter.take(event);
                    // The counter's line is the sources' too: touched only for a copy.
                    if bytes > 0 {
                        copies.release(bytes);
                    }
                }
                copies.release_events(count);
                // Batches while events keep coming; at once when the input runs dry.
                let dry = input.is_empty();
                if dry || interpreter.pending_urgent || interpreter.pending.len() >= RECORD_BATCH {
                    interpreter.pass_on();
                }
                if dry {
                    std::thread::sleep(DRY_NAP);
                }
            }
            interpreter.symbolize_all();
        })
        .expect("spawning the interpret thread")
}

struct CloseOnDrop(Arc<CopiesInFlight>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl Drop for Interpreter {
    fn drop(&mut self) {
        self.pass_on();
    }
}

impl Interpreter {
    fn new(output: Sender<RecordBatch>, shared: Shared) -> Interpreter {
        Interpreter {
            output,
            pending: Vec::new(),
            pending_urgent: false,
            live_bytes_change: 0,
            files: Arc::clone(&shared.modules),
            images: IntegerMap::default(),
            heaps: IntegerMap::default(),
            peaks: RequestedPeaks::new(Arc::clone(&shared.watched)),
            mpi_nesting: MpiNesting::default(),
            symbolizer: ImageSymbolizer::new(shared.bars, Arc::clone(&shared.modules)),
            preloader: DebugPreloader::new(shared.modules),
            stats: shared.stats,
            windows: shared.windows,
            watched: shared.watched,
            in_stream: HashSet::new(),
            origin_ns: shared.origin_ns,
            time_unit_ns: shared.time_unit_ns.max(1),
            last_time_ns: 0,
            new_nodes: Vec::new(),
            costs: UnwindCosts::default(),
        }
    }

    /// Queues a record for the writer.
    fn emit(&mut self, record: Record) {
        if matches!(record, Record::ProcessExit { .. } | Record::End { .. }) {
            self.pending_urgent = true;
        }
        self.pending.push(record);
    }

    /// Sends the queued records to the writer as one message.
    fn pass_on(&mut self) {
        if !self.pending.is_empty() {
            // The next batch is likely as long as this one.
            let capacity = self.pending.len();
            let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(capacity));
            let _ = self.output.send(batch);
        }
        self.pending_urgent = false;
        let change = std::mem::take(&mut self.live_bytes_change);
        self.stats.live_bytes.fetch_add(change, Ordering::Relaxed);
    }

    fn take(&mut self, event: Event) {
        let Event {
            time_ns,
            pid,
            tid,
            kind,
        } = event;
        // Allocations and frees, millions a second from the hook engine: straight to their
        // records, without the general path's moves of whole events and records.
        match kind {
            EventKind::Free { address } => {
                let time_ns = self.record_time(time_ns);
                let call = HeapCall::Free { address };
                self.follow_heap(pid, time_ns, EMPTY_STACK, call);
                self.pending.push(Record::Free {
                    time_ns,
                    pid,
                    tid,
                    address,
                });
            }
            EventKind::Alloc {
                function,
                address,
                size,
                stack,
            } => {
                let time_ns = self.record_time(time_ns);
                let stack = self.stack_id(pid, tid, stack);
                self.follow_heap(pid, time_ns, stack, HeapCall::Alloc { address, size });
                self.pending.push(Record::Alloc {
                    time_ns,
                    pid,
                    tid,
                    function,
                    address,
                    size,
                    stack,
                });
            }
            kind => self.take_other(time_ns, pid, tid, kind),
        }
    }

    fn take_other(&mut self, time_ns: u64, pid: u32, tid: u32, mut kind: EventKind) {
        // A sample is recorded only within the lifetime the profile records for its process.
        if kind.is_sample() && !self.in_stream.contains(&pid) {
            return;
        }
        let time_ns = self.record_time(time_ns);
        let stack = match &mut kind {
            EventKind::Realloc { stack, .. } | EventKind::Mapping { stack, .. } => {
                let raw = std::mem::replace(stack, RawStack::Caller(0));
                self.stack_id(pid, tid, raw)
            }
            EventKind::ThreadState { stack, .. } => {
                let raw = std::mem::replace(stack, RawStack::Caller(0));
                self.stopped_thread_stack_id(pid, tid, raw)
            }
            _ => EMPTY_STACK,
        };
        match kind {
            EventKind::MpiCall {
                entry,
                stack_pointer,
                ..
            } if !self
                .mpi_nesting
                .is_outermost(pid, tid, entry, stack_pointer) =>
            {
                return;
            }
            // Calls made inside an open call are part of it.
            EventKind::MpiCalls { .. } if self.mpi_nesting.is_inside(pid, tid) => return,
            EventKind::ThreadExit => self.mpi_nesting.thread_ended(pid, tid),
            EventKind::Exec { .. } | EventKind::ProcessExit { .. } => {
                self.mpi_nesting.image_ended(pid)
            }
            _ => {}
        }
        self.before(pid, &kind);
        let Some(record) = records::record_of(time_ns, pid, tid, kind, stack) else {
            return;
        };
        self.follow(&record);
        self.emit(record);
    }

    /// Nanoseconds since the recording started, in whole time units, never before the last
    /// record's.
    fn record_time(&mut self, time_ns: u64) -> u64 {
        let time_ns = time_ns.saturating_sub(self.origin_ns);
        let time_ns = (time_ns - time_ns % self.time_unit_ns).max(self.last_time_ns);
        self.last_time_ns = time_ns;
        time_ns
    }

    /// Unwinds or looks up the event's stack, interns it and writes the new tree nodes.
    fn stack_id(&mut self, pid: u32, tid: u32, stack: RawStack) -> StackId {
        let files = &self.files;
        let image = self.images.entry(pid).or_insert_with(|| Image::new(files));
        let mut walk = StackWalk {
            costs: &mut self.costs,
            windows: &self.windows,
            tid,
        };
        let id = walk.resolve(image, stack, &mut self.new_nodes);
        self.write_new_nodes(pid);
        id
    }

    /// The stack of a thread a snapshot stopped: its innermost frame is the instruction the
    /// thread was stopped at, not a return address, so it is named at its own address (as an
    /// instruction a signal interrupted is).
    fn stopped_thread_stack_id(&mut self, pid: u32, tid: u32, stack: RawStack) -> StackId {
        let stopped_at = match &stack {
            RawStack::Copy(copy) => Some(copy.snapshot.ip),
            _ => None,
        };
        let id = self.stack_id(pid, tid, stack);
        if let (Some(ip), Some(image)) = (stopped_at, self.images.get_mut(&pid)) {
            image.signal_frames.interrupted.insert(ip);
        }
        id
    }

    fn write_new_nodes(&mut self, pid: u32) {
        if self.new_nodes.is_empty() {
            return;
        }
        if let Some(image) = self.images.get(&pid) {
            for node in &self.new_nodes {
                if let Some(&Some(module)) = image.addresses.get(&node.address) {
                    self.preloader.request(&image.modules[module]);
                }
            }
        }
        self.pending
            .extend(self.new_nodes.drain(..).map(|node| Record::StackNode {
                pid,
                id: node.id,
                parent: node.parent,
                address: node.address,
            }));
    }

    /// What an event changes before its record is written: images, the processes alive.
    fn before(&mut self, pid: u32, kind: &EventKind) {
        match kind {
            EventKind::ProcessStart { parent_pid, .. } => {
                let image = match parent_pid.and_then(|p| self.images.get(&p)) {
                    Some(parent) => parent.inherit(),
                    None => Image::new(&self.files),
                };
                self.images.insert(pid, image);
                self.stats.processes.fetch_add(1, Ordering::Relaxed);
                self.in_stream.insert(pid);
            }
            EventKind::Module {
                path,
                inode,
                start,
                end,
                bias,
            } => {
                let files = &self.files;
                let image = self.images.entry(pid).or_insert_with(|| Image::new(files));
                // A file the unwinder cannot read is walked through by frame pointers only.
                let _ = image.unwinder.add_module(path, *inode, *start, *end, *bias);
                image.modules.push(ModuleRange {
                    path: path.clone(),
                    inode: *inode,
                    start: *start,
                    end: *end,
                    bias: *bias,
                });
            }
            EventKind::KnownStack { id, frames } => {
                let files = &self.files;
                let image = self.images.entry(pid).or_insert_with(|| Image::new(files));
                image.register_known(*id, frames, &mut self.new_nodes);
                self.write_new_nodes(pid);
            }
            EventKind::Exec { .. } => {
                self.symbolize(pid);
                self.images.insert(pid, Image::new(&self.files));
                self.forget_blocks(pid);
            }
            EventKind::ProcessExit { .. } => {
                self.in_stream.remove(&pid);
                self.symbolize(pid);
                self.forget_blocks(pid);
                self.images.remove(&pid);
                self.stats.processes.fetch_sub(1, Ordering::Relaxed);
            }
            EventKind::End => {
                self.symbolize_all();
                self.emit(Record::UnwindCosts(self.costs));
                self.emit(Record::RecorderCosts(crate::proc::own_usage::own_costs()));
            }
            _ => {}
        }
    }
}

impl Interpreter {
    /// Live blocks and snapshot requests, as the record changes them.
    fn follow(&mut self, record: &Record) {
        if let Some((pid, _, event)) = heap_event(record) {
            self.follow_heap(pid, event.time_ns, event.stack, event.call);
        } else if let Record::Exec { pid, .. } = *record {
            // The tracer snapshots the new program at its exec stop.
            self.watched.new_image(pid as i32);
        }
    }

    /// Live blocks and peaks, as an allocator call changes them.
    fn follow_heap(&mut self, pid: u32, time_ns: u64, stack: StackId, call: HeapCall) {
        let event = HeapEvent {
            time_ns,
            stack,
            call,
        };
        let outcome = self.heaps.entry(pid).or_default().apply(event);
        // Released first, so a block handed out again at its own address is no new high.
        for block in [outcome.replaced, outcome.released].into_iter().flatten() {
            self.peaks.remove(pid, block.size);
            self.live_bytes_change -= block.size as i64;
        }
        if let Some(block) = outcome.created {
            self.peaks.add(pid, block.size, self.origin_ns + time_ns);
            self.live_bytes_change += block.size as i64;
        }
    }

    /// The image ended: its blocks are gone with it (an exec'd program starts afresh).
    fn forget_blocks(&mut self, pid: u32) {
        let released = self.heaps.remove(&pid).map_or(0, |mut heap| heap.clear());
        self.peaks.forget(pid);
        self.live_bytes_change -= released as i64;
    }

    fn symbolize_all(&mut self) {
        let mut pids: Vec<u32> = self.images.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.symbolize(pid);
        }
    }

    /// Emits a Symbol record for every address of the image's stacks not yet symbolised,
    /// before the record that ends the image.
    fn symbolize(&mut self, pid: u32) {
        let Some(image) = self.images.get_mut(&pid) else {
            return;
        };
        let addresses: Vec<(u64, Option<usize>)> =
            std::mem::take(&mut image.addresses).into_iter().collect();
        let started = Instant::now();
        self.costs.addresses += addresses.len() as u64;
        let records =
            self.symbolizer
                .symbolize(pid, &image.modules, addresses, &image.signal_frames);
        self.costs.symbolize_ns += started.elapsed().as_nanos() as u64;
        self.pending.extend(records);
    }
}

#[cfg(test)]
mod tests;
