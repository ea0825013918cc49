//! The MPI component whole: modules MPI brought in, and its shared-memory segments.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::super::attribution::is_mpi_shared_memory;
use super::super::loaded_by_mpi::{is_mpi_plugin, mpi_modules, Dynamic, ModuleFacts};
use super::*;

const MPI_EXE: &str = "/home/user/solver";

/// A module graph: (path, soname, needed, root).
type Node = (&'static str, &'static str, &'static [&'static str], bool);

/// The modules `mpi_modules` gives for `nodes` (the C runtime known by its name).
fn brought_in(nodes: &[Node]) -> BTreeSet<String> {
    let dynamics: HashMap<&str, Arc<Dynamic>> = nodes
        .iter()
        .map(|&(path, soname, needed, _)| {
            let dynamic = Dynamic {
                soname: (!soname.is_empty()).then(|| soname.to_string()),
                needed: needed.iter().map(|name| name.to_string()).collect(),
            };
            (path, Arc::new(dynamic))
        })
        .collect();
    let facts: Vec<ModuleFacts> = nodes
        .iter()
        .map(|&(path, _, _, root)| ModuleFacts {
            path,
            root,
            runtime: path.contains("libc.so") || path.contains("libm.so"),
        })
        .collect();
    mpi_modules(&facts, MPI_EXE, |path| dynamics.get(path).cloned())
}

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|path| path.to_string()).collect()
}

/// Open MPI's shape: the program needs libmpi; libmpi needs the ORTE/OPAL libraries and
/// hwloc, hwloc needs libudev; a dlopened hwloc plugin needs libX11 (and it libxcb), a PMIx
/// plugin libz; everything needs the C library.
const OPEN_MPI: [Node; 11] = [
    (MPI_EXE, "", &["libmpi.so.40", "libc.so.6"], false),
    (
        "/usr/lib/libmpi.so.40.30.4",
        "libmpi.so.40",
        &["libopen-pal.so.40", "libhwloc.so.15", "libc.so.6"],
        true,
    ),
    (
        "/usr/lib/libopen-pal.so.40.30.2",
        "libopen-pal.so.40",
        &["libm.so.6", "libc.so.6"],
        true,
    ),
    (
        "/usr/lib/libhwloc.so.15.6.1",
        "libhwloc.so.15",
        &["libudev.so.1", "libc.so.6"],
        true,
    ),
    (
        "/usr/lib/libudev.so.1.7.5",
        "libudev.so.1",
        &["libc.so.6"],
        false,
    ),
    (
        "/usr/lib/hwloc/hwloc_gl.so",
        "",
        &["libX11.so.6", "libc.so.6"],
        true,
    ),
    (
        "/usr/lib/libX11.so.6.4.0",
        "libX11.so.6",
        &["libxcb.so.1"],
        false,
    ),
    ("/usr/lib/libxcb.so.1.1.0", "libxcb.so.1", &[], false),
    (
        "/usr/lib/pmix/pmix_mca_pcompress_zlib.so",
        "",
        &["libz.so.1"],
        true,
    ),
    ("/usr/lib/libz.so.1.2.13", "libz.so.1", &[], false),
    (
        "/usr/lib/libc.so.6",
        "libc.so.6",
        &["ld-linux-x86-64.so.2"],
        false,
    ),
];

#[test]
fn what_the_mpi_library_needs_and_dlopens_is_mpi_but_not_the_c_runtime() {
    assert_eq!(
        brought_in(&OPEN_MPI),
        set(&[
            "/usr/lib/hwloc/hwloc_gl.so",
            "/usr/lib/libX11.so.6.4.0",
            "/usr/lib/libhwloc.so.15.6.1",
            "/usr/lib/libmpi.so.40.30.4",
            "/usr/lib/libopen-pal.so.40.30.2",
            "/usr/lib/libudev.so.1.7.5",
            "/usr/lib/libxcb.so.1.1.0",
            "/usr/lib/libz.so.1.2.13",
            "/usr/lib/pmix/pmix_mca_pcompress_zlib.so",
        ])
    );
}

