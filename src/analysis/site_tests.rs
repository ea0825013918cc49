//! Call sites of a scripted profile with whole stacks, inlined frames and allocator wrappers,
//! with every number worked out by hand in `sites_profile`.

use std::path::Path;

use super::*;
use crate::trace::format::SourceFrame as SymbolFrame;
use crate::trace::format::{ExitKind, Header, Record, TRUNCATED_FRAME};
use crate::trace::stacks::StackId;

const PID: u32 = 7;

// Return addresses, named after the function they return into.
const MAIN: u64 = 0x1000; // main, calling load_table and build_index
const MAIN_DIRECT: u64 = 0x1020; // main, calling malloc and realloc itself
const LOAD_TABLE: u64 = 0x2000;
const BUILD_INDEX: u64 = 0x2100;
const FILL_VALUES: u64 = 0x3000; // operator new's caller, with std::allocator inlined
const OPERATOR_NEW: u64 = 0x7000;
const OPERATOR_NEW_RETRY: u64 = 0x7040; // the same operator new, calling malloc again
const MMAP: u64 = 0x9000;
const BRK: u64 = 0x9100;
const SYSMALLOC: u64 = 0x9200;
const MALLOC: u64 = 0x9300;

// Stacks, innermost first, in the order their nodes are interned below.
const NEW_STACK: [u64; 4] = [OPERATOR_NEW, FILL_VALUES, LOAD_TABLE, MAIN];
const NEW_RETRY_STACK: [u64; 4] = [OPERATOR_NEW_RETRY, FILL_VALUES, LOAD_TABLE, MAIN];
const BUILD_STACK: [u64; 2] = [BUILD_INDEX, MAIN];
const DIRECT_STACK: [u64; 1] = [MAIN_DIRECT];
const MMAP_STACK: [u64; 5] = [MMAP, SYSMALLOC, MALLOC, BUILD_INDEX, MAIN];
const BRK_STACK: [u64; 5] = [BRK, SYSMALLOC, MALLOC, BUILD_INDEX, MAIN];
const TRUNCATED_STACK: [u64; 2] = [BUILD_INDEX, TRUNCATED_FRAME];

/// Builds the records of one process: stack nodes interned as the interpret stage does.
struct Script {
    pid: u32,
    interner: crate::trace::stacks::StackInterner,
    records: Vec<Record>,
}

impl Script {
    fn new(pid: u32, start: Record) -> Script {
        Script {
            pid,
            interner: Default::default(),
            records: vec![start],
        }
    }

    fn stack(&mut self, frames: &[u64]) -> StackId {
        let mut nodes = Vec::new();
        let id = self.interner.intern(frames, &mut nodes);
        for node in nodes {
            self.records.push(Record::StackNode {
                pid: self.pid,
                id: node.id,
                parent: node.parent,
                address: node.address,
            });
        }
        id
    }

    fn alloc(&mut self, time_ns: u64, stack: &[u64], address: u64, size: u64) {
        let stack = self.stack(stack);
        self.records.push(Record::Alloc {
            time_ns,
            pid: self.pid,
            tid: self.pid,
            function: AllocFunction::Malloc,
            address,
            size,
            stack,
        });
    }

    fn realloc(&mut self, time_ns: u64, stack: &[u64], addresses: (u64, u64), size: u64) {
        let stack = self.stack(stack);
        self.records.push(Record::Realloc {
            time_ns,
            pid: self.pid,
            tid: self.pid,
            function: AllocFunction::Realloc,
            old_address: addresses.0,
            new_address: addresses.1,
            size,
            stack,
        });
    }

    fn free(&mut self, time_ns: u64, address: u64) {
        self.records.push(Record::Free {
            time_ns,
            pid: self.pid,
            tid: self.pid,
            address,
        });
    }

