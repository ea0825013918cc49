//! Scripted record sequences with hand-counted expectations.

use std::path::Path;

use super::*;
use crate::trace::format::{ExitKind, Header, Record};
use crate::trace::stacks::{StackId, EMPTY_STACK};

pub(crate) const CALLER_A: u64 = 0x40_1000;
pub(crate) const CALLER_B: u64 = 0x40_2000;
pub(crate) const CALLER_C: u64 = 0x40_3000;

fn alloc(time_ns: u64, function: AllocFunction, address: u64, size: u64, caller: u64) -> Record {
    Record::Alloc {
        time_ns,
        pid: 100,
        tid: 100,
        function,
        address,
        size,
        stack: stack_of(caller),
    }
}

/// The one-frame stack of each test caller; `profile` writes its nodes into every image.
fn stack_of(caller: u64) -> StackId {
    match caller {
        CALLER_A => 1,
        CALLER_B => 2,
        CALLER_C => 3,
        _ => EMPTY_STACK,
    }
}

fn caller_nodes(pid: u32) -> Vec<Record> {
    [CALLER_A, CALLER_B, CALLER_C]
        .into_iter()
        .map(|address| Record::StackNode {
            pid,
            id: stack_of(address),
            parent: EMPTY_STACK,
            address,
        })
        .collect()
}

fn free(time_ns: u64, address: u64) -> Record {
    Record::Free {
        time_ns,
        pid: 100,
        tid: 101,
        address,
    }
}

fn realloc(time_ns: u64, old_address: u64, new_address: u64, size: u64, caller: u64) -> Record {
    Record::Realloc {
        time_ns,
        pid: 100,
        tid: 100,
        function: AllocFunction::Realloc,
        old_address,
        new_address,
        size,
        stack: stack_of(caller),
    }
}

fn symbol(pid: u32, address: u64, function: &str, offset: u64, module: &str) -> Record {
    Record::Symbol {
        pid,
        address,
        function: function.to_string(),
        offset,
        module: module.to_string(),
        frames: Vec::new(),
    }
}

fn start(time_ns: u64, pid: u32, parent_pid: Option<u32>, cause: StartCause) -> Record {
    Record::ProcessStart {
        time_ns,
        pid,
        parent_pid,
        cause,
    }
}

fn exec(time_ns: u64, pid: u32, exe: &str, argv: &[&str]) -> Record {
    Record::Exec {
        time_ns,
        pid,
        exe: exe.to_string(),
        argv: argv.iter().map(|word| word.to_string()).collect(),
    }
}

fn exit(time_ns: u64, pid: u32, status: ExitKind) -> Record {
    Record::ProcessExit {
        time_ns,
        pid,
        status,
        counters: ProbeCounters {
            stops: 40,
            entry_hits: 20,
            return_hits: 15,
            emulated: 18,
            out_of_line: 2,
            single_steps: 1,
            stop_the_world: 1,
            syscall_stops: 4,
            nested_calls: 0,
            foreign_patches: 0,
            stack_copies: 0,
            stack_copy_ns: 0,
        },
    }
}

fn mapping(time_ns: u64, call: MapCall, length: u64, result: i64) -> Record {
    Record::Mapping {
        time_ns,
        pid: 12,
        tid: 12,
        call,
        args: [0, length, 3, 0x22, u64::MAX, 0],
        result,
        stack: EMPTY_STACK,
    }
}

fn profile(records: Vec<Record>, truncated: bool) -> Profile {
    Profile {
        header: Header {
            memsup_version: "0.1.0".to_string(),
            host: "node17".to_string(),
            mode: RecordMode::Run,
            target: vec!["./app".to_string(), "x".to_string()],
            start_unix_ns: 0,
            options: Vec::new(),
        },
        records: with_caller_nodes(records),
        truncated,
        damage: Vec::new(),
    }
}

/// The records with the test callers' stack nodes after each record that starts an image.
fn with_caller_nodes(records: Vec<Record>) -> Vec<Record> {
    let mut out = Vec::new();
    for record in records {
        let starts_image = match record {
            Record::ProcessStart { pid, .. } | Record::Exec { pid, .. } => Some(pid),
            _ => None,
        };
        out.push(record);
        if let Some(pid) = starts_image {
            out.extend(caller_nodes(pid));
        }
    }
    out
}

