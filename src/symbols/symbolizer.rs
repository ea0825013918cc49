//! Names, inlined frames and file:line of call sites, from the module files on disk.
//!
//! Sources, in order: DWARF in the file itself; else DWARF in its separate debug file (by
//! build-id, else `.gnu_debuglink`); else the ELF symbol tables (the file's, then the debug
//! file's), which give the function only. Each path is parsed once per `Symbolizer`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::debug_files::{DebugFileLocator, DEFAULT_DEBUG_ROOT};
use super::demangle::demangle;
use super::dwarf::DwarfModule;
use super::elf::ElfFile;
use crate::error::{Error, Result};

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

/// What one module file offers, parsed on first use.
#[derive(Default)]
struct Module {
    /// The file's own DWARF, else its separate debug file's (at most one is kept).
    dwarf: Option<DwarfModule>,
    /// The file's symbol tables, then the separate debug file's.
    symbol_tables: Vec<ElfFile>,
    /// The separate debug file used, if any.
    debug_file: Option<PathBuf>,
    /// Why a source could not be read (the module still uses the others).
    error: Option<String>,
}

/// Symbolises call sites of the modules of one recording.
pub struct Symbolizer {
    debug_files: DebugFileLocator,
    modules: HashMap<String, Module>,
}

impl Default for Symbolizer {
    fn default() -> Symbolizer {
        Symbolizer::new(DEFAULT_DEBUG_ROOT)
    }
}

impl Symbolizer {
    /// Separate debug files are searched under `debug_root` (normally `/usr/lib/debug`).
    pub fn new(debug_root: impl Into<PathBuf>) -> Symbolizer {
        Symbolizer {
            debug_files: DebugFileLocator::new(debug_root),
            modules: HashMap::new(),
        }
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
        let address = if is_return_address {
            file_address.saturating_sub(1)
        } else {
            file_address
        };
        let module = self
            .modules
            .entry(path.to_string())
            .or_insert_with(|| load_module(path, &self.debug_files));
        let mut frames = match &module.dwarf {
            Some(dwarf) => dwarf.frames(address).unwrap_or_else(|error| {
                module.error.get_or_insert(format!("DWARF: {error}"));
                Vec::new()
            }),
            None => Vec::new(),
        };
        match frames.last_mut() {
            // DWARF line info without a subprogram (e.g. hand-written assembly).
            Some(outermost) if outermost.raw_name.is_empty() => {
                if let Some(name) = symbol_table_name(module, address) {
                    outermost.function = demangle(&name);
                    outermost.raw_name = name;
                }
            }
            Some(_) => {}
            None => frames.extend(symbol_table_frame(module, address)),
        }
        frames
    }

    /// The separate debug file used for `path`, once `path` has been symbolised.
    pub fn debug_file(&self, path: &str) -> Option<&Path> {
        self.modules.get(path)?.debug_file.as_deref()
    }

    /// Modules with a source that could not be read, and why, sorted by path.
    pub fn module_errors(&self) -> Vec<(&str, &str)> {
        let mut errors: Vec<(&str, &str)> = self
            .modules
            .iter()
            .filter_map(|(path, module)| Some((path.as_str(), module.error.as_deref()?)))
            .collect();
        errors.sort_unstable();
        errors
    }
}

/// Reads everything `path` offers; failures leave the module with fewer sources.
fn load_module(path: &str, debug_files: &DebugFileLocator) -> Module {
    let mut module = Module::default();
    if let Err(error) = load_dwarf(path, debug_files, &mut module) {
        module.error = Some(error.to_string());
    }
    // `ElfFile` reads the file again: once per module and recording, and it keeps only the
    // symbols, not the bytes.
    match ElfFile::open(path) {
        Ok(file) => module.symbol_tables.push(file),
        Err(error) => {
            module.error.get_or_insert(error.to_string());
        }
    }
    if let Some(debug_path) = module.debug_file.as_ref().and_then(|path| path.to_str()) {
        if let Ok(file) = ElfFile::open(debug_path) {
            module.symbol_tables.push(file);
        }
    }
    module
}

/// The file's own DWARF, else the separate debug file's; records the debug file found.
fn load_dwarf(path: &str, debug_files: &DebugFileLocator, module: &mut Module) -> Result<()> {
    let data = std::fs::read(path).map_err(|source| Error::io(path, source))?;
    let file = object::File::parse(&*data).map_err(|error| Error::Elf {
        path: path.to_string(),
        message: error.to_string(),
    })?;
    module.dwarf = DwarfModule::load(path, &file)?;
    if module.dwarf.is_some() {
        return Ok(());
    }
    let Some(debug_file) = debug_files.find(Path::new(path), &file) else {
        return Ok(());
    };
    let debug_path = debug_file.path.to_string_lossy().into_owned();
    module.debug_file = Some(debug_file.path);
    let parsed = object::File::parse(&*debug_file.data).map_err(|error| Error::Elf {
        path: debug_path.clone(),
        message: error.to_string(),
    })?;
    module.dwarf = DwarfModule::load(&debug_path, &parsed)?;
    Ok(())
}

/// The raw name of the function containing `address` in the first symbol table that has one.
fn symbol_table_name(module: &Module, address: u64) -> Option<String> {
    module
        .symbol_tables
        .iter()
        .find_map(|table| table.symbolize(address))
        .map(|(name, _offset)| name)
}

/// A frame with the function's name only, from the symbol tables.
fn symbol_table_frame(module: &Module, address: u64) -> Option<SymbolFrame> {
    let raw_name = symbol_table_name(module, address)?;
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
