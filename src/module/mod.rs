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
//!
//! A process in a container or a mount namespace of its own may map, at a path, another
//! file than memsup's there. Its file is read through /proc/PID/root while it lives. Every
//! file found for a process is kept by its path and the inode maps gives, which every later
//! user of the module knows: a recording can hold a container's libc and the host's at one
//! path, and a file replaced on disk after it was mapped is still read as it was. The files
//! are kept until the recording ends.

mod bytes;
mod debug;
mod file;
pub mod loaded;
mod root;

pub use bytes::{offset_in, FileBytes};
pub use debug::DebugInfo;
pub use file::{FileIdentity, ModuleFile};
pub use loaded::MappedInode;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::failure::lock;
use crate::symbols::debug_files::DebugFileLocator;
use root::{ProcessRoot, RootKey};

/// Set to print, when a recording ends, how often each module file was read.
pub const READS_VARIABLE: &str = "MEMSUP_DEBUG_MODULE_READS";

/// The module files of one recording. `Send + Sync`: share it through an `Arc`.
pub struct ModuleStore {
    slots: Mutex<HashMap<String, Arc<Mutex<Slot>>>>,
    /// The files processes map, once found (memsup's, or read through a process's root),
    /// by path and mapped inode: what the unwinders and the symboliser read, even after a
    /// file at that path was replaced or the process is gone.
    by_mapping: Mutex<HashMap<(String, MappedInode), ProcessFile>>,
    /// How often each path was read through a process's root.
    root_reads: Mutex<HashMap<String, u64>>,
    /// The roots files were read through, one per mount namespace and root directory: two
    /// descriptors a container, however many of its files are kept.
    roots: Mutex<HashMap<RootKey, Arc<ProcessRoot>>>,
    debug_files: DebugFileLocator,
}

