//! What a module file offers the symboliser beyond its symbol tables: its own DWARF, else the
//! DWARF and symbol tables of its separate debug file (found by build-id, else
//! `.gnu_debuglink`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::symbols::debug_files::{DebugFile, DebugFileLocator};
use crate::symbols::dwarf::DwarfModule;
use crate::symbols::elf::ElfFile;

/// The debug information of one module file, parsed once.
#[derive(Default)]
pub struct DebugInfo {
    /// The file's own DWARF, else its separate debug file's (at most one is kept). addr2line
    /// parses units lazily on lookup and is not `Sync`: lookups take turns.
    pub dwarf: Option<Mutex<DwarfModule>>,
    /// The separate debug file's symbol tables, if one was found.
    pub debug_symbols: Option<ElfFile>,
    /// The separate debug file used, if any.
    pub debug_file: Option<PathBuf>,
    /// Why DWARF could not be read (the symbol tables may still name functions).
    pub error: Option<String>,
}

impl DebugInfo {
    /// Loads what `data` (the file at `path`) and its debug file offer; a failure is kept
    /// as `error` and leaves fewer sources. A file read through a process's `root` has its
    /// debug file looked for beneath that root first (a container's debug packages).
    pub fn load(
        path: &str,
        data: &Arc<[u8]>,
        debug_files: &DebugFileLocator,
        root: Option<&File>,
    ) -> DebugInfo {
        let mut info = DebugInfo::default();
        if let Err(error) = info.load_dwarf(path, data, debug_files, root) {
            info.error = Some(error.to_string());
        }
        info
    }

    fn load_dwarf(
        &mut self,
        path: &str,
        data: &Arc<[u8]>,
        debug_files: &DebugFileLocator,
        root: Option<&File>,
    ) -> Result<()> {
        let file = parse_object(path, data)?;
        self.dwarf = DwarfModule::load(path, &file, data)?.map(Mutex::new);
        if self.dwarf.is_some() {
            return Ok(());
        }
        let Some(debug_file) = find_debug_file(path, &file, debug_files, root) else {
            return Ok(());
        };
        let debug_path = debug_file.path.to_string_lossy().into_owned();
        self.debug_file = Some(debug_file.path);
        let debug_data: Arc<[u8]> = Arc::from(debug_file.data);
        self.debug_symbols = ElfFile::parse(&debug_path, &debug_data).ok();
        let parsed = parse_object(&debug_path, &debug_data)?;
        self.dwarf = DwarfModule::load(&debug_path, &parsed, &debug_data)?.map(Mutex::new);
        Ok(())
    }
}

/// The separate debug file of the file at `path` (parsed as `file`): for a file read through
/// a process's `root`, beneath that root first (a container's debug packages), then in
/// memsup's. A candidate must carry the build-id or the CRC the file records, wherever found.
pub fn find_debug_file(
    path: &str,
    file: &object::File,
    debug_files: &DebugFileLocator,
    root: Option<&File>,
) -> Option<DebugFile> {
    let path = Path::new(path);
    let beneath_root = root.and_then(|root| {
        let read = |candidate: &Path| crate::module::root::read_beneath(root, candidate);
        debug_files.find_with(path, file, read)
    });
    beneath_root.or_else(|| debug_files.find(path, file))
}

fn parse_object<'data>(path: &str, data: &'data [u8]) -> Result<object::File<'data>> {
    object::File::parse(data).map_err(|error| Error::Elf {
        path: path.to_string(),
        message: error.to_string(),
    })
}
