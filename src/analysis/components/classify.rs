//! Which component a module path or a call stack belongs to.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use super::loaded_by_mpi::{defines_mpi_init, is_mpi_plugin};
use super::rules::ComponentRules;
use crate::analysis::Frame;
pub(super) use crate::platform::allocators::{is_allocator_function, is_thread_creation};
pub(super) use crate::platform::libraries::file_name;
use crate::platform::libraries::{is_libc_internal_function, is_mpi_function, LibraryKind};

pub(super) const APP: &str = "app";
pub(super) const MPI: &str = "mpi";
pub(super) const LIBC: &str = "libc";
pub(super) const STACKS: &str = "stacks";
pub(super) const SHM: &str = "shm";
/// Shared-memory transport segments of the MPI stack: within MPI, named apart.
pub(super) const MPI_SHM: &str = "mpi:shm";
pub(super) const MEMSUP: &str = "memsup";
pub(super) const UNKNOWN: &str = "unknown";

/// Classifies module paths and stacks of one image.
#[derive(Debug, Clone)]
pub(super) struct Classifier<'a> {
    rules: &'a ComponentRules,
    /// The image's executable, without a " (deleted)" suffix.
    exe: String,
    /// The image maps an MPI library other than libevent: Open MPI's bundled libevent then
    /// counts as MPI too (a program's own libevent does not).
    maps_mpi: bool,
    /// Modules the MPI library brought in (`loaded_by_mpi`): they count as MPI.
    loaded_by_mpi: BTreeSet<String>,
    /// The executable defines MPI_Init (static MPI), worked out when first asked.
    static_mpi: OnceCell<bool>,
}

impl<'a> Classifier<'a> {
    /// `paths`: every file the image is known to map (modules and snapshot files).
    pub fn new<'p>(
        rules: &'a ComponentRules,
        exe: &str,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Self {
        let maps_mpi = paths
            .into_iter()
            .any(|path| LibraryKind::of(path) == LibraryKind::Mpi);
        Classifier {
            rules,
            exe: without_deleted(exe).to_string(),
            maps_mpi,
            loaded_by_mpi: BTreeSet::new(),
            static_mpi: OnceCell::new(),
        }
    }

    /// Counts `modules` as MPI too.
    pub fn with_loaded_by_mpi(mut self, modules: BTreeSet<String>) -> Self {
        self.loaded_by_mpi = modules;
        self
    }

    /// The image runs MPI: it maps an MPI library, or its executable defines MPI_Init.
    pub fn runs_mpi(&self) -> bool {
        self.maps_mpi || *self.static_mpi.get_or_init(|| defines_mpi_init(&self.exe))
    }

    /// The image's executable.
    pub fn exe(&self) -> &str {
        &self.exe
    }

    /// The user rules it applies.
    pub fn rules(&self) -> &'a ComponentRules {
        self.rules
    }

    /// The component of a module (or mapped file) path.
    pub fn module(&self, path: &str) -> String {
        if let Some(name) = self.rules.first_match(std::iter::once(path)) {
            return name.to_string();
        }
        let file = file_name(path);
        if file.is_empty() {
            return UNKNOWN.to_string();
        }
        if self.is_mpi_module(path) {
            return MPI.to_string();
        }
        if is_libc_file(path) {
            return LIBC.to_string();
        }
        if !self.exe.is_empty() && without_deleted(path) == self.exe {
            return APP.to_string();
        }
        library_name(file).to_string()
    }

    /// The component of a stack's frames (innermost first, skipped frames already dropped).
    pub fn frames(&self, frames: &[Frame]) -> String {
        let texts = frames
            .iter()
            .flat_map(|frame| [frame.module.as_str(), frame.function.as_str()]);
        if let Some(name) = self.rules.first_match(texts) {
            return name.to_string();
        }
        let mpi_frame = |frame: &Frame| {
            self.is_mpi_module(&frame.module)
                || is_mpi_function(&frame.function)
                || self.is_static_mpi_dependency(frame)
        };
        if frames.iter().any(mpi_frame) {
            return MPI.to_string();
        }
        let Some(frame) = frames.iter().find(|frame| !frame.module.is_empty()) else {
            return UNKNOWN.to_string();
        };
        let component = self.module(&frame.module);
        // A static binary holds its C library: its internals are known by name.
        let libc_internal = is_libc_internal_function(&frame.function);
        if component == APP && libc_internal {
            return LIBC.to_string();
        }
        component
    }

    /// The component a user rule gives `path`, if any.
    pub fn user_component(&self, path: &str) -> Option<String> {
        self.rules
            .first_match(std::iter::once(path))
            .map(str::to_string)
    }

    /// A function the executable holds of a library only MPI needs (libnuma, hwloc's, in a
    /// statically linked MPICH program), known by its name since there is no module.
    fn is_static_mpi_dependency(&self, frame: &Frame) -> bool {
        frame.function.starts_with("numa_") && without_deleted(&frame.module) == self.exe
    }

    /// An MPI library or plugin by its name, or a module MPI brought in.
    pub fn is_mpi_module(&self, path: &str) -> bool {
        LibraryKind::of(path) == LibraryKind::Mpi
            || (self.maps_mpi && file_name(path).starts_with("libevent"))
            || is_mpi_plugin(path)
            || self.loaded_by_mpi.contains(without_deleted(path))
    }
}

fn without_deleted(path: &str) -> &str {
    path.strip_suffix(" (deleted)").unwrap_or(path)
}

/// The C library, the dynamic linker, a language runtime or a kernel pseudo-file: all
/// count as the C runtime.
pub(super) fn is_libc_file(path: &str) -> bool {
    let kind = LibraryKind::of(path);
    kind.is_runtime() || kind == LibraryKind::KernelPseudoFile
}

/// `libfoo.so.1.2` -> `libfoo.so`; a file that is not a `.so` keeps its name.
fn library_name(file: &str) -> &str {
    match file.find(".so.") {
        Some(position) => &file[..position + 3],
        None => file,
    }
}
