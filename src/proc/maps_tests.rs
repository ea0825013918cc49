use super::*;

const NASTY_MAPS: &str = "\
00400000-00452000 r-xp 00000000 08:02 173521                             /usr/bin/dbus-daemon
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f0000021000-7f0000022000 ---p 00000000 00:00 0
7f1c8a3f0000-7f1c8a3f1000 r--p 0001a000 08:02 1234                       /tmp/dir with  spaces/lib two.so (deleted)
7f1c8a3f1000-7f1c8a3f2000 rw-s 00000000 00:01 77                         /memfd:ring buffer (deleted)
7f1c8a3f2000-7f1c8a3f3000 rw-p 00000000 00:00 0                          [anon:glibc malloc arena]
garbage line
7ffd5a7a3000-7ffd5a7c4000 rw-p 00000000 00:00 0                          [stack]

7ffd5a7fc000-7ffd5a7fe000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

#[test]
fn parses_nasty_lines_and_skips_garbage() {
    let maps = parse_maps(NASTY_MAPS);
    assert_eq!(maps.len(), 9);
    assert_eq!(
        maps[0],
        MapEntry {
            start: 0x400000,
            end: 0x452000,
            readable: true,
            writable: false,
            executable: true,
            shared: false,
            offset: 0,
            device: (8, 2),
            inode: 173521,
            path: Some("/usr/bin/dbus-daemon".to_string()),
        }
    );
    assert_eq!(maps[1].path, None);
    assert!(maps[1].readable && maps[1].writable && !maps[1].executable);
    assert_eq!(maps[2].path, None);
    assert!(!maps[2].readable && !maps[2].writable);

    let deleted = &maps[3];
    assert_eq!(deleted.offset, 0x1a000);
    assert_eq!(deleted.inode, 1234);
    assert_eq!(
        deleted.path.as_deref(),
        Some("/tmp/dir with  spaces/lib two.so (deleted)")
    );
    assert!(deleted.is_deleted());
    assert_eq!(
        deleted.file_path(),
        Some("/tmp/dir with  spaces/lib two.so")
    );

    assert!(maps[4].shared);
    assert_eq!(maps[4].file_path(), Some("/memfd:ring buffer"));
    assert_eq!(maps[5].path.as_deref(), Some("[anon:glibc malloc arena]"));
    assert!(maps[5].is_pseudo() && maps[5].file_path().is_none());
    assert_eq!(maps[6].path.as_deref(), Some("[stack]"));
    assert_eq!(maps[7].path.as_deref(), Some("[vdso]"));
    assert_eq!(maps[8].start, 0xffffffffff600000);
    assert_eq!(maps[8].path.as_deref(), Some("[vsyscall]"));
}

#[test]
fn reads_own_maps() {
    let maps = read_maps(std::process::id() as i32).unwrap();
    let code = reads_own_maps as fn() as usize as u64;
    let entry = mapping_containing(&maps, code).expect("own code is mapped");
    assert!(entry.executable);
    assert!(maps
        .iter()
        .any(|entry| entry.path.as_deref() == Some("[stack]")));
}

#[test]
fn mapping_containing_uses_half_open_ranges() {
    let maps = parse_maps(NASTY_MAPS);
    assert_eq!(mapping_containing(&maps, 0x400000).unwrap().start, 0x400000);
    assert_eq!(mapping_containing(&maps, 0x451fff).unwrap().start, 0x400000);
    assert!(mapping_containing(&maps, 0x452000).is_none());
    assert!(mapping_containing(&maps, 0x1000).is_none());
}

const REL32_REACH: u64 = 0x7fff_0000;
const GIB: u64 = 1 << 30;

const NON_PIE_MAPS: &str = "\
00400000-00401000 r--p 00000000 08:01 1234 /usr/bin/prog
00401000-00402000 r-xp 00001000 08:01 1234 /usr/bin/prog
00402000-00403000 r--p 00002000 08:01 1234 /usr/bin/prog
00403000-00405000 rw-p 00002000 08:01 1234 /usr/bin/prog
00405000-00426000 rw-p 00000000 00:00 0 [heap]
7ffff7d80000-7ffff7da6000 r--p 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7da6000-7ffff7efb000 r-xp 00026000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]
";

#[test]
fn gap_below_non_pie_executable_keeps_a_guard_page() {
    let maps = parse_maps(NON_PIE_MAPS);
    assert_eq!(
        find_gap(&maps, 0x401100, 0x1000, REL32_REACH),
        Some(0x3fe000)
    );
    // Sizes are rounded up to whole pages.
    assert_eq!(find_gap(&maps, 0x401100, 10, REL32_REACH), Some(0x3fe000));
}

#[test]
fn gap_above_non_pie_executable_leaves_the_heap_room() {
    let maps = parse_maps(NON_PIE_MAPS);
    // Too big for the space between 64 KiB and the executable.
    let gap = find_gap(&maps, 0x401100, 0x400000, REL32_REACH).unwrap();
    assert_eq!(gap, 0x426000 + GIB);
    assert!(gap + 0x400000 - 0x401100 <= REL32_REACH);
}

