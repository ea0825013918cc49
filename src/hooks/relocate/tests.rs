//! Relocation of hand-written prologues, checked byte by byte; real allocator entries are
//! relocated and run in `libc_shared`, and checked by decoding in `static_programs`.

mod libc_shared;
mod static_programs;

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};

use super::{direct_target, jump_bytes, relocate_entry, Refusal, Relocation, MAX_RELOCATED_BYTES};

const ENTRY: u64 = 0x7f12_3456_7000;
/// 1 GiB below the entry: every displacement must change.
const AT: u64 = ENTRY - 0x4000_0000;

fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|byte| u8::from_str_radix(byte, 16).expect("hex byte"))
        .collect()
}

fn le32(value: i64) -> Vec<u8> {
    i32::try_from(value).expect("rel32").to_le_bytes().to_vec()
}

/// `jmp rel32` from `from` (the jump's own address) to `target`.
fn jump(from: u64, target: u64) -> Vec<u8> {
    let mut bytes = vec![0xe9];
    bytes.extend(le32(target as i64 - (from as i64 + 5)));
    bytes
}

fn decode_all(code: &[u8], address: u64) -> Vec<Instruction> {
    Decoder::with_ip(64, code, address, DecoderOptions::NONE)
        .into_iter()
        .collect()
}

/// Decodes `relocation.code` at `at` and checks it against the patched instructions of
/// `function`: one relocated instruction per original one, the same mnemonic, branch target
/// and rip-relative address, then `jmp rel32` to the first byte after the patch and nothing
/// else. Returns the mnemonics whose bytes changed (the rewritten ones).
pub(super) fn check_relocated(
    function: &[u8],
    entry: u64,
    at: u64,
    relocation: &Relocation,
) -> Vec<Mnemonic> {
    let patch = &relocation.patch;
    let start = patch.offset as usize;
    assert_eq!(patch.original, function[start..start + patch.length]);
    assert!(patch.length >= 5);
    assert!(relocation.code.len() <= MAX_RELOCATED_BYTES);
    let originals = decode_all(&patch.original, entry + patch.offset);
    let relocated = decode_all(&relocation.code, at);
    assert_eq!(
        relocated.len(),
        originals.len() + 1,
        "{:02x?}",
        relocation.code
    );
    let mut rewritten = Vec::new();
    for (original, moved) in originals.iter().zip(&relocated) {
        assert!(!moved.is_invalid());
        assert_eq!(moved.mnemonic(), original.mnemonic());
        assert_eq!(
            direct_target(moved),
            direct_target(original),
            "{original:?}"
        );
        if original.is_ip_rel_memory_operand() {
            assert_eq!(
                moved.ip_rel_memory_address(),
                original.ip_rel_memory_address()
            );
        }
        let original_bytes = instruction_bytes(&patch.original, entry + patch.offset, original);
        if instruction_bytes(&relocation.code, at, moved) != original_bytes {
            rewritten.push(original.mnemonic());
        }
    }
    let jump_back = relocated.last().expect("jump back");
    assert_eq!(jump_back.mnemonic(), Mnemonic::Jmp);
    assert_eq!(jump_back.len(), 5, "jmp rel32");
    assert_eq!(
        jump_back.near_branch_target(),
        entry + patch.offset + patch.length as u64
    );
    assert_eq!(jump_back.next_ip(), at + relocation.code.len() as u64);
    rewritten
}

fn instruction_bytes<'a>(code: &'a [u8], base: u64, instruction: &Instruction) -> &'a [u8] {
    let start = (instruction.ip() - base) as usize;
    &code[start..start + instruction.len()]
}

#[test]
fn a_rip_relative_compare_keeps_its_absolute_address() {
    // glibc 2.36 memalign: cmpb $0x0,0x16c539(%rip); je +0x13; ...; ret
    let function = hex("80 3d 39 c5 16 00 00 74 13 48 89 f7 c3");
    let relocation = relocate_entry(&function, ENTRY, AT).unwrap();
    assert_eq!(relocation.patch.offset, 0);
    assert_eq!(relocation.patch.length, 7);
    let operand = ENTRY + 7 + 0x16c539;
    let mut expected = hex("80 3d");
    expected.extend(le32(operand as i64 - (AT as i64 + 7)));
    expected.push(0x00);
    expected.extend(jump(AT + 7, ENTRY + 7));
    assert_eq!(relocation.code, expected);
    assert_eq!(
        check_relocated(&function, ENTRY, AT, &relocation),
        [Mnemonic::Cmp]
    );
}

