//! Who holds one mapping of a smaps snapshot.

use std::collections::BTreeSet;

use super::arena_free::ArenaKind;
use super::classify::{LIBC, MEMSUP, MPI, MPI_SHM, SHM, STACKS, UNKNOWN};
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
    // A thread arena's heap is the allocator's, blocks inside or not, whoever mapped it.
    if !mapping.live.is_empty() || mapping.arena == Some(ArenaKind::Thread) {
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
    let creator_component = |resolver: &mut Resolver| {
        let creator = mapping.creator?;
        let name = resolver.creator_component(creator);
        (name != UNKNOWN).then_some(name)
    };
    let mpi_named = is_mpi_shared_memory(path);
    let name = if mpi_named || is_shared_memory(path) {
        match creator_component(resolver) {
            Some(name) if name == MPI => MPI_SHM.to_string(),
            Some(name) => name,
            None if mpi_named => MPI_SHM.to_string(),
            // Seen only at an attach: in an MPI process a private SysV segment is a
            // transport's (UCX's sysv mm, MPICH's); the program's cannot be told apart.
            None if path.starts_with(PRIVATE_SYSV) && resolver.classifier.runs_mpi() => {
                MPI_SHM.to_string()
            }
            None => SHM.to_string(),
        }
    } else if facts.modules.contains(path) || facts.executable_files.contains(path) {
        resolver.classifier.module(path)
    } else {
        creator_component(resolver).unwrap_or_else(|| UNKNOWN.to_string())
    };
    Holder::Component(name)
}

/// A System V segment of key IPC_PRIVATE, as /proc/PID/maps names it.
const PRIVATE_SYSV: &str = "/SYSV00000000";

/// Shared memory by its path: System V, POSIX (`/dev/shm`) and memfd.
fn is_shared_memory(path: &str) -> bool {
    ["/SYSV", "/dev/shm/", "/memfd:"]
        .iter()
        .any(|prefix| path.starts_with(prefix))
}

/// File name prefixes of MPI shared-memory transports: Open MPI's vader and sm BTLs and its
/// shmem framework, UCX's POSIX mm, MPICH's bootstrap segment, PSM's.
const MPI_SHARED_MEMORY_FILES: &[&str] = &[
    "vader_segment.",
    "sm_segment.",
    "open_mpi_shmem",
    "ucx_shm_posix_",
    "mpich_shar_tmp",
    "psm_shm.",
    "psm2_shm.",
];

/// A segment an MPI stack names as its own: a transport file, or anything mapped from an
/// Open MPI session directory (`/tmp/ompi.HOST.UID/...`, PMIx's `pmix_dstor_*` stores).
pub(super) fn is_mpi_shared_memory(path: &str) -> bool {
    let file = super::classify::file_name(path);
    MPI_SHARED_MEMORY_FILES
        .iter()
        .any(|prefix| file.starts_with(prefix))
        || path.contains("/pmix_dstor_")
        || path
            .rsplit_once('/')
            .is_some_and(|(directory, _)| directory.split('/').any(|p| p.starts_with("ompi.")))
}
