//! Every allocator symbol of a static glibc and a static musl program built here, relocated
//! 64 KiB below its entry and checked by decoding the result.

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

use super::check_relocated;
use crate::breakpoints::test_programs::build_static;
use crate::hooks::relocate::{relocate_entry, Refusal};
use crate::platform::allocators::ALLOCATOR_SYMBOLS;

const GLIBC_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
int main(void) {
    void *p = malloc(10); free(p); p = calloc(1, 2); p = realloc(p, 5);
    p = reallocarray(p, 2, 3); if (posix_memalign(&p, 16, 16)) return 1;
    p = aligned_alloc(16, 16); p = memalign(16, 16); p = valloc(16); p = pvalloc(16);
    return 0;
}
"#;

/// musl has no pvalloc.
const MUSL_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
int main(void) {
    void *p = malloc(10); free(p); p = calloc(1, 2); p = realloc(p, 5);
    p = reallocarray(p, 2, 3); if (posix_memalign(&p, 16, 16)) return 1;
    p = aligned_alloc(16, 16); p = memalign(16, 16); p = valloc(16);
    return 0;
}
"#;

/// Where the code page is assumed to lie: close enough for every displacement to change
/// and still reach.
const PAGE_DISTANCE: u64 = 0x1_0000;

/// (name, address, the function's bytes) of every allocator symbol in .symtab.
fn allocator_functions(path: &Path) -> Vec<(String, u64, Vec<u8>)> {
    let data = std::fs::read(path).expect("readable program");
    let file = object::File::parse(&*data).expect("parsable program");
    let names: Vec<&str> = ALLOCATOR_SYMBOLS
        .iter()
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    let mut found = Vec::new();
    for symbol in file.symbols() {
        let Ok(name) = symbol.name() else { continue };
        if !names.contains(&name) || !symbol.is_definition() || symbol.size() == 0 {
            continue;
        }
        let address = symbol.address();
        let section = file
            .sections()
            .find(|section| {
                (section.address()..section.address() + section.size()).contains(&address)
            })
            .expect("function inside a section");
        let bytes = section.data().expect("section data");
        let start = (address - section.address()) as usize;
        let end = start + symbol.size() as usize;
        found.push((name.to_string(), address, bytes[start..end].to_vec()));
    }
    found.sort();
    found
}

/// Relocates every function of `path`, checks the relocated ones, and returns the others
/// with why each was refused (a forwarder by the name of the function it jumps to).
fn relocate_all(label: &str, path: &Path) -> Vec<(String, String)> {
    let functions = allocator_functions(path);
    assert!(functions.iter().any(|(name, _, _)| name == "malloc"));
    let mut refused = Vec::new();
    for (name, entry, bytes) in functions {
        let at = entry - PAGE_DISTANCE;
        match relocate_entry(&bytes, entry, at) {
            Ok(relocation) => {
                let rewritten = check_relocated(&bytes, entry, at, &relocation);
                eprintln!(
                    "{label} {name}: offset {} length {} original {:02x?} rewritten {rewritten:?}",
                    relocation.patch.offset, relocation.patch.length, relocation.patch.original
                );
            }
            Err(refusal) => {
                eprintln!(
                    "{label} {name}: {refusal} ({:02x?})",
                    &bytes[..bytes.len().min(16)]
                );
                let reason = match refusal {
                    Refusal::Forwarder {
                        target: Some(target),
                        ..
                    } => format!("forwards to {}", global_name_at(path, target)),
                    other => other.to_string(),
                };
                refused.push((name, reason));
            }
        }
    }
    refused
}

/// The first (by name) global function symbol at `address`.
fn global_name_at(path: &Path, address: u64) -> String {
    let data = std::fs::read(path).expect("readable program");
    let file = object::File::parse(&*data).expect("parsable program");
    let mut names: Vec<String> = file
        .symbols()
        .filter(|symbol| symbol.address() == address && symbol.is_global())
        .filter_map(|symbol| symbol.name().ok().map(str::to_string))
        .collect();
    names.sort();
    names
        .into_iter()
        .next()
        .expect("a global symbol at the target")
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(name, reason)| (name.to_string(), reason.to_string()))
        .collect()
}

#[test]
fn static_glibc_allocator_entries_relocate() {
    let Some((_directory, program)) = build_static("gcc", GLIBC_PROGRAM) else {
        return;
    };
    let refused = relocate_all("gcc -static", &program);
    assert_eq!(refused, pairs(&[]));
}

#[test]
fn static_musl_allocator_entries_relocate() {
    let Some((_directory, program)) = build_static("musl-gcc", MUSL_PROGRAM) else {
        return;
    };
    let refused = relocate_all("musl-gcc -static", &program);
    // musl's entries that only jump to the implementation: the engine probes them with int3.
    let expected = pairs(&[
        ("__libc_malloc", "forwards to __libc_malloc_impl"),
        ("free", "forwards to __libc_free"),
        ("malloc", "forwards to __libc_malloc_impl"),
        ("memalign", "forwards to aligned_alloc"),
        ("realloc", "forwards to __libc_realloc"),
    ]);
    assert_eq!(refused, expected);
}