    fn mapping(&mut self, time_ns: u64, stack: &[u64], call: MapCall, length: u64, result: i64) {
        let stack = self.stack(stack);
        self.records.push(Record::Mapping {
            time_ns,
            pid: self.pid,
            tid: self.pid,
            call,
            args: [0, length, 3, 0x22, u64::MAX, 0],
            result,
            stack,
        });
    }

    /// One Symbol record per address, then the exit.
    fn end(mut self, time_ns: u64, symbols: Vec<Record>) -> Vec<Record> {
        self.records.extend(symbols);
        self.records.push(Record::ProcessExit {
            time_ns,
            pid: self.pid,
            status: ExitKind::Code(0),
            counters: ProbeCounters::default(),
        });
        self.records
    }
}

fn source(function: &str, file: &str, line: u32, inlined: bool) -> SymbolFrame {
    SymbolFrame {
        function: function.to_string(),
        raw_name: function.to_string(),
        file: Some(file.to_string()),
        line: Some(line),
        column: None,
        inlined,
    }
}

fn symbol(
    pid: u32,
    address: u64,
    elf: (&str, u64),
    module: &str,
    frames: Vec<SymbolFrame>,
) -> Record {
    Record::Symbol {
        pid,
        address,
        function: elf.0.to_string(),
        offset: elf.1,
        module: module.to_string(),
        frames,
    }
}

const APP: &str = "/bin/app";
const LIBC: &str = "/lib/libc.so.6";
const LIBSTDCXX: &str = "/lib/libstdc++.so.6";
const FILL_VALUES_NAME: &str = "fill_values(std::vector<int, std::allocator<int> >&)";

fn symbols(pid: u32) -> Vec<Record> {
    let libc = |address, name: &str, frames| symbol(pid, address, (name, 0x10), LIBC, frames);
    vec![
        symbol(
            pid,
            MAIN,
            ("main", 0x10),
            APP,
            vec![source("main", "app.cpp", 50, false)],
        ),
        symbol(
            pid,
            MAIN_DIRECT,
            ("main", 0x30),
            APP,
            vec![source("main", "app.cpp", 52, false)],
        ),
        symbol(
            pid,
            LOAD_TABLE,
            ("_Z10load_tablev", 0x21),
            APP,
            vec![source("load_table()", "app.cpp", 20, false)],
        ),
        symbol(
            pid,
            BUILD_INDEX,
            ("build_index", 0x9),
            APP,
            vec![source("build_index", "index.c", 30, false)],
        ),
        symbol(
            pid,
            FILL_VALUES,
            ("_Z11fill_valuesRSt6vectorIiSaIiEE", 0x33),
            APP,
            vec![
                source(
                    "std::__new_allocator<int>::allocate(unsigned long, void const*)",
                    "new_allocator.h",
                    137,
                    true,
                ),
                source(
                    "std::allocator<int>::allocate(unsigned long)",
                    "allocator.h",
                    198,
                    true,
                ),
                source(FILL_VALUES_NAME, "app.cpp", 12, false),
            ],
        ),
        // No DWARF for libstdc++: the ELF name, demangled by the analysis.
        symbol(pid, OPERATOR_NEW, ("_Znwm", 0x1c), LIBSTDCXX, Vec::new()),
        symbol(
            pid,
            OPERATOR_NEW_RETRY,
            ("_Znwm", 0x5c),
            LIBSTDCXX,
            Vec::new(),
        ),
        libc(
            MMAP,
            "__mmap64",
            vec![source("__GI___mmap64", "mmap64.c", 58, false)],
        ),
        libc(
            BRK,
            "__brk",
            vec![
                source("__brk_call", "brk_call.h", 21, true),
                source("__brk", "brk.c", 36, false),
            ],
        ),
        libc(
            SYSMALLOC,
            "sysmalloc",
            vec![source("sysmalloc", "malloc.c", 2634, false)],
        ),
        libc(
            MALLOC,
            "__libc_malloc",
            vec![source("__GI___libc_malloc", "malloc.c", 3287, false)],
        ),
    ]
}

