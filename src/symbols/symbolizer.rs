//! Names, inlined frames and file:line of call sites, from the module files on disk.
//!
//! Sources, in order: DWARF in the file itself; else DWARF in its separate debug file (by
//! build-id, else `.gnu_debuglink`); else the ELF symbol tables (the file's, then the debug
//! file's), which give the function only. The files come from a `module::ModuleStore`, so
//! the symboliser reads nothing the tracer or the unwinder already read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::debug_files::DEFAULT_DEBUG_ROOT;
use super::demangle::demangle;
use super::elf::ElfFile;
use crate::module::{DebugInfo, MappedInode, ModuleFile, ModuleStore};

/// One function at a call site: an inlined one, or the real function that contains it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymbolFrame {
    /// Demangled name; empty when DWARF covers the address but names no function and no
    /// symbol table does either.
    pub function: String,
    /// The name as the file spells it (mangled for C++ and Rust).
    pub raw_name: String,
    /// Source file (as DWARF records it, normally absolute) and position: for the innermost
    /// frame the address itself, for an outer frame the call that was inlined there.
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// Inlined into the next frame of the list (all frames but the last).
    pub inlined: bool,
}

/// A module file as the symboliser found it.
struct Module {
    /// None when the file could not be read.
    file: Option<Arc<ModuleFile>>,
    /// Why a source could not be read (the module still uses the others).
    error: Option<String>,
}

impl Module {
    fn debug_info<'a>(&'a self, store: &ModuleStore) -> Option<&'a DebugInfo> {
        let file = self.file.as_ref()?;
        Some(file.debug_info(store.debug_files()))
    }

    /// The file's symbol tables, then the separate debug file's.
    fn symbol_tables<'a>(&'a self, store: &ModuleStore) -> impl Iterator<Item = &'a ElfFile> {
        let own = self.file.as_ref().and_then(|file| file.elf().ok());
        let debug = self
            .debug_info(store)
            .and_then(|info| info.debug_symbols.as_ref());
        own.into_iter().chain(debug)
    }
}

/// Symbolises call sites of the modules of one recording.
pub struct Symbolizer {
    store: Arc<ModuleStore>,
    /// By path and mapped file: two processes may map other files at one path.
    modules: HashMap<(String, MappedInode), Module>,
}

impl Default for Symbolizer {
    fn default() -> Symbolizer {
        Symbolizer::new(DEFAULT_DEBUG_ROOT)
    }
}

impl Symbolizer {
    /// Separate debug files are searched under `debug_root` (normally `/usr/lib/debug`).
    pub fn new(debug_root: impl Into<PathBuf>) -> Symbolizer {
        Symbolizer::with_store(Arc::new(ModuleStore::with_debug_root(debug_root)))
    }

    /// A symboliser over the recording's module files.
    pub fn with_store(store: Arc<ModuleStore>) -> Symbolizer {
        Symbolizer {
            store,
            modules: HashMap::new(),
        }
    }

    /// The symbol tables of the module file at `path` (not its debug file's), None when
    /// the file cannot be read or parsed.
    pub fn elf(&mut self, path: &str) -> Option<&ElfFile> {
        self.mapped_elf(path, MappedInode::default())
    }

    /// `elf` of the file a process mapped at `path` (`ModuleStore::get_mapped`).
    pub fn mapped_elf(&mut self, path: &str, inode: MappedInode) -> Option<&ElfFile> {
        self.module(path, inode).file.as_ref()?.elf().ok()
    }

    fn module(&mut self, path: &str, inode: MappedInode) -> &Module {
        let store = &self.store;
        self.modules
            .entry((path.to_string(), inode))
            .or_insert_with(|| load_module(store, path, inode))
    }

    /// The frames at ELF virtual address `file_address` of the module file at `path` (the
    /// runtime address minus the load bias), innermost inlined function first. For a
    /// return address the call instruction before it is looked up (`address - 1`), since
    /// the return address may already belong to the next line or function.
    ///
    /// Empty when nothing is known: no DWARF covers the address and no symbol contains it
    /// (e.g. a file stripped of all symbols whose debug file is not found), or the file
    /// cannot be read (see `module_errors`).
    pub fn symbolize(
        &mut self,
        path: &str,
        file_address: u64,
        is_return_address: bool,
    ) -> Vec<SymbolFrame> {
        self.symbolize_mapped(
            path,
            MappedInode::default(),
            file_address,
            is_return_address,
        )
    }

