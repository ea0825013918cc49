//! Exact expected numbers for a process image, and the assertions that compare them with the
//! report. Every mismatch of an image is listed at once.

use std::path::Path;

use serde_json::Value;

use super::engine::{assert_hook_costs, recorded_by_hooks};
use super::report::number;

/// The probed functions, in the report's (and AllocFunction::ALL's) order.
pub const FUNCTIONS: [&str; 10] = [
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
];

/// Calls per function, from the non-zero ones.
pub fn calls(nonzero: &[(&str, u64)]) -> [u64; 10] {
    let mut counts = [0; 10];
    for (name, count) in nonzero {
        let index = FUNCTIONS
            .iter()
            .position(|function| function == name)
            .unwrap_or_else(|| panic!("{name} is not a probed function"));
        counts[index] = *count;
    }
    counts
}

/// The heap numbers of one process image.
#[derive(Clone, Debug, Default)]
pub struct HeapExpectation {
    pub calls: [u64; 10],
    pub nested_calls: u64,
    /// Outer calls other than free that returned (each costs a return-trampoline hit).
    pub returned_calls: u64,
    pub allocations: u64,
    pub bytes_allocated: u64,
    pub frees: u64,
    pub null_frees: u64,
    pub unknown_frees: u64,
    pub failed_allocations: u64,
    pub peak_live_bytes: u64,
    pub peak_live_blocks: u64,
    pub live_bytes_at_exit: u64,
    pub live_blocks_at_exit: u64,
    pub largest_allocation: u64,
}

/// What statically linked glibc 2.36 allocates before main, and never frees, when
/// LD_LIBRARY_PATH is unset: _dl_get_origin malloc(D + 2) (D: length of the directory of
/// /proc/self/exe), _dl_new_object calloc(1225, 1), _dl_init_paths malloc(40) and malloc(320),
/// _dl_find_object_init malloc(160).
#[derive(Clone, Copy, Debug)]
pub struct GlibcStaticStartup {
    pub bytes: u64,
}

pub const STARTUP_MALLOCS: u64 = 4;
pub const STARTUP_CALLOCS: u64 = 1;
pub const STARTUP_BLOCKS: u64 = 5;
pub const STARTUP_LARGEST: u64 = 1225;

impl GlibcStaticStartup {
    pub fn of(fixture: &Path) -> GlibcStaticStartup {
        // The directory only: the program may be where this process sees no file (another
        // mount namespace's).
        let directory = fixture.parent().expect("a fixture lives in a directory");
        let resolved = directory
            .canonicalize()
            .unwrap_or_else(|error| panic!("resolving {}: {error}", directory.display()));
        let origin = resolved.as_os_str().len() as u64 + 2;
        GlibcStaticStartup {
            bytes: 1225 + 40 + 320 + 160 + origin,
        }
    }
}

impl HeapExpectation {
    /// The same program linked statically with glibc: its start-up blocks are live from
    /// before main to the end, so they add to the peak as well as to the totals.
    pub fn plus_static_startup(mut self, startup: GlibcStaticStartup) -> HeapExpectation {
        self.calls[0] += STARTUP_MALLOCS;
        self.calls[1] += STARTUP_CALLOCS;
        self.returned_calls += STARTUP_BLOCKS;
        self.allocations += STARTUP_BLOCKS;
        self.bytes_allocated += startup.bytes;
        self.peak_live_bytes += startup.bytes;
        self.peak_live_blocks += STARTUP_BLOCKS;
        self.live_bytes_at_exit += startup.bytes;
        self.live_blocks_at_exit += STARTUP_BLOCKS;
        self.largest_allocation = self.largest_allocation.max(STARTUP_LARGEST);
        self
    }
}

fn compare(mismatches: &mut Vec<String>, image: &Value, pointer: &str, expected: u64) {
    match image.pointer(pointer).and_then(Value::as_u64) {
        Some(actual) if actual == expected => {}
        Some(actual) => mismatches.push(format!("{pointer}: expected {expected}, got {actual}")),
        None => mismatches.push(format!("{pointer}: expected {expected}, missing")),
    }
}

fn fail_if_any(mismatches: Vec<String>, what: &str, image: &Value) {
    if !mismatches.is_empty() {
        panic!(
            "{what} of {} (pid {}):\n  {}\nimage: {image:#}",
            image["exe"],
            image["pid"],
            mismatches.join("\n  ")
        );
    }
}

