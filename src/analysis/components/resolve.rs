//! Stacks to components, once the image's symbols are known; each stack is worked out once.

use std::collections::HashMap;

use super::classify::{is_allocator_function, is_thread_creation, Classifier, UNKNOWN};
use super::ranges::Creator;
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

/// The other images of the analysis, for stacks recorded in another image than the one
/// being built (a fork child's mappings were made by its parent).
pub(in crate::analysis) struct Images<'a> {
    pub stacks: &'a HashMap<usize, ImageStacks>,
    pub exes: &'a [String],
}

pub(super) struct Resolver<'a> {
    stacks: &'a ImageStacks,
    images: Option<&'a Images<'a>>,
    /// Resolvers of the other images that own creators seen here, made when first needed.
    foreign: HashMap<usize, Resolver<'a>>,
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
            images: None,
            foreign: HashMap::new(),
            skip,
            classifier,
            heap: HashMap::new(),
            mapping: HashMap::new(),
            raw: HashMap::new(),
        }
    }

    /// Resolves creators owned by other images through `images`.
    pub fn with_images(mut self, images: &'a Images<'a>) -> Self {
        self.images = Some(images);
        self
    }

    /// What the raw frames of the call that created a range show.
    pub fn creator_raw(&mut self, creator: Creator) -> RawStack {
        match creator.owner {
            None => self.raw(creator.stack),
            Some(owner) => self
                .foreign(owner)
                .map_or(RawStack::default(), |resolver| resolver.raw(creator.stack)),
        }
    }

    /// The component of the call that created a range.
    pub fn creator_component(&mut self, creator: Creator) -> String {
        match creator.owner {
            None => self.mapping_component(creator.stack).to_string(),
            Some(owner) => self.foreign(owner).map_or(UNKNOWN.to_string(), |resolver| {
                resolver.mapping_component(creator.stack).to_string()
            }),
        }
    }

    fn foreign(&mut self, owner: usize) -> Option<&mut Resolver<'a>> {
        let images = self.images?;
        if !self.foreign.contains_key(&owner) {
            let stacks = images.stacks.get(&owner)?;
            let exe = images.exes.get(owner)?;
            let classifier = Classifier::new(self.classifier.rules(), exe, std::iter::empty());
            let resolver = Resolver::new(stacks, self.skip, classifier);
            self.foreign.insert(owner, resolver);
        }
        self.foreign.get_mut(&owner)
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
