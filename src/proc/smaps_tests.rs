use super::*;

/// As printed by Linux 6.x (6.18 here); the second mapping's path has spaces and its file
/// was deleted.
const SMAPS: &str = "\
55d291f85000-55d291f87000 r--p 00000000 fe:00 247282                     /usr/bin/head
Size:                  8 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
Pss:                   4 kB
Pss_Dirty:             0 kB
Shared_Clean:          8 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:            8 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd mr mw me 
7f1c8a3f0000-7f1c8a3f4000 rw-s 0001a000 00:01 1234                       /dev/shm/ring buffer (deleted)
Size:                 16 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                  12 kB
Pss:                   6 kB
Pss_Dirty:             6 kB
Shared_Clean:          0 kB
Shared_Dirty:         12 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Referenced:           12 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  4 kB
SwapPss:               2 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd wr sh mr mw me ms sd 
55d2a3c4e000-55d2a3c6f000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                 100 kB
Pss:                 100 kB
Pss_Dirty:           100 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:       100 kB
Referenced:          100 kB
Anonymous:           100 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd wr mr mw me ac sd 
7f1c8a400000-7f1c8a421000 rw-p 00000000 00:00 0                          [anon:glibc malloc arena]
Size:                132 kB
Rss:                  40 kB
Pss:                  40 kB
Anonymous:            40 kB
VmFlags: rd wr mr mw me ac sd 
7ffd5a7a3000-7ffd5a7c4000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
Rss:                  24 kB
Pss:                  24 kB
Private_Dirty:        24 kB
Anonymous:            24 kB
VmFlags: rd wr mr mw me gd ac 
";

const ROLLUP: &str = "\
562644d83000-7fffc0f82000 ---p 00000000 00:00 0                          [rollup]
Rss:                1784 kB
Pss:                 341 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            229 kB
Pss_Shmem:             0 kB
Shared_Clean:       1632 kB
Shared_Dirty:          0 kB
Private_Clean:        40 kB
Private_Dirty:       112 kB
Referenced:         1784 kB
Anonymous:           112 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  8 kB
SwapPss:               4 kB
Locked:                0 kB
";

#[test]
fn parses_smaps_rollup() {
    assert_eq!(
        parse_smaps_rollup(ROLLUP.as_bytes()),
        Residency {
            rss: 1784 << 10,
            pss: 341 << 10,
            pss_anon: 112 << 10,
            pss_file: 229 << 10,
            pss_shmem: 0,
            shared_clean: 1632 << 10,
            shared_dirty: 0,
            private_clean: 40 << 10,
            private_dirty: 112 << 10,
            anonymous: 112 << 10,
            swap: 8 << 10,
            swap_pss: 4 << 10,
        }
    );
}

#[test]
fn parses_every_mapping_of_smaps() {
    let entries = parse_smaps(SMAPS.as_bytes());
    assert_eq!(entries.len(), 5);
    let head = &entries[0];
    assert_eq!(head.map.start, 0x55d291f85000);
    assert_eq!(head.map.end, 0x55d291f87000);
    assert!(head.map.readable && !head.map.writable && !head.map.shared);
    assert_eq!(head.map.device, (0xfe, 0));
    assert_eq!(head.map.inode, 247282);
    assert_eq!(head.map.path.as_deref(), Some("/usr/bin/head"));
    assert_eq!(head.residency.rss, 8 << 10);
    assert_eq!(head.residency.pss, 4 << 10);
    assert_eq!(head.residency.shared_clean, 8 << 10);

    let ring = &entries[1];
    assert!(ring.map.shared && ring.map.writable);
    assert_eq!(ring.map.offset, 0x1a000);
    assert_eq!(ring.map.device, (0, 1));
    assert!(ring.map.is_deleted());
    assert_eq!(ring.map.file_path(), Some("/dev/shm/ring buffer"));
    assert_eq!(
        ring.residency,
        Residency {
            rss: 12 << 10,
            pss: 6 << 10,
            shared_dirty: 12 << 10,
            swap: 4 << 10,
            swap_pss: 2 << 10,
            ..Residency::default()
        }
    );

    assert_eq!(entries[2].map.path.as_deref(), Some("[heap]"));
    assert_eq!(entries[2].residency.anonymous, 100 << 10);
    assert_eq!(entries[2].residency.private_dirty, 100 << 10);
    assert_eq!(
        entries[3].map.path.as_deref(),
        Some("[anon:glibc malloc arena]")
    );
    assert_eq!(entries[3].residency.rss, 40 << 10);
    assert_eq!(entries[4].map.path.as_deref(), Some("[stack]"));
    assert_eq!(entries[4].residency.pss, 24 << 10);
}

