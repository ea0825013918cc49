//! Scripted images with hand-counted expectations.

use super::classify::Classifier;
use super::timeline::{Buckets, StepSeries};
use super::*;
use crate::analysis::replay::Replay;
use crate::analysis::{ProcessAnalysis, SampleOrder, Settings};
use crate::trace::format::{
    AllocFunction, ExitKind, MapCall, MappingResidency, ProbeCounters, Record, RecordMode,
    StartCause, MAPPING_EXECUTE, MAPPING_READ, MAPPING_SHARED, MAPPING_WRITE,
};
use crate::trace::stacks::StackId;

const PID: u32 = 100;
const EXE: &str = "/home/user/app";
const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const LIBMPI: &str = "/usr/lib/libmpi.so.40";
const LIBHDF5: &str = "/usr/lib/libhdf5.so.200";
const MIB: u64 = 1 << 20;

// Stacks (id: frames innermost first).
const APP: StackId = 2; // solver_step, main
const MPI: StackId = 3; // MPI_Init, main
const HDF5: StackId = 4; // H5Dread, main
const STATIC_MPI: StackId = 5; // ompi_static_thing (in the executable), main
const MALLOC_MMAP: StackId = 8; // __mmap64, sysmalloc, malloc, solver_step, main
const THREAD_MMAP: StackId = 11; // __mmap64, allocate_stack, pthread_create, main
const HDF5_MMAP: StackId = 12; // __mmap64, H5Dread, main
const NAMELESS: StackId = 13; // an address with no symbol
const STATIC_STDIO: StackId = 14; // _IO_file_doallocate (in the executable)

/// The stack tree: (parent, address), ids from 1.
const NODES: [(StackId, u64); 14] = [
    (0, 0x1000),
    (1, 0x2000),
    (1, 0x3000),
    (1, 0x6000),
    (1, 0x7000),
    (2, 0x4000),
    (6, 0x8000),
    (7, 0x5200),
    (1, 0x5000),
    (9, 0x5100),
    (10, 0x5200),
    (4, 0x5200),
    (0, 0x9999),
    (0, 0xa000),
];

const SYMBOLS: [(u64, &str, &str); 11] = [
    (0x1000, "main", EXE),
    (0x2000, "solver_step", EXE),
    (0x3000, "MPI_Init", LIBMPI),
    (0x4000, "malloc", LIBC),
    (0x5000, "pthread_create@@GLIBC_2.34", LIBC),
    (0x5100, "allocate_stack", LIBC),
    (0x5200, "__mmap64", LIBC),
    (0x6000, "H5Dread", LIBHDF5),
    (0x7000, "ompi_static_thing", EXE),
    (0x8000, "sysmalloc", LIBC),
    (0xa000, "_IO_file_doallocate", EXE),
];

/// An image of PID 100 from 0 to `end_ns`: start, exec, modules and stack nodes, then
/// `body`, then the symbols (they come at the end of an image) and the exit.
fn image(end_ns: u64, body: Vec<Record>) -> Vec<Record> {
    let mut records = vec![
        Record::ProcessStart {
            time_ns: 0,
            pid: PID,
            parent_pid: None,
            cause: StartCause::Launch,
        },
        Record::Exec {
            time_ns: 0,
            pid: PID,
            exe: EXE.to_string(),
            argv: vec![EXE.to_string()],
        },
    ];
    for (index, path) in [EXE, LIBC, LIBMPI, LIBHDF5].into_iter().enumerate() {
        let start = 0x10_0000_0000 * (index as u64 + 1);
        records.push(Record::Module {
            time_ns: 0,
            pid: PID,
            path: path.to_string(),
            start,
            end: start + 0x10000,
            bias: start,
        });
    }
    for (index, &(parent, address)) in NODES.iter().enumerate() {
        records.push(Record::StackNode {
            pid: PID,
            id: index as StackId + 1,
            parent,
            address,
        });
    }
    records.extend(body);
    for (address, function, module) in SYMBOLS {
        records.push(Record::Symbol {
            pid: PID,
            address,
            function: function.to_string(),
            offset: 0,
            module: module.to_string(),
            frames: Vec::new(),
        });
    }
    records.push(Record::ProcessExit {
        time_ns: end_ns,
        pid: PID,
        status: ExitKind::Code(0),
        counters: ProbeCounters::default(),
    });
    records
}

