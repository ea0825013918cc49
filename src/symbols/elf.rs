//! The symbols and headers of one ELF file, parsed with `object`.
//!
//! Everything memsup needs is copied out at `parse`, so the file's bytes are not borrowed.

use std::io::Read;

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader, Sym};
use object::{Endianness, Object};

use super::functions::{FunctionTable, RawFunction};
use crate::error::{Error, Result};

/// A function symbol (from .symtab, else .dynsym).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSymbol {
    pub name: String,
    /// ELF virtual address (add the load bias for the runtime address).
    pub address: u64,
    pub size: u64,
    /// STT_GNU_IFUNC: `address` is the resolver, not the function.
    pub is_ifunc: bool,
}

/// A PT_LOAD program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    pub offset: u64,
    pub virtual_address: u64,
    pub file_size: u64,
}

/// A GOT slot the dynamic linker fills with the result of an IFUNC resolver.
#[derive(Debug, Clone, Copy)]
struct IfuncRelocation {
    slot: u64,
    resolver: u64,
}

/// A loaded ELF file.
pub struct ElfFile {
    path: String,
    file_type: u16,
    entry: u64,
    has_interpreter: bool,
    load_segments: Vec<LoadSegment>,
    functions: FunctionTable,
    ifunc_relocations: Vec<IfuncRelocation>,
    build_id: Option<Vec<u8>>,
}

const PAGE_SIZE: u64 = 0x1000;
/// `e_ident[EI_CLASS]`.
const ELF_CLASS_INDEX: usize = 4;
/// An ELF64 file header's size.
const FILE_HEADER_SIZE: usize = std::mem::size_of::<elf::FileHeader64<Endianness>>();

impl ElfFile {
    /// Reads and parses `path`. Module files of a recording come from its
    /// `module::ModuleStore` instead, which reads each once.
    pub fn open(path: &str) -> Result<ElfFile> {
        let data = std::fs::read(path).map_err(|source| Error::io(path, source))?;
        ElfFile::parse(path, &data)
    }

