//! Exact lines of the text report for the scripted profiles of the analysis tests.

use std::path::Path;

use super::*;
use crate::analysis::analyze;
use crate::analysis::tests::{heap_profile, images_profile};
use crate::trace::reader::Profile;

fn rendered(profile: &Profile) -> String {
    let analysis = analyze(profile, Path::new("run.msup"));
    let mut out = Vec::new();
    render(&analysis, &mut out).unwrap();
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
            "  unknown frees        1",
            "  failed allocations   2",
            "  largest allocation   470 bytes",
            "  peak live requested  550 bytes in 3 blocks, 1.30 µs after start",
            "  leaked at exit       550 bytes in 2 blocks",
            "  mapping calls        none",
            "  probes               40 stops, 1 single-step, 1 stop-the-world fallback",
            "  warnings             no allocator symbols in /usr/lib/libjit.so",
            "    peak bytes  blocks  allocations  site",
            "     300 bytes       1            2  main+0x25 (app)",
            "     200 bytes       1            2  make_table+0x10 (libtable.so)",
            "      50 bytes       1            2  0x403000",
        ],
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
