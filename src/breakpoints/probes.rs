//! Which functions memsup probes, by symbol name. Every defined symbol with one of these names
//! in any module (libc.so, a static executable, musl, jemalloc, tcmalloc, mimalloc) is probed;
//! names at one address share one breakpoint, recorded under the first kind listed.

use crate::trace::format::{AllocFunction, MapCall};

pub const ALLOCATOR_SYMBOLS: &[(AllocFunction, &[&str])] = &[
    (
        AllocFunction::Malloc,
        &[
            "malloc",
            "__libc_malloc",
            "__malloc",
            "__libc_malloc_impl",
            "je_malloc",
            "tc_malloc",
            "mi_malloc",
        ],
    ),
    (
        AllocFunction::Calloc,
        &[
            "calloc",
            "__libc_calloc",
            "je_calloc",
            "tc_calloc",
            "mi_calloc",
        ],
    ),
    (
        AllocFunction::Realloc,
        &[
            "realloc",
            "__libc_realloc",
            "je_realloc",
            "tc_realloc",
            "mi_realloc",
        ],
    ),
    (
        AllocFunction::Reallocarray,
        &["reallocarray", "__libc_reallocarray", "mi_reallocarray"],
    ),
    (
        AllocFunction::Free,
        &[
            "free",
            "__libc_free",
            "cfree",
            "je_free",
            "tc_free",
            "mi_free",
        ],
    ),
    (
        AllocFunction::PosixMemalign,
        &[
            "posix_memalign",
            "__posix_memalign",
            "je_posix_memalign",
            "tc_posix_memalign",
            "mi_posix_memalign",
        ],
    ),
    (
        AllocFunction::AlignedAlloc,
        &["aligned_alloc", "je_aligned_alloc", "mi_aligned_alloc"],
    ),
    (
        AllocFunction::Memalign,
        &[
            "memalign",
            "__libc_memalign",
            "je_memalign",
            "tc_memalign",
            "mi_memalign",
        ],
    ),
    (
        AllocFunction::Valloc,
        &[
            "valloc",
            "__libc_valloc",
            "je_valloc",
            "tc_valloc",
            "mi_valloc",
        ],
    ),
    (
        AllocFunction::Pvalloc,
        &["pvalloc", "__libc_pvalloc", "tc_pvalloc"],
    ),
];

/// libc's mapping wrappers, probed in attach mode (run mode sees the system calls themselves).
pub const MAPPING_SYMBOLS: &[(MapCall, &[&str])] = &[
    (MapCall::Mmap, &["mmap", "mmap64", "__mmap"]),
    (MapCall::Munmap, &["munmap", "__munmap"]),
    (MapCall::Mremap, &["mremap", "__mremap"]),
    (MapCall::Brk, &["brk", "__brk"]),
    (MapCall::Shmat, &["shmat"]),
    (MapCall::Shmdt, &["shmdt"]),
];

/// The dynamic linker calls this after every change to the list of loaded objects.
pub const RENDEZVOUS_SYMBOL: &str = "_dl_debug_state";

/// Modules whose allocator-named symbols are not the program's allocator (the dynamic
/// linker's private minimal malloc).
pub fn is_dynamic_linker(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("ld-linux") || name.starts_with("ld64.so") || name.starts_with("ld-musl")
}

/// Whether the function hands back a pointer worth a return trampoline. Free does not.
pub fn needs_return(function: AllocFunction) -> bool {
    function != AllocFunction::Free
}