fn header() -> Header {
    Header {
        memsup_version: "0.1.0".to_string(),
        host: "node17".to_string(),
        mode: RecordMode::Run,
        target: vec!["/bin/app".to_string()],
        start_unix_ns: 0,
        options: Vec::new(),
    }
}

/// Process 7's schedule (times relative to its start; live bytes after each event):
/// ```text
///  100 fill_values (operator new)       malloc 0xA1 400    400
///  200 build_index                      malloc 0xB1 100    500
///  300 free 0xB1: temporary, lived 100                     400
///  400 build_index                      malloc 0xB2 100    500
///  450 mmap 4096, brk (first: no growth), brk +0x21000 from build_index through malloc
///  500 fill_values (operator new retry) malloc 0xA2 600   1100   fill_values holds 1000
///  600 free 0xA1: lived 500                                700
///  700 main                             malloc 0xC1 50     750
///  800 main realloc 0xB2 -> 0xB3 300: 0xB2 (build_index) lived 400   950
///  900 build_index                      malloc 0xB4 250   1200   the peak
/// 1000 free 0xB4: temporary, lived 100                     950
/// 1100 free 0xA2: lived 600                                350
/// 1200 main realloc 0xC1 -> 0xC1 80 (in place): 0xC1 lived 500      380
/// 1300 free 0xC1: temporary (the realloc's block), lived 100        300
/// 1400 fill_values (operator new)       malloc 0xA3 200    500   leaked with 0xB3
/// ```
/// Sites (peak share at t=900; local peak; leaks at exit):
///   fill_values <- load_table <- main: 3 allocations, 1200 bytes (200..600), freed 2 lived
///     500 and 600; peak 600 in 1; local peak 1000 (both operator new stacks); leaked 200
///   main: 3 allocations, 430 bytes (50..300, average 143), freed 2 lived 500 and 100 (1
///     temporary, 80 bytes); peak 350 in 2; local peak 380; leaked 300
///   build_index <- main: 3 allocations, 450 bytes (100..250), freed 3 lived 100, 400, 100 (2
///     temporary, 350 bytes); peak 250 in 1; local peak 250; leaked 0
pub(crate) fn sites_profile() -> Profile {
    scripted_profile(&BUILD_STACK, Vec::new())
}

/// `sites_profile` with build_index's second allocation (at 400) on `second_build_stack`,
/// and `more_symbols`.
fn scripted_profile(second_build_stack: &[u64], more_symbols: Vec<Record>) -> Profile {
    let start = Record::ProcessStart {
        time_ns: 0,
        pid: PID,
        parent_pid: None,
        cause: StartCause::Launch,
    };
    let mut script = Script::new(PID, start);
    script.records.push(Record::Exec {
        time_ns: 0,
        pid: PID,
        exe: APP.to_string(),
        argv: vec!["app".to_string()],
    });
    script.alloc(100, &NEW_STACK, 0xA1, 400);
    script.alloc(200, &BUILD_STACK, 0xB1, 100);
    script.free(300, 0xB1);
    script.alloc(400, second_build_stack, 0xB2, 100);
    script.mapping(450, &MMAP_STACK, MapCall::Mmap, 4096, 0x7f00_0000_0000);
    script.mapping(451, &BRK_STACK, MapCall::Brk, 0, 0x10000);
    script.mapping(452, &BRK_STACK, MapCall::Brk, 0, 0x31000);
    script.mapping(453, &[], MapCall::Munmap, 8192, 0);
    script.alloc(500, &NEW_RETRY_STACK, 0xA2, 600);
    script.free(600, 0xA1);
    script.alloc(700, &DIRECT_STACK, 0xC1, 50);
    script.realloc(800, &DIRECT_STACK, (0xB2, 0xB3), 300);
    script.alloc(900, &BUILD_STACK, 0xB4, 250);
    script.free(1000, 0xB4);
    script.free(1100, 0xA2);
    script.realloc(1200, &DIRECT_STACK, (0xC1, 0xC1), 80);
    script.free(1300, 0xC1);
    script.alloc(1400, &NEW_STACK, 0xA3, 200);
    let mut symbols = symbols(PID);
    symbols.extend(more_symbols);
    let mut records = script.end(1500, symbols);
    records.push(Record::End { time_ns: 1501 });
    Profile {
        header: header(),
        records,
        truncated: false,
        damage: Vec::new(),
    }
}