fn alloc(time_ns: u64, address: u64, size: u64, stack: StackId) -> Record {
    Record::Alloc {
        time_ns,
        pid: PID,
        tid: PID,
        function: AllocFunction::Malloc,
        address,
        size,
        stack,
    }
}

fn free(time_ns: u64, address: u64) -> Record {
    Record::Free {
        time_ns,
        pid: PID,
        tid: PID,
        address,
    }
}

fn mmap(time_ns: u64, address: u64, length: u64, flags: u64, stack: StackId) -> Record {
    Record::Mapping {
        time_ns,
        pid: PID,
        tid: PID,
        call: MapCall::Mmap,
        args: [0, length, 3, flags, u64::MAX, 0],
        result: address as i64,
        stack,
    }
}

/// A mapping of a snapshot: rss and pss given, no swap.
pub(super) fn region(
    start: u64,
    end: u64,
    flags: u8,
    path: &str,
    rss: u64,
    pss: u64,
) -> MappingResidency {
    MappingResidency {
        start,
        end,
        flags,
        offset: 0,
        inode: 0,
        path: path.to_string(),
        rss,
        pss,
        shared: 0,
        private_dirty: 0,
        anonymous: 0,
        swap: 0,
        swap_pss: 0,
    }
}

fn snapshot(time_ns: u64, mappings: Vec<MappingResidency>) -> Record {
    Record::SmapsSnapshot {
        time_ns,
        pid: PID,
        reason: SnapshotReason::Interval,
        cost_ns: 1000,
        mappings,
    }
}

fn status(time_ns: u64, rss: u64) -> Record {
    Record::StatusSample {
        time_ns,
        pid: PID,
        rss,
        anon: 0,
        file: 0,
        shmem: 0,
        swap: 0,
    }
}

fn analyzed_with(records: &[Record], rules: &[&str]) -> ProcessAnalysis {
    let rules: Vec<String> = rules.iter().map(|rule| rule.to_string()).collect();
    let settings = Settings {
        components: ComponentRules::parse_all(&rules).expect("valid rules"),
        ..Settings::default()
    };
    let mut images = replay(records, RecordMode::Run, &settings);
    assert_eq!(images.len(), 1);
    images.remove(0)
}

fn replay(records: &[Record], mode: RecordMode, settings: &Settings) -> Vec<ProcessAnalysis> {
    let mut replay = Replay::new(mode, SampleOrder::Apart);
    for record in records {
        replay.apply(record.clone());
    }
    replay.finish(settings)
}

fn analyzed(records: &[Record]) -> ProcessAnalysis {
    analyzed_with(records, &[])
}

fn component<'a>(image: &'a ProcessAnalysis, name: &str) -> &'a Component {
    let components = &image.components.components;
    components
        .iter()
        .find(|component| component.name == name)
        .unwrap_or_else(|| panic!("no component {name} in {components:#?}"))
}

/// (name, rss, pss) of every component in the first snapshot, in list order.
fn first_snapshot(image: &ProcessAnalysis) -> Vec<(String, u64, u64)> {
    image
        .components
        .components
        .iter()
        .filter_map(|c| {
            let point = c.resident.first()?;
            Some((c.name.clone(), point.rss, point.pss))
        })
        .collect()
}

fn held(list: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
    list.iter()
        .map(|&(name, rss, pss)| (name.to_string(), rss, pss))
        .collect()
}

#[test]
fn module_paths_are_classified() {
    let rules = ComponentRules::parse_all(&["petsc=/libpetsc".to_string()]).unwrap();
    let with_mpi = Classifier::new(&rules, EXE, [LIBMPI, LIBC]);
    for (path, expected) in [
        ("/opt/petsc/lib/libpetsc.so.3.20", "petsc"),
        (LIBMPI, "mpi"),
        ("/usr/lib/libmpich.so.12", "mpi"),
        ("/usr/lib/x86_64-linux-gnu/libucp.so.0", "mpi"),
        ("/usr/lib/libfabric.so.1", "mpi"),
        ("/usr/lib/openmpi/mca_btl_vader.so", "mpi"),
        ("/usr/lib/libevent_core-2.1.so.7", "mpi"),
        (LIBC, "libc"),
        ("/lib64/ld-linux-x86-64.so.2", "libc"),
        ("/usr/lib/libstdc++.so.6.0.30", "libc"),
        ("/usr/lib/libgfortran.so.5", "libc"),
        ("/lib/libm.so.6", "libc"),
        ("[vdso]", "libc"),
        ("/usr/lib/librtmp.so.1", "librtmp.so"),
        (EXE, "app"),
        ("/home/user/app (deleted)", "app"),
        ("/usr/lib/libhdf5.so.200.1.0", "libhdf5.so"),
        ("/usr/lib/libz.so", "libz.so"),
        ("/data/input.dat", "input.dat"),
        ("", "unknown"),
    ] {
        assert_eq!(with_mpi.module(path), expected, "{path}");
    }
    let without_mpi = Classifier::new(&rules, EXE, [LIBC]);
    assert_eq!(
        without_mpi.module("/usr/lib/libevent_core-2.1.so.7"),
        "libevent_core-2.1.so"
    );
}

