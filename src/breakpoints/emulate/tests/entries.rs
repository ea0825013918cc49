//! The real first instructions of the allocator and mapping entry points memsup probes, read
//! from this machine's shared glibc and from static glibc and musl programs built here. A tool
//! or library that is missing skips its test with a message rather than failing.

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::breakpoints::emulate::Emulation;
use crate::breakpoints::test_programs::build_static;

const GLIBC_SHARED: &str = "/lib/x86_64-linux-gnu/libc.so.6";

const GLIBC_ENTRIES: [&str; 20] = [
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "mmap",
    "mmap64",
    "munmap",
    "mremap",
    "sbrk",
    "brk",
    "__brk",
    "shmat",
    "shmdt",
    "__libc_malloc",
];

const GLIBC_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>
int main(void) {
    void *p = malloc(10); free(p); p = calloc(1, 2); p = realloc(p, 5);
    p = reallocarray(p, 2, 3); if (posix_memalign(&p, 16, 16)) return 1;
    p = aligned_alloc(16, 16); p = memalign(16, 16); p = valloc(16); p = pvalloc(16);
    p = mmap(0, 4096, 3, 0x22, -1, 0); munmap(p, 4096); mremap(p, 1, 2, 0);
    sbrk(0); brk(0); shmat(0, 0, 0); shmdt(0);
    return 0;
}
"#;

const MUSL_ENTRIES: [&str; 9] = [
    "malloc",
    "free",
    "calloc",
    "realloc",
    "aligned_alloc",
    "posix_memalign",
    "__libc_malloc_impl",
    "__libc_malloc",
    "__libc_free",
];

const MUSL_PROGRAM: &str = r#"
#include <stdlib.h>
int main(void) {
    void *p = malloc(10); free(p); p = calloc(1, 2); p = realloc(p, 5);
    if (posix_memalign(&p, 16, 16)) return 1; p = aligned_alloc(16, 16);
    return 0;
}
"#;

/// (name, address, first bytes) of each defined function among `names`.
fn entries(path: &Path, names: &[&str]) -> Vec<(String, u64, Vec<u8>)> {
    let data = std::fs::read(path).expect("readable ELF");
    let file = object::File::parse(&*data).expect("parsable ELF");
    let mut found = Vec::new();
    for symbol in file.dynamic_symbols().chain(file.symbols()) {
        let (Ok(name), address) = (symbol.name(), symbol.address()) else {
            continue;
        };
        if !names.contains(&name) || !symbol.is_definition() || address == 0 {
            continue;
        }
        if found
            .iter()
            .any(|(known, at, _)| known == name && *at == address)
        {
            continue;
        }
        let section = file
            .sections()
            .find(|section| {
                (section.address()..section.address() + section.size()).contains(&address)
            })
            .expect("entry inside a section");
        let bytes = section.data().expect("section data");
        let offset = (address - section.address()) as usize;
        let end = (offset + 16).min(bytes.len());
        found.push((name.to_string(), address, bytes[offset..end].to_vec()));
    }
    found
}

/// Asserts every entry is emulatable and that `required` ones were found at all.
fn assert_emulatable(label: &str, found: &[(String, u64, Vec<u8>)], required: &[&str]) {
    for name in required {
        assert!(
            found.iter().any(|(known, _, _)| known == name),
            "{label}: no {name}"
        );
    }
    for (name, address, bytes) in found {
        let emulation = Emulation::decode(bytes, *address);
        eprintln!("{label} {name} {address:#x}: {bytes:02x?} -> {emulation:?}");
        let emulation =
            emulation.unwrap_or_else(|| panic!("{label} {name}: {bytes:02x?} not emulated"));
        assert!(emulation.length() <= bytes.len());
    }
}

#[test]
fn glibc_shared_entries_are_emulatable() {
    let path = Path::new(GLIBC_SHARED);
    if !path.exists() {
        eprintln!("skipped: no {GLIBC_SHARED}");
        return;
    }
    let found = entries(path, &GLIBC_ENTRIES);
    assert_emulatable(
        "libc.so.6",
        &found,
        &["malloc", "free", "calloc", "realloc", "mmap", "munmap"],
    );
}

#[test]
fn glibc_static_entries_are_emulatable() {
    let Some((_directory, program)) = build_static("gcc", GLIBC_PROGRAM) else {
        return;
    };
    let found = entries(&program, &GLIBC_ENTRIES);
    assert_emulatable(
        "gcc -static",
        &found,
        &["malloc", "free", "calloc", "realloc", "mmap", "munmap"],
    );
}

#[test]
fn musl_static_entries_are_emulatable() {
    let Some((_directory, program)) = build_static("musl-gcc", MUSL_PROGRAM) else {
        return;
    };
    let found = entries(&program, &MUSL_ENTRIES);
    assert_emulatable(
        "musl-gcc -static",
        &found,
        &["malloc", "free", "calloc", "realloc"],
    );
}