/// One image of PID 100 exercising every heap rule; see the comments for running totals.
pub(crate) fn heap_profile() -> Profile {
    use AllocFunction::{Calloc, Malloc};
    let records = vec![
        start(1000, 100, None, StartCause::Launch),
        exec(1100, 100, "/bin/app", &["./app", "x"]),
        alloc(2000, Malloc, 0x10, 100, CALLER_A), // live 100
        alloc(2100, Calloc, 0x20, 200, CALLER_B), // live 300
        realloc(2200, 0, 0x30, 50, CALLER_C),     // realloc(NULL, n): live 350
        realloc(2300, 0x10, 0x40, 300, CALLER_A), // moves 100 -> 300: live 550, the peak
        alloc(2400, Malloc, 0, 1000, CALLER_A),   // failed
        free(2500, 0x999),                        // unknown
        free(2600, 0),                            // free(NULL)
        realloc(2700, 0x30, 0, 0, CALLER_C),      // realloc(p, 0) frees: live 500
        realloc(2800, 0x20, 0, 400, CALLER_B),    // failed, 0x20 stays: live 500
        alloc(2900, Malloc, 0x20, 80, CALLER_C),  // missed free of 0x20: live 380
        free(3000, 0x40),                         // live 80
        alloc(3100, Malloc, 0x50, 470, CALLER_B), // live 550 again: not a new peak
        symbol(100, CALLER_A, "main", 0x25, "/bin/app"),
        symbol(100, CALLER_B, "make_table", 0x10, "/usr/lib/libtable.so"),
        Record::Warning {
            time_ns: 3200,
            pid: 100,
            message: "no allocator symbols in /usr/lib/libjit.so".to_string(),
        },
        exit(5000, 100, ExitKind::Code(3)),
        Record::End { time_ns: 5001 },
    ];
    profile(records, false)
}

#[test]
fn heap_counters_follow_every_rule() {
    let analysis = analyze(&heap_profile(), Path::new("heap.msup"));
    assert_eq!(analysis.processes.len(), 1);
    let image = &analysis.processes[0];
    assert_eq!(image.call_count(AllocFunction::Malloc), 4);
    assert_eq!(image.call_count(AllocFunction::Calloc), 1);
    assert_eq!(image.call_count(AllocFunction::Realloc), 4);
    assert_eq!(image.call_count(AllocFunction::Free), 3);
    assert_eq!(image.call_count(AllocFunction::Valloc), 0);
    assert_eq!(image.calls.len(), AllocFunction::ALL.len());
    assert_eq!(image.allocations, 6);
    assert_eq!(image.bytes_allocated, 1200);
    assert_eq!(image.frees, 4);
    assert_eq!(image.null_frees, 1);
    assert_eq!(image.unknown_frees, 1);
    assert_eq!(image.failed_allocations, 2);
    assert_eq!(image.largest_allocation, 470);
    assert_eq!(image.live_bytes_at_exit, 550);
    assert_eq!(image.live_blocks_at_exit, 2);
}

#[test]
fn the_peak_is_the_first_time_the_highest_level_is_reached() {
    let analysis = analyze(&heap_profile(), Path::new("heap.msup"));
    let image = &analysis.processes[0];
    assert_eq!(image.peak_live_bytes, 550);
    assert_eq!(image.peak_live_blocks, 3);
    assert_eq!(image.peak_time_ns, 1300);
    assert_eq!(image.start_ns, 1000);
    assert_eq!(image.duration_ns, 4000);
    assert_eq!(image.exit, ImageExit::Code(3));
    assert_eq!(image.probes.stops, 40);
    assert_eq!(
        image.warnings,
        vec!["no allocator symbols in /usr/lib/libjit.so".to_string()]
    );
}

/// The one frame of a scripted caller's site.
fn caller_frame(address: u64, function: &str, offset: u64, module: &str) -> Vec<Frame> {
    vec![Frame {
        function: function.to_string(),
        file: None,
        line: None,
        module: module.to_string(),
        address,
        offset,
        inlined: false,
    }]
}