#[test]
fn malformed_rules_are_refused_with_one_line() {
    for (text, expected) in [
        ("nameonly", "no '=' found"),
        ("=libfoo", "the component name is empty"),
        ("x=lib(", "bad regular expression: unclosed group"),
    ] {
        let error = ComponentRule::parse(text).unwrap_err();
        assert!(error.contains(expected), "{text}: {error}");
        assert!(!error.contains('\n'), "{error}");
    }
    let rule = ComponentRule::parse("io=H5D.*=x").unwrap();
    assert_eq!(rule.name, "io");
    assert_eq!(rule.pattern.as_str(), "H5D.*=x");
}

fn one_block_per_stack() -> Vec<Record> {
    image(
        1000,
        vec![
            alloc(10, 0x1_0000, 100, APP),
            alloc(20, 0x2_0000, 200, MPI),
            alloc(30, 0x3_0000, 400, HDF5),
            alloc(40, 0x4_0000, 800, STATIC_MPI),
            alloc(50, 0x5_0000, 1600, NAMELESS),
            alloc(60, 0x6_0000, 3200, STATIC_STDIO),
        ],
    )
}

#[test]
fn stacks_are_classified_by_rules_mpi_frames_and_their_first_module() {
    let image = analyzed(&one_block_per_stack());
    let peaks: Vec<(&str, u64)> = image
        .components
        .components
        .iter()
        .map(|c| (c.name.as_str(), c.peak_requested_bytes))
        .collect();
    assert_eq!(
        peaks,
        [
            // The C library's own buffer, by its name, though it is in the executable.
            ("libc", 3200),
            ("unknown", 1600),
            ("mpi", 1000),
            ("libhdf5.so", 400),
            ("app", 100)
        ]
    );
    // A user rule matching a function name wins over the built-in rules, even over mpi.
    let ruled = analyzed_with(&one_block_per_stack(), &["io=^H5D", "init=MPI_Init"]);
    assert_eq!(component(&ruled, "io").peak_requested_bytes, 400);
    assert_eq!(component(&ruled, "init").peak_requested_bytes, 200);
    assert_eq!(component(&ruled, "mpi").peak_requested_bytes, 800);
}

/// A `[heap]` of `rss` resident bytes holding 3000 live bytes of the app and 1000 of MPI.
fn arena_image(rss: u64, pss: u64, scale: u64) -> Vec<Record> {
    image(
        1000,
        vec![
            alloc(10, 0x10_0010, 3000 * scale, APP),
            alloc(20, 0x10_8000, 1000 * scale, MPI),
            // Outside the arena: not counted in it.
            alloc(30, 0x90_0000, 5000, APP),
            snapshot(
                100,
                vec![region(
                    0x10_0000,
                    0x20_0000,
                    MAPPING_READ | MAPPING_WRITE,
                    "[heap]",
                    rss,
                    pss,
                )],
            ),
        ],
    )
}

#[test]
fn an_arena_with_fewer_live_bytes_than_resident_ones_shows_overhead() {
    let image = analyzed(&arena_image(8192, 4096, 1));
    assert_eq!(
        first_snapshot(&image),
        held(&[
            ("overhead", 4192, 2096),
            ("app", 3000, 1500),
            ("mpi", 1000, 500)
        ])
    );
    let summary = &image.components.snapshots[0];
    assert_eq!(
        (
            summary.rss,
            summary.pss,
            summary.arena_rss,
            summary.arena_requested,
            summary.arena_overhead_rss
        ),
        (8192, 4096, 8192, 4000, 4192)
    );
    assert_eq!(component(&image, "app").peak_requested_bytes, 8000);
}