#[test]
fn a_test_and_near_je_are_rewritten_to_the_same_target() {
    // glibc free: test %rdi,%rdi; je +0xb0; push %rbp; ...; ret
    let function = hex("48 85 ff 0f 84 b0 00 00 00 55 c3");
    let relocation = relocate_entry(&function, ENTRY, AT).unwrap();
    assert_eq!(relocation.patch.length, 9);
    let mut expected = hex("48 85 ff 0f 84");
    expected.extend(le32((ENTRY + 9 + 0xb0) as i64 - (AT as i64 + 9)));
    expected.extend(jump(AT + 9, ENTRY + 9));
    assert_eq!(relocation.code, expected);
    assert_eq!(
        check_relocated(&function, ENTRY, AT, &relocation),
        [Mnemonic::Je]
    );
}

#[test]
fn a_short_je_out_of_reach_becomes_a_jump_over_an_absolute_jump() {
    let function = hex("48 85 ff 74 10 55 c3");
    let far = 0x1000_0000;
    let relocation = relocate_entry(&function, ENTRY, far).unwrap();
    assert_eq!(relocation.patch.length, 5);
    let code = &relocation.code;
    let instructions = decode_all(code, far);
    let mnemonics: Vec<Mnemonic> = instructions.iter().map(Instruction::mnemonic).collect();
    // test; jne over; jmp [rip] to the je's target; jmp [rip] back.
    assert_eq!(
        mnemonics[..4],
        [Mnemonic::Test, Mnemonic::Jne, Mnemonic::Jmp, Mnemonic::Jmp]
    );
    let absolute = |instruction: &Instruction| {
        let slot = (instruction.ip_rel_memory_address() - far) as usize;
        u64::from_le_bytes(code[slot..slot + 8].try_into().unwrap())
    };
    assert_eq!(instructions[1].near_branch_target(), instructions[3].ip());
    assert_eq!(absolute(&instructions[2]), ENTRY + 5 + 0x10);
    assert_eq!(absolute(&instructions[3]), ENTRY + 5);
}

#[test]
fn endbr64_stays_and_the_pushes_after_it_are_moved() {
    let function = hex("f3 0f 1e fa 41 57 41 56 41 55 41 54 55 53 c3");
    let relocation = relocate_entry(&function, ENTRY, AT).unwrap();
    assert_eq!(relocation.patch.offset, 4);
    assert_eq!(relocation.patch.length, 6);
    assert_eq!(relocation.patch.original, hex("41 57 41 56 41 55"));
    let mut expected = hex("41 57 41 56 41 55");
    expected.extend(jump(AT + 6, ENTRY + 10));
    assert_eq!(relocation.code, expected);
    assert!(check_relocated(&function, ENTRY, AT, &relocation).is_empty());
}

#[test]
fn a_branch_back_into_byte_two_of_the_patch_is_refused() {
    // push %rbp; mov %rsp,%rbp; push %rbx; dec %ebx; jne entry+2
    let function = hex("55 48 89 e5 53 ff cb 75 f8 c3");
    let refusal = relocate_entry(&function, ENTRY, AT).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::BranchIntoPatch {
            entry: ENTRY,
            source: 7,
            target: 1,
        }
    );
    assert_eq!(
        refusal.to_string(),
        "a branch at 0x7f1234567000+0x7 lands inside the patched bytes (at +0x1)"
    );
}

#[test]
fn every_kind_of_direct_branch_into_the_patch_is_seen() {
    let cases = [
        // je +1 among the patched instructions themselves, to entry+3.
        ("74 01 53 55 41 54 c3", 0, 3),
        // four pushes; ret; call entry+2 (code of another function inside the symbol).
        ("53 55 41 54 41 55 c3 e8 f6 ff ff ff c3", 7, 2),
        // ...; loop entry+4; jrcxz entry+1.
        ("53 55 41 54 41 55 e2 fc e3 f7 c3", 6, 4),
    ];
    for (text, source, target) in cases {
        let refusal = relocate_entry(&hex(text), ENTRY, AT).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::BranchIntoPatch {
                entry: ENTRY,
                source,
                target
            },
            "{text}"
        );
    }
}

#[test]
fn a_branch_to_the_first_byte_or_past_the_patch_is_accepted() {
    // push %rbp; mov %rsp,%rbp; push %rbx; jne entry; jne entry+5; ret
    let function = hex("55 48 89 e5 53 75 f9 75 fc c3");
    let relocation = relocate_entry(&function, ENTRY, AT).unwrap();
    assert_eq!(relocation.patch.length, 5);
}

#[test]
fn a_jump_forwarder_is_refused() {
    let function = hex("e9 fb 0f 00 00 90 90 90");
    let refusal = relocate_entry(&function, ENTRY, AT).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::Forwarder {
            entry: ENTRY,
            target: Some(ENTRY + 0x1000),
        }
    );
    assert_eq!(
        refusal.to_string(),
        "the function at 0x7f1234567000 only jumps to 0x7f1234568000"
    );
    let indirect = relocate_entry(&hex("ff 25 00 10 00 00 90 90"), ENTRY, AT).unwrap_err();
    assert_eq!(
        indirect,
        Refusal::Forwarder {
            entry: ENTRY,
            target: None,
        }
    );
    assert_eq!(
        indirect.to_string(),
        "the function at 0x7f1234567000 only jumps elsewhere"
    );
}

