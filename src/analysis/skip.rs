//! Which frames are dropped from the innermost end of a stack so that a call site ends at the
//! code that asked for memory, not inside an allocator wrapper or the C library.
//!
//! Patterns are globs over the demangled function name: `*` matches any run of characters,
//! everything else matches itself, and the whole name must match. Globs, not regular
//! expressions, because C++ names are full of regex syntax (`operator new[](unsigned long)`,
//! `std::allocator<int>::allocate(unsigned long)`) that users would otherwise have to escape.
//! A name also matches without the suffix GCC gives the copies it makes of a function
//! (`sysmalloc_mmap.constprop.0`, `tcache_init.part.0`, `f(int) [clone .cold]`).

pub use crate::platform::allocators::{DEFAULT_HEAP_PATTERNS, DEFAULT_MAPPING_PATTERNS};

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
