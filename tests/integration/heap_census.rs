//! The glibc heap census of `memsup snapshot` (fixtures/heap_census.c): every class of chunk
//! counted exactly (in use, tcache, fastbins, free in bins, mmapped), per arena and by size
//! class, and glibc's totals equal to the `mallinfo2()` the fixture printed, with libc's
//! debug file and without it (MEMSUP_CENSUS_IGNORE_DEBUG_FILE: the heuristics must find the
//! same), dynamic and static; musl and a preloaded jemalloc, tcmalloc or mimalloc get a
//! one-line reason and the rest of the snapshot. The fixture is released afterwards and must
//! print and exit as it does alone.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::announced::{start_announced, Running, Start};
use crate::common::live_process::{hook_mappings, thread_states, tracer_pid, wait_until};
use crate::common::report::{report_json, report_output};
use crate::common::run::{clean_command, memsup_binary, spawn_piped, wait_within};
use crate::common::tools::require_file;
use crate::common::*;

const NAME: &str = "heap_census";

/// What the fixture announced: where its 20000-byte block's chunk is, and its mallinfo2
/// fields (None under musl).
struct Announced {
    big_chunk: u64,
    mallinfo: Option<BTreeMap<String, u64>>,
}

/// Starts the fixture (with `args`) and reads its announcement.
fn start(fixture: &Path, args: &[&str]) -> (Running, Announced) {
    let start = Start {
        args,
        piped_stdin: true,
        extra_lines: 3,
    };
    let program = start_announced(fixture, NAME, start);
    let big_chunk = program.extra[1]
        .strip_prefix("heap_census: big chunk ")
        .and_then(|address| address.parse().ok())
        .unwrap_or_else(|| panic!("the big chunk line: {:?}", program.extra[1]));
    let line = &program.extra[2];
    if line == "heap_census: no mallinfo2" {
        let announced = Announced {
            big_chunk,
            mallinfo: None,
        };
        return (program, announced);
    }
    let fields = line
        .strip_prefix("heap_census: mallinfo2 ")
        .unwrap_or_else(|| panic!("the mallinfo2 line: {line:?}"))
        .split(' ')
        .map(|field| {
            let (name, value) = field.split_once('=').expect("name=value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect();
    let announced = Announced {
        big_chunk,
        mallinfo: Some(fields),
    };
    (program, announced)
}

/// The chunk of malloc(20000), freed into a bin.
const BIG_CHUNK: u64 = 0x4e30;

/// What malloc_trim would give back of the big chunk: the whole pages past its 48 bytes of
/// links (all resident: the fixture wrote every byte).
fn trimmable(big_chunk: u64) -> u64 {
    let first = (big_chunk + 48).div_ceil(4096) * 4096;
    let last = (big_chunk + BIG_CHUNK) / 4096 * 4096;
    last.saturating_sub(first)
}

/// `memsup snapshot -o PROFILE PID`, with libc's debug file ignored when `ignore_debug`.
fn snapshot(profile: &Path, pid: u32, ignore_debug: bool) {
    let mut command: Command = clean_command(memsup_binary());
    command
        .args(["snapshot", "-o"])
        .arg(profile)
        .arg(pid.to_string());
    if ignore_debug {
        command.env("MEMSUP_CENSUS_IGNORE_DEBUG_FILE", "1");
    }
    let (child, description) = spawn_piped(command);
    let output = wait_within(child, &description, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(tracer_pid(pid), 0, "every thread let go");
}

fn blocks(count: u64, bytes: u64) -> Value {
    json!({"count": count, "bytes": bytes})
}

/// The chunk glibc makes for a request of `bytes`.
fn chunk_size(bytes: u64) -> u64 {
    ((bytes + 8 + 15) & !15).max(0x20)
}

/// The blocks the fixture keeps, (requested bytes, count), and frees after its release:
/// the worker's, then main's.
const KEPT: [(u64, u64); 7] = [
    (64, 5),
    (600, 2),
    (24, 5),
    (100, 7),
    (1000, 3),
    (5000, 2),
    (200_000, 3),
];

/// The block of posix_memalign(4096, 200000): its 50-page chunk less the 4,080 bytes memalign
/// skipped and the header.
const ALIGNED_USABLE: u64 = 204_800 - 4_080 - 16;

/// The same block realloc'd to 300000: mremap grew its mapping to 75 pages, the 4,080 bytes
/// memalign skipped still below it.
const GROWN_USABLE: u64 = 307_200 - 4_080 - 16;

/// What glibc's heap gives the program for a request of `bytes`: a heap chunk's size less
/// its size field, or (at the mmap threshold, 128 KiB) whole pages less the header.
fn usable_size(bytes: u64) -> u64 {
    if bytes >= 128 << 10 {
        ((bytes + 16 + 4095) & !4095) - 16
    } else {
        chunk_size(bytes) - 8
    }
}

/// Static glibc keeps the program's directory (`_dl_origin_path`) in a block of its own: its
/// chunk depends on where the fixture was built.
fn origin_chunk(fixture: &Path) -> u64 {
    let directory = fixture.parent().expect("a directory").as_os_str().len() as u64;
    chunk_size(directory + 1)
}

/// The main arena's in-use chunks: the fixture's 5 x 0x20, 7 x 0x70, 3 x 0x3f0 and 2 x 0x1390
/// (13,984 bytes), the worker's DTV (0x120, calloc'd by pthread_create), and under static
/// glibc 4 blocks libc allocates at start-up (1,808 bytes) and the origin block.
fn main_in_use(variant: Variant, fixture: &Path) -> Value {
    match variant {
        Variant::Dynamic => blocks(18, 14_272),
        _ => blocks(23, 14_272 + 1_808 + origin_chunk(fixture)),
    }
}

/// (up to, in use, cached, free) chunks per size class.
fn histogram(variant: Variant, fixture: &Path) -> Vec<(u64, u64, u64, u64)> {
    if variant == Variant::Dynamic {
        return vec![
            (32, 5, 0, 0),
            (64, 0, 10, 0),
            (128, 12, 1, 0),
            (256, 0, 3, 0),
            (512, 1, 0, 0),
            (1024, 5, 0, 0),
            (4096, 0, 0, 2),
            (8192, 2, 0, 0),
            (32768, 0, 0, 1),
        ];
    }
    let mut classes = vec![
        (32, 5, 0, 0),
        (64, 1, 10, 0),
        (128, 12, 1, 0),
        (256, 1, 3, 0),
        (512, 2, 0, 0),
        (1024, 5, 0, 0),
        (2048, 1, 0, 0),
        (4096, 0, 0, 2),
        (8192, 2, 0, 0),
        (32768, 0, 0, 1),
    ];
    let origin_class = origin_chunk(fixture).next_power_of_two();
    match classes.iter_mut().find(|class| class.0 == origin_class) {
        Some(class) => class.1 += 1,
        None => {
            classes.push((origin_class, 1, 0, 0));
            classes.sort();
        }
    }
    classes
}

fn check_census(
    census: &Value,
    variant: Variant,
    fixture: &Path,
    big_chunk: u64,
    mallinfo: &BTreeMap<String, u64>,
) {
    assert_eq!(census["walked"], true, "{census}");
    assert_eq!(census["doubts"], json!([]), "{census}");
    let arenas = census["arenas"].as_array().unwrap();
    assert_eq!(arenas.len(), 2, "{census}");
    let (main, worker) = (&arenas[0], &arenas[1]);
    assert_eq!(main["main"], true);
    assert_eq!(main["in_use"], main_in_use(variant, fixture));
    // 7 x 0x30 and 3 x 0xd0; 3 x 0x30 in the fastbin; 2 x 0xbc0 and the big chunk in the
    // unsorted bin.
    assert_eq!(main["tcache"], blocks(10, 960));
    assert_eq!(main["tcache_structs"], blocks(1, 0x290));
    assert_eq!(main["fastbins"], blocks(3, 144));
    assert_eq!(main["free"], blocks(3, 6016 + BIG_CHUNK));
    assert_eq!(main["largest_free"], BIG_CHUNK);
    // The worker's 5 x 0x50 and 2 x 0x260, and the 0x50 it freed.
    assert_eq!(worker["main"], false);
    assert_eq!(worker["heaps"], 1);
    assert_eq!(worker["in_use"], blocks(7, 1616));
    assert_eq!(worker["tcache"], blocks(1, 0x50));
    assert_eq!(worker["tcache_structs"], blocks(1, 0x290));
    assert_eq!(worker["fastbins"], blocks(0, 0));
    assert_eq!(worker["free"], blocks(0, 0));
    // 3 x malloc(200000): 49 pages each; posix_memalign(4096, 200000): 50 pages; the one
    // grown to 300000: 75 pages.
    assert_eq!(
        census["totals"]["mmapped"],
        blocks(5, 3 * 200_704 + 204_800 + 307_200)
    );
    let classes: Vec<(u64, u64, u64, u64)> = census["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|class| {
            let count = |name: &str| class[name]["count"].as_u64().unwrap();
            let up_to = class["up_to"].as_u64().unwrap();
            (up_to, count("in_use"), count("cached"), count("free"))
        })
        .collect();
    assert_eq!(classes, histogram(variant, fixture));
    let expected: BTreeMap<String, u64> = mallinfo.clone();
    let found: BTreeMap<String, u64> = census["mallinfo2"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| (name.clone(), value.as_u64().unwrap()))
        .collect();
    assert_eq!(found, expected, "mallinfo2, {variant:?}");
    // Every byte the fixture wrote is resident: the free chunks, the caches.
    let residency = &census["residency"];
    let part = |name: &str| residency[name].as_u64().unwrap();
    assert_eq!(part("free"), 6016 + BIG_CHUNK);
    assert_eq!(part("cache"), 960 + 144 + 0x50);
    // The main top's pages past its header were never touched: only the big chunk's count.
    assert!(trimmable(big_chunk) >= 3 * 4096, "{big_chunk:#x}");
    assert_eq!(part("trimmable"), trimmable(big_chunk), "{residency}");
    assert_eq!(
        part("resident"),
        part("in_use") + part("free") + part("cache") + part("top")
    );
}

/// What the census found free in the arenas (free chunks, caches, tops) is the allocator's
/// `overhead` in the snapshot's components, taken from what no known block accounted for.
fn check_overhead(process: &Value, census: &Value) {
    let residency = &census["residency"];
    let part = |name: &str| residency[name].as_u64().unwrap();
    let free = part("free") + part("cache") + part("top");
    let components = process["components"].as_array().unwrap();
    let overhead = components
        .iter()
        .find(|component| component["name"] == "overhead")
        .unwrap_or_else(|| panic!("no overhead in {components:#?}"));
    assert_eq!(overhead["peak_rss_bytes"], free, "{residency} {overhead}");
    assert_eq!(
        overhead["peak_pss_bytes"], free,
        "private pages: {overhead}"
    );
}

#[test]
fn the_census_counts_every_class_and_equals_mallinfo2_with_and_without_debug_symbols() {
    for variant in variants(NAME) {
        let path = fixture(NAME, variant);
        let (mut program, announced) = start(&path, &[]);
        let pid = program.pid;
        let directory = tempfile::tempdir().unwrap();
        let mut censuses = Vec::new();
        for ignore_debug in [false, true] {
            let profile = directory.path().join(format!("census-{ignore_debug}.msup"));
            snapshot(&profile, pid, ignore_debug);
            let report = report_json(&profile);
            let process = &report["processes"][0];
            assert_eq!(
                process["threads"]["groups"].as_array().map(Vec::len),
                Some(2)
            );
            let census = process["heap_census"].clone();
            let text = report_output(&profile, &[]);
            match &announced.mallinfo {
                None => {
                    let reason = "a static program without glibc's main_arena symbol \
                                  (another C library, or stripped)";
                    assert_eq!(census["walked"], false);
                    assert_eq!(census["reason"], reason);
                    let line = format!("\n  Heap: not read: {reason}\n");
                    assert!(text.contains(&line), "{text}");
                }
                Some(mallinfo) => {
                    check_census(&census, variant, &path, announced.big_chunk, mallinfo);
                    let symbols = match (variant, ignore_debug) {
                        (Variant::Dynamic, false) => "debug file",
                        (Variant::Dynamic, true) => "heuristics",
                        _ => "symbol table",
                    };
                    assert_eq!(census["symbols"], symbols);
                    let line = format!(
                        "    mallinfo2: arena {} uordblks {} fordblks {} ordblks {} smblks {} \
                         fsmblks {} hblks {} hblkhd {} keepcost {}\n",
                        mallinfo["arena"],
                        mallinfo["uordblks"],
                        mallinfo["fordblks"],
                        mallinfo["ordblks"],
                        mallinfo["smblks"],
                        mallinfo["fsmblks"],
                        mallinfo["hblks"],
                        mallinfo["hblkhd"],
                        mallinfo["keepcost"]
                    );
                    assert!(text.contains(&line), "{text}");
                    check_overhead(process, &census);
                }
            }
            censuses.push(census);
        }
        // The heuristics found what the symbols found.
        let without_source = |census: &Value| {
            let mut census = census.clone();
            census["symbols"] = Value::Null;
            census
        };
        assert_eq!(without_source(&censuses[0]), without_source(&censuses[1]));
        program.write_stdin(b"\n");
        let rest = program.finish_cleanly();
        assert_eq!(rest, format!("{NAME}: released\n"), "{variant:?}");
    }
}

#[test]
fn a_heap_of_another_allocator_is_one_reason_and_the_snapshot_still_works() {
    let allocators = [
        ("libjemalloc.so.2", "libjemalloc2"),
        ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
        ("libmimalloc.so.2", "libmimalloc2.0"),
    ];
    let path = fixture(NAME, Variant::Dynamic);
    for (file, package) in allocators {
        let library = format!("/usr/lib/x86_64-linux-gnu/{file}");
        if !require_file(&library, package) {
            continue;
        }
        // Through env, so that the allocator is the fixture's alone.
        let preload = format!("LD_PRELOAD={library}");
        let args = [preload.as_str(), path.to_str().expect("a UTF-8 path")];
        let start = Start {
            args: &args,
            piped_stdin: true,
            extra_lines: 3,
        };
        let mut program = start_announced(Path::new("/usr/bin/env"), NAME, start);
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("other.msup");
        snapshot(&profile, program.pid, false);
        let report = report_json(&profile);
        let process = &report["processes"][0];
        assert_eq!(
            process["threads"]["groups"].as_array().map(Vec::len),
            Some(2)
        );
        let census = &process["heap_census"];
        assert_eq!(census["walked"], false, "{file}");
        // Named as the process maps it: the file the link leads to.
        let real = std::fs::canonicalize(&library).unwrap();
        let name = real.file_name().unwrap().to_string_lossy();
        assert_eq!(census["reason"], format!("malloc is {name}'s, not glibc's"));
        program.write_stdin(b"\n");
        let rest = program.finish_cleanly();
        assert_eq!(rest, format!("{NAME}: released\n"), "{file}");
    }
}

#[test]
fn without_symbols_a_lone_main_arena_is_found_by_its_top_and_bins() {
    let path = fixture(NAME, Variant::Dynamic);
    let (mut program, announced) = start(&path, &["--no-worker"]);
    let mallinfo = announced.mallinfo.expect("glibc's mallinfo2");
    let directory = tempfile::tempdir().unwrap();
    let mut censuses = Vec::new();
    for ignore_debug in [false, true] {
        let profile = directory.path().join(format!("lone-{ignore_debug}.msup"));
        snapshot(&profile, program.pid, ignore_debug);
        let mut census = report_json(&profile)["processes"][0]["heap_census"].clone();
        let symbols = if ignore_debug {
            "heuristics"
        } else {
            "debug file"
        };
        assert_eq!(census["symbols"], symbols);
        assert_eq!(census["doubts"], json!([]), "{census}");
        assert_eq!(census["arenas"].as_array().map(Vec::len), Some(1));
        // The fixture's main-arena chunks, without the worker's DTV.
        assert_eq!(census["arenas"][0]["in_use"], blocks(17, 14_272 - 0x120));
        assert_eq!(census["arenas"][0]["tcache"], blocks(10, 960));
        assert_eq!(census["arenas"][0]["fastbins"], blocks(3, 144));
        for (name, value) in &mallinfo {
            assert_eq!(census["mallinfo2"][name], *value, "{name}");
        }
        census["symbols"] = Value::Null;
        censuses.push(census);
    }
    assert_eq!(censuses[0], censuses[1]);
    program.write_stdin(b"\n");
    let rest = program.finish_cleanly();
    assert_eq!(rest, format!("{NAME}: released\n"));
}

/// `memsup attach` starts from a census: the fixture's heap exactly as a snapshot sees it,
/// "live before attach" counts its chunks in use, and what glibc holds free is `overhead`
/// in the start snapshot, not `unknown`.
#[test]
fn an_attach_starts_from_a_census_of_the_heap() {
    for variant in variants(NAME) {
        let path = fixture(NAME, variant);
        let (mut program, announced) = start(&path, &[]);
        let pid = program.pid;
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("attach.msup");
        let mut command = clean_command(memsup_binary());
        command.args(["attach", "-q", "-o"]);
        command.arg(&profile).arg(pid.to_string());
        let (memsup, description) = spawn_piped(command);
        let memsup_pid = memsup.id();
        wait_until("memsup traces the fixture", Duration::from_secs(30), || {
            tracer_pid(pid) == memsup_pid
        });
        // Joined and let go: both threads wait again (stdin, the condition). Memsup's
        // page in the fixture tells the attach's stop from the moment before it.
        wait_until("the fixture runs on", Duration::from_secs(30), || {
            !hook_mappings(pid).is_empty() && thread_states(pid).iter().all(|state| state == "S")
        });
        program.write_stdin(b"\n");
        let rest = program.finish_cleanly();
        assert_eq!(rest, format!("{NAME}: released\n"), "{variant:?}");
        let output = wait_within(memsup, &description, Duration::from_secs(60));
        assert_eq!(output.status.code(), Some(0), "{variant:?}: {output:?}");
        let report = report_json(&profile);
        let process = &report["processes"][0];
        assert_eq!(process["cause"], "attach");
        let census = &process["heap_census"];
        let text = report_output(&profile, &[]);
        let line = text
            .lines()
            .find(|line| line.starts_with("  live before attach "))
            .unwrap_or_else(|| panic!("{variant:?}: no line for the census:\n{text}"));
        let Some(mallinfo) = &announced.mallinfo else {
            assert_eq!(census["walked"], false, "{census}");
            let reason = census["reason"].as_str().unwrap();
            assert!(line.ends_with(&format!(" not counted: {reason}")), "{line}");
            continue;
        };
        check_census(census, variant, &path, announced.big_chunk, mallinfo);
        check_overhead(process, census);
        // Its kept blocks, freed after the release, are the census's: known by their size.
        // With the aligned blocks: found where memalign moved them, 4,096 bytes into their
        // chunks, the grown one by its own header.
        let kept = KEPT.iter().map(|&(_, count)| count).sum::<u64>() + 2;
        let kept_bytes: u64 = KEPT
            .iter()
            .map(|&(bytes, count)| count * usable_size(bytes))
            .sum::<u64>()
            + ALIGNED_USABLE
            + GROWN_USABLE;
        assert_eq!((kept, kept_bytes), (29, 1_121_280));
        let sources = &process["unknown_free_sources"];
        assert_eq!(
            (
                &sources["before_attach_in_census"],
                &sources["before_attach_bytes"]
            ),
            (&json!(kept), &json!(kept_bytes)),
            "{variant:?}: {sources}"
        );
        let frees = text
            .lines()
            .find(|line| line.starts_with("  unknown frees "))
            .unwrap_or_else(|| panic!("{variant:?}: no unknown frees:\n{text}"));
        assert!(
            frees.ends_with(&format!(
                " 29 of blocks from before the attach, 1.07 MiB ({kept_bytes} bytes) by the \
                 heap census at the attach"
            )),
            "{variant:?}: {frees}"
        );
        let count = |blocks: &Value| {
            (
                blocks["count"].as_u64().unwrap(),
                blocks["bytes"].as_u64().unwrap(),
            )
        };
        let (mut blocks, mut bytes) = count(&census["totals"]["mmapped"]);
        for arena in census["arenas"].as_array().unwrap() {
            let (arena_blocks, arena_bytes) = count(&arena["in_use"]);
            blocks += arena_blocks;
            bytes += arena_bytes;
        }
        assert!(
            line.contains(&format!(" {blocks} blocks, "))
                && line.ends_with(&format!(
                    "({bytes} bytes) (glibc's chunks in use when memsup attached, by its heap \
                     census)"
                )),
            "{variant:?}: {line}"
        );
    }
}