#[test]
fn free_space_between_blocks_is_known_only_when_every_block_was_seen() {
    // The app's chunk ends at 0x10_0bc0 (3000 bytes asked, 3008 for glibc), MPI's starts at
    // 0x10_7ff0 and ends at 0x10_83e0, 1008 bytes later; the heap ends at 0x20_0000.
    let launched = analyzed(&arena_image(8192, 4096, 1));
    let free = launched.arena_free.expect("free space in the heap");
    assert_eq!(
        (
            free.time_ns,
            free.main.chunks,
            free.main.bytes,
            free.main.top
        ),
        (100, 1, 0x10_7ff0 - 0x10_0bc0, 0x20_0000 - 0x10_83e0)
    );
    assert_eq!(free.thread_arenas, 0);
    let mut attached = arena_image(8192, 4096, 1);
    for record in &mut attached {
        if let Record::ProcessStart { cause, .. } = record {
            *cause = StartCause::Attach;
        }
    }
    assert_eq!(analyzed(&attached).arena_free, None);
    // A fork child's blocks from before the fork are its parent's, unknown to it.
    let rw = MAPPING_READ | MAPPING_WRITE;
    let child = fork_child(
        Vec::new(),
        vec![
            Record::Alloc {
                time_ns: 200,
                pid: CHILD,
                tid: CHILD,
                function: AllocFunction::Malloc,
                address: 0x10_0010,
                size: 3000,
                stack: APP,
            },
            child_snapshot(
                300,
                vec![region(0x10_0000, 0x20_0000, rw, "[heap]", 8192, 8192)],
            ),
        ],
    );
    assert_eq!(child.arena_free, None);
}

#[test]
fn after_an_attach_what_no_known_block_explains_is_unknown() {
    let mut records = arena_image(8192, 4096, 1);
    for record in &mut records {
        if let Record::ProcessStart { cause, .. } = record {
            *cause = StartCause::Attach;
        }
    }
    let image = analyzed_with(&records, &[]);
    assert_eq!(
        first_snapshot(&image),
        held(&[
            ("unknown", 4192, 2096),
            ("app", 3000, 1500),
            ("mpi", 1000, 500)
        ])
    );
}

#[test]
fn an_arena_with_more_live_bytes_than_resident_ones_is_split_in_proportion() {
    // 30000 app and 10000 MPI bytes in 10000 resident bytes: 7500 / 2500; PSS 5001 splits
    // 3750.75 / 1250.25, the rounding remainder going to the larger share.
    let image = analyzed(&arena_image(10000, 5001, 10));
    assert_eq!(
        first_snapshot(&image),
        held(&[("app", 7500, 3751), ("mpi", 2500, 1250)])
    );
    assert!(image
        .components
        .components
        .iter()
        .all(|c| c.name != OVERHEAD));
    assert_eq!(image.components.snapshots[0].arena_overhead_rss, 0);
}

#[test]
fn mappings_are_attributed_to_their_holders() {
    let rw = MAPPING_READ | MAPPING_WRITE;
    let records = image(
        1000,
        vec![
            Record::ScratchPage {
                time_ns: 1,
                pid: PID,
                address: 0x7000_0000,
            },
            // A shared file mapped by HDF5, a thread stack, and a malloc'd large block.
            mmap(10, 0x7100_0000, 0x10000, 0x01, HDF5_MMAP),
            mmap(20, 0x7200_0000, 0x20000, 0x22, THREAD_MMAP),
            mmap(30, 0x7300_0000, 0x40000, 0x22, MALLOC_MMAP),
            snapshot(
                100,
                vec![
                    region(0x7000_0000, 0x7000_1000, MAPPING_EXECUTE, "", 4096, 4096),
                    region(
                        0x7100_0000,
                        0x7101_0000,
                        MAPPING_SHARED,
                        "/data/t.bin",
                        1 << 16,
                        100,
                    ),
                    region(0x7200_0000, 0x7202_0000, rw, "", 8192, 8192),
                    region(0x7300_0000, 0x7304_0000, rw, "", 3 << 12, 3 << 12),
                    // Shared memory nobody recorded creating, and unknown memory.
                    region(
                        0x7400_0000,
                        0x7401_0000,
                        MAPPING_SHARED,
                        "/dev/shm/psm2",
                        1 << 13,
                        7,
                    ),
                    region(
                        0x7500_0000,
                        0x7501_0000,
                        MAPPING_SHARED,
                        "/SYSV00000000 (deleted)",
                        1 << 12,
                        5,
                    ),
                    region(0x7600_0000, 0x7601_0000, rw, "", 5 << 12, 5 << 12),
                    region(
                        0x7700_0000,
                        0x7701_0000,
                        rw,
                        "/data/other.bin",
                        6 << 12,
                        6 << 12,
                    ),
                    // A module of the image, the C library's pseudo-file, the main stack.
                    region(
                        0x10_0000_0000,
                        0x10_0001_0000,
                        MAPPING_EXECUTE,
                        EXE,
                        1 << 14,
                        1 << 14,
                    ),
                    region(0x7f00_0000, 0x7f00_1000, MAPPING_EXECUTE, "[vdso]", 4096, 0),
                    region(0x7ff0_0000, 0x7ff2_0000, rw, "[stack]", 1 << 15, 1 << 15),
                ],
            ),
        ],
    );
    let image = analyzed(&records);
    assert_eq!(
        first_snapshot(&image),
        held(&[
            ("libhdf5.so", 1 << 16, 100),
            ("unknown", 11 << 12, 11 << 12),
            ("stacks", (1 << 15) + 8192, (1 << 15) + 8192),
            ("app", 1 << 14, 1 << 14),
            // Equal peaks: by name.
            ("overhead", 3 << 12, 3 << 12),
            // The image maps libmpi: its private SysV segment nobody was seen making is
            // MPI's transport.
            ("shm", 1 << 13, 7),
            ("libc", 4096, 0),
            ("memsup", 4096, 4096),
            ("mpi:shm", 1 << 12, 5),
        ])
    );
}

