//! The default text report, line by line, for the scripted profiles of the analysis tests.

use std::path::Path;

use super::*;
use crate::analysis::analyze;
use crate::analysis::site_tests::sites_profile;
use crate::analysis::tests::{heap_profile, images_profile};
use crate::trace::reader::Profile;

fn rendered(profile: &Profile, options: TextOptions) -> String {
    let analysis = analyze(profile, Path::new("run.msup"));
    let mut out = Vec::new();
    render(&analysis, options, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

const HEADER: &str = "memsup profile run.msup
  mode         run
  command      ./app x
  host         node17
  recorded by  memsup 0.1.0
";

#[test]
fn a_summary_then_one_line_per_site() {
    let text = rendered(&heap_profile(), TextOptions::default());
    let expected = HEADER.to_string()
        + "
== process 100 (launch) ==
  command              ./app x
  exit                 exited with status 3 after 4.00 µs (started 1.00 µs into the recording)
  peak requested       550 bytes in 3 blocks, 1.30 µs after start
  leaked at exit       550 bytes in 2 blocks
  allocations          6 blocks, 1.17 KiB (1200 bytes): malloc 4, calloc 1, realloc 4, free 3; 2 failed
  unknown frees        1 of blocks not seen allocated (e.g. allocated by a module loaded before probes)
  allocation sizes     32–63 B 1, 64–127 B 2 (1 live), 128–255 B 1, 256–511 B 2 (1 live)
  components           libtable.so 470 bytes requested, app 300 bytes requested, unknown 80 bytes requested
  warnings             no allocator symbols in /usr/lib/libjit.so
  heap sites by bytes live at the peak
      at peak  allocs    allocated  temporary                  leaked  site
    300 bytes       2    400 bytes          0                       0  main+0x25
    200 bytes       2    670 bytes          0    470 bytes in 1 block  make_table+0x10 (libtable)
     50 bytes       2    130 bytes          0     80 bytes in 1 block  0x403000
";
    assert_eq!(text, expected);
}

#[test]
fn verbose_adds_what_watching_cost() {
    let text = rendered(
        &heap_profile(),
        TextOptions {
            verbose: true,
            ..TextOptions::default()
        },
    );
    let lines: Vec<&str> = text.lines().collect();
    let probes = [
        "  probes               40 stops, 1 single-step, 1 stop-the-world fallback",
        "                       entry hits 20, return hits 15, emulated 18, out of line 2, syscall stops 4, nested calls 0, foreign patches 0, stack copies 0 (0 ns)",
        "  engine               int3 (a stop per allocator call)",
    ];
    let after_allocations = lines
        .iter()
        .position(|line| line.starts_with("  allocation sizes "))
        .expect("an allocation sizes row")
        + 1;
    assert_eq!(lines[after_allocations..after_allocations + 3], probes);
    assert!(!rendered(&heap_profile(), TextOptions::default()).contains("  probes "));
}

#[test]
fn stacks_are_cut_at_the_program_and_top_limits_the_list() {
    let options = TextOptions {
        top: 2,
        ..TextOptions::default()
    };
    let text = rendered(&sites_profile(), options);
    let sites = &text[text.find("== process").unwrap()..];
    let expected = "== process 7 (launch) ==
  command              app
  exit                 exited with status 0 after 1.50 µs (started 0 ns into the recording)
  peak requested       1.17 KiB (1200 bytes) in 4 blocks, 900 ns after start
  leaked at exit       500 bytes in 2 blocks
  allocations          9 blocks, 2.03 KiB (2080 bytes): malloc 7, realloc 2, free 5
  allocation sizes     32–63 B 1, 64–127 B 3, 128–255 B 2 (1 live), 256–511 B 2 (1 live), 512–1023 B 1
  mapping calls        mmap 1, munmap 1, brk 2: 4.00 KiB mmap'd, 8.00 KiB munmap'd, 132.00 KiB brk growth
  components           app 1.17 KiB requested
  heap sites by bytes live at the peak (2 of 3; --top N for more)
      at peak  allocs    allocated  temporary                  leaked  site
    600 bytes       3     1.17 KiB          0    200 bytes in 1 block  fill_values(std::vector<int, std::allocator<int> >&) app.cpp:12 <- load_table() :20 <- main :50
    350 bytes       3    430 bytes          1    300 bytes in 1 block  main app.cpp:52
  mapping sites by bytes mapped
   136.00 KiB  mmap 1, brk 2     build_index index.c:30 <- main app.cpp:50
";
    assert_eq!(sites, expected);
}

#[test]
fn images_without_calls_are_short() {
    let text = rendered(&images_profile(), TextOptions::default());
    let images = &text[text.find("\n== process").unwrap()..];
    let expected = "
== process 10 (launch) ==
  command              sh -c ./app
  exit                 replaced by exec after 90 ns (started 0 ns into the recording)
  calls                none

== process 11, parent 10 (fork) ==
  command              sh -c ./app
  exit                 replaced by exec after 20 ns (started 50 ns into the recording)
  peak requested       10 bytes in 1 block, 5 ns after start
  leaked at exec       10 bytes in 1 block
  allocations          1 block, 10 bytes: malloc 1
  allocation sizes     8–15 B 1 (1 live)
  components           unknown 10 bytes requested
  heap sites by bytes live at the peak
      at peak  allocs    allocated  temporary                  leaked  site
     10 bytes       1     10 bytes          0     10 bytes in 1 block  0x401000

== process 12, parent 10 (vfork) ==
  command              true
  exit                 exited with status 0 after 20 ns (started 60 ns into the recording)
  calls                none
  mapping calls        mmap 2, munmap 2, brk 4: 4.00 KiB mmap'd, 4.00 KiB munmap'd, 140.00 KiB brk growth
  mapping sites by bytes mapped
   144.00 KiB  mmap 2, munmap 2, brk 4  (no stack recorded)

== process 11, parent 10 (fork) ==
  command              ./app
  exit                 unknown (the recording ended first) after 50 ns (started 70 ns into the recording)
  calls                none
  warnings             stopped early

== process 10 (launch) ==
  command              app2
  exit                 killed by signal 11 (SIGSEGV) after 10 ns (started 90 ns into the recording)
  calls                none
";
    assert_eq!(images, expected);
}
