//! UCX patching the C library: Open MPI over UCX (`--mca pml ucx --mca pml_ucx_tls any --mca
//! pml_ucx_devices any`) and MPICH (ch4:ucx, always) have UCX rewrite the entries of libc's
//! mmap, munmap, mremap, brk, sbrk, shmat and shmdt at MPI_Init into jumps to its own hooks.
//! Under memsup, with either engine, every rank lives and prints what it prints natively; the
//! allocator calls are all recorded (the fixture's two buffers, exact) and so are the mapping
//! calls (each buffer's mmap of n MiB and a page, and its munmap at free). In run mode memsup
//! sees mapping calls at the system call, below UCX's hooks (which show as `ucm_*` frames of
//! their stacks), and plants nothing on the patched entries: no foreign patch is met.
//! fixtures/mpi_alltoall.c, 4 ranks, 2 alltoalls.

use crate::common::file_name;
use crate::common::mpi::{mpi_fixture, mpi_libraries, MpiLibrary, MpiLinking};
use crate::common::mpi_job::{
    assert_fixture_buffers, assert_same_job, calls_from, images_of, mapped_where, passes_through,
    rank_pids, went_through_ucx, Mapped,
};
use crate::common::report::report_json;
use crate::common::run::{memsup_binary, run_command};

const RANKS: u32 = 4;
const ITERATIONS: &str = "2";
/// Open MPI's UCX PML on a host without InfiniBand; MPICH (ch4:ucx) always uses UCX.
const OPEN_MPI_OVER_UCX: [&str; 9] = [
    "--mca",
    "pml",
    "ucx",
    "--mca",
    "pml_ucx_tls",
    "any",
    "--mca",
    "pml_ucx_devices",
    "any",
];

/// `LAUNCHER -n 4 [UCX options] FIXTURE 2` as arguments.
fn job(library: MpiLibrary, fixture: &std::path::Path) -> Vec<std::ffi::OsString> {
    let mut arguments: Vec<std::ffi::OsString> = library
        .launch_arguments(RANKS)
        .into_iter()
        .map(Into::into)
        .collect();
    if library == MpiLibrary::OpenMpi {
        arguments.extend(OPEN_MPI_OVER_UCX.iter().map(Into::into));
    }
    arguments.push(fixture.into());
    arguments.push(ITERATIONS.into());
    arguments
}

#[test]
fn ranks_whose_libc_ucx_patches_live_and_are_recorded_with_either_engine() {
    for library in mpi_libraries() {
        let int3 = check_job(library, "int3");
        let hooks = check_job(library, "hooks");
        // malloc's own mmaps (the fixture's two and any large block of the MPI library's)
        // are the same in every rank and with both engines.
        assert!(
            int3.iter().all(|mapped| *mapped == int3[0]),
            "{library:?}: {int3:?}"
        );
        assert_eq!(
            hooks, int3,
            "{library:?}: malloc's mmaps, hooks against int3"
        );
    }
}

/// Runs the job under memsup with `engine`, checks it, and returns each rank's mmaps made
/// by malloc, by pid.
fn check_job(library: MpiLibrary, engine: &str) -> Vec<Mapped> {
    let fixture = mpi_fixture("mpi_alltoall", library, MpiLinking::Dynamic);
    let arguments = job(library, &fixture);
    let mut native = library.command(&arguments[0]);
    native.args(&arguments[1..]);
    let native = run_command(native, None);
    let label = format!("{library:?} {engine}");
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("ucx.msup");
    let mut command = library.command(memsup_binary());
    command
        .args(["run", "-q", "--engine", engine, "-o"])
        .arg(&profile)
        .arg("--")
        .args(&arguments);
    let supervised = run_command(command, None);
    assert_same_job(&supervised, &native, RANKS, 2);

    let report = report_json(&profile);
    let images = images_of(&report, &file_name(&fixture));
    let pids: Vec<i64> = rank_pids(&supervised.stdout, RANKS, 2)
        .into_values()
        .collect();
    let mut recorded: Vec<i64> = images.keys().copied().collect();
    recorded.sort();
    let mut printed = pids.clone();
    printed.sort();
    assert_eq!(recorded, printed, "{label}: one image per rank");
    // glibc maps each buffer (n MiB and its chunk header) with mmap and unmaps it at free.
    let mapping = u64::from(RANKS) * (1 << 20) + 4096;
    let mut malloc_mappings = Vec::new();
    for (pid, image) in images {
        let what = format!("{label}, pid {pid}");
        assert!(
            went_through_ucx(image),
            "{what}: UCX's hooks were not in use"
        );
        assert_fixture_buffers(image, RANKS, &what);
        // A thread's new arena is mapped by malloc too, but not by sysmalloc_mmap.
        malloc_mappings.push(mapped_where(image, |stack| {
            passes_through(stack, "__GI___libc_malloc") && passes_through(stack, "sysmalloc_mmap")
        }));
        let freed_in_main =
            mapped_where(image, |stack| calls_from(stack, "__GI___libc_free", "main"));
        let expected = Mapped {
            munmap_calls: 2,
            munmap_bytes: 2 * mapping,
            ..Mapped::default()
        };
        assert_eq!(freed_in_main, expected, "{what}: main's frees");
        // The hook engine's stack of a call made inside a hooked malloc ends there
        // ([truncated]): only int3 names the buffer's function.
        if engine == "int3" {
            for function in ["make_send_buffer", "make_receive_buffer"] {
                let mapped = mapped_where(image, |stack| passes_through(stack, function));
                let expected = Mapped {
                    mmap_calls: 1,
                    mmap_bytes: mapping,
                    ..Mapped::default()
                };
                assert_eq!(mapped, expected, "{what}: {function}");
            }
        }
        assert_eq!(image["probes"]["foreign_patches"], 0, "{what}");
    }
    malloc_mappings
}
