//! Exact lines of the text report for the scripted profiles of the analysis tests.

use std::path::Path;

use super::*;
use crate::analysis::site_tests::sites_profile;
use crate::analysis::tests::{heap_profile, images_profile};
use crate::analysis::{analyze, Frame};
use crate::trace::reader::Profile;

/// `--stacks full --verbose`: every list, whole stacks, what watching cost.
const FULL_VERBOSE: TextOptions = TextOptions {
    top: DEFAULT_TOP,
    full: true,
    verbose: true,
};

fn rendered(profile: &Profile) -> String {
    let analysis = analyze(profile, Path::new("run.msup"));
    let mut out = Vec::new();
    render(&analysis, FULL_VERBOSE, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn assert_lines(text: &str, expected: &[&str]) {
    let lines: Vec<&str> = text.lines().collect();
    for line in expected {
        assert!(lines.contains(line), "missing line {line:?} in\n{text}");
    }
}

const TRUNCATION_LINE: &str = "WARNING: the profile is truncated (memsup was stopped before it \
    finished); showing what was recorded up to the last whole block.";

#[test]
fn heap_image_lines() {
    let text = rendered(&heap_profile());
    assert!(text.starts_with("memsup profile run.msup\n"));
    assert!(!text.contains("WARNING"));
    assert_lines(
        &text,
        &[
            "  mode         run",
            "  command      ./app x",
            "== process 100 (launch) ==",
            "  command              ./app x",
            "  executable           /bin/app",
            "  exit                 exited with status 3",
            "  duration             4.00 µs (started 1.00 µs into the recording)",
            "  calls                malloc 4, calloc 1, realloc 4, free 3",
            "  allocations          6 blocks, 1.17 KiB (1200 bytes)",
            "  frees                4 (+ 1 free(NULL))",
            "  unknown frees        1 of blocks not seen allocated (e.g. allocated by a module loaded before probes)",
            "  failed allocations   2",
            "  largest allocation   470 bytes",
            "  peak live requested  550 bytes in 3 blocks, 1.30 µs after start",
            "  leaked at exit       550 bytes in 2 blocks",
            "  mapping calls        none",
            "  probes               40 stops, 1 single-step, 1 stop-the-world fallback",
            "  warnings             no allocator symbols in /usr/lib/libjit.so",
            "  call sites by bytes live at the peak",
            "    #1 300 bytes live at the peak in 1 block",
            "       main+0x25 in app",
            "       make_table+0x10 in libtable.so",
            "       0x403000",
            "  call sites by bytes leaked",
            "    #1 470 bytes leaked in 1 block",
        ],
    );
    assert!(
        !text.contains("temporary allocations\n"),
        "no site has temporary allocations: no such list"
    );
}

#[test]
fn site_lists_show_numbers_and_stacks() {
    let analysis = analyze(&sites_profile(), Path::new("run.msup"));
    let mut out = Vec::new();
    let options = TextOptions {
        top: 1,
        ..FULL_VERBOSE
    };
    render(&analysis, options, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let sites = &text[text.find("  call sites by bytes live").unwrap()..];
    let expected = "  call sites by bytes live at the peak
    #1 600 bytes live at the peak in 1 block
       3 allocations, 1200 bytes: size min 200, average 400, max 600
       peak 600 bytes in 1 block, local peak 1000 bytes, recycling ratio 1.20; leaked 200 bytes in 1 block; temporary 0 (0 bytes)
       freed 2 blocks: lifetime min 500 ns, average 550 ns, max 600 ns
       fill_values(std::vector<int, std::allocator<int> >&) at app.cpp:12 in app
       load_table() at app.cpp:20 in app
       main at app.cpp:50 in app
  call sites by allocations
    #1 3 allocations, 1.17 KiB (1200 bytes)
";
    assert!(sites.starts_with(expected), "{sites}");
    let lists: Vec<&str> = text
        .lines()
        .filter(|line| {
            line.starts_with("  call sites by") || line.starts_with("  mapping call sites")
        })
        .collect();
    assert_eq!(
        lists,
        vec![
            "  call sites by bytes live at the peak",
            "  call sites by allocations",
            "  call sites by bytes leaked",
            "  call sites by temporary allocations",
            "  mapping call sites by bytes mapped (mmap and brk growth)",
        ]
    );
    assert_eq!(text.matches("    #1 ").count(), 5, "--top 1");
    assert!(!text.contains("    #2 "));
    assert_lines(
        &text,
        &[
            "    #1 2 temporary allocations, 350 bytes",
            "    #1 136.00 KiB (139264 bytes) mapped (mmap 4096 bytes, brk growth 135168 bytes)",
            "       calls: mmap 1, brk 2; munmap'd 0 bytes",
        ],
    );
}

#[test]
fn frame_lines() {
    let frame = |function: &str, file: Option<&str>, module: &str, inlined| Frame {
        function: function.to_string(),
        file: file.map(str::to_string),
        line: file.map(|_| 137),
        module: module.to_string(),
        address: 0x7f00,
        offset: 0x1c,
        inlined,
    };
    let lines = [
        frame(
            "std::allocator<int>::allocate",
            Some("/usr/include/new_allocator.h"),
            "/bin/app",
            true,
        ),
        frame(
            "operator new(unsigned long)",
            None,
            "/lib/libstdc++.so.6",
            false,
        ),
        frame("", None, "/lib/libjit.so", false),
        frame("", None, "", false),
        frame("[truncated]", None, "", false),
    ]
    .map(|frame| sites::frame_line(&frame));
    assert_eq!(
        lines,
        [
            "std::allocator<int>::allocate (inlined) at /usr/include/new_allocator.h:137 in app",
            "operator new(unsigned long)+0x1c in libstdc++.so.6",
            "0x7f00 in libjit.so",
            "0x7f00",
            "[truncated]",
        ]
    );
}

#[test]
fn images_lines_and_truncation_warning() {
    let text = rendered(&images_profile());
    assert_lines(
        &text,
        &[
            TRUNCATION_LINE,
            "== process 11, parent 10 (fork) ==",
            "  command              sh -c ./app",
            "  exit                 replaced by exec",
            "  exit                 killed by signal 11 (SIGSEGV)",
            "  exit                 unknown (the recording ended first)",
            "  calls                none",
            "  mapping calls        mmap 2, munmap 2, brk 4",
            "  mmap'd               4.00 KiB (4096 bytes)",
            "  munmap'd             4.00 KiB (4096 bytes)",
            "  brk growth           140.00 KiB (143360 bytes)",
        ],
    );
    assert_eq!(text.matches("== process ").count(), 5);
}

#[test]
fn units() {
    assert_eq!(human_bytes(1), "1 byte");
    assert_eq!(human_bytes(1023), "1023 bytes");
    assert_eq!(human_bytes(1_572_864), "1.50 MiB (1572864 bytes)");
    assert_eq!(human_bytes(3 << 30), "3.00 GiB (3221225472 bytes)");
    assert_eq!(human_duration(850), "850 ns");
    assert_eq!(human_duration(12_500_000), "12.50 ms");
    assert_eq!(human_duration(3_200_000_000), "3.20 s");
    assert_eq!(human_duration(125_000_000_000), "2 min 5.00 s");
    assert_eq!(exit_description(ImageExit::Detached), "detached");
    assert_eq!(
        exit_description(ImageExit::Signal(99)),
        "killed by signal 99"
    );
}

#[test]
fn components_table_and_arenas() {
    let mut analysis = crate::report::test_data::components_analysis();
    analysis.processes[0]
        .warnings
        .push("fragmentation: 2.00 KiB of the arenas hold no live block".to_string());
    let mut out = Vec::new();
    render(&analysis, FULL_VERBOSE, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let table = &text[text.find("  components (peaks)").expect("the table")..];
    let expected = "  components (peaks)      requested          RSS          PSS         swap
    app                    2.93 KiB     8.00 KiB     6.00 KiB      0 bytes
    libc                  500 bytes     4.00 KiB     2.00 KiB     4.00 KiB
    overhead                0 bytes     2.00 KiB     2.00 KiB      0 bytes
  smaps snapshots      2 (1 estimated from pagemap), costing 500.00 µs; the last (exit) 2.50 µs into the recording
  split at peak RSS    measured: the highest snapshot (an estimate from pagemap) holds 14.00 KiB (2.50 µs into the recording), the status samples' peak RSS is 19.53 KiB
  allocator arenas     6.00 KiB resident, 3.42 KiB requested live, 2.00 KiB overhead (last snapshot)
  warnings             no allocator symbols in /usr/lib/libjit.so
                       fragmentation: 2.00 KiB of the arenas hold no live block
";
    assert!(table.starts_with(expected), "{table}");
    // The rows before the table are unchanged, and no image without components gets one.
    assert_lines(
        &text,
        &["  probes               40 stops, 1 single-step, 1 stop-the-world fallback"],
    );
    let mut analysis = analyze(&heap_profile(), Path::new("run.msup"));
    analysis.processes[0].components = Default::default();
    let mut out = Vec::new();
    render(&analysis, FULL_VERBOSE, &mut out).unwrap();
    let plain = String::from_utf8(out).unwrap();
    assert!(!plain.contains("components (peaks)"));
    assert!(!plain.contains("allocator arenas"));
}

#[test]
fn a_long_component_name_widens_the_name_column() {
    let mut analysis = crate::report::test_data::components_analysis();
    let components = &mut analysis.processes[0].components;
    components.components[1].name = "libverylongname.so.1.2.3".to_string();
    components.snapshots.clear();
    let mut out = Vec::new();
    render(&analysis, FULL_VERBOSE, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_lines(
        &text,
        &[
            "  components (peaks)            requested          RSS          PSS         swap",
            "    app                          2.93 KiB     8.00 KiB     6.00 KiB      0 bytes",
            "    libverylongname.so.1.2.3    500 bytes     4.00 KiB     2.00 KiB     4.00 KiB",
        ],
    );
    assert!(!text.contains("smaps snapshots"), "no snapshot, no line");
}
