//! Raw stacks to interned stack ids, per process image: copies are unwound, walked frames
//! taken as they are, known stacks looked up by the id their source registered.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::symbolize::SignalFrames;
use crate::events::heap::IntegerMap;
use crate::events::stack::INTERRUPTED_MARK;
use crate::events::{CopyWindows, RawStack, StackCopy};
use crate::module::{MappedInode, ModuleStore};
use crate::trace::format::{UnwindCosts, TRUNCATED_FRAME};
use crate::trace::stacks::{StackId, StackInterner, StackNode};
use crate::unwind::{Stack, Unwinder};

/// A module of a process image: its path, the file mapped there, where, and its load bias.
#[derive(Debug, Clone)]
pub struct ModuleRange {
    pub path: String,
    pub inode: MappedInode,
    pub start: u64,
    pub end: u64,
    pub bias: u64,
}

impl ModuleRange {
    pub fn holds(&self, address: u64) -> bool {
        (self.start..self.end).contains(&address)
    }
}

/// What the interpret stage keeps per process image.
pub struct Image {
    pub modules: Vec<ModuleRange>,
    pub unwinder: Unwinder,
    stacks: StackInterner,
    /// Every address in the image's stack tree, symbolised when the image ends, with the
    /// index in `modules` of the module that held it when it was first seen (a library
    /// dlclose()d later may leave its place to another one).
    pub addresses: BTreeMap<u64, Option<usize>>,
    /// Which of them are signal frames (named at the address itself, not at `a - 1`).
    pub signal_frames: SignalFrames,
    /// Stacks a source registered by id (`EventKind::KnownStack`).
    known: IntegerMap<u64, StackId>,
}

impl Image {
    pub fn new(files: &Arc<ModuleStore>) -> Image {
        Image {
            modules: Vec::new(),
            unwinder: Unwinder::with_module_store(Arc::clone(files)),
            stacks: StackInterner::default(),
            addresses: BTreeMap::new(),
            signal_frames: SignalFrames::default(),
            known: IntegerMap::default(),
        }
    }

    /// A forked child's image: the parent's modules, a stack tree (and known stacks) of its own.
    pub fn inherit(&self) -> Image {
        Image {
            modules: self.modules.clone(),
            unwinder: self.unwinder.clone(),
            stacks: StackInterner::default(),
            addresses: BTreeMap::new(),
            signal_frames: SignalFrames::default(),
            known: IntegerMap::default(),
        }
    }

    /// Interns `frames` (caller first); the tree nodes it adds go to `new_nodes`.
    pub fn intern(&mut self, frames: &[u64], new_nodes: &mut Vec<StackNode>) -> StackId {
        new_nodes.clear();
        let id = self.stacks.intern(frames, new_nodes);
        for node in new_nodes.iter() {
            let module = self
                .modules
                .iter()
                .rposition(|module| module.holds(node.address));
            self.addresses.entry(node.address).or_insert(module);
        }
        id
    }

    /// From now on `Known(id)` names these frames in this image.
    pub fn register_known(&mut self, id: u64, frames: &[u64], new_nodes: &mut Vec<StackNode>) {
        let frames = self.take_signal_marks(frames);
        let stack = self.intern(&frames, new_nodes);
        self.known.insert(id, stack);
    }

    /// `frames` a source walked, without their `INTERRUPTED_MARK`s: each marked frame and
    /// the trampoline before it are signal frames (named at themselves).
    fn take_signal_marks(&mut self, frames: &[u64]) -> Vec<u64> {
        let mut plain = Vec::with_capacity(frames.len());
        for &frame in frames {
            if frame != TRUNCATED_FRAME && frame & INTERRUPTED_MARK != 0 {
                let interrupted = frame & !INTERRUPTED_MARK;
                if let Some(&trampoline) = plain.last() {
                    self.signal_frames.trampolines.insert(trampoline);
                }
                self.signal_frames.interrupted.insert(interrupted);
                plain.push(interrupted);
            } else {
                plain.push(frame);
            }
        }
        plain
    }
}

/// Turns the raw stacks of one thread's events into frames, counting what that cost.
pub struct StackWalk<'a> {
    pub costs: &'a mut UnwindCosts,
    pub windows: &'a CopyWindows,
    pub tid: u32,
}

impl StackWalk<'_> {
    /// The stack's id in `image`; its new tree nodes go to `new_nodes`.
    pub fn resolve(
        &mut self,
        image: &mut Image,
        stack: RawStack,
        new_nodes: &mut Vec<StackNode>,
    ) -> StackId {
        let frames = match stack {
            RawStack::Caller(caller) => return image.intern(&[caller], new_nodes),
            RawStack::Uncopied(caller) => {
                self.costs.truncated += 1;
                vec![caller, TRUNCATED_FRAME]
            }
            RawStack::Frames(frames) => image.take_signal_marks(&frames),
            RawStack::Known(id) => match image.known.get(&id) {
                Some(&stack) => {
                    new_nodes.clear();
                    return stack;
                }
                // Never registered: nothing is known of it.
                None => {
                    self.costs.truncated += 1;
                    vec![TRUNCATED_FRAME]
                }
            },
            RawStack::Copy(copy) => self.unwind_copy(image, &copy),
        };
        image.intern(&frames, new_nodes)
    }

    fn unwind_copy(&mut self, image: &mut Image, copy: &StackCopy) -> Vec<u64> {
        let started = Instant::now();
        let (frames, truncated, signal_frames) =
            unwind(&image.unwinder, copy, self.windows, self.tid);
        for index in signal_frames {
            image.signal_frames.trampolines.insert(frames[index]);
            if let Some(&interrupted) = frames.get(index + 1) {
                image.signal_frames.interrupted.insert(interrupted);
            }
        }
        let costs = &mut *self.costs;
        costs.unwind_ns += started.elapsed().as_nanos() as u64;
        costs.stacks += 1;
        costs.frames += frames.len() as u64 - u64::from(truncated);
        costs.truncated += u64::from(truncated);
        costs.copied_bytes += copy.snapshot.stack.len() as u64;
        frames
    }
}

/// The frames of a copied stack, caller first: the return address into the code that
/// called the allocator (or the system call wrapper's own address), then outwards. A walk
/// that stopped early ends in `TRUNCATED_FRAME`; when the copy was too short for it, the
/// source is told, and copies more of that thread's stack next time.
/// Also returns the indices of the signal return trampolines among the frames.
pub fn unwind(
    unwinder: &Unwinder,
    copy: &StackCopy,
    windows: &CopyWindows,
    tid: u32,
) -> (Vec<u64>, bool, Vec<usize>) {
    let mut substituted = copy.substituted.iter();
    let mut substitute = |address: u64| {
        if Some(address) == copy.substitute {
            substituted.next().copied()
        } else {
            None
        }
    };
    let stack = unwinder.unwind(&copy.snapshot, &mut substitute);
    report_short_copy(copy, &stack, windows, tid);
    let mut frames = stack.frames;
    if stack.truncated {
        frames.push(TRUNCATED_FRAME);
    }
    (frames, stack.truncated, stack.signal_frames)
}

/// Reports a walk that stopped at the end of a copy that the window, not the stack
/// mapping, had cut short.
pub fn report_short_copy(copy: &StackCopy, stack: &Stack, windows: &CopyWindows, tid: u32) {
    if stack.ran_off_copy && copy.window_limited {
        windows.ran_off_copy(tid, copy.snapshot.stack.len() as u32);
    }
}