/// Every heap number of `image` equals `expected`.
pub fn assert_heap(image: &Value, expected: &HeapExpectation) {
    let mut mismatches = Vec::new();
    let calls = image["calls"].as_object();
    let names: Vec<&str> = calls
        .map(|calls| calls.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut sorted_expected = FUNCTIONS.to_vec();
    sorted_expected.sort_unstable();
    let mut sorted_names = names.clone();
    sorted_names.sort_unstable();
    if sorted_names != sorted_expected {
        mismatches.push(format!(
            "calls must list every probed function, got {names:?}"
        ));
    }
    for (function, count) in FUNCTIONS.iter().zip(expected.calls) {
        compare(&mut mismatches, image, &format!("/calls/{function}"), count);
    }
    let fields = [
        ("/allocations", expected.allocations),
        ("/bytes_allocated", expected.bytes_allocated),
        ("/frees", expected.frees),
        ("/null_frees", expected.null_frees),
        ("/unknown_frees", expected.unknown_frees),
        ("/failed_allocations", expected.failed_allocations),
        ("/peak_live_bytes", expected.peak_live_bytes),
        ("/peak_live_blocks", expected.peak_live_blocks),
        ("/largest_allocation", expected.largest_allocation),
        ("/probes/nested_calls", expected.nested_calls),
    ];
    for (pointer, value) in fields {
        compare(&mut mismatches, image, pointer, value);
    }
    // What the program left live: the leaks reported plus those suppressed by default
    // (the C and C++ runtimes' one-time blocks).
    let live = [
        (
            "/live_bytes_at_exit",
            "/suppressed/bytes",
            expected.live_bytes_at_exit,
        ),
        (
            "/live_blocks_at_exit",
            "/suppressed/blocks",
            expected.live_blocks_at_exit,
        ),
    ];
    for (pointer, suppressed, value) in live {
        let total = (image.pointer(pointer).and_then(Value::as_u64))
            .zip(image.pointer(suppressed).and_then(Value::as_u64))
            .map(|(reported, suppressed)| reported + suppressed);
        if total != Some(value) {
            mismatches.push(format!(
                "{pointer} + {suppressed}: {total:?}, expected {value}"
            ));
        }
    }
    fail_if_any(mismatches, "heap numbers", image);
}

/// One expected entry of `sites`.
#[derive(Clone, Debug)]
pub struct SiteExpectation {
    /// The function that called the allocator (the site's innermost frame), when it is
    /// certain (None: any name).
    pub function: Option<&'static str>,
    pub peak_bytes: u64,
    pub peak_blocks: u64,
    /// (allocations, bytes_allocated) over the whole run, when asserted.
    pub totals: Option<(u64, u64)>,
}

pub fn site(function: Option<&'static str>, peak_bytes: u64, peak_blocks: u64) -> SiteExpectation {
    SiteExpectation {
        function,
        peak_bytes,
        peak_blocks,
        totals: None,
    }
}

impl SiteExpectation {
    pub fn with_totals(mut self, allocations: u64, bytes_allocated: u64) -> SiteExpectation {
        self.totals = Some((allocations, bytes_allocated));
        self
    }

    fn matches(&self, got: &Value) -> bool {
        self.function
            .map_or(true, |function| leaf_function(got) == function)
            && got["peak_bytes"] == self.peak_bytes
            && got["peak_blocks"] == self.peak_blocks
            && self.totals.map_or(true, |(allocations, bytes)| {
                got["allocations"] == allocations && got["bytes_allocated"] == bytes
            })
    }
}

/// The name of a site's innermost frame ("" when it has none).
pub fn leaf_function(site: &Value) -> &str {
    site["stack"][0]["function"].as_str().unwrap_or_default()
}

/// The first entries of `sites` are `expected`, and the whole list is ordered by peak bytes,
/// then bytes allocated.
pub fn assert_sites(image: &Value, expected: &[SiteExpectation]) {
    let sites = image["sites"].as_array().cloned().unwrap_or_default();
    let mut mismatches = Vec::new();
    if sites.len() < expected.len() {
        mismatches.push(format!(
            "sites has {} entries, expected at least {}",
            sites.len(),
            expected.len()
        ));
    }
    let rank = |site: &Value| {
        (
            number(site, "/peak_bytes"),
            number(site, "/bytes_allocated"),
        )
    };
    for pair in sites.windows(2) {
        if rank(&pair[0]) < rank(&pair[1]) {
            mismatches.push("sites is not ordered by peak_bytes, bytes_allocated".to_string());
        }
    }
    for (index, (want, got)) in expected.iter().zip(&sites).enumerate() {
        if !want.matches(got) {
            mismatches.push(format!(
                "sites[{index}]: expected {want:?}, got {} peak {} in {} blocks, {} \
                 allocations, {} bytes",
                leaf_function(got),
                got["peak_bytes"],
                got["peak_blocks"],
                got["allocations"],
                got["bytes_allocated"]
            ));
        }
    }
    fail_if_any(mismatches, "sites", image);
}

/// Stops memsup may spend on process and thread life-cycle events (exec, exit, clone, fork,
/// group stops) beyond probes and system calls: per process image, per thread, per signal.
pub const LIFECYCLE_STOPS_PER_IMAGE: u64 = 8;
pub const LIFECYCLE_STOPS_PER_THREAD: u64 = 4;
pub const LIFECYCLE_STOPS_PER_SIGNAL: u64 = 2;

/// What watching the image cost, by the rule of DESIGN.md §5: every allocator call hits its
/// entry probe once, nested ones included (emulated or run out of line, never single-stepped
/// and never stopping the other threads); every outer call that returns, except free (which
/// needs no result), hits the return trampoline once; each mapping system call costs one or
/// two syscall stops (seccomp stop, and the syscall-exit stop for its result); the rest is
/// life-cycle, bounded by `threads` (created by the program) and `signals` (delivered to it).
pub fn assert_probe_costs(image: &Value, expected: &HeapExpectation, threads: u64, signals: u64) {
    if recorded_by_hooks(image) {
        return assert_hook_costs(image, expected, threads, signals);
    }
    let probes = &image["probes"];
    let mut mismatches = Vec::new();
    let total_calls: u64 = expected.calls.iter().sum();
    let entry_hits = total_calls + expected.nested_calls;
    compare(&mut mismatches, image, "/probes/single_steps", 0);
    compare(&mut mismatches, image, "/probes/stop_the_world", 0);
    compare(&mut mismatches, image, "/probes/foreign_patches", 0);
    compare(&mut mismatches, image, "/probes/entry_hits", entry_hits);
    compare(
        &mut mismatches,
        image,
        "/probes/return_hits",
        expected.returned_calls,
    );
    let emulated = number(probes, "/emulated") + number(probes, "/out_of_line");
    if emulated != entry_hits {
        mismatches.push(format!(
            "emulated + out_of_line = {emulated}, expected every entry hit ({entry_hits})"
        ));
    }
    let mapping_calls: u64 = ["mmap", "munmap", "mremap", "brk", "shmat", "shmdt"]
        .iter()
        .map(|call| number(image, &format!("/mappings/calls/{call}")))
        .sum();
    let syscall_stops = number(probes, "/syscall_stops");
    if syscall_stops < mapping_calls || syscall_stops > 2 * mapping_calls {
        mismatches.push(format!(
            "syscall_stops {syscall_stops} outside [{mapping_calls}, {}] for {mapping_calls} \
             mapping calls",
            2 * mapping_calls
        ));
    }
    let probe_stops = entry_hits + expected.returned_calls + syscall_stops;
    let allowance = LIFECYCLE_STOPS_PER_IMAGE
        + LIFECYCLE_STOPS_PER_THREAD * threads
        + LIFECYCLE_STOPS_PER_SIGNAL * signals;
    let stops = number(probes, "/stops");
    if stops < probe_stops || stops > probe_stops + allowance {
        mismatches.push(format!(
            "stops {stops} outside [{probe_stops}, {}] (entry hits {entry_hits} + returns {} + \
             syscall stops {syscall_stops}, plus at most {allowance} life-cycle stops)",
            probe_stops + allowance,
            expected.returned_calls
        ));
    }
    fail_if_any(mismatches, "probe costs", image);
}

/// Some entry of `sites` matches `expected` (for a site whose rank depends on the length
/// of the build directory, which sets the size of static glibc's _dl_get_origin block).
pub fn assert_site_listed(image: &Value, expected: &SiteExpectation) {
    let sites = image["sites"].as_array().cloned().unwrap_or_default();
    let found = sites.iter().any(|got| expected.matches(got));
    let summary: Vec<String> = sites
        .iter()
        .map(|got| {
            format!(
                "{} peak {} in {}, {} allocations, {} bytes",
                leaf_function(got),
                got["peak_bytes"],
                got["peak_blocks"],
                got["allocations"],
                got["bytes_allocated"]
            )
        })
        .collect();
    assert!(found, "sites has no entry like {expected:?}: {summary:#?}");
}

/// A step-over mechanism forced with `--step-over`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForcedStepOver {
    OutOfLine,
    StopTheWorld,
}