/// `sites_profile` plus process 8, forked from 7, with one block on a truncated stack.
pub(crate) fn two_process_profile() -> Profile {
    let mut profile = sites_profile();
    let end = profile.records.pop().expect("the end record");
    let start = Record::ProcessStart {
        time_ns: 1600,
        pid: 8,
        parent_pid: Some(PID),
        cause: StartCause::Fork,
    };
    let mut script = Script::new(8, start);
    script.alloc(1700, &TRUNCATED_STACK, 0xD1, 64);
    profile.records.extend(script.end(1800, symbols(8)));
    profile.records.push(end);
    profile
}

fn analysis_with(skip: &SkipFrames) -> Analysis {
    analyze_with(&sites_profile(), Path::new("sites.msup"), skip)
}

fn frame_names(stack: &[Frame]) -> Vec<&str> {
    stack.iter().map(|frame| frame.function.as_str()).collect()
}

fn site_names(image: &ProcessAnalysis) -> Vec<Vec<&str>> {
    image
        .sites
        .iter()
        .map(|site| frame_names(&site.stack))
        .collect()
}

#[test]
fn sites_end_at_the_function_that_called_the_allocator() {
    let analysis = analysis_with(&SkipFrames::default());
    let image = &analysis.processes[0];
    assert_eq!(
        site_names(image),
        vec![
            vec![FILL_VALUES_NAME, "load_table()", "main"],
            vec!["main"],
            vec!["build_index", "main"],
        ]
    );
    let leaf = &image.sites[0].stack[0];
    assert_eq!(
        leaf,
        &Frame {
            function: FILL_VALUES_NAME.to_string(),
            file: Some("app.cpp".to_string()),
            line: Some(12),
            module: APP.to_string(),
            address: FILL_VALUES,
            offset: 0x33,
            inlined: false,
        }
    );
}

#[test]
fn every_metric_of_every_site() {
    let analysis = analysis_with(&SkipFrames::default());
    let image = &analysis.processes[0];
    assert_eq!((image.peak_live_bytes, image.peak_time_ns), (1200, 900));
    assert_eq!(image.live_bytes_at_exit, 500);
    let metrics: Vec<SiteMetrics> = image.sites.iter().map(|site| site.metrics).collect();
    let fill_values = SiteMetrics {
        allocations: 3,
        bytes_allocated: 1200,
        min_size: 200,
        max_size: 600,
        freed_blocks: 2,
        total_lifetime_ns: 1100,
        min_lifetime_ns: 500,
        max_lifetime_ns: 600,
        peak_bytes: 600,
        peak_blocks: 1,
        local_peak_bytes: 1000,
        temporary_allocations: 0,
        temporary_bytes: 0,
        leaked_bytes: 200,
        leaked_blocks: 1,
    };
    let main = SiteMetrics {
        allocations: 3,
        bytes_allocated: 430,
        min_size: 50,
        max_size: 300,
        freed_blocks: 2,
        total_lifetime_ns: 600,
        min_lifetime_ns: 100,
        max_lifetime_ns: 500,
        peak_bytes: 350,
        peak_blocks: 2,
        local_peak_bytes: 380,
        temporary_allocations: 1,
        temporary_bytes: 80,
        leaked_bytes: 300,
        leaked_blocks: 1,
    };
    let build_index = SiteMetrics {
        allocations: 3,
        bytes_allocated: 450,
        min_size: 100,
        max_size: 250,
        freed_blocks: 3,
        total_lifetime_ns: 600,
        min_lifetime_ns: 100,
        max_lifetime_ns: 400,
        peak_bytes: 250,
        peak_blocks: 1,
        local_peak_bytes: 250,
        temporary_allocations: 2,
        temporary_bytes: 350,
        leaked_bytes: 0,
        leaked_blocks: 0,
    };
    assert_eq!(metrics, vec![fill_values, main, build_index]);
    let sizes: Vec<u64> = metrics.iter().map(SiteMetrics::average_size).collect();
    assert_eq!(sizes, vec![400, 143, 150]);
    let lifetimes: Vec<Option<(u64, u64, u64)>> =
        metrics.iter().map(SiteMetrics::lifetimes_ns).collect();
    assert_eq!(
        lifetimes,
        vec![
            Some((500, 550, 600)),
            Some((100, 300, 500)),
            Some((100, 200, 400))
        ]
    );
    let ratios: Vec<Option<f64>> = metrics.iter().map(SiteMetrics::recycling_ratio).collect();
    assert_eq!(ratios, vec![Some(1.2), Some(430.0 / 380.0), Some(1.8)]);
    let peak_total: u64 = metrics.iter().map(|site| site.peak_bytes).sum();
    let leaked_total: u64 = metrics.iter().map(|site| site.leaked_bytes).sum();
    assert_eq!((peak_total, leaked_total), (1200, 500));
}