#[test]
fn a_function_of_four_bytes_is_refused() {
    let refusal = relocate_entry(&hex("31 c0 c3 90"), ENTRY, AT).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::TooShort {
            entry: ENTRY,
            size: 4
        }
    );
    assert_eq!(
        refusal.to_string(),
        "the function at 0x7f1234567000 is 4 bytes, too short for a 5-byte jump"
    );
    // endbr64 and four bytes: the jump after the endbr64 would not fit.
    let after_end_branch = relocate_entry(&hex("f3 0f 1e fa 31 c0 c3 90"), ENTRY, AT);
    assert!(matches!(
        after_end_branch,
        Err(Refusal::TooShort { size: 8, .. })
    ));
}

#[test]
fn calls_returns_and_traps_among_the_patched_bytes_are_refused() {
    let cases = [
        ("53 e8 00 00 00 00 c3", 1, Mnemonic::Call),
        ("31 c0 c3 90 90 90", 2, Mnemonic::Ret),
        ("53 cc 90 90 90 90", 1, Mnemonic::Int3),
        ("53 0f 05 90 90 90", 1, Mnemonic::Syscall),
        ("53 eb 00 90 90 90", 1, Mnemonic::Jmp),
        ("53 ff 25 00 00 00 00 90", 1, Mnemonic::Jmp),
    ];
    for (text, offset, mnemonic) in cases {
        let refusal = relocate_entry(&hex(text), ENTRY, AT).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::Unrelocatable {
                entry: ENTRY,
                offset,
                mnemonic
            },
            "{text}"
        );
    }
    let refusal = relocate_entry(&hex("53 e8 00 00 00 00 c3"), ENTRY, AT).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "the call at 0x7f1234567000+0x1 cannot run out of place"
    );
}

#[test]
fn undecodable_bytes_in_the_patch_are_refused_and_after_it_tolerated() {
    let refusal = relocate_entry(&hex("53 0f 0b 90 90 90"), ENTRY, AT).unwrap_err();
    // ud2 decodes but faults.
    assert!(matches!(refusal, Refusal::Unrelocatable { offset: 1, .. }));
    let refusal = relocate_entry(&hex("53 55 06 90 90 90"), ENTRY, AT).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::Undecodable {
            entry: ENTRY,
            offset: 2
        }
    );
    // Padding after a ret: the scan stops there.
    let function = hex("55 48 89 e5 53 c3 06 06 06");
    assert_eq!(
        relocate_entry(&function, ENTRY, AT).unwrap().patch.length,
        5
    );
}

#[test]
fn a_rip_relative_operand_out_of_reach_is_refused() {
    let function = hex("80 3d 39 c5 16 00 00 74 13 c3");
    let refusal = relocate_entry(&function, ENTRY, 0x1000_0000).unwrap_err();
    assert!(
        matches!(
            refusal,
            Refusal::Encoder {
                entry: ENTRY,
                at: 0x1000_0000,
                ..
            }
        ),
        "{refusal:?}"
    );
    assert!(refusal
        .to_string()
        .starts_with("the prologue at 0x7f1234567000 cannot be placed at 0x10000000: "));
}

#[test]
fn jump_bytes_are_a_rel32_jump_padded_with_int3() {
    assert_eq!(
        jump_bytes(ENTRY, ENTRY + 0x1005, 7),
        Some(hex("e9 00 10 00 00 cc cc"))
    );
    assert_eq!(
        jump_bytes(ENTRY, ENTRY - 0x1000, 5),
        Some(hex("e9 fb ef ff ff"))
    );
    assert_eq!(
        jump_bytes(ENTRY, ENTRY + 5 + 0x7fff_ffff, 5),
        Some(hex("e9 ff ff ff 7f"))
    );
    assert_eq!(jump_bytes(ENTRY, ENTRY + 5 + 0x8000_0000, 5), None);
    assert_eq!(jump_bytes(ENTRY, 0x1000_0000, 5), None);
    assert_eq!(jump_bytes(ENTRY, ENTRY + 0x1000, 4), None);
}

#[test]
fn the_longest_relocated_form_fits_the_bound() {
    // Three `loop`s out of reach: each becomes loop; jmp over; jmp [rip] (10 bytes), the
    // jump back jmp [rip] (6), then int3 padding and the four 8-byte targets.
    let function = hex("e2 10 e2 10 e2 10 c3");
    let relocation = relocate_entry(&function, ENTRY, 0x1000_0000).unwrap();
    assert_eq!(relocation.patch.length, 6);
    // The code ends at 0x24; the four targets start at the next multiple of eight.
    assert_eq!(relocation.code.len(), 3 * 10 + 6 + 4 + 4 * 8);
    assert!(relocation.code.len() <= MAX_RELOCATED_BYTES);
}