#[test]
fn gap_before_first_brk_leaves_the_future_heap_room() {
    let maps: Vec<MapEntry> = parse_maps(NON_PIE_MAPS)
        .into_iter()
        .filter(|entry| entry.path.as_deref() != Some("[heap]"))
        .collect();
    let gap = find_gap(&maps, 0x401100, 0x400000, REL32_REACH).unwrap();
    assert_eq!(gap, 0x405000 + (32 << 20) + GIB);
}

#[test]
fn gap_below_pie_executable() {
    let maps = parse_maps(
        "\
555555554000-555555555000 r--p 00000000 fd:01 42 /home/user/my prog (deleted)
555555555000-555555556000 r-xp 00001000 fd:01 42 /home/user/my prog (deleted)
555555556000-555555557000 r--p 00002000 fd:01 42 /home/user/my prog (deleted)
555555557000-555555559000 rw-p 00002000 fd:01 42 /home/user/my prog (deleted)
55555555a000-55555557b000 rw-p 00000000 00:00 0 [heap]
7ffff7dd0000-7ffff7df6000 r--p 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]
",
    );
    let gap = find_gap(&maps, 0x555555555100, 0x2000, REL32_REACH);
    assert_eq!(gap, Some(0x555555551000));
}

#[test]
fn gap_below_libc_skips_adjacent_anonymous_mapping() {
    let maps = parse_maps(
        "\
7ffff7d7d000-7ffff7d80000 rw-p 00000000 00:00 0
7ffff7d80000-7ffff7da6000 r--p 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7da6000-7ffff7efb000 r-xp 00026000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7fc3000-7ffff7fc5000 r--p 00000000 00:00 0 [vvar]
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]
",
    );
    let gap = find_gap(&maps, 0x7ffff7da6100, 0x1000, REL32_REACH);
    assert_eq!(gap, Some(0x7ffff7d7b000));
}

#[test]
fn no_gap_within_reach() {
    let maps = parse_maps("10000000-20000000 r-xp 00000000 08:01 5 /opt/big\n");
    assert_eq!(find_gap(&maps, 0x18000000, 0x1000, 0x1000000), None);
}

#[test]
fn gap_stays_clear_of_the_stack_growth_room() {
    let maps = parse_maps(
        "\
555555554000-555555555000 r-xp 00000000 08:01 4 /opt/program
555555556000-555555557000 rw-p 00000000 00:00 0 [heap]
7fff00000000-7ffff7000000 r-xp 00000000 08:01 5 /opt/huge.so
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]
",
    );
    let anchor = 0x7ffff6000000;
    let reach = 0x1000_0000;
    let stack_limit = 0x7ffffffde000 - (8 << 20);
    let room = stack_limit - 0x7ffff7001000;
    assert_eq!(find_gap(&maps, anchor, room, reach), Some(0x7ffff7001000));
    assert_eq!(find_gap(&maps, anchor, room + 0x1000, reach), None);
}

#[test]
fn gap_never_in_first_64_kib() {
    let maps = parse_maps(
        "\
00020000-00030000 r-xp 00000000 08:01 5 /opt/low
555555556000-555555557000 rw-p 00000000 00:00 0 [heap]
",
    );
    assert_eq!(find_gap(&maps, 0x20100, 0x1000, 0x100000), Some(0x1e000));
    assert_eq!(find_gap(&maps, 0x20100, 0x10000, 0x100000), Some(0x31000));
}

#[test]
fn parses_bytes_keeping_a_path_that_is_not_utf8_and_skipping_bad_numbers() {
    let text = b"\
1000-2000 rw-p 00000000 00:00 0                          /tmp/caf\xe9.so
1000-2000 rw-p 00000000 00:00 1x                         /bad/inode
10000000000000000-10000000000000001 rw-p 00000000 00:00 0
2000-3000 rw-p 00000000 fe:100000000 0
3000-4000 rw-p 0000000g 00:00 0
4000-5000 r-x 00000000 00:00 0
5000-6000 --xp 0000000000000000000000010 103:02 12345678901234567890
";
    let maps = parse_maps_bytes(text);
    assert_eq!(maps.len(), 2, "{maps:?}");
    assert_eq!(maps[0].path.as_deref(), Some("/tmp/caf\u{fffd}.so"));
    assert_eq!((maps[0].start, maps[0].end), (0x1000, 0x2000));
    // Leading zeros are not an overflow; a device number is hexadecimal.
    assert_eq!(maps[1].offset, 0x10);
    assert_eq!(maps[1].device, (0x103, 2));
    assert_eq!(maps[1].inode, 12345678901234567890);
    assert_eq!(maps[1].path, None);
}

#[test]
fn a_process_mapping_a_file_whose_name_is_not_utf8_is_read() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let mut name = std::ffi::OsString::from(format!("memsup-maps-{}-", std::process::id()));
    name.push(std::ffi::OsStr::from_bytes(b"\xff-test"));
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, [1u8; 4096]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: a fresh read-only mapping of the file, unmapped below.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(address, libc::MAP_FAILED);
    let maps = read_maps(std::process::id() as i32);
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(address, 4096) };
    std::fs::remove_file(&path).unwrap();
    let maps = maps.expect("maps with a name that is not UTF-8");
    let mapping = maps
        .iter()
        .find(|map| map.start == address as u64)
        .expect("the mapping");
    assert!(
        mapping.path.as_deref().unwrap().ends_with("-\u{fffd}-test"),
        "{mapping:?}"
    );
}
