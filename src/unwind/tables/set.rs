//! The tables of one process image: each mapped module file compiled once, its executable
//! segments placed at their runtime addresses. Shared by the tests and the hook engine.

use std::collections::HashMap;
use std::sync::Arc;

use super::compile::{compile, CompiledTable};
use super::walk::{TableModule, TableSet};
use crate::module::loaded::LoadedModule;
use crate::module::ModuleStore;

/// A module file mapped in the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    pub path: String,
    /// Runtime address minus ELF virtual address.
    pub bias: u64,
}

impl MappedFile {
    /// The module files among `modules` that `store` can read, with their load biases.
    pub fn of_modules(store: &ModuleStore, modules: &[LoadedModule]) -> Vec<MappedFile> {
        modules
            .iter()
            .filter_map(|module| {
                let file = store.get(&module.path).ok()?;
                let bias = module.load_bias(file.elf().ok()?);
                Some(MappedFile {
                    path: module.path.clone(),
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

/// Compiled tables by module path, kept from one table set to the next (a process maps
/// more modules as it runs).
pub type TableCache = HashMap<String, std::result::Result<Arc<CompiledTable>, String>>;

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
            .entry(module.path.clone())
            .or_insert_with(|| compile_file(store, &module.path))
            .clone();
        if let Ok(compiled) = &compiled {
            let file = store.get(&module.path).ok();
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
) -> std::result::Result<Arc<CompiledTable>, String> {
    let file = store.get(path).map_err(|error| error.to_string())?;
    let sections = file.unwind().map_err(|error| error.to_string())?;
    compile(sections)
        .map(Arc::new)
        .map_err(|error| format!("{path}: {error}"))
}
