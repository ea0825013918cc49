//! Readable names for mangled C++ and Rust symbols.
//!
//! Rust is tried first: a legacy Rust name is a valid C++ name too (`_ZN...E`), and only
//! rustc-demangle knows to drop its `::h<hash>` element. rustc-demangle refuses C++ names
//! that carry a parameter list (anything after the closing `E` other than a `.suffix`), so
//! those go on to cpp_demangle. A C++ name without parameters (a variable) may be printed
//! by rustc-demangle, which gives the same text.

use std::fmt::Write;

/// The demangled form of `name`: C++ as `c++filt` prints it (full signature), Rust without
/// the hash; any other name (C, or a mangling we cannot read) unchanged.
pub fn demangle(name: &str) -> String {
    if let Some(rust) = demangle_rust(name) {
        return rust;
    }
    if let Some(cpp) = demangle_cpp(name) {
        return cpp;
    }
    name.to_string()
}

/// Rust legacy (`_ZN...17h<hash>E`) and v0 (`_R...`) names, printed with `{:#}`, which
/// leaves out the hash and the crate disambiguators.
fn demangle_rust(name: &str) -> Option<String> {
    let looks_rust = ["_ZN", "__ZN", "_R", "__R"]
        .iter()
        .any(|prefix| name.starts_with(prefix));
    if !looks_rust {
        return None;
    }
    let demangled = rustc_demangle::try_demangle(name).ok()?;
    let mut text = String::new();
    write!(text, "{demangled:#}").ok()?;
    Some(text)
}

/// Itanium C++ names, with cpp_demangle's default options (parameters and return types
/// included, as c++filt shows them).
fn demangle_cpp(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    symbol.demangle().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected texts are what binutils' c++filt prints for these names, without the
    // `::h<hash>` element or the `[disambiguator]` of v0 crate roots.
    #[test]
    fn rust_legacy_names_lose_the_hash() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h5e1ed8a1d1dd8f0fE"),
            "core::fmt::write"
        );
        assert_eq!(
            demangle("_ZN5alloc5alloc15exchange_malloc17h2b9d3f7a1c0e4b6dE"),
            "alloc::alloc::exchange_malloc"
        );
        // Escaped characters and LLVM's `.llvm.N` suffix.
        assert_eq!(
            demangle("_ZN71_$LT$Test$u20$$u2b$$u20$$u27$static$u20$as$u20$foo..Bar$LT$Test$GT$$GT$3bar17h930b740aa94f1d3aE"),
            "<Test + 'static as foo::Bar<Test>>::bar"
        );
    }

    #[test]
    fn rust_v0_names_lose_the_disambiguators() {
        assert_eq!(
            demangle("_RNvNtCs1234_7mycrate7storage8allocate"),
            "mycrate::storage::allocate"
        );
        assert_eq!(
            demangle("_RNvMNtCs1234_7mycrate6bufferINtB2_6BufferhE3new"),
            "<mycrate::buffer::Buffer<u8>>::new"
        );
    }

    #[test]
    fn cpp_names_keep_their_signature() {
        assert_eq!(demangle("_ZN2ns3fooEv"), "ns::foo()");
        assert_eq!(
            demangle("_ZN7storage10make_arrayIdEEPT_m"),
            "double* storage::make_array<double>(unsigned long)"
        );
    }

    #[test]
    fn other_names_are_unchanged() {
        assert_eq!(demangle("malloc"), "malloc");
        assert_eq!(demangle("_Znot valid"), "_Znot valid");
        assert_eq!(demangle(""), "");
    }
}