    /// `symbolize` in the file a process mapped at `path` (`ModuleStore::get_mapped`).
    pub fn symbolize_mapped(
        &mut self,
        path: &str,
        inode: MappedInode,
        file_address: u64,
        is_return_address: bool,
    ) -> Vec<SymbolFrame> {
        let address = if is_return_address {
            file_address.saturating_sub(1)
        } else {
            file_address
        };
        let store = &self.store;
        let module = self
            .modules
            .entry((path.to_string(), inode))
            .or_insert_with(|| load_module(store, path, inode));
        let mut frames = dwarf_frames(module, store, address);
        match frames.last_mut() {
            // DWARF line info without a subprogram (e.g. hand-written assembly).
            Some(outermost) if outermost.raw_name.is_empty() => {
                if let Some(name) = symbol_table_name(module, store, address) {
                    outermost.function = demangle(&name);
                    outermost.raw_name = name;
                }
            }
            Some(_) => {}
            None => frames.extend(symbol_table_frame(module, store, address)),
        }
        frames
    }

    /// The separate debug file used for `path`, once `path` has been symbolised.
    pub fn debug_file(&self, path: &str) -> Option<&Path> {
        let key = (path.to_string(), MappedInode::default());
        let info = self.modules.get(&key)?.debug_info(&self.store)?;
        info.debug_file.as_deref()
    }

    /// Modules with a source that could not be read, and why, sorted by path.
    pub fn module_errors(&self) -> Vec<(&str, &str)> {
        let mut errors: Vec<(&str, &str)> = self
            .modules
            .iter()
            .filter_map(|((path, _), module)| Some((path.as_str(), module.error.as_deref()?)))
            .collect();
        errors.sort_unstable();
        errors
    }
}

/// The file at `path` from the store; failures leave the module with fewer sources.
fn load_module(store: &ModuleStore, path: &str, inode: MappedInode) -> Module {
    let file = match store.get_mapped(path, inode) {
        Ok(file) => file,
        Err(error) => {
            return Module {
                file: None,
                error: Some(error.to_string()),
            }
        }
    };
    let mut error = file.debug_info(store.debug_files()).error.clone();
    if let Err(elf_error) = file.elf() {
        error.get_or_insert(elf_error.to_string());
    }
    Module {
        file: Some(file),
        error,
    }
}

/// The DWARF frames at `address`; a lookup that fails is kept as the module's error.
fn dwarf_frames(module: &mut Module, store: &ModuleStore, address: u64) -> Vec<SymbolFrame> {
    // A clone of the Arc, so that the module's error can be set while DWARF is in use.
    let Some(file) = module.file.clone() else {
        return Vec::new();
    };
    let Some(dwarf) = file.debug_info(store.debug_files()).dwarf.as_ref() else {
        return Vec::new();
    };
    let dwarf = dwarf
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    dwarf.frames(address).unwrap_or_else(|error| {
        module.error.get_or_insert(format!("DWARF: {error}"));
        Vec::new()
    })
}

/// The raw name of the function containing `address` in the first symbol table that has one.
fn symbol_table_name(module: &Module, store: &ModuleStore, address: u64) -> Option<String> {
    module
        .symbol_tables(store)
        .find_map(|table| table.symbolize(address))
        .map(|(name, _offset)| name)
}

/// A frame with the function's name only, from the symbol tables.
fn symbol_table_frame(module: &Module, store: &ModuleStore, address: u64) -> Option<SymbolFrame> {
    let raw_name = symbol_table_name(module, store, address)?;
    Some(SymbolFrame {
        function: demangle(&raw_name),
        raw_name,
        file: None,
        line: None,
        column: None,
        inlined: false,
    })
}

#[cfg(test)]
#[path = "symbolizer_tests.rs"]
mod tests;