#[test]
fn skips_what_does_not_parse() {
    let text = b"Rss: 4 kB\nnot a mapping\n00400000-00401000 r-xp 00000000 08:02 1 /a\n\
                 Rss: x kB\nPss: 4\nSwap: 8 kB\ndead-zz r-xp\nRss: 4 kB\n";
    let entries = parse_smaps(text);
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].residency,
        Residency {
            swap: 8 << 10,
            ..Residency::default()
        }
    );
    assert_eq!(kilobytes(b"18446744073709551615 kB"), None);
    assert_eq!(kilobytes(b" kB"), None);
    assert_eq!(kilobytes(b"12 kB"), Some(12 << 10));
}

#[test]
fn own_smaps_agree_with_own_rollup() {
    let pid = std::process::id() as i32;
    // Touch some memory of our own so that the numbers are not all tiny.
    let touched = std::hint::black_box(vec![1u8; 8 << 20]);
    // The reads are not atomic and other test threads allocate meanwhile: take a rollup
    // between two smaps reads that agree, so that nothing moved while it was read.
    let total_rss = |entries: &[SmapsEntry]| entries.iter().map(|e| e.residency.rss).sum::<u64>();
    let (entries, rollup) = (0..50)
        .map(|_| {
            let before = read_smaps(pid).unwrap();
            let rollup = read_smaps_rollup(pid).unwrap();
            let after = read_smaps(pid).unwrap();
            (total_rss(&before) == total_rss(&after), after, rollup)
        })
        .find(|(quiet, _, _)| *quiet)
        .map(|(_, entries, rollup)| (entries, rollup))
        .expect("a quiet moment in 50 tries");
    assert!(entries.len() > 10);
    assert!(entries
        .iter()
        .any(|e| e.map.path.as_deref() == Some("[stack]")));
    for entry in &entries {
        let r = &entry.residency;
        assert!(r.pss <= r.rss, "{entry:?}");
        assert!(r.rss <= entry.map.end - entry.map.start, "{entry:?}");
        assert_eq!(
            r.shared_clean + r.shared_dirty + r.private_clean + r.private_dirty,
            r.rss,
            "{entry:?}"
        );
        assert!(r.anonymous <= r.rss, "{entry:?}");
    }
    let slack = 2048 << 10;
    let rss: u64 = entries.iter().map(|e| e.residency.rss).sum();
    let pss: u64 = entries.iter().map(|e| e.residency.pss).sum();
    assert!(rss.abs_diff(rollup.rss) <= slack, "{rss} vs {rollup:?}");
    // Per-mapping PSS is rounded down to kB separately, the rollup once.
    assert!(pss.abs_diff(rollup.pss) <= slack, "{pss} vs {rollup:?}");
    assert!(rollup.pss <= rollup.rss);
    assert!(rollup.rss >= 8 << 20);
    let parts = rollup.pss_anon + rollup.pss_file + rollup.pss_shmem;
    assert!(parts.abs_diff(rollup.pss) <= 3 << 10, "{rollup:?}");
    drop(std::hint::black_box(touched));
}

/// What parsing smaps costs per mapping, on this process's own smaps repeated to 20,000
/// mappings (as many as `bench/mappings.c` makes):
/// `cargo test --release --lib smaps_parse_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn smaps_parse_cost() {
    let own = std::fs::read("/proc/self/smaps").unwrap();
    let per_copy = parse_smaps(&own).len();
    let copies = 20_000usize.div_ceil(per_copy);
    let text = own.repeat(copies);
    let mut best = std::time::Duration::MAX;
    let mut parsed = 0;
    for _ in 0..20 {
        let started = std::time::Instant::now();
        parsed = std::hint::black_box(parse_smaps(&text)).len();
        best = best.min(started.elapsed());
    }
    println!(
        "smaps parse: {parsed} mappings, {} KiB, best of 20 {:.2} ms, {:.0} ns per mapping",
        text.len() >> 10,
        best.as_secs_f64() * 1e3,
        best.as_nanos() as f64 / parsed as f64
    );
}

#[test]
fn a_mapping_is_locked_when_lo_is_among_its_vm_flags() {
    let text = "\
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 
Locked:                0 kB
VmFlags: rd ex mr mw me lo 
7f0000001000-7f0000003000 rw-p 00000000 00:00 0 
Locked:                0 kB
VmFlags: rd wr mr mw me ac lock 
";
    assert!(locked_at(text.as_bytes(), 0x7f00_0000_0000));
    assert!(locked_at(text.as_bytes(), 0x7f00_0000_0fff));
    // A flag that only starts with "lo" is another flag.
    assert!(!locked_at(text.as_bytes(), 0x7f00_0000_1000));
    // No mapping holds it.
    assert!(!locked_at(text.as_bytes(), 0x7f00_0000_3000));
    assert!(!locked_at(SMAPS.as_bytes(), 0x55d2_91f8_5000));
}
