//! The module files of one recording, each read from disk once and shared by everything that
//! needs it: probe planting on the tracer thread, the unwinders and the symboliser on the
//! collector thread.
//!
//! A file's bytes are read whole into one `Arc<[u8]>`; its symbol tables, unwind sections
//! and DWARF are parsed from them on first use, and unwind and DWARF sections stay ranges of
//! that one copy. Files are not mapped: a library truncated while memsup holds a mapping of
//! it would kill memsup with SIGBUS. A file is known by its path and its identity (device,
//! inode, size, modification time), so one replaced on disk during the recording is read
//! again.

mod bytes;
mod debug;
mod file;
pub mod loaded;

pub use bytes::{offset_in, FileBytes};
pub use debug::DebugInfo;
pub use file::{FileIdentity, ModuleFile};

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::failure::lock;
use crate::symbols::debug_files::DebugFileLocator;

/// Set to print, when a recording ends, how often each module file was read.
pub const READS_VARIABLE: &str = "MEMSUP_DEBUG_MODULE_READS";

/// The module files of one recording. `Send + Sync`: share it through an `Arc`.
pub struct ModuleStore {
    slots: Mutex<HashMap<String, Arc<Mutex<Slot>>>>,
    debug_files: DebugFileLocator,
}

/// One path: its current file, and how often it was read.
#[derive(Default)]
struct Slot {
    file: Option<Arc<ModuleFile>>,
    reads: u64,
}

impl Default for ModuleStore {
    fn default() -> ModuleStore {
        ModuleStore::with_debug_files(DebugFileLocator::default())
    }
}

impl ModuleStore {
    /// Separate debug files are searched under `/usr/lib/debug`.
    pub fn new() -> ModuleStore {
        ModuleStore::default()
    }

    /// Separate debug files are searched under `debug_root` besides each file's directory.
    pub fn with_debug_root(debug_root: impl Into<PathBuf>) -> ModuleStore {
        ModuleStore::with_debug_files(DebugFileLocator::new(debug_root))
    }

    fn with_debug_files(debug_files: DebugFileLocator) -> ModuleStore {
        ModuleStore {
            slots: Mutex::new(HashMap::new()),
            debug_files,
        }
    }

    /// Where separate debug files are looked for.
    pub fn debug_files(&self) -> &DebugFileLocator {
        &self.debug_files
    }

    /// The file at `path`, read on first use and again only when the file on disk is
    /// another. Failures are not kept: a file that appears later is read then. Callers
    /// asking for one path wait for one read; other paths are read meanwhile.
    pub fn get(&self, path: &str) -> Result<Arc<ModuleFile>> {
        let slot = {
            let mut slots = lock(&self.slots);
            Arc::clone(slots.entry(path.to_string()).or_default())
        };
        let mut slot = lock(&slot);
        let on_disk = std::fs::metadata(path).map_err(|source| Error::io(path, source))?;
        let identity = FileIdentity::of(&on_disk);
        if let Some(file) = slot.file.as_ref().filter(|f| f.identity() == identity) {
            return Ok(Arc::clone(file));
        }
        let (identity, bytes) = read(path)?;
        slot.reads += 1;
        let file = Arc::new(ModuleFile::new(path, identity, bytes));
        slot.file = Some(Arc::clone(&file));
        Ok(file)
    }

    /// How often the file at `path` was read from disk.
    pub fn reads(&self, path: &str) -> u64 {
        let slot = lock(&self.slots).get(path).cloned();
        slot.map_or(0, |slot| lock(&slot).reads)
    }

    /// Every path read at least once, with its count, by path.
    pub fn read_counts(&self) -> Vec<(String, u64)> {
        let slots: Vec<(String, Arc<Mutex<Slot>>)> = lock(&self.slots)
            .iter()
            .map(|(path, slot)| (path.clone(), Arc::clone(slot)))
            .collect();
        let mut counts: Vec<(String, u64)> = slots
            .into_iter()
            .map(|(path, slot)| (path, lock(&slot).reads))
            .filter(|&(_, reads)| reads > 0)
            .collect();
        counts.sort_unstable();
        counts
    }

    /// With `READS_VARIABLE` set, one line per file read on stderr:
    /// `memsup: module reads: COUNT PATH`.
    pub fn print_read_counts_if_asked(&self) {
        if std::env::var_os(READS_VARIABLE).is_none() {
            return;
        }
        for (path, reads) in self.read_counts() {
            eprintln!("memsup: module reads: {reads} {path}");
        }
    }
}

/// The bytes of `path` and the identity of the file they came from.
fn read(path: &str) -> Result<(FileIdentity, Arc<[u8]>)> {
    let io_error = |source| Error::io(path, source);
    let mut file = std::fs::File::open(path).map_err(io_error)?;
    let metadata = file.metadata().map_err(io_error)?;
    // Allocated once at its final place: a Vec turned into an Arc would be copied, and the
    // transient second copy of a large executable raises memsup's peak.
    let mut bytes: Arc<[u8]> = std::iter::repeat(0).take(metadata.len() as usize).collect();
    let buffer = Arc::get_mut(&mut bytes).expect("not shared yet");
    file.read_exact(buffer).map_err(io_error)?;
    Ok((FileIdentity::of(&metadata), bytes))
}

#[cfg(test)]
mod tests;
