//! Which component a module path or a call stack belongs to.

use super::rules::ComponentRules;
use crate::analysis::Frame;

pub(super) const APP: &str = "app";
pub(super) const MPI: &str = "mpi";
pub(super) const LIBC: &str = "libc";
pub(super) const STACKS: &str = "stacks";
pub(super) const SHM: &str = "shm";
pub(super) const MEMSUP: &str = "memsup";
pub(super) const UNKNOWN: &str = "unknown";

/// Library file name prefixes of MPI implementations and the transports and runtimes they
/// load (Open MPI, MPICH, UCX, libfabric, PSM, PMIx, hwloc ...).
const MPI_LIBRARY_PREFIXES: &[&str] = &[
    "mpi", "mpich", "mpifort", "mpicxx", "mpi_", "open-pal", "open-rte", "pmix", "ucp", "uct",
    "ucs", "ucm", "fabric", "psm", "psm2", "hwloc", "pmi", "hcoll", "xpmem", "knem", "ibverbs",
    "rdmacm",
];

/// Function name prefixes of the same libraries: they make a statically linked MPI program's
/// stacks (no MPI module) count as MPI too.
const MPI_FUNCTION_PREFIXES: &[&str] = &[
    "MPI_", "PMPI_", "MPIR_", "MPID_", "MPII_", "ompi_", "opal_", "orte_", "pmix_", "PMIx_",
    "ucp_", "uct_", "ucs_", "ucm_", "fi_", "hwloc_",
];

/// The C and language runtimes, by file name prefix. libdl, librt and libpthread must be
/// followed by `.` or `-` so that librtmp or libdlt do not count.
const LIBC_PREFIXES: &[&str] = &[
    "libc.so",
    "libc-",
    "ld-linux",
    "ld-musl",
    "libstdc++",
    "libgfortran",
    "libm.so",
    "libm-",
    "libgcc_s",
    "libpthread.",
    "libpthread-",
    "libdl.",
    "libdl-",
    "librt.",
    "librt-",
    "libquadmath",
    "libatomic",
];

/// Kernel-provided pseudo-files, part of every process's C runtime.
/// Functions of glibc and musl that allocate for their own needs (stdio buffers, the dynamic
/// linker, locales, exit handlers, name services): in a static binary they are not in a
/// library of their own, so their names tell.
const LIBC_FUNCTION_PREFIXES: &[&str] = &[
    "_IO_",
    "__libc_",
    "_dl_",
    "__GI_",
    "_nl_",
    "__nss_",
    "__gconv",
    "__tz",
    "__new_exitfn",
    "__cxa_atexit",
    "__fopen",
    "__vfprintf",
    "__printf",
    "setlocale",
    "__register_atfork",
];

pub(super) const KERNEL_PSEUDO_FILES: &[&str] = &["[vdso]", "[vvar]", "[vsyscall]"];

/// Classifies module paths and stacks of one image.
#[derive(Debug)]
pub(super) struct Classifier<'a> {
    rules: &'a ComponentRules,
    /// The image's executable, without a " (deleted)" suffix.
    exe: String,
    /// The image maps an MPI library other than libevent: Open MPI's bundled libevent then
    /// counts as MPI too (a program's own libevent does not).
    maps_mpi: bool,
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
            .any(|path| is_mpi_library(file_name(path)));
        Classifier {
            rules,
            exe: without_deleted(exe).to_string(),
            maps_mpi,
        }
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
        if self.is_mpi_module(file) {
            return MPI.to_string();
        }
        if is_libc_file(file) {
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
            self.is_mpi_module(file_name(&frame.module))
                || MPI_FUNCTION_PREFIXES
                    .iter()
                    .any(|prefix| frame.function.starts_with(prefix))
        };
        if frames.iter().any(mpi_frame) {
            return MPI.to_string();
        }
        let Some(frame) = frames.iter().find(|frame| !frame.module.is_empty()) else {
            return UNKNOWN.to_string();
        };
        let component = self.module(&frame.module);
        // A static binary holds its C library: its internals are known by name.
        let libc_internal = LIBC_FUNCTION_PREFIXES
            .iter()
            .any(|prefix| frame.function.starts_with(prefix));
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

    fn is_mpi_module(&self, file: &str) -> bool {
        is_mpi_library(file) || (self.maps_mpi && file.starts_with("libevent"))
    }
}

/// The last component of a path, without a " (deleted)" suffix.
pub(super) fn file_name(path: &str) -> &str {
    let path = without_deleted(path);
    path.rsplit('/').next().unwrap_or_default()
}

fn without_deleted(path: &str) -> &str {
    path.strip_suffix(" (deleted)").unwrap_or(path)
}

/// An MPI library or Open MPI component (`mca_*.so`); libevent excluded.
fn is_mpi_library(file: &str) -> bool {
    let library = file
        .strip_prefix("lib")
        .is_some_and(|rest| MPI_LIBRARY_PREFIXES.iter().any(|p| rest.starts_with(p)));
    let mca = file.starts_with("mca_") && file.contains(".so");
    library || mca
}

fn is_libc_file(file: &str) -> bool {
    LIBC_PREFIXES.iter().any(|prefix| file.starts_with(prefix))
        || KERNEL_PSEUDO_FILES.contains(&file)
}

/// `libfoo.so.1.2` -> `libfoo.so`; a file that is not a `.so` keeps its name.
fn library_name(file: &str) -> &str {
    match file.find(".so.") {
        Some(position) => &file[..position + 3],
        None => file,
    }
}

/// The allocator functions (and glibc's internals only they call) under any of their
/// names: `__GI___libc_malloc`, `__libc_calloc`, `_int_malloc`, `sysmalloc_mmap.constprop.0`.
pub(super) fn is_allocator_function(function: &str) -> bool {
    const NAMES: &[&str] = &[
        "malloc",
        "calloc",
        "realloc",
        "reallocarray",
        "free",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
        "int_malloc",
        "int_realloc",
        "int_memalign",
        "int_free",
        "sysmalloc",
        "sysmalloc_mmap",
        "sysmalloc_mmap_fallback",
        "new_heap",
        "alloc_new_heap",
        "int_new_arena",
        "malloc_impl",
    ];
    let mut name = function.split('.').next().unwrap_or_default();
    loop {
        let stripped = name
            .trim_start_matches('_')
            .trim_start_matches("GI_")
            .trim_start_matches("libc_");
        if stripped == name {
            break;
        }
        name = stripped;
    }
    NAMES.contains(&name)
}

/// Thread creation: glibc maps a new thread's stack from `allocate_stack`, under `pthread_create`.
pub(super) fn is_thread_creation(function: &str) -> bool {
    let name = function.trim_start_matches('_');
    name.starts_with("pthread_create") || name.starts_with("allocate_stack")
}
