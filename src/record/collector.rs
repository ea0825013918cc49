//! Between the tracer and the writer: unwinds each event's stack copy (the traced thread
//! already runs on), interns the stacks of each process image in a prefix tree, symbolises
//! every address of the tree once when the image ends (exec, exit, end of recording) so
//! profiles report without the binaries, and keeps the live counters the progress line shows.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use indicatif::MultiProgress;

use super::requested_peaks::RequestedPeaks;
use super::symbolize::{ImageSymbolizer, SignalFrames};
use crate::module::ModuleStore;
use crate::ptrace::capture::MAX_WINDOW;
use crate::ptrace::sink::{copy_bytes, Capture, CopiesInFlight, Message, StackSource};
use crate::sampler::Watched;
use crate::trace::format::{Record, UnwindCosts, TRUNCATED_FRAME};
use crate::trace::stacks::{StackInterner, StackNode};
use crate::unwind::{Stack, Unwinder};

/// Counters shared with the progress line.
#[derive(Default)]
pub struct LiveStats {
    pub events: AtomicU64,
    pub processes: AtomicU64,
    pub live_bytes: AtomicI64,
}

/// A module of a process image: (path, start, end, bias).
pub type ModuleRange = (String, u64, u64, u64);

/// What the collector keeps per process image.
struct Image {
    modules: Vec<ModuleRange>,
    unwinder: Unwinder,
    stacks: StackInterner,
    /// Every address in the image's stack tree, symbolised when the image ends, with the
    /// index in `modules` of the module that held it when it was first seen (a library
    /// dlclose()d later may leave its place to another one).
    addresses: BTreeMap<u64, Option<usize>>,
    /// Which of them are signal frames (named at the address itself, not at `a - 1`).
    signal_frames: SignalFrames,
}

impl Image {
    fn new(files: &Arc<ModuleStore>) -> Image {
        Image {
            modules: Vec::new(),
            unwinder: Unwinder::with_module_store(Arc::clone(files)),
            stacks: StackInterner::default(),
            addresses: BTreeMap::new(),
            signal_frames: SignalFrames::default(),
        }
    }

    /// A forked child's image: the parent's modules, a stack tree of its own.
    fn inherit(&self) -> Image {
        Image {
            modules: self.modules.clone(),
            unwinder: self.unwinder.clone(),
            stacks: StackInterner::default(),
            addresses: BTreeMap::new(),
            signal_frames: SignalFrames::default(),
        }
    }
}

struct Collector {
    output: Sender<Record>,
    files: Arc<ModuleStore>,
    images: HashMap<u32, Image>,
    /// Live blocks of each process: address -> size.
    live_blocks: HashMap<u32, HashMap<u64, u64>>,
    /// New highs of live requested bytes, passed on to the sampler.
    peaks: RequestedPeaks,
    symbolizer: ImageSymbolizer,
    stats: Arc<LiveStats>,
    new_nodes: Vec<StackNode>,
    costs: UnwindCosts,
}

pub fn spawn(
    input: Receiver<Message>,
    output: Sender<Record>,
    stats: Arc<LiveStats>,
    bars: MultiProgress,
    copies: Arc<CopiesInFlight>,
    watched: Arc<Watched>,
    modules: Arc<ModuleStore>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("memsup-collector".into())
        .spawn(move || {
            let mut collector = Collector {
                output,
                files: Arc::clone(&modules),
                images: HashMap::new(),
                live_blocks: HashMap::new(),
                peaks: RequestedPeaks::new(watched),
                symbolizer: ImageSymbolizer::new(bars, modules),
                stats,
                new_nodes: Vec::new(),
                costs: UnwindCosts::default(),
            };
            for message in input {
                let bytes = copy_bytes(&message.stack);
                collector.take(message);
                copies.release(bytes);
            }
            collector.symbolize_all();
        })
        .expect("spawning the collector thread")
}

impl Collector {
    fn take(&mut self, message: Message) {
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        let Message { mut record, stack } = message;
        if let Some(source) = stack {
            self.attach_stack(&mut record, source);
        }
        match &record {
            Record::ProcessStart {
                pid, parent_pid, ..
            } => {
                let image = match parent_pid.and_then(|p| self.images.get(&p)) {
                    Some(parent) => parent.inherit(),
                    None => Image::new(&self.files),
                };
                self.images.insert(*pid, image);
                self.stats.processes.fetch_add(1, Ordering::Relaxed);
            }
            Record::Module {
                pid,
                path,
                start,
                end,
                bias,
                ..
            } => {
                let files = &self.files;
                let image = self.images.entry(*pid).or_insert_with(|| Image::new(files));
                // A file the unwinder cannot read is walked through by frame pointers only.
                let _ = image.unwinder.add_module(path, *start, *end, *bias);
                image.modules.push((path.clone(), *start, *end, *bias));
            }
            Record::Exec { pid, .. } => {
                self.symbolize(*pid);
                self.images.insert(*pid, Image::new(&self.files));
                self.forget_blocks(*pid);
            }
            Record::ProcessExit { pid, .. } => {
                self.symbolize(*pid);
                self.forget_blocks(*pid);
                self.images.remove(pid);
                self.stats.processes.fetch_sub(1, Ordering::Relaxed);
            }
            Record::End { .. } => {
                self.symbolize_all();
                let _ = self.output.send(Record::UnwindCosts(self.costs));
            }
            _ => self.track_heap(&record),
        }
        let _ = self.output.send(record);
    }