/// The file a process maps at a path, as memsup found it.
#[derive(Clone)]
pub struct ProcessFile {
    pub file: Arc<ModuleFile>,
    /// It is the mapped file (its device and inode). When not, it may hold other code.
    pub verified: bool,
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
            by_mapping: Mutex::new(HashMap::new()),
            root_reads: Mutex::new(HashMap::new()),
            roots: Mutex::new(HashMap::new()),
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
        let file = self.get_when(path, |_| true)?;
        Ok(file.expect("every file wanted"))
    }

    /// `get`, when the file at `path` is one `wanted` accepts by its identity: another is
    /// neither read nor returned (None). One stat when the file was read before.
    fn get_when(
        &self,
        path: &str,
        wanted: impl Fn(&FileIdentity) -> bool,
    ) -> Result<Option<Arc<ModuleFile>>> {
        let slot = {
            let mut slots = lock(&self.slots);
            Arc::clone(slots.entry(path.to_string()).or_default())
        };
        let mut slot = lock(&slot);
        let on_disk = std::fs::metadata(path).map_err(|source| Error::io(path, source))?;
        let identity = FileIdentity::of(&on_disk);
        if !wanted(&identity) {
            return Ok(None);
        }
        if let Some(file) = slot.file.as_ref().filter(|f| f.identity() == identity) {
            return Ok(Some(Arc::clone(file)));
        }
        let (identity, bytes) = read(path)?;
        // Checked again on the file read: the path may have been replaced since the stat.
        if !wanted(&identity) {
            return Ok(None);
        }
        slot.reads += 1;
        let file = Arc::new(ModuleFile::new(path, identity, bytes));
        slot.file = Some(Arc::clone(&file));
        Ok(Some(file))
    }

    /// The file process `pid` maps at `path`, whose inode maps gives as `mapped`: memsup's
    /// file at that path when it is the mapped one; else the file at that path in the
    /// process's own root when it is; else the one found before for this mapping (the path
    /// changed since); else, unverified, the regular file at that path in the process's root
    /// (on overlayfs before Linux 6.8 maps gives the layer's inode, so a container's file is
    /// never verified: the root's is still the likelier one), else memsup's. What it returns
    /// is kept for `get_mapped`.
    pub fn of_process(&self, pid: i32, path: &str, mapped: MappedInode) -> Result<ProcessFile> {
        let key = (path.to_string(), mapped);
        if let Ok(Some(file)) = self.get_when(path, |identity| identity.is(mapped)) {
            return Ok(self.keep(key, file, true));
        }
        let known = lock(&self.by_mapping).get(&key).cloned();
        if let Ok(opened) = root::open_in_root(pid, path) {
            let identity = FileIdentity::of(&opened.metadata);
            let verified = identity.is(mapped);
            if let Some(known) = known.as_ref().filter(|k| k.file.identity() == identity) {
                return Ok(known.clone());
            }
            // An unverified file is taken only from a lookup confined to the process's root.
            if verified || (known.is_none() && opened.confined) {
                let file = match self.same_as_own(path, identity) {
                    Some(own) => own,
                    None => {
                        let shown = format!("/proc/{pid}/root{path}");
                        let metadata = &opened.metadata;
                        let (identity, bytes) = read_opened(&shown, opened.file, metadata)?;
                        *lock(&self.root_reads).entry(path.to_string()).or_default() += 1;
                        Arc::new(match opened.confined {
                            true => {
                                let root = self.shared_root(ProcessRoot::keep(pid, opened.root));
                                ModuleFile::in_root(path, identity, bytes, root)
                            }
                            false => ModuleFile::new(path, identity, bytes),
                        })
                    }
                };
                return Ok(self.keep(key, file, verified));
            }
        }
        if let Some(known) = known {
            return Ok(known);
        }
        let file = self.get(path)?;
        Ok(self.keep(key, file, false))
    }

    /// The root kept for `root`'s namespace and directory: `root` itself the first time.
    fn shared_root(&self, root: ProcessRoot) -> Arc<ProcessRoot> {
        let Some(key) = root.key() else {
            return Arc::new(root);
        };
        Arc::clone(
            lock(&self.roots)
                .entry(key)
                .or_insert_with(|| Arc::new(root)),
        )
    }

    /// memsup's file at `path`, if it is the file of `identity` (the process's root is
    /// memsup's): one copy for both. Read only then.
    fn same_as_own(&self, path: &str, identity: FileIdentity) -> Option<Arc<ModuleFile>> {
        self.get_when(path, |own| *own == identity).ok().flatten()
    }

    /// Keeps `file` as what the process maps at `key`.
    fn keep(
        &self,
        key: (String, MappedInode),
        file: Arc<ModuleFile>,
        verified: bool,
    ) -> ProcessFile {
        let found = ProcessFile { file, verified };
        lock(&self.by_mapping).insert(key, found.clone());
        found
    }

    /// The file a process maps at `path` (inode `mapped`), as `of_process` found it; else
    /// memsup's file at that path.
    pub fn get_mapped(&self, path: &str, mapped: MappedInode) -> Result<Arc<ModuleFile>> {
        let key = (path.to_string(), mapped);
        if let Some(found) = lock(&self.by_mapping).get(&key) {
            return Ok(Arc::clone(&found.file));
        }
        self.get(path)
    }

    /// How often the file at `path` was read from disk (memsup's, and any process's own).
    pub fn reads(&self, path: &str) -> u64 {
        let slot = lock(&self.slots).get(path).cloned();
        let own = slot.map_or(0, |slot| lock(&slot).reads);
        own + lock(&self.root_reads).get(path).copied().unwrap_or(0)
    }

    /// Every path read at least once, with its count, by path.
    pub fn read_counts(&self) -> Vec<(String, u64)> {
        let slots: Vec<(String, Arc<Mutex<Slot>>)> = lock(&self.slots)
            .iter()
            .map(|(path, slot)| (path.clone(), Arc::clone(slot)))
            .collect();
        let mut counts: HashMap<String, u64> = slots
            .into_iter()
            .map(|(path, slot)| (path, lock(&slot).reads))
            .collect();
        for (path, reads) in lock(&self.root_reads).iter() {
            *counts.entry(path.clone()).or_default() += reads;
        }
        let mut counts: Vec<(String, u64)> =
            counts.into_iter().filter(|&(_, reads)| reads > 0).collect();
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

/// The bytes of `path` and the identity of the file they came from. Only a regular file
/// is opened (`root::reopen_regular`): a FIFO or a device put at a module's path is not.
fn read(path: &str) -> Result<(FileIdentity, Arc<[u8]>)> {
    let io_error = |source| Error::io(path, source);
    let located = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_error)?;
    let (file, metadata) = root::reopen_regular(&located).map_err(io_error)?;
    read_opened(path, file, &metadata)
}

/// The bytes of `file`, opened at `path`, whose metadata is `metadata`.
fn read_opened(
    path: &str,
    mut file: std::fs::File,
    metadata: &std::fs::Metadata,
) -> Result<(FileIdentity, Arc<[u8]>)> {
    let io_error = |source| Error::io(path, source);
    // Allocated once at its final place: a Vec turned into an Arc would be copied, and the
    // transient second copy of a large executable raises memsup's peak.
    let mut bytes: Arc<[u8]> = std::iter::repeat(0).take(metadata.len() as usize).collect();
    let buffer = Arc::get_mut(&mut bytes).expect("not shared yet");
    file.read_exact(buffer).map_err(io_error)?;
    Ok((FileIdentity::of(metadata), bytes))
}

#[cfg(test)]
mod tests;
