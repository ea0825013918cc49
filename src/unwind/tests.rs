//! Self-unwind: a known chain of functions in this test binary captures its own registers
//! and stack, and the copy is walked as if it came from another process.

use std::arch::asm;
use std::hint::black_box;
use std::time::Instant;

use super::*;
use crate::module::loaded;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::symbols::elf::ElfFile;

/// The chain, outermost first; `level_05` recurses `RECURSION` extra times.
const CHAIN: [&str; 12] = [
    "level_01", "level_02", "level_03", "level_04", "level_05", "level_06", "level_07", "level_08",
    "level_09", "level_10", "level_11", "level_12",
];
const RECURSION: u32 = 3;
const COPY_SIZE: usize = 64 * 1024;

/// An unwinder holding every loaded module of process `pid` that is an ELF file.
pub(super) fn unwinder_for_process(pid: i32) -> Unwinder {
    let store = Arc::new(ModuleStore::new());
    let mut unwinder = Unwinder::with_module_store(Arc::clone(&store));
    for module in loaded::of_process(pid).unwrap() {
        let Ok(file) = store.get(&module.path) else {
            continue;
        };
        let Ok(elf) = file.elf() else {
            continue; // not ELF: fonts, /dev/zero
        };
        let bias = module.load_bias(elf);
        unwinder
            .add_module(&module.path, module.inode, module.start, module.end, bias)
            .unwrap();
    }
    unwinder
}

/// Names of the frames found in `elf` (the module at `bias`), `None` for other modules.
/// Return addresses are looked up at `a - 1`: the call may be a function's last instruction.
pub(super) fn frame_names(frames: &[u64], elf: &ElfFile, bias: u64) -> Vec<Option<String>> {
    frames
        .iter()
        .enumerate()
        .map(|(index, &frame)| {
            let lookup = if index == 0 { frame } else { frame - 1 };
            elf.symbolize(lookup.wrapping_sub(bias))
                .map(|(name, _)| name)
        })
        .collect()
}

/// Asserts that `expected` (innermost first) appears in `names` in order, each name at
/// consecutive frames after the first match.
pub(super) fn assert_chain(names: &[Option<String>], expected: &[&str]) {
    let start = names
        .iter()
        .position(|name| name.as_deref().is_some_and(|n| n.contains(expected[0])))
        .unwrap_or_else(|| panic!("{} not found in {names:#?}", expected[0]));
    for (offset, wanted) in expected.iter().enumerate() {
        let found = names.get(start + offset).cloned().flatten();
        assert!(
            found.as_deref().is_some_and(|name| name.contains(wanted)),
            "frame {} should be {wanted}, is {found:?}; all: {names:#?}",
            start + offset
        );
    }
}

/// The chain innermost first, as the unwind must find it from `capture`.
fn expected_chain() -> Vec<&'static str> {
    let mut expected = vec!["capture", "capture_level"];
    for name in CHAIN.iter().rev() {
        let repeats = if *name == "level_05" {
            RECURSION + 1
        } else {
            1
        };
        expected.extend(std::iter::repeat(*name).take(repeats as usize));
    }
    expected
}

/// Captures ip/sp/bp here and copies up to `COPY_SIZE` bytes of the stack from sp.
#[inline(never)]
fn capture() -> StackSnapshot {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads registers only.
    unsafe {
        asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    // Never copy past the end of this thread's stack mapping.
    let maps = read_maps(std::process::id() as i32).unwrap();
    let stack_end = mapping_containing(&maps, sp).unwrap().end;
    let size = COPY_SIZE.min((stack_end - sp) as usize);
    let mut stack = vec![0u8; size];
    // SAFETY: [sp, sp + size) is inside the mapped stack, and above this frame's own
    // stack pointer, so nothing below writes to it while it is copied.
    unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, stack.as_mut_ptr(), size) };
    StackSnapshot {
        ip,
        at_function_entry: false,
        sp,
        bp,
        stack,
    }
}

// Each level uses its argument after the call, so no call becomes a tail jump (which would
// leave no frame to find).
macro_rules! level {
    ($name:ident, $next:ident) => {
        #[inline(never)]
        fn $name(depth: u32) -> StackSnapshot {
            let snapshot = $next(black_box(depth));
            black_box(depth);
            snapshot
        }
    };
}
level!(level_01, level_02);
level!(level_02, level_03);
level!(level_03, level_04);
level!(level_04, level_05);
#[inline(never)]
fn level_05(depth: u32) -> StackSnapshot {
    let snapshot = if depth < RECURSION {
        level_05(black_box(depth + 1))
    } else {
        level_06(black_box(depth))
    };
    black_box(depth);
    snapshot
}
level!(level_06, level_07);
level!(level_07, level_08);
level!(level_08, level_09);
level!(level_09, level_10);
level!(level_10, level_11);
level!(level_11, level_12);
level!(level_12, capture_level);
#[inline(never)]
fn capture_level(_depth: u32) -> StackSnapshot {
    let snapshot = capture();
    black_box(&snapshot);
    snapshot
}

