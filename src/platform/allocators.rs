//! The allocator functions under every name memsup knows them by: the symbols probes are
//! planted on, the names the component classifier recognises in stacks, and the frames
//! reports drop by default from the innermost end of a stack.

use crate::trace::format::{AllocFunction, MapCall};

/// Symbol names probed per function. Every defined symbol with one of these names in any
/// module (libc.so, a static executable, musl, jemalloc, tcmalloc, mimalloc) is probed;
/// names at one address share one breakpoint, recorded under the first kind listed. The
/// first name of each is the standard one (`AllocFunction::name`).
pub const ALLOCATOR_SYMBOLS: &[(AllocFunction, &[&str])] = &[
    (
        AllocFunction::Malloc,
        &[
            "malloc",
            "__libc_malloc",
            "__malloc",
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

/// glibc's malloc internals that only the allocator functions call, as DWARF and symbol
/// tables name them once `_`, `__GI_` and `__libc_` prefixes are stripped.
const GLIBC_MALLOC_INTERNALS: &[&str] = &[
    "int_malloc",
    "int_realloc",
    "int_memalign",
    "int_free",
    "sysmalloc",
    "sysmalloc_mmap",
    "sysmalloc_mmap_fallback",
    "new_heap",
    "alloc_new_heap",
    "int_new_arena",
    "malloc_impl",
];

/// The allocator functions (and glibc's internals only they call) under any of their
/// names: `__GI___libc_malloc`, `__libc_calloc`, `_int_malloc`, `sysmalloc_mmap.constprop.0`.
pub fn is_allocator_function(function: &str) -> bool {
    let mut name = function.split('.').next().unwrap_or_default();
    loop {
        let stripped = name
            .trim_start_matches('_')
            .trim_start_matches("GI_")
            .trim_start_matches("libc_");
        if stripped == name {
            break;
        }
        name = stripped;
    }
    let standard = ALLOCATOR_SYMBOLS.iter().any(|(_, names)| names[0] == name);
    standard || GLIBC_MALLOC_INTERNALS.contains(&name)
}

/// Thread creation: glibc maps a new thread's stack from `allocate_stack`, under `pthread_create`.
pub fn is_thread_creation(function: &str) -> bool {
    let name = function.trim_start_matches('_');
    name.starts_with("pthread_create") || name.starts_with("allocate_stack")
}

/// Allocator wrappers of C++, GLib, Fortran and C programs: a heap stack passes through them
/// between the code that wanted the memory and the probed allocator function.
pub const DEFAULT_HEAP_PATTERNS: &[&str] = &[
    // Every overload of operator new / new[]; DWARF names them without parameters.
    "operator new*",
    // libstdc++'s allocators (GCC 12 renamed new_allocator to __new_allocator) and the
    // traits every container allocates through.
    "std::allocator<*",
    "std::allocator_traits<*",
    "__gnu_cxx::new_allocator<*",
    "std::__new_allocator<*",
    // The C++ runtime's allocation of a thrown exception: the site is the function that throws.
    "__cxa_allocate_exception",
    "__cxa_allocate_dependent_exception",
    "_gfortran_*",
    "g_malloc*",
    "g_realloc*",
    "g_try_malloc*",
    "g_try_realloc*",
    "xmalloc",
    "xrealloc",
    "xcalloc",
    // glibc names them __strdup / __strndup (strdup is an alias at the same address), and
    // its DWARF __GI___strdup.
    "strdup",
    "strndup",
    "__strdup",
    "__strndup",
    "__GI___strdup",
    "__GI___strndup",
];

/// The C library between a mapping system call and the code whose request caused it: the
/// system call wrappers, then glibc's and musl's malloc internals (a `malloc` that grows the
/// heap with brk or maps a large block), as the recorded stacks name them.
pub const DEFAULT_MAPPING_PATTERNS: &[&str] = &[
    // System call wrappers (glibc's internal __GI_ aliases included).
    "mmap",
    "mmap64",
    "__mmap",
    "__mmap64",
    "__GI___mmap64",
    "munmap",
    "__munmap",
    "__GI_munmap",
    "__GI___munmap",
    "mremap",
    "__mremap",
    "__GI___mremap",
    "brk",
    "__brk",
    "__GI___brk",
    "__brk_call",
    "sbrk",
    "__sbrk",
    "__GI___sbrk",
    "__glibc_morecore",
    "__default_morecore",
    // glibc malloc internals.
    "sysmalloc",
    "sysmalloc_mmap",
    "sysmalloc_mmap_fallback",
    "_int_malloc",
    "_int_realloc",
    "_int_memalign",
    "_int_free",
    "_int_free_*",
    "_mid_memalign",
    "malloc_consolidate",
    "systrim",
    "heap_trim",
    "shrink_heap",
    "new_heap",
    "alloc_new_heap",
    "grow_heap",
    "_int_new_arena",
    "arena_get2",
    "arena_get_retry",
    "tcache_init",
    "ptmalloc_init",
    "munmap_chunk",
    "mremap_chunk",
    // The dynamic linker's own allocator, used before libc's is ready.
    "__minimal_malloc",
    "__minimal_calloc",
    "__minimal_realloc",
    // The allocator entry points themselves, under their public and internal names.
    "malloc",
    "__malloc",
    "__libc_malloc",
    "__GI___libc_malloc",
    "calloc",
    "__libc_calloc",
    "realloc",
    "__libc_realloc",
    "__GI___libc_realloc",
    "reallocarray",
    "__libc_reallocarray",
    "free",
    "__libc_free",
    "__GI___libc_free",
    "memalign",
    "__libc_memalign",
    "aligned_alloc",
    "posix_memalign",
    "__posix_memalign",
    "valloc",
    "__libc_valloc",
    "pvalloc",
    "__libc_pvalloc",
    // musl's mallocng.
    "__expand_heap",
    "__malloc_alloc_meta",
    "alloc_meta",
    "alloc_group",
    "alloc_slot",
    "__libc_malloc_impl",
    "__malloc_donate",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_of_each_function_is_its_standard_name() {
        for (function, names) in ALLOCATOR_SYMBOLS {
            assert_eq!(names[0], function.name());
        }
        assert_eq!(ALLOCATOR_SYMBOLS.len(), 10);
        for (call, names) in MAPPING_SYMBOLS {
            assert_eq!(names[0], call.name());
        }
    }

    #[test]
    fn allocator_functions_are_known_under_internal_names() {
        for name in [
            "malloc",
            "__GI___libc_malloc",
            "__libc_calloc",
            "_int_malloc",
            "sysmalloc_mmap.constprop.0",
            "pvalloc",
            "__libc_malloc_impl",
        ] {
            assert!(is_allocator_function(name), "{name}");
        }
        for name in ["xmalloc", "je_malloc", "malloc_consolidate", "main", ""] {
            assert!(!is_allocator_function(name), "{name}");
        }
        assert!(is_thread_creation("pthread_create@@GLIBC_2.34"));
        assert!(is_thread_creation("__pthread_create_2_1"));
        assert!(is_thread_creation("allocate_stack.constprop.0"));
        assert!(!is_thread_creation("create_thread"));
    }
}
