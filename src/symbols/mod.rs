//! ELF files of the tracee's modules: symbols, load bias, function+offset lookup.
pub mod elf;

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Result;
use elf::ElfFile;

/// Each module file parsed once per recording.
#[derive(Default)]
pub struct SymbolCache {
    files: HashMap<String, Arc<ElfFile>>,
}

impl SymbolCache {
    pub fn get(&mut self, path: &str) -> Result<Arc<ElfFile>> {
        if let Some(file) = self.files.get(path) {
            return Ok(file.clone());
        }
        let file = Arc::new(ElfFile::open(path)?);
        self.files.insert(path.to_string(), file.clone());
        Ok(file)
    }
}