#[test]
fn a_library_the_program_needs_itself_stays_its_own() {
    // The program needs libz and libX11 (through a library of its own) too.
    let mut nodes = OPEN_MPI.to_vec();
    nodes[0].2 = &["libmpi.so.40", "libz.so.1", "libplot.so.2", "libc.so.6"];
    nodes.push((
        "/usr/lib/libplot.so.2.2.4",
        "libplot.so.2",
        &["libX11.so.6"],
        false,
    ));
    let mpi = brought_in(&nodes);
    for own in [
        "/usr/lib/libz.so.1.2.13",
        "/usr/lib/libX11.so.6.4.0",
        "/usr/lib/libxcb.so.1.1.0",
    ] {
        assert!(!mpi.contains(own), "{own} in {mpi:?}");
    }
    assert!(!mpi.contains("/usr/lib/libplot.so.2.2.4"));
    assert!(mpi.contains("/usr/lib/libudev.so.1.7.5"));
}

#[test]
fn needed_names_resolve_by_soname_then_by_file_name() {
    // No soname anywhere: "libfoo.so.1" is the file libfoo.so.1.2.3, not libfoo.so.10.
    let nodes: [Node; 4] = [
        (MPI_EXE, "", &["libmpich.so.12"], false),
        ("/usr/lib/libmpich.so.12.2.2", "", &["libfoo.so.1"], true),
        ("/usr/lib/libfoo.so.10.0.0", "", &[], false),
        ("/usr/lib/libfoo.so.1.2.3", "", &[], false),
    ];
    assert_eq!(
        brought_in(&nodes),
        set(&["/usr/lib/libfoo.so.1.2.3", "/usr/lib/libmpich.so.12.2.2"])
    );
}

#[test]
fn without_dynamic_sections_only_the_roots_are_mpi() {
    let facts = [
        ModuleFacts {
            path: MPI_EXE,
            root: false,
            runtime: false,
        },
        ModuleFacts {
            path: "/usr/lib/libmpi.so.40",
            root: true,
            runtime: false,
        },
        ModuleFacts {
            path: "/usr/lib/libudev.so.1",
            root: false,
            runtime: false,
        },
    ];
    assert_eq!(
        mpi_modules(&facts, MPI_EXE, |_| None),
        set(&["/usr/lib/libmpi.so.40"])
    );
}

#[test]
fn plugins_and_transport_segments_are_known_by_name() {
    for (path, plugin) in [
        (
            "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so",
            true,
        ),
        (
            "/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/pmix_mca_pcompress_zlib.so",
            true,
        ),
        ("/usr/lib/x86_64-linux-gnu/hwloc/hwloc_pci.so", true),
        ("/usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0", true),
        ("/usr/lib/x86_64-linux-gnu/libmca_common_sm.so.40", true),
        ("/usr/lib/x86_64-linux-gnu/libX11.so.6", false),
        ("/home/user/hwloc_tool", false),
    ] {
        assert_eq!(is_mpi_plugin(path), plugin, "{path}");
    }
    for (path, transport) in [
        ("/dev/shm/vader_segment.vm.0.6b10001.0", true),
        (
            "/tmp/ompi.vm.0/pid.27215/pmix_dstor_ds21_27215/smseg-112263169-0",
            true,
        ),
        ("/tmp/ompi.vm.0/pid.27215/1/shared_mem_pool.vm", true),
        ("/dev/shm/ucx_shm_posix_5f1a2b (deleted)", true),
        ("/dev/shm/mpich_shar_tmpA1b2C3 (deleted)", true),
        ("/dev/shm/psm2", false),
        ("/SYSV00000000 (deleted)", false),
        ("/home/user/ompi.conf", false),
    ] {
        assert_eq!(is_mpi_shared_memory(path), transport, "{path}");
    }
}

const PLUGIN: &str = "/opt/gl/libglplugin.so.1";
const OWN_PLUGIN: &str = "/home/user/libown.so";