#[test]
fn snapshots_see_the_heap_as_it_was_at_their_time_whatever_their_place_in_the_file() {
    let heap = |time_ns| {
        snapshot(
            time_ns,
            vec![region(0x10_0000, 0x11_0000, 3, "[heap]", 4096, 4096)],
        )
    };
    // The sampler wrote both snapshots before the tracer's records of earlier times.
    let records = image(
        1000,
        vec![
            heap(250),
            heap(150),
            alloc(100, 0x10_0100, 1000, APP),
            free(200, 0x10_0100),
            alloc(300, 0x10_0200, 10, MPI),
        ],
    );
    let image = analyzed(&records);
    let resident = |name| -> Vec<(u64, u64)> {
        let points = &component(&image, name).resident;
        points.iter().map(|p| (p.time_ns, p.rss)).collect()
    };
    assert_eq!(resident("app"), [(150, 1000), (250, 0)]);
    assert_eq!(resident(OVERHEAD), [(150, 3096), (250, 4096)]);
    let times: Vec<u64> = image
        .components
        .snapshots
        .iter()
        .map(|s| s.time_ns)
        .collect();
    assert_eq!(times, [150, 250]);
}

#[test]
fn downsampling_keeps_a_one_event_spike_among_ten_thousand() {
    let mut body = Vec::new();
    for step in 0..5000u64 {
        let time_ns = step * 2000;
        body.push(alloc(time_ns, 0x1000 + step * 64, 10, APP));
        if step == 2345 {
            body.push(alloc(time_ns + 1, 0x9000_0000, MIB, APP));
            body.push(free(time_ns + 2, 0x9000_0000));
        }
    }
    let image = analyzed(&image(10_000_000, body));
    let app = component(&image, "app");
    // The spike: 2346 blocks of 10 bytes live, plus the MiB, for 1 ns of a 19532 ns bucket.
    assert_eq!(app.peak_requested_bytes, MIB + 23_460);
    let highest = app.requested.iter().map(|p| p.bytes).max();
    assert_eq!(highest, Some(MIB + 23_460));
    assert_eq!(app.requested.len(), 512);
    assert_eq!(app.requested.last().map(|p| p.bytes), Some(50_000));
    assert_eq!(image.components.timeline.requested, app.requested);
}

#[test]
fn a_spike_survives_among_changes_too_many_to_keep_one_by_one() {
    // 70,001 changes: the oldest are folded into segments, the spike among them.
    let mut body = Vec::new();
    for step in 0..70_000u64 {
        let time_ns = step * 100;
        body.push(alloc(time_ns, 0x1000 + step * 64, 10, APP));
        if step == 50_000 {
            body.push(alloc(time_ns + 1, 0x9000_0000, MIB, APP));
            body.push(free(time_ns + 2, 0x9000_0000));
        }
    }
    let image = analyzed(&image(10_000_000, body));
    let app = component(&image, "app");
    assert_eq!(app.peak_requested_bytes, MIB + 500_010);
    let highest = app.requested.iter().map(|p| p.bytes).max();
    assert_eq!(highest, Some(MIB + 500_010));
    assert_eq!(app.requested.last().map(|p| p.bytes), Some(700_000));
    assert!(app.requested.len() <= 512, "{}", app.requested.len());
    assert_eq!(image.sites[0].metrics.local_peak_bytes, MIB + 500_010);
}

