//! Who holds one mapping of a smaps snapshot.

use std::collections::BTreeSet;

use super::classify::{LIBC, MEMSUP, SHM, STACKS, UNKNOWN};
use super::resolve::Resolver;
use super::tracker::PendingMapping;
use crate::platform::libraries::LibraryKind;

/// A whole mapping's holder, or an allocator arena to split by the live blocks inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holder {
    Component(String),
    Arena,
}

/// What is known of the image beside the mapping itself.
pub(super) struct ImageFacts<'a> {
    pub scratch_pages: &'a [u64],
    /// Files the image loaded as modules, and files mapped executable in the same snapshot.
    pub modules: &'a BTreeSet<String>,
    pub executable_files: &'a BTreeSet<&'a str>,
}

pub(super) fn holder(
    mapping: &PendingMapping,
    facts: &ImageFacts,
    resolver: &mut Resolver,
) -> Holder {
    let component = |name: &str| Holder::Component(name.to_string());
    let path = mapping.path.as_str();
    let inside = |address: u64| mapping.start <= address && address < mapping.end;
    if facts.scratch_pages.iter().any(|&page| inside(page)) {
        return component(MEMSUP);
    }
    // The thread's own stack pointer says so, whoever mapped it and whether or not that
    // call's stack could be walked; not for a stack inside the heap (a malloc'd stack, a
    // coroutine's), whose mapping holds blocks of its own.
    if mapping.thread_stack && path != "[heap]" && mapping.live.is_empty() {
        return component(STACKS);
    }
    if path == "[heap]" {
        return Holder::Arena;
    }
    if path.starts_with("[stack") {
        return component(STACKS);
    }
    if path.starts_with('[') && LibraryKind::of(path) == LibraryKind::KernelPseudoFile {
        return component(LIBC);
    }
    // MAP_SHARED|MAP_ANONYMOUS memory shows as "/dev/zero (deleted)": anonymous, not a file.
    let file_backed = !path.is_empty() && !path.starts_with('[') && !path.starts_with("/dev/zero");
    if file_backed {
        return file_holder(mapping, facts, resolver);
    }
    if !mapping.live.is_empty() {
        return Holder::Arena;
    }
    // A module's zero-filled data: mapped by the kernel at exec or by the dynamic linker,
    // right after the module's last file mapping.
    if let Some(file) = &mapping.follows {
        let by_loader = match mapping.creator {
            Some(creator) => resolver.creator_raw(creator).loader,
            None => true,
        };
        if by_loader
            && (facts.modules.contains(file) || facts.executable_files.contains(file.as_str()))
        {
            return Holder::Component(resolver.classifier.module(file));
        }
    }
    let Some(creator) = mapping.creator else {
        return component(UNKNOWN);
    };
    let raw = resolver.creator_raw(creator);
    if raw.allocator {
        return Holder::Arena;
    }
    if raw.thread {
        return component(STACKS);
    }
    let name = resolver.creator_component(creator);
    if creator.shared && name == UNKNOWN {
        return component(SHM);
    }
    Holder::Component(name)
}

fn file_holder(mapping: &PendingMapping, facts: &ImageFacts, resolver: &mut Resolver) -> Holder {
    let path = mapping.path.as_str();
    // A user rule names any file, data files and shared memory included.
    if let Some(name) = resolver.classifier.user_component(path) {
        return Holder::Component(name);
    }
    let shared_memory = ["/SYSV", "/dev/shm/", "/memfd:"]
        .iter()
        .any(|prefix| path.starts_with(prefix));
    let creator_component = |resolver: &mut Resolver| {
        let creator = mapping.creator?;
        let name = resolver.creator_component(creator);
        (name != UNKNOWN).then_some(name)
    };
    let name = if shared_memory {
        creator_component(resolver).unwrap_or_else(|| SHM.to_string())
    } else if facts.modules.contains(path) || facts.executable_files.contains(path) {
        resolver.classifier.module(path)
    } else {
        creator_component(resolver).unwrap_or_else(|| UNKNOWN.to_string())
    };
    Holder::Component(name)
}