#[test]
fn sites_hold_the_blocks_live_at_the_peak_with_names() {
    let analysis = analyze(&heap_profile(), Path::new("heap.msup"));
    let sites = &analysis.processes[0].sites;
    let stacks: Vec<&Vec<Frame>> = sites.iter().map(|site| &site.stack).collect();
    assert_eq!(
        stacks,
        vec![
            &caller_frame(CALLER_A, "main", 0x25, "/bin/app"),
            &caller_frame(CALLER_B, "make_table", 0x10, "/usr/lib/libtable.so"),
            &caller_frame(CALLER_C, "", 0, ""),
        ]
    );
    // (peak bytes, peak blocks, allocations, bytes allocated, local peak, leaked bytes)
    let numbers: Vec<(u64, u64, u64, u64, u64, u64)> = sites
        .iter()
        .map(|site| {
            let metrics = &site.metrics;
            (
                metrics.peak_bytes,
                metrics.peak_blocks,
                metrics.allocations,
                metrics.bytes_allocated,
                metrics.local_peak_bytes,
                metrics.leaked_bytes,
            )
        })
        .collect();
    assert_eq!(
        numbers,
        vec![
            (300, 1, 2, 400, 300, 0),
            (200, 1, 2, 670, 470, 470),
            (50, 1, 2, 130, 80, 80),
        ]
    );
    // The block whose free was missed (0x20, reused by C) has no lifetime.
    let lifetimes: Vec<Option<(u64, u64, u64)>> = sites
        .iter()
        .map(|site| site.metrics.lifetimes_ns())
        .collect();
    assert_eq!(
        lifetimes,
        vec![Some((300, 500, 700)), None, Some((500, 500, 500))]
    );
}

#[test]
fn sites_break_ties_by_stack() {
    use AllocFunction::Malloc;
    let mut records = vec![start(0, 100, None, StartCause::Attach)];
    // Twelve sites of 64 bytes, then a smaller one; sites allocated in descending address order.
    let mut next_id = 3;
    let mut alloc_at = |time_ns, address, size, caller| {
        next_id += 1;
        let node = Record::StackNode {
            pid: 100,
            id: next_id,
            parent: EMPTY_STACK,
            address: caller,
        };
        let mut record = alloc(time_ns, Malloc, address, size, 0);
        if let Record::Alloc { stack, .. } = &mut record {
            *stack = next_id;
        }
        [node, record]
    };
    for site in 0..12u64 {
        records.extend(alloc_at(10 + site, 0x1000 + site, 64, 0x9000 - site));
    }
    records.extend(alloc_at(30, 0x2000, 32, 0x100));
    records.push(free(40, 0x1000));
    let analysis = analyze(&profile(records, true), Path::new("t.msup"));
    let image = &analysis.processes[0];
    assert_eq!(image.peak_live_bytes, 12 * 64 + 32);
    let addresses: Vec<u64> = image
        .sites
        .iter()
        .map(|site| site.stack[0].address)
        .collect();
    let mut expected: Vec<u64> = (0..12u64).map(|rank| 0x9000 - 11 + rank).collect();
    expected.push(0x100);
    assert_eq!(addresses, expected);
    assert!(image.sites[..12]
        .iter()
        .all(|site| site.metrics.peak_bytes == 64));
    // Never closed: unknown exit, cut at the last record time.
    assert_eq!(image.exit, ImageExit::Unknown);
    assert_eq!(image.duration_ns, 40);
    assert_eq!(image.live_bytes_at_exit, 11 * 64 + 32);
}

#[test]
fn a_symbol_after_the_exit_still_names_the_site() {
    let mut profile = heap_profile();
    let end = profile.records.pop().unwrap();
    profile
        .records
        .push(symbol(100, CALLER_C, "late", 4, "/bin/app"));
    profile.records.push(end);
    let analysis = analyze(&profile, Path::new("heap.msup"));
    let frame = &analysis.processes[0].sites[2].stack[0];
    assert_eq!((frame.function.as_str(), frame.offset), ("late", 4));
}