#[test]
fn a_residency_spike_survives_among_ten_thousand_samples() {
    let body: Vec<Record> = (0..10_000u64)
        .map(|index| {
            let rss = if index == 7777 { 1 << 30 } else { 4096 };
            status(index * 1000, rss)
        })
        .collect();
    let image = analyzed(&image(10_000_000, body));
    let rss = &image.components.timeline.rss;
    assert!(rss.len() <= 512, "{}", rss.len());
    assert_eq!(rss.iter().map(|point| point.bytes).max(), Some(1 << 30));
    assert_eq!(image.residency.status_samples, 10_000);
}

#[test]
fn a_step_series_carries_its_value_into_empty_buckets() {
    let buckets = Buckets::new(0, 1024);
    let mut series = StepSeries::new(buckets);
    series.set(0, 5);
    series.set(3, 9);
    series.set(5, 1);
    series.set(700, 0);
    let points: Vec<(u64, u64)> = series
        .points()
        .iter()
        .map(|point| (point.time_ns, point.bytes))
        .collect();
    // Buckets of 2 ns: 9 held from 3 to 5 shows in [2, 4) and [4, 6); 1 held until 700
    // shows in [700, 702); the last bucket closes the series.
    assert_eq!(points, [(0, 5), (2, 9), (6, 1), (702, 0), (1022, 0)]);
}

/// 64 blocks of 128 KiB (8 MiB) allocated by 1 s, then every other one freed (or all) by 2 s.
fn freeing_image(free_all: bool, rss_after: u64) -> Vec<Record> {
    let mut body = Vec::new();
    let block = 128 << 10;
    for index in 0..64u64 {
        body.push(alloc(1000 + index, 0x100_0000 + index * block, block, APP));
    }
    body.push(status(1_000_000_000, 9 * MIB));
    for index in (0..64u64).filter(|index| free_all || index % 2 == 0) {
        body.push(free(1_500_000_000 + index, 0x100_0000 + index * block));
    }
    body.push(status(2_000_000_000, rss_after));
    image(3_000_000_000, body)
}

#[test]
fn interleaved_frees_that_leave_rss_up_warn_of_fragmentation() {
    let image = analyzed(&freeing_image(false, 9 * MIB - MIB / 2));
    assert_eq!(
        image.warnings,
        [
            "fragmentation: live requested memory fell from 8.0 MiB to 4.0 MiB at 2.00 s while \
          RSS stayed at 8.5 MiB (freed blocks are interleaved with live ones; the allocator \
          cannot return the pages)"
        ]
    );
    let rss: Vec<(u64, u64)> = image
        .components
        .timeline
        .rss
        .iter()
        .map(|p| (p.time_ns, p.bytes))
        .collect();
    assert_eq!(
        rss,
        [(1_000_000_000, 9 * MIB), (2_000_000_000, 9 * MIB - MIB / 2)]
    );
}

#[test]
fn the_warning_names_the_deepest_fall() {
    let mut records = freeing_image(false, 9 * MIB - MIB / 2);
    // Sampled half-way through the frees (20 of 32 freed): a fall too, but not the deepest.
    let halfway = records
        .iter()
        .position(
            |record| matches!(record, Record::Free { time_ns, .. } if *time_ns == 1_500_000_040),
        )
        .unwrap();
    records.insert(halfway, status(1_500_000_039, 9 * MIB));
    let image = analyzed(&records);
    assert_eq!(image.warnings.len(), 1);
    assert!(
        image.warnings[0].contains("from 8.0 MiB to 4.0 MiB at 2.00 s"),
        "{}",
        image.warnings[0]
    );
}