    /// Unwinds the event's stack, interns it, writes the new tree nodes and sets the id.
    fn attach_stack(&mut self, record: &mut Record, source: StackSource) {
        let (pid, slot) = match record {
            Record::Alloc { pid, stack, .. }
            | Record::Realloc { pid, stack, .. }
            | Record::Mapping { pid, stack, .. } => (*pid, stack),
            _ => return,
        };
        let files = &self.files;
        let image = self.images.entry(pid).or_insert_with(|| Image::new(files));
        let frames = match source {
            StackSource::Caller(caller) => vec![caller],
            StackSource::Uncopied(caller) => {
                self.costs.truncated += 1;
                vec![caller, TRUNCATED_FRAME]
            }
            StackSource::Snapshot(capture) => {
                let started = Instant::now();
                let (frames, truncated, signal_frames) = unwind(&image.unwinder, &capture);
                for index in signal_frames {
                    image.signal_frames.trampolines.insert(frames[index]);
                    if let Some(&interrupted) = frames.get(index + 1) {
                        image.signal_frames.interrupted.insert(interrupted);
                    }
                }
                self.costs.unwind_ns += started.elapsed().as_nanos() as u64;
                self.costs.stacks += 1;
                self.costs.frames += frames.len() as u64 - u64::from(truncated);
                self.costs.truncated += u64::from(truncated);
                self.costs.copied_bytes += capture.snapshot.stack.len() as u64;
                frames
            }
        };
        self.new_nodes.clear();
        *slot = image.stacks.intern(&frames, &mut self.new_nodes);
        for node in &self.new_nodes {
            let module = image
                .modules
                .iter()
                .rposition(|(_, start, end, _)| (*start..*end).contains(&node.address));
            image.addresses.entry(node.address).or_insert(module);
            let _ = self.output.send(Record::StackNode {
                pid,
                id: node.id,
                parent: node.parent,
                address: node.address,
            });
        }
    }

    fn track_heap(&mut self, record: &Record) {
        match *record {
            Record::Alloc {
                pid, address, size, ..
            } if address != 0 => self.remember_block(pid, address, size),
            Record::Realloc {
                pid,
                old_address,
                new_address,
                size,
                ..
            } => {
                if new_address != 0 || size == 0 {
                    self.forget_block(pid, old_address);
                }
                if new_address != 0 {
                    self.remember_block(pid, new_address, size);
                }
            }
            Record::Free { pid, address, .. } => self.forget_block(pid, address),
            _ => {}
        }
    }

    fn remember_block(&mut self, pid: u32, address: u64, size: u64) {
        // A block at an address already live (its free was not seen) replaces it.
        self.forget_block(pid, address);
        self.live_blocks
            .entry(pid)
            .or_default()
            .insert(address, size);
        self.peaks.add(pid, size);
        self.stats
            .live_bytes
            .fetch_add(size as i64, Ordering::Relaxed);
    }

    fn forget_block(&mut self, pid: u32, address: u64) {
        let removed = self
            .live_blocks
            .get_mut(&pid)
            .and_then(|blocks| blocks.remove(&address));
        if let Some(size) = removed {
            self.peaks.remove(pid, size);
            self.stats
                .live_bytes
                .fetch_sub(size as i64, Ordering::Relaxed);
        }
    }

    /// The image ended: its blocks are gone with it (an exec'd program starts afresh).
    fn forget_blocks(&mut self, pid: u32) {
        let released: u64 = self
            .live_blocks
            .remove(&pid)
            .map_or(0, |blocks| blocks.values().sum());
        self.peaks.forget(pid);
        self.stats
            .live_bytes
            .fetch_sub(released as i64, Ordering::Relaxed);
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
        for record in records {
            let _ = self.output.send(record);
        }
    }
}

/// The frames of a captured stack, caller first: the return address into the code that
/// called the allocator (or the system call wrapper's own address), then outwards. A walk
/// that stopped early ends in `TRUNCATED_FRAME`; when the copy was too short for it, the
/// thread's next copies are made larger.
/// Also returns the indices of the signal return trampolines among the frames.
fn unwind(unwinder: &Unwinder, capture: &Capture) -> (Vec<u64>, bool, Vec<usize>) {
    let mut hijacked = capture.hijacked.iter();
    let mut substitute = |address: u64| {
        if Some(address) == capture.trampoline {
            hijacked.next().copied()
        } else {
            None
        }
    };
    let stack = unwinder.unwind(&capture.snapshot, &mut substitute);
    grow_window(capture, &stack);
    let mut frames = stack.frames;
    if stack.truncated {
        frames.push(TRUNCATED_FRAME);
    }
    (frames, stack.truncated, stack.signal_frames)
}

/// Doubles the thread's copy window (up to `MAX_WINDOW`) when this walk stopped at the end
/// of a copy that the window, not the stack mapping, had cut short.
fn grow_window(capture: &Capture, stack: &Stack) {
    if stack.ran_off_copy && capture.window_limited {
        let larger = (capture.snapshot.stack.len() as u32)
            .saturating_mul(2)
            .min(MAX_WINDOW);
        capture.window.fetch_max(larger, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
