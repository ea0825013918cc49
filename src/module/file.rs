//! One module file as read from disk, and what memsup parses from it on first use: the ELF
//! symbol tables (probes, symbolising), the unwind sections (the unwinder) and the debug
//! information (the symboliser). Each is parsed at most once, from the same bytes.

use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, OnceLock};

use super::debug::DebugInfo;
use super::loaded::MappedInode;
use super::root::ProcessRoot;
use crate::error::{Error, Result};
use crate::symbols::debug_files::{DebugFile, DebugFileLocator};
use crate::symbols::elf::ElfFile;
use crate::unwind::modules::UnwindSections;

/// What tells one version of a file at a path from another: a file replaced (a new inode) or
/// rewritten in place (a new size or modification time) is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    device: u64,
    inode: u64,
    size: u64,
    modified_ns: i128,
}

impl FileIdentity {
    pub fn of(metadata: &std::fs::Metadata) -> FileIdentity {
        FileIdentity {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.size(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
        }
    }

    /// Whether this is the file a mapping maps.
    pub fn is(&self, mapped: MappedInode) -> bool {
        mapped.is(self.device, self.inode)
    }
}

/// A module file's bytes and its lazily parsed parts.
pub struct ModuleFile {
    path: String,
    identity: FileIdentity,
    bytes: Arc<[u8]>,
    elf: OnceLock<Result<ElfFile>>,
    unwind: OnceLock<Result<UnwindSections>>,
    debug: OnceLock<DebugInfo>,
    /// The root of the process it was read through (a container's), where its separate
    /// debug file is looked for first; None for memsup's own files.
    root: Option<Arc<ProcessRoot>>,
}

impl std::fmt::Debug for ModuleFile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ModuleFile")
            .field("path", &self.path)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl ModuleFile {
    pub fn new(path: &str, identity: FileIdentity, bytes: Arc<[u8]>) -> ModuleFile {
        ModuleFile {
            path: path.to_string(),
            identity,
            bytes,
            elf: OnceLock::new(),
            unwind: OnceLock::new(),
            debug: OnceLock::new(),
            root: None,
        }
    }

    /// A file read through a process's root `root`, beneath which its separate debug file is
    /// looked for too.
    pub fn in_root(
        path: &str,
        identity: FileIdentity,
        bytes: Arc<[u8]>,
        root: Arc<ProcessRoot>,
    ) -> Self {
        ModuleFile {
            root: Some(root),
            ..ModuleFile::new(path, identity, bytes)
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn identity(&self) -> FileIdentity {
        self.identity
    }

    pub fn bytes(&self) -> &Arc<[u8]> {
        &self.bytes
    }

    /// Symbols, segments and IFUNC relocations. Fails as `ElfFile::parse` does.
    pub fn elf(&self) -> Result<&ElfFile> {
        let parsed = self
            .elf
            .get_or_init(|| ElfFile::parse(&self.path, &self.bytes));
        parsed.as_ref().map_err(|error| again(&self.path, error))
    }

    /// The unwind sections and executable segments.
    pub fn unwind(&self) -> Result<&UnwindSections> {
        let parsed = self
            .unwind
            .get_or_init(|| UnwindSections::parse(&self.path, &self.bytes));
        parsed.as_ref().map_err(|error| again(&self.path, error))
    }

    /// Whether `debug_info` has been loaded (by any thread).
    pub fn has_debug_info(&self) -> bool {
        self.debug.get().is_some()
    }

    /// Its separate debug file (`file` is it parsed), beneath the process's root first for a
    /// file read through it.
    pub fn find_debug_file(
        &self,
        file: &object::File,
        debug_files: &DebugFileLocator,
    ) -> Option<DebugFile> {
        let root = self.root.as_ref().map(|root| &root.directory);
        super::debug::find_debug_file(&self.path, file, debug_files, root)
    }

    /// DWARF and the separate debug file, looked for with `debug_files` on first use
    /// (beneath the process's root first, for a file read through it).
    pub fn debug_info(&self, debug_files: &DebugFileLocator) -> &DebugInfo {
        self.debug.get_or_init(|| {
            let root = self.root.as_ref().map(|root| &root.directory);
            DebugInfo::load(&self.path, &self.bytes, debug_files, root)
        })
    }
}

/// A parse error again, for another caller: parsing fails only with these two kinds.
fn again(path: &str, error: &Error) -> Error {
    match error {
        Error::UnsupportedExecutable { path, reason } => Error::UnsupportedExecutable {
            path: path.clone(),
            reason: reason.clone(),
        },
        Error::Elf { path, message } => Error::Elf {
            path: path.clone(),
            message: message.clone(),
        },
        other => Error::Elf {
            path: path.to_string(),
            message: other.to_string(),
        },
    }
}