#[test]
fn without_the_default_list_operator_new_and_std_allocator_stay() {
    let analysis = analysis_with(&SkipFrames::new(false, &[]));
    let image = &analysis.processes[0];
    let new_site = vec![
        "operator new(unsigned long)",
        "std::__new_allocator<int>::allocate(unsigned long, void const*)",
        "std::allocator<int>::allocate(unsigned long)",
        FILL_VALUES_NAME,
        "load_table()",
        "main",
    ];
    // Two return addresses in operator new: two sites, each with its own local peak.
    assert_eq!(
        site_names(image),
        vec![
            new_site.clone(),
            vec!["main"],
            vec!["build_index", "main"],
            new_site
        ]
    );
    let new_sites: Vec<(u64, u64, u64)> = [&image.sites[0], &image.sites[3]]
        .iter()
        .map(|site| {
            let metrics = &site.metrics;
            (
                metrics.peak_bytes,
                metrics.bytes_allocated,
                metrics.local_peak_bytes,
            )
        })
        .collect();
    assert_eq!(new_sites, vec![(600, 600, 600), (0, 600, 400)]);
    assert!(image.sites[0].stack[1].inlined && image.sites[0].stack[2].inlined);
    assert!(!image.sites[0].stack[0].inlined);
}

#[test]
fn user_patterns_extend_the_list() {
    let skip = SkipFrames::new(true, &["fill_values*".to_string(), "build_*".to_string()]);
    let image = &analysis_with(&skip).processes[0];
    assert_eq!(
        site_names(image),
        vec![vec!["load_table()", "main"], vec!["main"], vec!["main"]]
    );
    // A stack made only of skipped frames keeps its outermost one.
    let only_main = SkipFrames::new(false, &["*".to_string()]);
    let image = &analysis_with(&only_main).processes[0];
    assert!(image
        .sites
        .iter()
        .all(|site| frame_names(&site.stack) == ["main"]));
}