/// Two modules dlopened after start, one from MPI code, one from the program's; then one
/// snapshot of them and of shared memory made by MPI, by the program and by nobody recorded.
fn dlopen_and_shared_memory_image() -> Vec<Record> {
    let module = |time_ns, path: &str, start: u64| Record::Module {
        time_ns,
        pid: PID,
        path: path.to_string(),
        start,
        end: start + 0x10000,
        bias: start,
    };
    let shared = MAPPING_SHARED | MAPPING_READ | MAPPING_WRITE;
    image(
        1000,
        vec![
            mmap(10, 0x6100_0000, 0x10000, 0x02, MPI),
            module(11, PLUGIN, 0x6100_0000),
            mmap(12, 0x6200_0000, 0x10000, 0x02, APP),
            module(13, OWN_PLUGIN, 0x6200_0000),
            mmap(20, 0x7100_0000, 0x10000, 0x01, MPI),
            mmap(21, 0x7200_0000, 0x10000, 0x01, APP),
            snapshot(
                100,
                vec![
                    region(
                        0x6100_0000,
                        0x6101_0000,
                        MAPPING_EXECUTE,
                        PLUGIN,
                        1 << 14,
                        1 << 13,
                    ),
                    region(
                        0x6200_0000,
                        0x6201_0000,
                        MAPPING_EXECUTE,
                        OWN_PLUGIN,
                        1 << 12,
                        1 << 12,
                    ),
                    region(
                        0x7100_0000,
                        0x7101_0000,
                        shared,
                        "/dev/shm/ucx_any",
                        1 << 16,
                        1000,
                    ),
                    region(
                        0x7200_0000,
                        0x7201_0000,
                        shared,
                        "/dev/shm/mine",
                        1 << 13,
                        300,
                    ),
                    region(
                        0x7300_0000,
                        0x7301_0000,
                        shared,
                        "/dev/shm/vader_segment.h.0.1.0",
                        1 << 13,
                        20,
                    ),
                    region(
                        0x7400_0000,
                        0x7401_0000,
                        shared,
                        "/dev/shm/other",
                        1 << 12,
                        7,
                    ),
                ],
            ),
        ],
    )
}

#[test]
fn a_module_dlopened_from_mpi_code_is_mpi_and_mpi_s_shared_memory_is_mpi_shm() {
    let image = analyzed(&dlopen_and_shared_memory_image());
    assert_eq!(
        first_snapshot(&image),
        held(&[
            ("mpi:shm", (1 << 16) + (1 << 13), 1020),
            ("mpi", 1 << 14, 1 << 13),
            ("app", 1 << 13, 300),
            ("libown.so", 1 << 12, 1 << 12),
            ("shm", 1 << 12, 7),
        ])
    );
}

#[test]
fn a_user_rule_still_names_what_mpi_brought_in() {
    let image = analyzed_with(&dlopen_and_shared_memory_image(), &["gl=glplugin"]);
    assert_eq!(component(&image, "gl").peak_rss_bytes, 1 << 14);
    assert_eq!(component(&image, "mpi:shm").peak_pss_bytes, 1020);
}

const X_LIBRARY: &str = "/opt/x/libxfake.so.1";

fn munmap(time_ns: u64, address: u64, length: u64) -> Record {
    Record::Mapping {
        time_ns,
        pid: PID,
        tid: PID,
        call: MapCall::Munmap,
        args: [address, length, 0, 0, 0, 0],
        result: 0,
        stack: MPI,
    }
}

/// A library dlopened from MPI code without a module record (a static program's dlopen that
/// failed), unmapped at 2 ms; a snapshot ending at `snapshot_ns` still shows it.
fn unloaded_library_image(snapshot_ns: u64) -> Vec<Record> {
    let library = region(
        0x6100_0000,
        0x6101_0000,
        MAPPING_EXECUTE,
        X_LIBRARY,
        1 << 14,
        1 << 13,
    );
    image(
        10_000_000_000,
        vec![
            mmap(1_000_000, 0x6100_0000, 0x10000, 0x02, MPI),
            munmap(2_000_000, 0x6100_0000, 0x10000),
            snapshot(snapshot_ns, vec![library]),
        ],
    )
}

#[test]
fn a_library_unmapped_while_a_snapshot_was_read_keeps_its_creator_in_it() {
    // The read began before the unmapping, and ended 1 ms after it.
    let during = analyzed(&unloaded_library_image(3_000_000));
    assert_eq!(first_snapshot(&during), held(&[("mpi", 1 << 14, 1 << 13)]));
    // Read long after: no recorded call made what holds that range now.
    let after = analyzed(&unloaded_library_image(2_000_000_000));
    assert_eq!(
        first_snapshot(&after),
        held(&[("libxfake.so", 1 << 14, 1 << 13)])
    );
}
