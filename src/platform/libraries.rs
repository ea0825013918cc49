//! What a module file is, from its path: the C library, the dynamic linker, a language
//! runtime, an MPI library or something else. Probes, the component classifier and the HTML
//! colouring all ask here, so that they agree on every spelling of glibc, musl and the rest.

/// The role of a library in every process that maps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibraryKind {
    /// The C library and the libraries split from it (libm, libpthread, libdl, librt).
    Libc,
    /// The program interpreter. Its allocator-named symbols are its private minimal malloc,
    /// and it calls `RENDEZVOUS_SYMBOL` after each dlopen and dlclose.
    DynamicLinker,
    /// libstdc++, libc++ and libc++abi.
    CxxRuntime,
    /// GCC's support libraries: unwinding (libgcc_s) and atomics (libatomic).
    GccRuntime,
    /// libgfortran and the quad-precision maths it uses.
    FortranRuntime,
    /// An MPI implementation, or a transport or runtime one loads (see `is_mpi_library`).
    Mpi,
    /// A mapping the kernel provides in every process: `[vdso]`, `[vvar]`, `[vsyscall]`.
    KernelPseudoFile,
    Other,
}

/// The dynamic linker calls this after every change to the list of loaded objects.
pub const RENDEZVOUS_SYMBOL: &str = "_dl_debug_state";

/// File name prefixes per kind. glibc before 2.34 named its files `libc-2.31.so`; musl's C
/// library is its dynamic linker, also installed as `libc.musl-<arch>.so.1`. libdl, librt and
/// libpthread must be followed by `.` or `-` so that librtmp or libdlt do not count.
const LIBC_PREFIXES: &[&str] = &[
    "libc.so",
    "libc-",
    "libc.musl",
    "libm.so",
    "libm-",
    "libpthread.",
    "libpthread-",
    "libdl.",
    "libdl-",
    "librt.",
    "librt-",
];
/// glibc's `ld-linux-x86-64.so.2`, musl's `ld-musl-x86_64.so.1`, the `ld64.so.2` of 64-bit
/// PowerPC and S/390, and the generic `ld.so`. Before 2.34 glibc's file was `ld-2.31.so`
/// (the `ld-linux` name a symlink to it), and /proc/PID/maps names the file itself: see
/// `is_versioned_glibc_linker`.
const DYNAMIC_LINKER_PREFIXES: &[&str] = &["ld-linux", "ld-musl", "ld64.so", "ld.so"];
const CXX_RUNTIME_PREFIXES: &[&str] = &["libstdc++", "libc++"];
const GCC_RUNTIME_PREFIXES: &[&str] = &["libgcc_s", "libatomic"];
const FORTRAN_RUNTIME_PREFIXES: &[&str] = &["libgfortran", "libquadmath"];
const KERNEL_PSEUDO_FILES: &[&str] = &["[vdso]", "[vvar]", "[vsyscall]"];

/// Library file name prefixes (after `lib`) of MPI implementations and the transports and
/// runtimes they load (Open MPI, MPICH, UCX, libfabric, PSM, PMIx, hwloc ...).
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

impl LibraryKind {
    /// The kind of the module at `path` (a path, a bare file name or a pseudo-name such as
    /// `[vdso]`; a " (deleted)" suffix is ignored).
    pub fn of(path: &str) -> LibraryKind {
        let file = file_name(path);
        let starts_with_any = |prefixes: &[&str]| prefixes.iter().any(|p| file.starts_with(p));
        if KERNEL_PSEUDO_FILES.contains(&file) {
            LibraryKind::KernelPseudoFile
        } else if starts_with_any(DYNAMIC_LINKER_PREFIXES) || is_versioned_glibc_linker(file) {
            LibraryKind::DynamicLinker
        } else if starts_with_any(LIBC_PREFIXES) {
            LibraryKind::Libc
        } else if starts_with_any(CXX_RUNTIME_PREFIXES) {
            LibraryKind::CxxRuntime
        } else if starts_with_any(GCC_RUNTIME_PREFIXES) {
            LibraryKind::GccRuntime
        } else if starts_with_any(FORTRAN_RUNTIME_PREFIXES) {
            LibraryKind::FortranRuntime
        } else if is_mpi_library(file) {
            LibraryKind::Mpi
        } else {
            LibraryKind::Other
        }
    }

    /// The C library, the dynamic linker or a language runtime: code every program of that
    /// language runs, rather than the program's own or a library it chose.
    pub fn is_runtime(self) -> bool {
        matches!(
            self,
            LibraryKind::Libc
                | LibraryKind::DynamicLinker
                | LibraryKind::CxxRuntime
                | LibraryKind::GccRuntime
                | LibraryKind::FortranRuntime
        )
    }
}

/// The last component of a path, without a " (deleted)" suffix.
pub fn file_name(path: &str) -> &str {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    path.rsplit('/').next().unwrap_or_default()
}

/// `ld-2.31.so`: `ld-` and a version.
fn is_versioned_glibc_linker(file: &str) -> bool {
    file.strip_prefix("ld-")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// An MPI library or Open MPI component (`mca_*.so`), by file name. Open MPI's bundled
/// libevent is not one by name: only the classifier, which sees the whole image, can tell.
fn is_mpi_library(file: &str) -> bool {
    let library = file
        .strip_prefix("lib")
        .is_some_and(|rest| MPI_LIBRARY_PREFIXES.iter().any(|p| rest.starts_with(p)));
    let mca = file.starts_with("mca_") && file.contains(".so");
    library || mca
}

/// A function of an MPI library or of the transports it uses, by name.
pub fn is_mpi_function(name: &str) -> bool {
    MPI_FUNCTION_PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// A C library internal that allocates for the library's own needs, by name.
pub fn is_libc_internal_function(name: &str) -> bool {
    LIBC_FUNCTION_PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
#[path = "libraries_tests.rs"]
mod tests;
