use std::path::Path;
use std::process::Command;

use super::*;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

const PROGRAM: &str = "#include <stdlib.h>\n#include <string.h>\n\
    int main(int argc, char **argv) {\n\
        char *copy = malloc(64);\n\
        memcpy(copy, argv[0], 8);\n\
        free(copy);\n\
        return argc;\n\
    }\n";

/// Compiles `PROGRAM` with `flags` into `directory`; returns the output's path.
fn compile(directory: &Path, name: &str, flags: &[&str]) -> String {
    let source = directory.join("program.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let output = directory.join(name);
    let status = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&output)
        .arg(&source)
        .status()
        .expect("running cc");
    assert!(status.success(), "cc {flags:?} failed");
    output.to_str().unwrap().to_string()
}

/// The address `nm -D --defined-only` prints for `name`.
fn nm_dynamic_address(path: &str, name: &str) -> u64 {
    let output = Command::new("nm")
        .args(["-D", "--defined-only", path])
        .output()
        .expect("running nm");
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let symbol = fields.get(2)?.split('@').next()?;
            (symbol == name).then(|| u64::from_str_radix(fields[0], 16).unwrap())
        })
        .next()
        .unwrap_or_else(|| panic!("nm does not list {name}"))
}

fn page_down(value: u64) -> u64 {
    value & !(PAGE_SIZE - 1)
}

#[test]
fn libc_aliases_share_addresses() {
    let libc = ElfFile::open(LIBC).unwrap();
    assert!(libc.has_function_symbols());
    let names = [
        "malloc",
        "__libc_malloc",
        "free",
        "memalign",
        "aligned_alloc",
    ];
    let found = libc.find_functions(&names);
    let address_of = |name: &str| {
        let hits: Vec<&FunctionSymbol> = found.iter().filter(|hit| hit.name == name).collect();
        assert_eq!(hits.len(), 1, "{name}: {hits:?}");
        hits[0].address
    };
    assert_eq!(address_of("malloc"), address_of("__libc_malloc"));
    assert_eq!(address_of("memalign"), address_of("aligned_alloc"));
    assert_ne!(address_of("malloc"), address_of("free"));
    assert_eq!(address_of("malloc"), nm_dynamic_address(LIBC, "malloc"));
    let order: Vec<&str> = found.iter().map(|hit| hit.name.as_str()).collect();
    assert_eq!(order, names);
    assert!(found.iter().all(|hit| !hit.is_ifunc));
}

#[test]
fn libc_symbolizes_inside_malloc() {
    let libc = ElfFile::open(LIBC).unwrap();
    let malloc = libc.find_functions(&["malloc"])[0].address;
    assert_eq!(libc.symbolize(malloc + 5), Some(("malloc".to_string(), 5)));
    assert!(
        libc.has_interpreter(),
        "libc.so.6 can be run, so it has PT_INTERP"
    );
    assert!(libc.build_id().is_some_and(|id| !id.is_empty()));
}

#[test]
fn static_binary_has_symtab_and_ifunc_slots() {
    let directory = tempfile::tempdir().unwrap();
    let path = compile(directory.path(), "static", &["-O1", "-static"]);
    let program = ElfFile::open(&path).unwrap();
    check_executable(&path).unwrap();
    assert!(!program.has_interpreter());
    assert_eq!(program.file_type(), elf::ET_EXEC);

    let found = program.find_functions(&["malloc", "__libc_malloc"]);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].address, found[1].address);

    let memcpy = program.find_functions(&["memcpy"]);
    let resolver = memcpy
        .iter()
        .find(|hit| hit.is_ifunc)
        .expect("memcpy IFUNC");
    let slots = program.ifunc_slots(resolver.address);
    assert!(!slots.is_empty());
    assert!(program.ifunc_slots(found[0].address).is_empty());
}

#[test]
fn stripped_static_binary_has_no_function_symbols() {
    let directory = tempfile::tempdir().unwrap();
    let path = compile(directory.path(), "stripped", &["-static"]);
    let status = Command::new("strip").arg(&path).status().unwrap();
    assert!(status.success());
    let program = ElfFile::open(&path).unwrap();
    assert!(!program.has_function_symbols());
    assert!(program.find_functions(&["malloc"]).is_empty());
    assert_eq!(program.symbolize(program.entry()), None);
}

#[test]
fn pie_load_bias_follows_the_mapping() {
    let directory = tempfile::tempdir().unwrap();
    let path = compile(directory.path(), "pie", &["-pie", "-fPIE"]);
    let program = ElfFile::open(&path).unwrap();
    assert!(program.has_interpreter());
    assert_eq!(program.file_type(), elf::ET_DYN);
    let map_start = 0x5555_5555_4000;
    let first = program.load_segments()[0];
    assert_eq!(
        program.load_bias(map_start, page_down(first.offset)),
        Some(map_start - first.virtual_address)
    );
    // The mappings of every segment, including ones whose p_offset is not page aligned
    // and which may share a file page with the previous segment.
    let bias = map_start - first.virtual_address;
    let mappings: Vec<(u64, u64)> = program
        .load_segments()
        .iter()
        .map(|segment| {
            (
                bias + page_down(segment.virtual_address),
                page_down(segment.offset),
            )
        })
        .collect();
    for &(start, offset) in &mappings {
        assert!(program.load_bias_candidates(start, offset).contains(&bias));
    }
    assert_eq!(program.module_load_bias(&mappings), Some(bias));
    let code = program.find_functions(&["main"])[0].address;
    let code_segment = program
        .load_segments()
        .iter()
        .find(|segment| {
            (segment.virtual_address..segment.virtual_address + segment.file_size).contains(&code)
        })
        .unwrap();
    let code_start = bias + page_down(code_segment.virtual_address);
    assert_eq!(
        program.load_bias(code_start, page_down(code_segment.offset)),
        Some(bias)
    );
    assert_eq!(program.load_bias(map_start, 0x1000_0000), None);
}