/// The test binary's own ELF file and load bias.
fn own_binary() -> (ElfFile, u64) {
    let path = std::fs::read_link("/proc/self/exe").unwrap();
    let path = path.to_str().unwrap();
    let elf = ElfFile::open(path).unwrap();
    let maps = read_maps(std::process::id() as i32).unwrap();
    let mappings: Vec<(u64, u64)> = maps
        .iter()
        .filter(|entry| entry.file_path() == Some(path))
        .map(|entry| (entry.start, entry.offset))
        .collect();
    let bias = elf.module_load_bias(&mappings).unwrap();
    (elf, bias)
}

#[test]
fn unwinds_own_chain_innermost_first() {
    let snapshot = level_01(0);
    let unwinder = unwinder_for_process(std::process::id() as i32);
    let stack = unwinder.unwind(&snapshot, &mut |_| None);
    let (elf, bias) = own_binary();
    let names = frame_names(&stack.frames, &elf, bias);
    assert_chain(&names, &expected_chain());
    // The walk reaches the thread's start (clone3's CFI ends it) inside 64 KiB, or the
    // copy ended first; either way every frame is code.
    assert!(stack.frames[1..]
        .iter()
        .all(|&frame| unwinder.is_code(frame)));
    measure_speed(&unwinder, &snapshot, stack.frames.len());
}

/// Prints frames per second of repeated walks of one snapshot (warm rule cache).
fn measure_speed(unwinder: &Unwinder, snapshot: &StackSnapshot, depth: usize) {
    const WALKS: usize = 2000;
    let started = Instant::now();
    for _ in 0..WALKS {
        black_box(unwinder.unwind(black_box(snapshot), &mut |_| None));
    }
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "unwind: {depth} frames, {:.2} µs per walk, {:.1} M frames/s",
        seconds * 1e6 / WALKS as f64,
        (WALKS * depth) as f64 / seconds / 1e6
    );
}

/// Offset in the copy of the first word equal to `value` (a return address's slot).
fn slot_of(snapshot: &StackSnapshot, value: u64) -> usize {
    (0..snapshot.stack.len().saturating_sub(8))
        .step_by(8)
        .find(|&offset| snapshot.read_word(snapshot.sp + offset as u64) == Some(value))
        .expect("the return address is in the copy")
}

#[test]
fn a_short_copy_truncates_after_the_frames_it_holds() {
    let full = level_01(0);
    let unwinder = unwinder_for_process(std::process::id() as i32);
    let complete = unwinder.unwind(&full, &mut |_| None);
    // Cut just below the slot of the fifth frame's return address: four frames remain.
    let mut short = full.clone();
    short.stack.truncate(slot_of(&full, complete.frames[4]));
    let cut = unwinder.unwind(&short, &mut |_| None);
    assert!(cut.truncated && cut.ran_off_copy);
    assert!(!complete.ran_off_copy);
    assert_eq!(cut.frames[..], complete.frames[..4]);
    // A few hundred bytes: whatever is found is the start of the full walk.
    short.stack.truncate(300);
    let cut = unwinder.unwind(&short, &mut |_| None);
    assert!(cut.truncated);
    assert_eq!(cut.frames[..], complete.frames[..cut.frames.len()]);
    let empty = StackSnapshot {
        stack: Vec::new(),
        ..full
    };
    let nothing = unwinder.unwind(&empty, &mut |_| None);
    assert!(nothing.truncated);
    assert_eq!(nothing.frames, vec![empty.ip]);
}

#[test]
fn a_substituted_trampoline_address_unwinds_as_the_original() {
    let snapshot = level_01(0);
    let unwinder = unwinder_for_process(std::process::id() as i32);
    let original = unwinder.unwind(&snapshot, &mut |_| None);
    // Overwrite the return address of the 6th frame in the copy, as memsup's return
    // trampoline would have.
    let real = original.frames[6];
    let slot = slot_of(&snapshot, real);
    const TRAMPOLINE: u64 = 0x7000_dead_0000;
    let mut hijacked = snapshot.clone();
    hijacked.stack[slot..slot + 8].copy_from_slice(&TRAMPOLINE.to_le_bytes());
    let without = unwinder.unwind(&hijacked, &mut |_| None);
    assert!(without.truncated, "the trampoline is no module's code");
    assert_eq!(without.frames[..], original.frames[..6]);
    let mut substitute = |address| (address == TRAMPOLINE).then_some(real);
    assert_eq!(unwinder.unwind(&hijacked, &mut substitute), original);
}

