//! The tables of one process image: each mapped module file compiled once, its executable
//! segments placed at their runtime addresses. Shared by the tests and the hook engine.

use std::collections::HashMap;
use std::sync::Arc;

use super::compile::{compile, CompiledTable};
use super::walk::{TableModule, TableSet};
use crate::module::loaded::LoadedModule;
use crate::module::{MappedInode, ModuleStore};

/// A module file mapped in the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    pub path: String,
    pub inode: MappedInode,
    /// Runtime address minus ELF virtual address.
    pub bias: u64,
}

impl MappedFile {
    /// The module files among `modules`, mapped by process `pid`, that `store` can read,
    /// with their load biases. A file memsup could not verify is taken too, as the
    /// unwinders take it: on a filesystem whose maps and stat disagree on devices (btrfs)
    /// every file is such a file, and the walker reads only within the thread's stack.
    pub fn of_modules(store: &ModuleStore, pid: i32, modules: &[LoadedModule]) -> Vec<MappedFile> {
        modules
            .iter()
            .filter_map(|module| {
                let found = store.of_process(pid, &module.path, module.inode).ok()?;
                let bias = module.load_bias(found.file.elf().ok()?);
                Some(MappedFile {
                    path: module.path.clone(),
                    inode: module.inode,
                    bias,
                })
            })
            .collect()
    }
}

/// One module's outcome: its compiled table, or why it has none (a return address into it
/// then ends a walk, truncated).
#[derive(Debug, Clone)]
pub struct ModuleOutcome {
    pub path: String,
    pub bias: u64,
    pub compiled: std::result::Result<Arc<CompiledTable>, String>,
}

/// The table set of a process image and how each of its modules fared.
#[derive(Debug, Clone, Default)]
pub struct ProcessTables {
    pub set: TableSet,
    pub modules: Vec<ModuleOutcome>,
}

/// Compiled tables by module path and mapped file, kept from one table set to the next (a
/// process maps more modules as it runs).
pub type TableCache =
    HashMap<(String, MappedInode), std::result::Result<Arc<CompiledTable>, String>>;

/// Compiles the tables of `modules` (each file once: `compiled_files` keeps them) and
/// places their executable segments, each with the signal return trampoline in it.
pub fn table_set(
    store: &ModuleStore,
    compiled_files: &mut TableCache,
    modules: &[MappedFile],
) -> ProcessTables {
    let mut segments = Vec::new();
    let mut outcomes = Vec::new();
    for module in modules {
        let compiled = compiled_files
            .entry((module.path.clone(), module.inode))
            .or_insert_with(|| compile_file(store, &module.path, module.inode))
            .clone();
        if let Ok(compiled) = &compiled {
            let file = store.get_mapped(&module.path, module.inode).ok();
            let sections = file.as_ref().and_then(|file| file.unwind().ok());
            for segment in sections.iter().flat_map(|sections| &sections.executable) {
                let executable =
                    segment.start.wrapping_add(module.bias)..segment.end.wrapping_add(module.bias);
                let sigreturn = sections.into_iter().flat_map(|s| &s.sigreturn);
                segments.push(TableModule {
                    sigreturn: sigreturn
                        .map(|address| address.wrapping_add(module.bias))
                        .find(|address| executable.contains(address)),
                    executable,
                    bias: module.bias,
                    table: Arc::clone(&compiled.table),
                });
            }
        }
        outcomes.push(ModuleOutcome {
            path: module.path.clone(),
            bias: module.bias,
            compiled,
        });
    }
    ProcessTables {
        set: TableSet::new(segments),
        modules: outcomes,
    }
}

fn compile_file(
    store: &ModuleStore,
    path: &str,
    inode: MappedInode,
) -> std::result::Result<Arc<CompiledTable>, String> {
    let file = store
        .get_mapped(path, inode)
        .map_err(|error| error.to_string())?;
    let sections = file.unwind().map_err(|error| error.to_string())?;
    compile(sections)
        .map(Arc::new)
        .map_err(|error| format!("{path}: {error}"))
}