impl ForcedStepOver {
    /// The value of memsup's `--step-over` option.
    pub fn option(self) -> &'static str {
        match self {
            ForcedStepOver::OutOfLine => "out-of-line",
            ForcedStepOver::StopTheWorld => "stop-the-world",
        }
    }
}

/// Every entry hit went through the forced mechanism and no other: out of line, each hit runs
/// the relocated instruction in the scratch page (no emulation, no step); stop the world, each
/// hit stops the other threads and single-steps once. Returns are counted as usual.
pub fn assert_forced_step_over(image: &Value, expected: &HeapExpectation, mode: ForcedStepOver) {
    let mut mismatches = Vec::new();
    let total_calls: u64 = expected.calls.iter().sum();
    let entry_hits = total_calls + expected.nested_calls;
    compare(&mut mismatches, image, "/probes/entry_hits", entry_hits);
    compare(
        &mut mismatches,
        image,
        "/probes/return_hits",
        expected.returned_calls,
    );
    compare(&mut mismatches, image, "/probes/foreign_patches", 0);
    compare(&mut mismatches, image, "/probes/emulated", 0);
    let (out_of_line, stepped) = match mode {
        ForcedStepOver::OutOfLine => (entry_hits, 0),
        ForcedStepOver::StopTheWorld => (0, entry_hits),
    };
    compare(&mut mismatches, image, "/probes/out_of_line", out_of_line);
    compare(&mut mismatches, image, "/probes/single_steps", stepped);
    compare(&mut mismatches, image, "/probes/stop_the_world", stepped);
    fail_if_any(mismatches, "probe mechanism", image);
}
