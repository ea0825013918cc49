//! Tests of the emulator: decoding and rejection here, comparison with the CPU in `compare`,
//! real allocator entries in `entries`.

mod compare;
mod entries;
mod native;

use libc::user_regs_struct;

use super::flags::{ARITHMETIC, CARRY, OVERFLOW, ZERO};
use super::Emulation;
use crate::ptrace::memory::SliceMemory;

/// "48 85 ff" → bytes.
pub(super) fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|byte| u8::from_str_radix(byte, 16).expect("hex byte"))
        .collect()
}

fn empty_memory() -> SliceMemory {
    SliceMemory {
        base: 0,
        bytes: Vec::new(),
    }
}

fn zeroed_registers() -> user_regs_struct {
    // SAFETY: user_regs_struct is plain integers; all zeros is a valid value.
    unsafe { std::mem::zeroed() }
}

const ENTRY: u64 = 0x7f00_1234_5000;

#[test]
fn decodes_lengths_of_the_glibc_entries() {
    let entries = [
        ("41 54", 2),
        ("55", 1),
        ("48 85 ff", 3),
        ("41 55", 2),
        ("41 57", 2),
        ("48 89 f0", 3),
        ("80 3d 01 02 14 00 00", 7),
        ("41 89 ca", 3),
        ("b8 0b 00 00 00", 5),
        ("48 83 ec 58", 4),
        ("f3 0f 1e fa", 4),
    ];
    for (text, length) in entries {
        let emulation = Emulation::decode(&hex(text), ENTRY).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(emulation.length(), length, "{text}");
        assert_eq!(emulation.address(), ENTRY);
    }
}

#[test]
fn push_r12_decrements_rsp_and_returns_the_value() {
    let mut regs = zeroed_registers();
    regs.r12 = 0xdead_beef;
    regs.rsp = 0x7ffc_0000_1000;
    regs.rip = ENTRY + 1; // as the int3 leaves it
    let emulation = Emulation::decode(&hex("41 54"), ENTRY).unwrap();
    let pushed = emulation.apply(&mut regs, &empty_memory()).unwrap();
    assert_eq!(pushed, Some(0xdead_beef));
    assert_eq!(regs.rsp, 0x7ffc_0000_0ff8);
    assert_eq!(regs.rip, ENTRY + 2);
}

#[test]
fn cmpb_rip_relative_reads_the_flag_byte() {
    // posix_memalign: cmpb $0x0,0x140201(%rip), next instruction at ENTRY + 7.
    let target = ENTRY + 7 + 0x140201;
    let memory = SliceMemory {
        base: target,
        bytes: vec![1],
    };
    let mut regs = zeroed_registers();
    regs.eflags = 0x246; // ZF PF IF
    let emulation = Emulation::decode(&hex("80 3d 01 02 14 00 00"), ENTRY).unwrap();
    assert_eq!(emulation.apply(&mut regs, &memory).unwrap(), None);
    assert_eq!(regs.eflags & ZERO, 0, "1 != 0");
    assert_eq!(regs.eflags & !ARITHMETIC, 0x202);
    assert_eq!(regs.rip, ENTRY + 7);
}

#[test]
fn unreadable_memory_is_an_error_and_leaves_registers_alone() {
    let mut regs = zeroed_registers();
    regs.rip = ENTRY + 1;
    let before = regs;
    let emulation = Emulation::decode(&hex("80 3d 01 02 14 00 00"), ENTRY).unwrap();
    assert!(emulation.apply(&mut regs, &empty_memory()).is_err());
    assert_eq!(format!("{regs:?}"), format!("{before:?}"));
}

#[test]
fn non_arithmetic_flags_are_preserved() {
    // TF, IF, DF, AC and the reserved bit 1 must survive.
    let other_bits = 0x100 | 0x200 | 0x400 | 0x4_0000 | 0x2;
    let mut regs = zeroed_registers();
    regs.eflags = other_bits | CARRY | OVERFLOW;
    regs.rsp = 0x50;
    let emulation = Emulation::decode(&hex("48 83 ec 58"), ENTRY).unwrap();
    emulation.apply(&mut regs, &empty_memory()).unwrap();
    assert_eq!(regs.rsp, 0xffff_ffff_ffff_fff8);
    assert_eq!(regs.eflags & !ARITHMETIC, other_bits);
    assert_ne!(regs.eflags & CARRY, 0, "borrow");
    assert_eq!(regs.eflags & OVERFLOW, 0);
}

#[test]
fn direct_jumps_go_to_their_target() {
    let cases = [
        ("eb 10", ENTRY + 2 + 0x10),
        ("e9 3b 18 00 00", ENTRY + 5 + 0x183b),
    ];
    for (text, target) in cases {
        let mut regs = zeroed_registers();
        let emulation = Emulation::decode(&hex(text), ENTRY).unwrap();
        assert_eq!(emulation.apply(&mut regs, &empty_memory()).unwrap(), None);
        assert_eq!(regs.rip, target, "{text}");
    }
}

#[test]
fn refuses_what_it_cannot_emulate() {
    let refused = [
        "",
        "48 83",                      // truncated
        "e8 00 00 00 00",             // call
        "c3",                         // ret
        "74 05",                      // je
        "0f 84 bf 00 00 00",          // je rel32
        "ff e0",                      // jmp *%rax
        "ff 25 00 10 00 00",          // jmp *disp(%rip)
        "66 e9 00 00 00 00",          // jmp with an operand-size prefix
        "0f 05",                      // syscall
        "cc",                         // int3
        "f0 48 01 07",                // lock add %rax,(%rdi)
        "64 48 8b 04 25 28 00 00 00", // mov %fs:0x28,%rax
        "2e 48 8b 07",                // cs mov (%rdi),%rax
        "67 8b 07",                   // mov (%edi),%eax
        "48 89 7c 24 08",             // mov %rdi,0x8(%rsp): a store
        "01 07",                      // add %eax,(%rdi): a store
        "80 07 01",                   // addb $1,(%rdi)
        "ff 35 00 10 00 00",          // push disp(%rip)
        "66 41 54",                   // push %r12w
        "58",                         // pop %rax
        "9c",                         // pushfq
        "48 11 c0",                   // adc
        "48 19 c0",                   // sbb
        "48 ff c0",                   // inc
        "48 f7 e2",                   // mul
        "48 0f af c7",                // imul
        "0f b6 c0",                   // movzbl
        "48 0f 44 c7",                // cmove
        "48 c1 e0 03",                // shl
        "48 87 c7",                   // xchg
        "8e d8",                      // mov %eax,%ds
        "8c d8",                      // mov %ds,%eax
        "0f 20 c0",                   // mov %cr0,%rax
        "f3 0f 10 07",                // movss
        "66 0f ef c0",                // pxor
        "f3 48 89 c0",                // rep mov
        "f3 90",                      // pause
        "f0 90",                      // lock nop
        "41 90",                      // xchg %eax,%r8d (not a nop)
    ];
    for text in refused {
        assert_eq!(Emulation::decode(&hex(text), ENTRY), None, "{text:?}");
    }
}