/// PIDs 10 (sh, then execs app2), 11 (fork of sh, allocates, then execs app), 12 (vfork, execs true).
pub(crate) fn images_profile() -> Profile {
    let records = vec![
        start(0, 10, None, StartCause::Launch),
        exec(10, 10, "/usr/bin/sh", &["sh", "-c", "./app"]),
        start(50, 11, Some(10), StartCause::Fork),
        alloc_for(55, 11, 0x100, 10),
        start(60, 12, Some(10), StartCause::Vfork),
        exec(61, 12, "/bin/true", &["true"]),
        mapping(62, MapCall::Brk, 0, 0x1000),
        mapping(63, MapCall::Brk, 0, 0x22000),
        mapping(64, MapCall::Brk, 0, 0x21000),
        mapping(65, MapCall::Brk, 0, 0x23000),
        mapping(66, MapCall::Mmap, 4096, 0x7f00_0000_0000),
        mapping(67, MapCall::Mmap, 8192, -12),
        mapping(68, MapCall::Munmap, 4096, 0),
        mapping(69, MapCall::Munmap, 100, -22),
        exec(70, 11, "/bin/app", &["./app"]),
        exit(80, 12, ExitKind::Code(0)),
        exec(90, 10, "/bin/app2", &["app2"]),
        Record::Warning {
            time_ns: 95,
            pid: 11,
            message: "stopped early".to_string(),
        },
        exit(100, 10, ExitKind::Signal(11)),
        Record::ThreadStart {
            time_ns: 120,
            pid: 11,
            tid: 13,
        },
    ];
    profile(records, true)
}

pub(crate) fn alloc_for(time_ns: u64, pid: u32, address: u64, size: u64) -> Record {
    Record::Alloc {
        time_ns,
        pid,
        tid: pid,
        function: AllocFunction::Malloc,
        address,
        size,
        stack: stack_of(CALLER_A),
    }
}

/// pid, parent, cause, exe, argv length, exit, start, duration.
type ImageSummary<'a> = (
    u32,
    Option<u32>,
    StartCause,
    &'a str,
    usize,
    ImageExit,
    u64,
    u64,
);

fn image_summary(image: &ProcessAnalysis) -> ImageSummary<'_> {
    (
        image.pid,
        image.parent_pid,
        image.cause,
        image.exe.as_str(),
        image.argv.len(),
        image.exit,
        image.start_ns,
        image.duration_ns,
    )
}

#[test]
fn exec_and_fork_split_and_name_images() {
    let analysis = analyze(&images_profile(), Path::new("i.msup"));
    let summary: Vec<ImageSummary> = analysis.processes.iter().map(image_summary).collect();
    use StartCause::{Fork, Launch, Vfork};
    assert_eq!(
        summary,
        vec![
            (10, None, Launch, "/usr/bin/sh", 3, ImageExit::Exec, 0, 90),
            (
                11,
                Some(10),
                Fork,
                "/usr/bin/sh",
                3,
                ImageExit::Exec,
                50,
                20
            ),
            (
                12,
                Some(10),
                Vfork,
                "/bin/true",
                1,
                ImageExit::Code(0),
                60,
                20
            ),
            (
                11,
                Some(10),
                Fork,
                "/bin/app",
                1,
                ImageExit::Unknown,
                70,
                50
            ),
            (
                10,
                None,
                Launch,
                "/bin/app2",
                1,
                ImageExit::Signal(11),
                90,
                10
            ),
        ]
    );
    let forked = &analysis.processes[1];
    assert_eq!(forked.argv, vec!["sh", "-c", "./app"]);
    assert_eq!(
        (forked.live_bytes_at_exit, forked.live_blocks_at_exit),
        (10, 1)
    );
    assert_eq!(analysis.processes[3].warnings, vec!["stopped early"]);
    assert_eq!(analysis.processes[3].allocations, 0);
    assert_eq!(analysis.processes[4].probes.single_steps, 1);
    assert!(analysis.profile.truncated);
    assert_eq!(analysis.profile.path, "i.msup");
}

#[test]
fn mappings_count_calls_bytes_and_brk_growth() {
    let analysis = analyze(&images_profile(), Path::new("i.msup"));
    let mappings = &analysis.processes[2].mappings;
    let calls: Vec<(MapCall, u64)> = mappings.calls.iter().map(|(&c, &n)| (c, n)).collect();
    assert_eq!(
        calls,
        vec![
            (MapCall::Mmap, 2),
            (MapCall::Munmap, 2),
            (MapCall::Mremap, 0),
            (MapCall::Brk, 4),
            (MapCall::Shmat, 0),
            (MapCall::Shmdt, 0),
        ]
    );
    assert_eq!(mappings.mmap_bytes, 4096);
    assert_eq!(mappings.munmap_bytes, 4096);
    assert_eq!(mappings.brk_growth_bytes, 0x21000 + 0x2000);
    assert_eq!(analysis.processes[0].mappings, MappingStats::default());
}
