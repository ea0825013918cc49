//! Which frames are dropped from the innermost end of a stack so that a call site ends at the
//! code that asked for memory, not inside an allocator wrapper or the C library.
//!
//! Patterns are globs over the demangled function name: `*` matches any run of characters,
//! everything else matches itself, and the whole name must match. Globs, not regular
//! expressions, because C++ names are full of regex syntax (`operator new[](unsigned long)`,
//! `std::allocator<int>::allocate(unsigned long)`) that users would otherwise have to escape.
//! A name also matches without the suffix GCC gives the copies it makes of a function
//! (`sysmalloc_mmap.constprop.0`, `tcache_init.part.0`, `f(int) [clone .cold]`).

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

/// One glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        Glob(pattern.to_string())
    }

    /// The whole of `name` matches, `*` standing for any run of characters.
    pub fn matches(&self, name: &str) -> bool {
        let mut pieces = self.0.split('*');
        let first = pieces.next().unwrap_or_default();
        let Some(mut rest) = name.strip_prefix(first) else {
            return false;
        };
        let pieces: Vec<&str> = pieces.collect();
        let Some((last, middle)) = pieces.split_last() else {
            // No `*`: the prefix was the whole pattern.
            return rest.is_empty();
        };
        // Each middle piece is taken at its first occurrence: leaving as much as possible
        // for the pieces after it never loses a match.
        for piece in middle {
            match rest.find(piece) {
                Some(position) => rest = &rest[position + piece.len()..],
                None => return false,
            }
        }
        rest.ends_with(last)
    }
}

/// The frames dropped from stacks: one list for heap stacks, and for mapping stacks that
/// list plus the C library's internals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipFrames {
    heap: Vec<Glob>,
    mapping: Vec<Glob>,
}

impl Default for SkipFrames {
    fn default() -> SkipFrames {
        SkipFrames::new(true, &[])
    }
}

impl SkipFrames {
    /// The default lists (when `defaults`) plus `extra`, which apply to both kinds of stack.
    pub fn new(defaults: bool, extra: &[String]) -> SkipFrames {
        let globs = |patterns: &[&str]| -> Vec<Glob> {
            if defaults {
                patterns.iter().map(|pattern| Glob::new(pattern)).collect()
            } else {
                Vec::new()
            }
        };
        let extra: Vec<Glob> = extra.iter().map(|pattern| Glob::new(pattern)).collect();
        let mut heap = globs(DEFAULT_HEAP_PATTERNS);
        heap.extend(extra.iter().cloned());
        let mut mapping = heap.clone();
        mapping.extend(globs(DEFAULT_MAPPING_PATTERNS));
        SkipFrames { heap, mapping }
    }

    /// A frame of a heap stack named `function` is dropped.
    pub fn skips_heap_frame(&self, function: &str) -> bool {
        any_matches(&self.heap, function)
    }

    /// A frame of a mapping stack named `function` is dropped.
    pub fn skips_mapping_frame(&self, function: &str) -> bool {
        any_matches(&self.mapping, function)
    }
}

fn any_matches(globs: &[Glob], function: &str) -> bool {
    let original = without_clone_suffix(function);
    globs
        .iter()
        .any(|glob| glob.matches(function) || glob.matches(original))
}

/// The name of the function GCC copied: `name.part.0` and `name.constprop.0` (C, where a
/// name has no parameter list), or `name(args) [clone .cold]` (C++ as demangled).
fn without_clone_suffix(function: &str) -> &str {
    if let Some(position) = function.find(" [clone ") {
        return &function[..position];
    }
    if function.contains('(') {
        return function;
    }
    match function.find('.') {
        Some(position) if position > 0 => &function[..position],
        _ => function,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        let glob = Glob::new("operator new*");
        assert!(glob.matches("operator new(unsigned long)"));
        assert!(glob.matches("operator new[](unsigned long, std::nothrow_t const&)"));
        assert!(glob.matches("operator new"));
        assert!(!glob.matches("my operator new"));
        assert!(!glob.matches("operator delete(void*)"));
        let exact = Glob::new("malloc");
        assert!(exact.matches("malloc"));
        assert!(!exact.matches("malloc_consolidate"));
        assert!(!exact.matches("xmalloc"));
        let middle = Glob::new("std::*<*>::allocate*");
        assert!(middle.matches("std::allocator<int>::allocate(unsigned long)"));
        assert!(!middle.matches("std::vector<int>::push_back(int const&)"));
        assert!(Glob::new("*").matches(""));
        assert!(Glob::new("a*a").matches("aa"));
        assert!(!Glob::new("a*a").matches("a"));
        assert!(Glob::new("*_int_*").matches("_int_malloc"));
    }

    #[test]
    fn defaults_cover_wrappers_and_user_patterns_extend_or_replace_them() {
        let skip = SkipFrames::default();
        for name in [
            "operator new(unsigned long)",
            "operator new[](unsigned long)",
            "std::__new_allocator<int>::allocate(unsigned long, void const*)",
            "__gnu_cxx::new_allocator<char>::allocate(unsigned long, void const*)",
            "std::allocator_traits<std::allocator<int> >::allocate(std::allocator<int>&, unsigned long)",
            "_gfortran_allocate",
            "g_malloc0",
            "xcalloc",
            "__strdup",
        ] {
            assert!(skip.skips_heap_frame(name), "{name}");
            assert!(skip.skips_mapping_frame(name), "{name}");
        }
        assert!(!skip.skips_heap_frame("main"));
        assert!(
            !skip.skips_heap_frame("__mmap64"),
            "heap stacks keep libc's names"
        );
        for name in [
            "__GI___mmap64",
            "sysmalloc_mmap.constprop.0",
            "_int_malloc",
            "__GI___libc_malloc",
            "__brk_call",
            "tcache_init.part.0",
            "__minimal_malloc",
        ] {
            assert!(skip.skips_mapping_frame(name), "{name}");
        }
        let extended = SkipFrames::new(true, &["my_alloc*".to_string()]);
        assert!(extended.skips_heap_frame("my_alloc_zeroed"));
        assert!(extended.skips_mapping_frame("my_alloc_zeroed"));
        assert!(extended.skips_heap_frame("xmalloc"));
        let replaced = SkipFrames::new(false, &["my_alloc*".to_string()]);
        assert!(replaced.skips_heap_frame("my_alloc"));
        let clone = SkipFrames::new(false, &["grow(int)".to_string(), "x.c".to_string()]);
        assert!(clone.skips_heap_frame("grow(int) [clone .cold]"));
        assert!(
            clone.skips_heap_frame("x.c"),
            "the whole name still matches"
        );
        assert!(!replaced.skips_heap_frame("xmalloc"));
        assert!(!replaced.skips_mapping_frame("__mmap64"));
    }
}