#[test]
fn a_thread_stack_is_known_by_its_stack_pointer() {
    let rw = MAPPING_READ | MAPPING_WRITE;
    let thread_stack = |time_ns, address| Record::ThreadStack {
        time_ns,
        pid: PID,
        tid: 101,
        address,
    };
    let munmap = Record::Mapping {
        time_ns: 150,
        pid: PID,
        tid: PID,
        call: MapCall::Munmap,
        args: [0x7200_0000, 0x10000, 0, 0, 0, 0],
        result: 0,
        stack: APP,
    };
    let unrecorded = |time_ns| {
        snapshot(
            time_ns,
            vec![
                // Mapped by nobody memsup saw (before an attach, or an unwalkable stack).
                region(0x7100_0000, 0x7101_0000, rw, "", 1 << 14, 1 << 14),
                region(0x7200_0000, 0x7201_0000, rw, "", 1 << 13, 1 << 13),
            ],
        )
    };
    let records = image(
        1000,
        vec![
            // The top of a clone'd stack (the mapping holds the byte below it), and a stack
            // pointer in the middle of another thread's stack.
            thread_stack(10, 0x7101_0000),
            thread_stack(20, 0x7200_8000),
            unrecorded(100),
            // The second is unmapped: whatever is mapped there later is not a stack.
            munmap,
            unrecorded(200),
        ],
    );
    let image = analyzed(&records);
    assert_eq!(
        first_snapshot(&image),
        held(&[("stacks", 3 << 13, 3 << 13), ("unknown", 0, 0)])
    );
    let stacks = component(&image, "stacks");
    let resident: Vec<u64> = stacks.resident.iter().map(|point| point.rss).collect();
    assert_eq!(resident, [3 << 13, 1 << 14]);
    assert_eq!(component(&image, "unknown").peak_rss_bytes, 1 << 13);
}

#[test]
fn a_stack_inside_the_heap_leaves_the_heap_an_arena() {
    let mut records = arena_image(8192, 8192, 1);
    // A thread running on a malloc'd stack, and the same cached stack given to a second one.
    for _ in 0..2 {
        records.insert(
            records.len() - 12,
            Record::ThreadStack {
                time_ns: 50,
                pid: PID,
                tid: 101,
                address: 0x10_9000,
            },
        );
    }
    let image = analyzed(&records);
    assert_eq!(
        first_snapshot(&image),
        held(&[
            ("overhead", 4192, 4192),
            ("app", 3000, 3000),
            ("mpi", 1000, 1000)
        ])
    );
}

#[test]
fn swapped_arena_pages_are_split_by_the_live_bytes_not_resident() {
    // 4000 live bytes in an arena with 2048 resident and 8192 swapped out.
    let mut records = arena_image(2048, 2048, 1);
    for record in &mut records {
        if let Record::SmapsSnapshot { mappings, .. } = record {
            mappings[0].swap = 8192;
        }
    }
    let image = analyzed(&records);
    let swap = |name| component(&image, name).peak_swap_bytes;
    // 1952 of the live bytes are not resident: that much of the swap is theirs, 3 to 1.
    assert_eq!((swap("app"), swap("mpi")), (1464, 488));
    assert_eq!(swap("overhead"), 8192 - 1952);
}

#[test]
fn zero_filled_data_after_a_module_belongs_to_the_module() {
    let rw = MAPPING_READ | MAPPING_WRITE;
    let records = image(
        1000,
        vec![snapshot(
            100,
            vec![
                region(0x10_0000_0000, 0x10_0001_0000, rw, EXE, 1 << 12, 1 << 12),
                // The executable's .bss, mapped by the kernel at exec: nobody recorded it.
                region(0x10_0001_0000, 0x10_0005_0000, rw, "", 5 << 12, 5 << 12),
                // Anonymous memory after a data file is not that file's.
                region(
                    0x7700_0000,
                    0x7701_0000,
                    rw,
                    "/data/other.bin",
                    1 << 12,
                    1 << 12,
                ),
                region(0x7701_0000, 0x7702_0000, rw, "", 3 << 12, 3 << 12),
            ],
        )],
    );
    let image = analyzed(&records);
    assert_eq!(
        first_snapshot(&image),
        held(&[("app", 6 << 12, 6 << 12), ("unknown", 4 << 12, 4 << 12)])
    );
}

const CHILD: u32 = PID + 1;

