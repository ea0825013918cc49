//! Stacks to components, once the image's symbols are known; each stack is worked out once.

use std::collections::HashMap;

use super::classify::{is_allocator_function, is_thread_creation, Classifier};
use crate::analysis::sites::{kept_frames, ImageStacks};
use crate::analysis::SkipFrames;
use crate::trace::stacks::StackId;

/// What the raw frames of a mapping call's stack (nothing skipped) show about it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RawStack {
    /// Made from inside a probed allocator (glibc's arenas, large blocks).
    pub allocator: bool,
    /// Made while creating a thread (its stack).
    pub thread: bool,
    /// Made by the dynamic linker mapping a module (its zero-filled data, `.bss`).
    pub loader: bool,
}

pub(super) struct Resolver<'a> {
    stacks: &'a ImageStacks,
    skip: &'a SkipFrames,
    pub classifier: Classifier<'a>,
    heap: HashMap<StackId, String>,
    mapping: HashMap<StackId, String>,
    raw: HashMap<StackId, RawStack>,
}

impl<'a> Resolver<'a> {
    pub fn new(stacks: &'a ImageStacks, skip: &'a SkipFrames, classifier: Classifier<'a>) -> Self {
        Resolver {
            stacks,
            skip,
            classifier,
            heap: HashMap::new(),
            mapping: HashMap::new(),
            raw: HashMap::new(),
        }
    }

    /// The component of an allocation stack, from the frames its call site shows.
    pub fn heap_component(&mut self, stack: StackId) -> &str {
        let (stacks, skip, classifier) = (self.stacks, self.skip, &self.classifier);
        self.heap.entry(stack).or_insert_with(|| {
            let skips = |function: &str| skip.skips_heap_frame(function);
            classifier.frames(&kept_frames(stack, stacks, &skips).1)
        })
    }

    /// The component of a mapping call's stack, from the frames its mapping site shows.
    pub fn mapping_component(&mut self, stack: StackId) -> &str {
        let (stacks, skip, classifier) = (self.stacks, self.skip, &self.classifier);
        self.mapping.entry(stack).or_insert_with(|| {
            let skips = |function: &str| skip.skips_mapping_frame(function);
            classifier.frames(&kept_frames(stack, stacks, &skips).1)
        })
    }

    pub fn raw(&mut self, stack: StackId) -> RawStack {
        let stacks = self.stacks;
        *self.raw.entry(stack).or_insert_with(|| {
            let frames = kept_frames(stack, stacks, &|_| false).1;
            RawStack {
                allocator: frames
                    .iter()
                    .any(|frame| is_allocator_function(&frame.function)),
                thread: frames
                    .iter()
                    .any(|frame| is_thread_creation(&frame.function)),
                loader: frames
                    .iter()
                    .any(|frame| frame.function.starts_with("_dl_map")),
            }
        })
    }
}