#[test]
fn non_pie_load_bias_is_zero() {
    let directory = tempfile::tempdir().unwrap();
    let path = compile(directory.path(), "nopie", &["-no-pie"]);
    let program = ElfFile::open(&path).unwrap();
    assert_eq!(program.file_type(), elf::ET_EXEC);
    for segment in program.load_segments() {
        let start = page_down(segment.virtual_address);
        assert_eq!(program.load_bias(start, page_down(segment.offset)), Some(0));
    }
}

#[inline(never)]
fn symbolize_target() -> u64 {
    std::hint::black_box(42)
}

#[test]
fn symbolizes_own_code_through_the_maps() {
    let executable = std::env::current_exe().unwrap();
    let executable = executable.to_str().unwrap();
    let maps = crate::proc::maps::read_maps(std::process::id() as i32).unwrap();
    let program = ElfFile::open(executable).unwrap();
    // Includes any extra mapping of the file, such as the one std's backtrace code makes.
    let mappings: Vec<(u64, u64)> = maps
        .iter()
        .filter(|entry| entry.file_path() == Some(executable))
        .map(|entry| (entry.start, entry.offset))
        .collect();
    let bias = program.module_load_bias(&mappings).unwrap();
    let (code_start, code_offset) = mappings[0];
    assert_eq!(program.load_bias(code_start, code_offset), Some(bias));
    let target = symbolize_target as fn() -> u64 as usize as u64;
    let (name, offset) = program.symbolize(target - bias).unwrap();
    assert!(name.contains("symbolize_target"), "{name}");
    assert_eq!(offset, 0);
}

#[test]
fn reads_the_build_id() {
    let directory = tempfile::tempdir().unwrap();
    let path = compile(
        directory.path(),
        "id",
        &["-Wl,--build-id=0x0123456789abcdef"],
    );
    let program = ElfFile::open(&path).unwrap();
    let expected = vec![0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
    assert_eq!(program.build_id(), Some(expected));
}

#[test]
fn object_file_is_not_an_executable() {
    let directory = tempfile::tempdir().unwrap();
    let path = compile(directory.path(), "program.o", &["-c"]);
    assert!(ElfFile::open(&path).is_ok());
    assert!(matches!(check_executable(&path), Err(Error::Elf { .. })));
}

/// An ELF header with the given class and machine and no program or section headers.
fn elf_header(class: u8, machine: u16) -> Vec<u8> {
    let mut header = vec![0x7f, b'E', b'L', b'F', class, 1, 1, 0];
    header.resize(16, 0);
    header.extend(2u16.to_le_bytes()); // ET_EXEC
    header.extend(machine.to_le_bytes());
    header.extend(1u32.to_le_bytes()); // EV_CURRENT
    let (word, header_size, program_header_size, section_header_size) = if class == 1 {
        (4, 52u16, 32u16, 40u16)
    } else {
        (8, 64, 56, 64)
    };
    header.resize(header.len() + 3 * word + 4, 0); // entry, phoff, shoff, flags
    for value in [
        header_size,
        program_header_size,
        0,
        section_header_size,
        0,
        0,
    ] {
        header.extend(value.to_le_bytes());
    }
    assert_eq!(header.len(), usize::from(header_size));
    header
}

fn write_temporary(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    file
}

#[test]
fn rejects_32_bit_elf() {
    let file = write_temporary(&elf_header(1, elf::EM_386));
    let path = file.path().to_str().unwrap();
    match check_executable(path) {
        Err(Error::UnsupportedExecutable { reason, .. }) => assert!(reason.contains("32-bit")),
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn rejects_other_machines() {
    let file = write_temporary(&elf_header(2, elf::EM_AARCH64));
    match ElfFile::open(file.path().to_str().unwrap()) {
        Err(Error::UnsupportedExecutable { reason, .. }) => {
            assert_eq!(reason, "ELF for machine AArch64")
        }
        other => panic!("{:?}", other.err()),
    }
    match check_executable(file.path().to_str().unwrap()) {
        Err(Error::UnsupportedExecutable { reason, .. }) => {
            assert_eq!(reason, "ELF for machine AArch64")
        }
        other => panic!("{:?}", other.err()),
    }
    let file = write_temporary(&elf_header(2, elf::EM_X86_64));
    check_executable(file.path().to_str().unwrap()).unwrap();
    // A cut file header is not ELF.
    let cut = write_temporary(&elf_header(2, elf::EM_X86_64)[..40]);
    assert!(matches!(
        check_executable(cut.path().to_str().unwrap()),
        Err(Error::Elf { .. })
    ));
    let minimal = ElfFile::open(file.path().to_str().unwrap()).unwrap();
    assert!(!minimal.has_function_symbols());
    assert_eq!(minimal.load_bias(0x400000, 0), None);
}

#[test]
fn rejects_text_and_missing_files() {
    let file = write_temporary(b"#!/bin/sh\necho hello\n");
    match ElfFile::open(file.path().to_str().unwrap()) {
        Err(Error::Elf { message, .. }) => assert_eq!(message, "not an ELF file"),
        other => panic!("{:?}", other.err()),
    }
    let missing = ElfFile::open("/nonexistent/program");
    assert!(matches!(missing, Err(Error::Io { .. })));
}