/// The analysis of a fork child of PID 100 made at 100 ns after `parent_body`, with
/// `child_body` (its records) before its exit at 400 ns.
fn fork_child(parent_body: Vec<Record>, child_body: Vec<Record>) -> ProcessAnalysis {
    let mut body = parent_body;
    body.push(Record::ProcessStart {
        time_ns: 100,
        pid: CHILD,
        parent_pid: Some(PID),
        cause: StartCause::Fork,
    });
    body.extend(child_body);
    body.push(Record::ProcessExit {
        time_ns: 400,
        pid: CHILD,
        status: ExitKind::Code(0),
        counters: ProbeCounters::default(),
    });
    let images = replay(&image(1000, body), RecordMode::Run, &Settings::default());
    images.into_iter().find(|image| image.pid == CHILD).unwrap()
}

fn child_snapshot(time_ns: u64, mappings: Vec<MappingResidency>) -> Record {
    let mut record = snapshot(time_ns, mappings);
    if let Record::SmapsSnapshot { pid, .. } = &mut record {
        *pid = CHILD;
    }
    record
}

#[test]
fn a_fork_child_holds_what_its_parent_mapped_as_the_parent_would() {
    let rw = MAPPING_READ | MAPPING_WRITE;
    let child = fork_child(
        vec![
            mmap(10, 0x7100_0000, 0x10000, 0x22, HDF5_MMAP),
            mmap(20, 0x7200_0000, 0x20000, 0x22, THREAD_MMAP),
        ],
        vec![child_snapshot(
            300,
            vec![
                // Mapped by the parent's HDF5 call and by its thread creation before the fork.
                region(0x7100_0000, 0x7101_0000, rw, "", 1 << 14, 1 << 13),
                region(0x7200_0000, 0x7202_0000, rw, "", 1 << 13, 1 << 12),
                // Mapped by nobody memsup saw.
                region(0x7600_0000, 0x7601_0000, rw, "", 1 << 12, 1 << 12),
            ],
        )],
    );
    assert_eq!(
        first_snapshot(&child),
        held(&[
            ("libhdf5.so", 1 << 14, 1 << 13),
            ("stacks", 1 << 13, 1 << 12),
            ("unknown", 1 << 12, 1 << 12),
        ])
    );
}

#[test]
fn a_snapshot_of_a_fork_child_before_its_exec_is_not_the_new_program_s() {
    let rw = MAPPING_READ | MAPPING_WRITE;
    let child = fork_child(
        vec![mmap(10, 0x7100_0000, 0x10000, 0x22, HDF5_MMAP)],
        vec![
            child_snapshot(
                150,
                vec![region(0x7100_0000, 0x7101_0000, rw, "", 1 << 14, 1 << 14)],
            ),
            Record::Exec {
                time_ns: 200,
                pid: CHILD,
                exe: "/bin/sleep".to_string(),
                argv: vec!["sleep".to_string()],
            },
        ],
    );
    assert_eq!(child.exe, "/bin/sleep");
    assert!(
        child.components.snapshots.is_empty(),
        "{:?}",
        child.components
    );
    assert!(child.components.components.is_empty());
}

#[test]
fn a_user_rule_names_data_files_and_shared_memory() {
    let rw = MAPPING_READ | MAPPING_WRITE;
    let records = image(
        1000,
        vec![
            mmap(10, 0x7100_0000, 0x10000, 0x01, HDF5_MMAP),
            snapshot(
                100,
                vec![
                    region(
                        0x7100_0000,
                        0x7101_0000,
                        MAPPING_SHARED,
                        "/data/t.bin",
                        1 << 16,
                        100,
                    ),
                    region(
                        0x7400_0000,
                        0x7401_0000,
                        MAPPING_SHARED,
                        "/dev/shm/psm2",
                        1 << 13,
                        7,
                    ),
                    region(
                        0x7700_0000,
                        0x7701_0000,
                        rw,
                        "/data/other.bin",
                        6 << 12,
                        6 << 12,
                    ),
                ],
            ),
        ],
    );
    let image = analyzed_with(&records, &["data=^/data/", "transport=psm"]);
    assert_eq!(
        first_snapshot(&image),
        held(&[
            ("data", (1 << 16) + (6 << 12), 100 + (6 << 12)),
            ("transport", 1 << 13, 7),
        ])
    );
}

#[test]
fn freeing_everything_and_giving_the_pages_back_does_not_warn() {
    let image = analyzed(&freeing_image(true, MIB));
    assert!(image.warnings.is_empty(), "{:?}", image.warnings);
    // Same frees, RSS kept: that is the warning's case.
    let kept = analyzed(&freeing_image(true, 9 * MIB));
    assert_eq!(kept.warnings.len(), 1);
}

#[path = "tests/mpi.rs"]
mod mpi;