#[test]
fn removed_modules_no_longer_validate_return_addresses() {
    let snapshot = level_01(0);
    let mut unwinder = unwinder_for_process(std::process::id() as i32);
    let path = std::fs::read_link("/proc/self/exe").unwrap();
    let own = unwinder
        .modules
        .iter()
        .find(|module| Some(module.path.as_str()) == path.to_str())
        .unwrap()
        .range
        .clone();
    assert_eq!(
        unwinder.module_at(snapshot.ip).map(|(path, _)| path),
        path.to_str()
    );
    unwinder.remove_module(own.start);
    assert!(unwinder.module_at(snapshot.ip).is_none());
    let stack = unwinder.unwind(&snapshot, &mut |_| None);
    assert!(stack.frames[1..].iter().all(|frame| !own.contains(frame)));
}

#[test]
fn a_walk_from_a_function_entry_starts_at_the_return_address() {
    let full = level_01(0);
    let unwinder = unwinder_for_process(std::process::id() as i32);
    let complete = unwinder.unwind(&full, &mut |_| None);
    // As if stopped at the first instruction of the function called by frame 3's code:
    // rsp points at the slot holding frame 3's return address.
    let slot = slot_of(&full, complete.frames[3]);
    let entry = StackSnapshot {
        ip: 0x1,
        at_function_entry: true,
        sp: full.sp + slot as u64,
        bp: full.bp,
        stack: full.stack[slot..].to_vec(),
    };
    let walked = unwinder.unwind(&entry, &mut |_| None);
    assert!(!walked.truncated);
    assert_eq!(walked.frames[..], complete.frames[3..]);
    // The return address itself may be the trampoline.
    const TRAMPOLINE: u64 = 0x7000_dead_0000;
    let mut hijacked = entry.clone();
    hijacked.stack[..8].copy_from_slice(&TRAMPOLINE.to_le_bytes());
    let real = complete.frames[3];
    let mut substitute = |address| (address == TRAMPOLINE).then_some(real);
    assert_eq!(unwinder.unwind(&hijacked, &mut substitute), walked);
}

/// The dynamic linker's entry code (`_start`, `_dl_start_user`) has no CFI and clears rbp
/// before calling `_dl_init`: a return address into it is the outermost frame, not a walk
/// that failed.
#[test]
fn a_return_into_the_dynamic_linkers_entry_code_ends_the_stack() {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    use object::{Object, ObjectSection};

    const LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";
    let entry = ModuleStore::new()
        .get(LD_SO)
        .unwrap()
        .unwind()
        .unwrap()
        .entry_code
        .clone()
        .expect("no CFI covers ld.so's entry code");
    // The return address of the entry code's first call (`call _dl_start`).
    let data = std::fs::read(LD_SO).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let code = file
        .sections()
        .find_map(|section| {
            section
                .data_range(entry.start, entry.end - entry.start)
                .ok()
                .flatten()
        })
        .unwrap();
    let returns_to = Decoder::with_ip(64, code, entry.start, DecoderOptions::NONE)
        .into_iter()
        .find(|instruction| instruction.mnemonic() == Mnemonic::Call)
        .expect("the entry code calls _dl_start")
        .next_ip();
    assert!(entry.contains(&returns_to));

    const BIAS: u64 = 0x7f00_0000_0000;
    let mut unwinder = Unwinder::new();
    unwinder
        .add_module(
            LD_SO,
            MappedInode::default(),
            BIAS,
            BIAS + data.len() as u64,
            BIAS,
        )
        .unwrap();
    // Stopped at the entry of the function the entry code called.
    let mut copy = vec![0; 256];
    copy[..8].copy_from_slice(&(BIAS + returns_to).to_le_bytes());
    let snapshot = StackSnapshot {
        ip: 0x1,
        at_function_entry: true,
        sp: 0x7ffc_0000_0000,
        bp: 0,
        stack: copy,
    };
    let stack = unwinder.unwind(&snapshot, &mut |_| None);
    assert_eq!(stack.frames, [BIAS + returns_to]);
    assert!(!stack.truncated);
}

#[test]
fn a_module_mapped_over_an_unloaded_one_replaces_it() {
    const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
    // libc's code is at ELF addresses 0x26000..0x17b0fc.
    const FIRST: u64 = 0x7000_0000_0000;
    const SIZE: u64 = 0x1e_3000;
    let mut unwinder = Unwinder::new();
    unwinder
        .add_module(LIBC, MappedInode::default(), FIRST, FIRST + SIZE, FIRST)
        .unwrap();
    assert!(unwinder.is_code(FIRST + 0x17_0000));
    // Unloaded, and another library mapped 1 MiB lower, over part of it.
    let second = FIRST - 0x10_0000;
    unwinder
        .add_module(LIBC, MappedInode::default(), second, second + SIZE, second)
        .unwrap();
    assert!(
        !unwinder.is_code(FIRST + 0x17_0000),
        "the old module is gone"
    );
    assert!(unwinder.is_code(second + 0x17_0000));
    // Even a file that cannot be read ends what it was mapped over.
    assert!(unwinder
        .add_module(
            "/nonexistent/plugin.so",
            MappedInode::default(),
            second,
            second + SIZE,
            second
        )
        .is_err());
    assert!(!unwinder.is_code(second + 0x17_0000));
}