#[test]
fn mapping_sites_drop_the_c_library() {
    let analysis = analysis_with(&SkipFrames::default());
    let sites = &analysis.processes[0].mapping_sites;
    let summary: Vec<(Vec<&str>, u64, u64, u64, u64)> = sites
        .iter()
        .map(|site| {
            let mappings = &site.mappings;
            (
                frame_names(&site.stack),
                mappings.total_calls(),
                mappings.mmap_bytes,
                mappings.brk_growth_bytes,
                mappings.munmap_bytes,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (vec!["build_index", "main"], 3, 4096, 0x21000, 0),
            (vec![], 1, 0, 0, 8192),
        ]
    );
    let skip_nothing = analysis_with(&SkipFrames::new(false, &[]));
    let raw: Vec<Vec<&str>> = skip_nothing.processes[0]
        .mapping_sites
        .iter()
        .map(|site| frame_names(&site.stack))
        .collect();
    assert_eq!(
        raw,
        vec![
            vec![
                "__brk_call",
                "__brk",
                "sysmalloc",
                "__GI___libc_malloc",
                "build_index",
                "main"
            ],
            vec![
                "__GI___mmap64",
                "sysmalloc",
                "__GI___libc_malloc",
                "build_index",
                "main"
            ],
            vec![],
        ]
    );
}

#[test]
fn frames_without_dwarf_or_symbols_are_still_named() {
    let analysis = analyze(&two_process_profile(), Path::new("two.msup"));
    let forked = &analysis.processes[1];
    assert_eq!(forked.exe, APP);
    let stack = &forked.sites[0].stack;
    assert_eq!(frame_names(stack), vec!["build_index", TRUNCATED_NAME]);
    assert_eq!(stack[1].address, TRUNCATED_FRAME);
    assert_eq!(stack[1].name(), TRUNCATED_NAME);
    let unknown = Frame {
        function: String::new(),
        file: None,
        line: None,
        module: "/lib/libjit.so".to_string(),
        address: 0xbeef,
        offset: 0,
        inlined: false,
    };
    assert_eq!(unknown.name(), "0xbeef (libjit.so)");
    let new_frame = &analysis.processes[0].sites[0].stack;
    assert_eq!(new_frame.len(), 3);
    let raw = analyze_with(
        &sites_profile(),
        Path::new("s"),
        &SkipFrames::new(false, &[]),
    );
    // The retry stack holds the block live at the peak.
    let operator_new = &raw.processes[0].sites[0].stack[0];
    assert_eq!(
        (
            operator_new.function.as_str(),
            operator_new.offset,
            operator_new.file.is_none()
        ),
        ("operator new(unsigned long)", 0x5c, true)
    );
}

/// `sites_profile` with build_index's second call made from another address of the same
/// line (a loop the compiler unrolled).
fn unrolled_profile() -> Profile {
    const UNROLLED: u64 = BUILD_INDEX + 0x40;
    let frames = vec![source("build_index", "index.c", 30, false)];
    let unrolled = symbol(PID, UNROLLED, ("build_index", 0x49), APP, frames);
    scripted_profile(&[UNROLLED, MAIN], vec![unrolled])
}

#[test]
fn sites_of_one_source_line_are_one_source_site_with_the_numbers_of_their_blocks_together() {
    let analysis = analyze_with(
        &unrolled_profile(),
        Path::new("u.msup"),
        &SkipFrames::default(),
    );
    let image = &analysis.processes[0];
    let by_address: Vec<(Vec<&str>, u64)> = (image.sites.iter())
        .map(|site| (frame_names(&site.stack), site.metrics.allocations))
        .collect();
    assert_eq!(
        by_address,
        vec![
            (vec![FILL_VALUES_NAME, "load_table()", "main"], 3),
            (vec!["main"], 3),
            (vec!["build_index", "main"], 2),
            (vec!["build_index", "main"], 1),
        ]
    );
    // The source sites are those of the profile without the second address, exactly.
    let original = analysis_with(&SkipFrames::default());
    let metrics =
        |sites: &[Site]| -> Vec<SiteMetrics> { sites.iter().map(|s| s.metrics).collect() };
    assert_eq!(
        metrics(&image.source_sites),
        metrics(&original.processes[0].sites)
    );
    assert_eq!(
        metrics(&original.processes[0].source_sites),
        metrics(&original.processes[0].sites)
    );
}