    /// Parses `data`, the contents of `path`. Fails with `Error::UnsupportedExecutable` for
    /// 32-bit or non-x86-64 files and `Error::Elf` for anything that is not ELF.
    pub fn parse(path: &str, data: &[u8]) -> Result<ElfFile> {
        // The machine is checked on the bare header, so that a foreign file whose other
        // headers `object` cannot read is still reported as unsupported.
        check_file_header(path, data)?;
        let parse_error = |error: object::Error| elf_error(path, error);
        let file = ElfFile64::<Endianness>::parse(data).map_err(parse_error)?;
        let endian = file.endian();
        let program_headers = file.elf_program_headers();
        Ok(ElfFile {
            path: path.to_string(),
            file_type: file.elf_header().e_type(endian),
            entry: file.entry(),
            has_interpreter: program_headers
                .iter()
                .any(|header| header.p_type(endian) == elf::PT_INTERP),
            load_segments: load_segments(program_headers, endian),
            functions: FunctionTable::new(read_functions(&file)),
            ifunc_relocations: read_ifunc_relocations(&file),
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// `e_type`: `ET_EXEC` for non-PIE executables, `ET_DYN` for PIEs and libraries.
    pub fn file_type(&self) -> u16 {
        self.file_type
    }

    /// `e_entry`, an ELF virtual address.
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The NT_GNU_BUILD_ID note, if any.
    pub fn build_id(&self) -> Option<Vec<u8>> {
        self.build_id.clone()
    }

    pub fn load_segments(&self) -> &[LoadSegment] {
        &self.load_segments
    }

    /// Has a PT_INTERP (dynamically linked).
    pub fn has_interpreter(&self) -> bool {
        self.has_interpreter
    }

    /// Defined function symbols with one of `names` (.symtab and .dynsym, versions stripped:
    /// `malloc@@GLIBC_2.2.5` matches `malloc`).
    pub fn find_functions(&self, names: &[&str]) -> Vec<FunctionSymbol> {
        self.functions.find(names)
    }

    /// Defined function symbols whose name `accept`s (the MPI entry points).
    pub fn find_functions_matching(&self, accept: impl Fn(&str) -> bool) -> Vec<FunctionSymbol> {
        self.functions.find_matching(accept)
    }

    /// Whether the file has any function symbol at all (false for a stripped static binary).
    pub fn has_function_symbols(&self) -> bool {
        !self.functions.is_empty()
    }

    /// Load bias of a mapping of this file at `map_start` with file offset `map_offset`:
    /// `map_start - (p_vaddr of the PT_LOAD containing map_offset, adjusted to the mapping)`.
    ///
    /// When two segments start in the same file page (e.g. .rodata and .data), a mapping of
    /// that page is ambiguous: for ET_EXEC the candidate giving 0 wins, otherwise the later
    /// segment. `module_load_bias` resolves this from all of a module's mappings.
    pub fn load_bias(&self, map_start: u64, map_offset: u64) -> Option<u64> {
        let candidates = self.load_bias_candidates(map_start, map_offset);
        if self.file_type == elf::ET_EXEC && candidates.contains(&0) {
            return Some(0);
        }
        candidates.first().copied()
    }

    /// Every bias `map_start`/`map_offset` is consistent with, later segments first.
    pub fn load_bias_candidates(&self, map_start: u64, map_offset: u64) -> Vec<u64> {
        let mut candidates: Vec<u64> = self
            .load_segments
            .iter()
            .rev()
            .filter(|segment| {
                // p_offset need not be page aligned; the mapping starts at its page.
                segment.file_size > 0
                    && segment.offset & !(PAGE_SIZE - 1) <= map_offset
                    && map_offset < segment.offset.saturating_add(segment.file_size)
            })
            .map(|segment| {
                let mapped_address = segment
                    .virtual_address
                    .wrapping_sub(segment.offset.wrapping_sub(map_offset));
                map_start.wrapping_sub(mapped_address)
            })
            .collect();
        candidates.dedup();
        candidates
    }

    /// The bias most of `mappings` (start, file offset) agree on, the first-seen on a tie.
    /// Immune to ambiguous pages and to stray mappings of the file (e.g. a process that
    /// maps its own executable to read its debug information).
    pub fn module_load_bias(&self, mappings: &[(u64, u64)]) -> Option<u64> {
        let mut votes: Vec<(u64, usize)> = Vec::new();
        for &(map_start, map_offset) in mappings {
            for bias in self.load_bias_candidates(map_start, map_offset) {
                match votes.iter_mut().find(|(candidate, _)| *candidate == bias) {
                    Some((_, count)) => *count += 1,
                    None => votes.push((bias, 1)),
                }
            }
        }
        let most = votes.iter().map(|&(_, count)| count).max()?;
        votes
            .into_iter()
            .find(|&(_, count)| count == most)
            .map(|(bias, _)| bias)
    }

    /// The function containing ELF virtual address `address`, and the offset into it.
    pub fn symbolize(&self, address: u64) -> Option<(String, u64)> {
        self.functions.symbolize(address)
    }

    /// The size of the function that starts at ELF virtual address `address`, when its
    /// symbol gives one.
    pub fn size_of_function_at(&self, address: u64) -> Option<u64> {
        self.functions.size_of_function_at(address)
    }

    /// Addresses of GOT slots that the dynamic linker fills with the target of the IFUNC
    /// whose resolver is at ELF address `resolver` (R_X86_64_IRELATIVE with that addend, or
    /// JUMP_SLOT/GLOB_DAT relocations against the IFUNC symbol).
    pub fn ifunc_slots(&self, resolver: u64) -> Vec<u64> {
        self.ifunc_relocations
            .iter()
            .filter(|relocation| relocation.resolver == resolver)
            .map(|relocation| relocation.slot)
            .collect()
    }
}

/// Checks that `path` is an x86-64 ELF executable memsup can trace, from its file header
/// alone: a program may be tens of megabytes, read whole later only once it is mapped.
pub fn check_executable(path: &str) -> Result<()> {
    // On the heap: `object` reads the header in place, aligned.
    let mut header = Vec::with_capacity(FILE_HEADER_SIZE);
    let read = std::fs::File::open(path)
        .and_then(|file| file.take(FILE_HEADER_SIZE as u64).read_to_end(&mut header));
    read.map_err(|source| Error::io(path, source))?;
    match check_file_header(path, &header)? {
        elf::ET_EXEC | elf::ET_DYN => Ok(()),
        other => Err(Error::Elf {
            path: path.to_string(),
            message: format!("not an executable (ELF type {other})"),
        }),
    }
}

/// `Error::Elf` for what `object` could not read in `path`.
fn elf_error(path: &str, error: object::Error) -> Error {
    Error::Elf {
        path: path.to_string(),
        message: error.to_string(),
    }
}

/// Checks the identification and machine of the ELF file header at the start of `data`;
/// returns its type.
fn check_file_header(path: &str, data: &[u8]) -> Result<u16> {
    check_identification(path, data)?;
    let parse_error = |error: object::Error| elf_error(path, error);
    let header = elf::FileHeader64::<Endianness>::parse(data).map_err(parse_error)?;
    let endian = header.endian().map_err(parse_error)?;
    let machine = header.e_machine(endian);
    if machine != elf::EM_X86_64 {
        return Err(Error::UnsupportedExecutable {
            path: path.to_string(),
            reason: format!("ELF for machine {}", machine_name(machine)),
        });
    }
    Ok(header.e_type(endian))
}

/// Rejects non-ELF and 32-bit files from `e_ident` alone, before parsing anything else.
fn check_identification(path: &str, data: &[u8]) -> Result<()> {
    let elf_error = |message: &str| Error::Elf {
        path: path.to_string(),
        message: message.to_string(),
    };
    if !data.starts_with(&elf::ELFMAG) {
        return Err(elf_error("not an ELF file"));
    }
    match data.get(ELF_CLASS_INDEX) {
        Some(&elf::ELFCLASS64) => Ok(()),
        Some(&elf::ELFCLASS32) => Err(Error::UnsupportedExecutable {
            path: path.to_string(),
            reason: "32-bit ELF (ELFCLASS32)".to_string(),
        }),
        _ => Err(elf_error("invalid ELF class")),
    }
}

fn machine_name(machine: u16) -> String {
    let name = match machine {
        elf::EM_386 => "i386",
        elf::EM_ARM => "ARM",
        elf::EM_AARCH64 => "AArch64",
        elf::EM_PPC64 => "PowerPC64",
        elf::EM_RISCV => "RISC-V",
        elf::EM_S390 => "S/390",
        elf::EM_LOONGARCH => "LoongArch",
        elf::EM_SPARCV9 => "SPARC V9",
        elf::EM_MIPS => "MIPS",
        other => return format!("number {other}"),
    };
    name.to_string()
}

fn load_segments(
    headers: &[elf::ProgramHeader64<Endianness>],
    endian: Endianness,
) -> Vec<LoadSegment> {
    headers
        .iter()
        .filter(|header| header.p_type(endian) == elf::PT_LOAD)
        .map(|header| LoadSegment {
            offset: header.p_offset(endian),
            virtual_address: header.p_vaddr(endian),
            file_size: header.p_filesz(endian),
        })
        .collect()
}

/// The ELF virtual address of the defined data object `name` in the ELF file `data`: from
/// .dynsym, or .symtab in a file without one (a static executable).
pub fn data_object_address(data: &[u8], name: &str) -> Option<u64> {
    let file = ElfFile64::<Endianness>::parse(data).ok()?;
    let endian = file.endian();
    let dynamic = file.elf_dynamic_symbol_table();
    let table = if dynamic.is_empty() {
        file.elf_symbol_table()
    } else {
        dynamic
    };
    let found = table.iter().find(|symbol| {
        symbol.st_type() == elf::STT_OBJECT
            && symbol.st_shndx(endian) != elf::SHN_UNDEF
            && table.symbol_name(endian, symbol).ok() == Some(name.as_bytes())
    });
    found.map(|symbol| symbol.st_value(endian))
}

/// Defined FUNC and GNU_IFUNC symbols of .symtab, then .dynsym.
fn read_functions(file: &ElfFile64<Endianness>) -> Vec<RawFunction> {
    let endian = file.endian();
    let sections = file.elf_section_table();
    let mut functions = Vec::new();
    for table in [file.elf_symbol_table(), file.elf_dynamic_symbol_table()] {
        for (index, symbol) in table.enumerate() {
            let kind = symbol.st_type();
            if (kind != elf::STT_FUNC && kind != elf::STT_GNU_IFUNC)
                || symbol.st_shndx(endian) == elf::SHN_UNDEF
            {
                continue;
            }
            let Ok(name) = table.symbol_name(endian, symbol) else {
                continue;
            };
            // Static binaries can carry versioned names such as `memcpy@GLIBC_2.2.5`.
            let name = String::from_utf8_lossy(name);
            let name = name.split('@').next().unwrap_or_default();
            if name.is_empty() {
                continue;
            }
            let section_end = match table.symbol_section(endian, symbol, index) {
                Ok(Some(section_index)) => sections
                    .section(section_index)
                    .map(|section| section.sh_addr(endian) + section.sh_size(endian))
                    .unwrap_or(0),
                _ => 0,
            };
            functions.push(RawFunction {
                symbol: FunctionSymbol {
                    name: name.to_string(),
                    address: symbol.st_value(endian),
                    size: symbol.st_size(endian),
                    is_ifunc: kind == elf::STT_GNU_IFUNC,
                },
                section_end,
            });
        }
    }
    functions
}

/// IRELATIVE relocations and JUMP_SLOT/GLOB_DAT/64 relocations against IFUNC symbols, from
/// the loaded (SHF_ALLOC) RELA sections, i.e. those the dynamic linker (or a static
/// binary's startup code) applies.
fn read_ifunc_relocations(file: &ElfFile64<Endianness>) -> Vec<IfuncRelocation> {
    let endian = file.endian();
    let data = file.data();
    let sections = file.elf_section_table();
    let mut relocations = Vec::new();
    for section in sections.iter() {
        if section.sh_flags(endian) & u64::from(elf::SHF_ALLOC) == 0 {
            continue;
        }
        let Ok(Some((entries, link))) = section.rela(endian, data) else {
            continue;
        };
        let symbols = sections.symbol_table_by_index(endian, data, link).ok();
        for entry in entries {
            let slot = entry.r_offset(endian);
            let resolver = match entry.r_type(endian, false) {
                elf::R_X86_64_IRELATIVE => Some(entry.r_addend(endian) as u64),
                elf::R_X86_64_JUMP_SLOT | elf::R_X86_64_GLOB_DAT | elf::R_X86_64_64 => symbols
                    .as_ref()
                    .and_then(|table| table.symbol(entry.symbol(endian, false)?).ok())
                    .filter(|symbol| {
                        symbol.st_type() == elf::STT_GNU_IFUNC
                            && symbol.st_shndx(endian) != elf::SHN_UNDEF
                    })
                    .map(|symbol| symbol.st_value(endian)),
                _ => None,
            };
            if let Some(resolver) = resolver {
                relocations.push(IfuncRelocation { slot, resolver });
            }
        }
    }
    relocations
}

#[cfg(test)]
#[path = "elf_tests.rs"]
mod tests;
