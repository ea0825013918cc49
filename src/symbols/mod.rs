//! ELF files of the tracee's modules: symbols, load bias, function+offset lookup; and the
//! symboliser that names call sites with DWARF (inlined frames, file:line), separate debug
//! files and demangling.
pub mod debug_files;
pub mod demangle;
pub mod dwarf;
pub mod elf;
pub mod functions;
pub mod symbolizer;
#[cfg(test)]
mod test_programs;

pub use symbolizer::{SymbolFrame, Symbolizer};

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Result;
use elf::ElfFile;

/// Parsed module files by path, so that each file is read once per recording.
#[derive(Default)]
pub struct SymbolCache {
    files: HashMap<String, Arc<ElfFile>>,
}

impl SymbolCache {
    pub fn new() -> SymbolCache {
        SymbolCache::default()
    }

    /// The parsed file at `path`, reading it on first use. Failures are not cached.
    pub fn get(&mut self, path: &str) -> Result<Arc<ElfFile>> {
        if let Some(file) = self.files.get(path) {
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(ElfFile::open(path)?);
        self.files.insert(path.to_string(), Arc::clone(&file));
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_file_once() {
        let mut cache = SymbolCache::new();
        let path = "/lib/x86_64-linux-gnu/libc.so.6";
        let first = cache.get(path).unwrap();
        let second = cache.get(path).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert!(cache.get("/nonexistent/library.so").is_err());
    }
}
