//! One ELF file read from disk with `object`.

use crate::error::Result;

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

/// A loaded ELF file.
pub struct ElfFile {}

impl ElfFile {
    /// Opens and parses `path`. Fails with `Error::UnsupportedExecutable` for 32-bit or
    /// non-x86-64 files and `Error::Elf` for anything that is not ELF.
    pub fn open(path: &str) -> Result<ElfFile> {
        let _ = path;
        todo!()
    }

    /// Has a PT_INTERP (dynamically linked).
    pub fn has_interpreter(&self) -> bool {
        todo!()
    }

    /// Defined function symbols with one of `names` (.symtab and .dynsym, versions stripped:
    /// `malloc@@GLIBC_2.2.5` matches `malloc`).
    pub fn find_functions(&self, names: &[&str]) -> Vec<FunctionSymbol> {
        let _ = names;
        todo!()
    }

    /// Whether the file has any function symbol at all (false for a stripped static binary).
    pub fn has_function_symbols(&self) -> bool {
        todo!()
    }

    /// Load bias of a mapping of this file at `map_start` with file offset `map_offset`:
    /// `map_start - (p_vaddr of the PT_LOAD containing map_offset, adjusted to the mapping)`.
    pub fn load_bias(&self, map_start: u64, map_offset: u64) -> Option<u64> {
        let _ = (map_start, map_offset);
        todo!()
    }

    /// The function containing ELF virtual address `address`, and the offset into it.
    pub fn symbolize(&self, address: u64) -> Option<(String, u64)> {
        let _ = address;
        todo!()
    }

    /// Addresses of GOT slots that the dynamic linker fills with the target of the IFUNC
    /// whose resolver is at ELF address `resolver` (R_X86_64_IRELATIVE with that addend, or
    /// JUMP_SLOT/GLOB_DAT relocations against the IFUNC symbol).
    pub fn ifunc_slots(&self, resolver: u64) -> Vec<u64> {
        let _ = resolver;
        todo!()
    }
}

/// Checks that `path` is an x86-64 ELF executable memsup can trace.
pub fn check_executable(path: &str) -> Result<()> {
    let _ = path;
    todo!()
}
