//! Real spellings of the libraries memsup meets, from glibc, musl, GCC, LLVM and MPI installs.

use super::LibraryKind::{self, *};
use super::*;

const SPELLINGS: &[(&str, LibraryKind)] = &[
    // glibc, current and before 2.34, and its satellites.
    ("/lib/x86_64-linux-gnu/libc.so.6", Libc),
    ("/lib/x86_64-linux-gnu/libc-2.31.so", Libc),
    ("/usr/lib64/libm.so.6", Libc),
    ("/lib/x86_64-linux-gnu/libm-2.31.so", Libc),
    ("/lib/x86_64-linux-gnu/libpthread.so.0", Libc),
    ("/lib/x86_64-linux-gnu/libpthread-2.31.so", Libc),
    ("/lib/x86_64-linux-gnu/libdl.so.2", Libc),
    ("/lib/x86_64-linux-gnu/librt.so.1", Libc),
    ("/usr/lib/librtmp.so.1", Other),
    ("/usr/lib/libdlt.so.2", Other),
    // musl: one file, the dynamic linker, also installed under the C library's name.
    ("/lib/ld-musl-x86_64.so.1", DynamicLinker),
    ("/usr/lib/libc.musl-x86_64.so.1", Libc),
    // Dynamic linkers.
    ("/lib64/ld-linux-x86-64.so.2", DynamicLinker),
    ("/lib/x86_64-linux-gnu/ld-2.31.so", DynamicLinker),
    ("/lib64/ld64.so.2", DynamicLinker),
    ("/lib/ld.so", DynamicLinker),
    // Language runtimes.
    ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", CxxRuntime),
    ("/usr/lib/llvm-17/lib/libc++.so.1", CxxRuntime),
    ("/usr/lib/llvm-17/lib/libc++abi.so.1", CxxRuntime),
    ("/lib/x86_64-linux-gnu/libgcc_s.so.1", GccRuntime),
    ("/usr/lib/x86_64-linux-gnu/libatomic.so.1", GccRuntime),
    ("/usr/lib/x86_64-linux-gnu/libgfortran.so.5", FortranRuntime),
    ("/usr/lib/x86_64-linux-gnu/libquadmath.so.0", FortranRuntime),
    // MPI implementations and what they load.
    ("/usr/lib/x86_64-linux-gnu/libmpi.so.40", Mpi),
    ("/usr/lib/x86_64-linux-gnu/libmpich.so.12", Mpi),
    ("/usr/lib/x86_64-linux-gnu/libmpi_usempif08.so.40", Mpi),
    ("/usr/lib/x86_64-linux-gnu/libopen-pal.so.40", Mpi),
    ("/usr/lib/x86_64-linux-gnu/libopen-rte.so.40", Mpi),
    ("/usr/lib/x86_64-linux-gnu/libucp.so.0", Mpi),
    ("/usr/lib/x86_64-linux-gnu/libfabric.so.1", Mpi),
    (
        "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so",
        Mpi,
    ),
    ("/usr/lib/x86_64-linux-gnu/libevent_core-2.1.so.7", Other),
    // Kernel pseudo-files, and the rest.
    ("[vdso]", KernelPseudoFile),
    ("[vsyscall]", KernelPseudoFile),
    ("[heap]", Other),
    ("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", Other),
    ("/usr/lib/x86_64-linux-gnu/libmpfr.so.6", Other),
    ("/home/user/app", Other),
    ("/lib/x86_64-linux-gnu/libc.so.6 (deleted)", Libc),
    ("libstdc++.so.6", CxxRuntime),
    ("", Other),
];

#[test]
fn every_spelling_has_its_kind() {
    for &(path, kind) in SPELLINGS {
        assert_eq!(LibraryKind::of(path), kind, "{path}");
    }
}

#[test]
fn runtimes_are_the_c_library_the_dynamic_linker_and_language_runtimes() {
    let runtimes: Vec<LibraryKind> = [
        Libc,
        DynamicLinker,
        CxxRuntime,
        GccRuntime,
        FortranRuntime,
        Mpi,
        KernelPseudoFile,
        Other,
    ]
    .into_iter()
    .filter(|kind| kind.is_runtime())
    .collect();
    assert_eq!(
        runtimes,
        [Libc, DynamicLinker, CxxRuntime, GccRuntime, FortranRuntime]
    );
}

#[test]
fn function_prefixes_name_mpi_and_libc_internals() {
    assert!(is_mpi_function("MPI_Init"));
    assert!(is_mpi_function("opal_malloc"));
    assert!(is_mpi_function("fi_getinfo"));
    assert!(!is_mpi_function("mpi_init"));
    assert!(!is_mpi_function("main"));
    assert!(is_libc_internal_function("_IO_file_doallocate"));
    assert!(is_libc_internal_function("_dl_map_object"));
    assert!(!is_libc_internal_function("malloc"));
    assert!(!is_libc_internal_function("my_IO_buffer"));
}

#[test]
fn file_names_drop_directories_and_the_deleted_suffix() {
    assert_eq!(file_name("/usr/lib/libfoo.so.1 (deleted)"), "libfoo.so.1");
    assert_eq!(file_name("libfoo.so"), "libfoo.so");
    assert_eq!(file_name("/usr/lib/"), "");
}
