//! Relocation checked with the decoder (targets kept, jump back in place) and by running
//! relocated entries of small functions in this process.

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic};

use super::{relocate, RelocatedInstruction, MAX_RELOCATED_LENGTH};
use crate::error::Error;

const ORIGINAL: u64 = 0x7f12_3456_7000;
/// 1 GiB below the original: rip-relative displacements must change.
const SLOT: u64 = ORIGINAL - 0x4000_0000;

fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|byte| u8::from_str_radix(byte, 16).expect("hex byte"))
        .collect()
}

/// The relocated instruction and the jump back, decoded at the slot.
fn decode_slot(relocated: &RelocatedInstruction, slot: u64) -> (Instruction, Instruction) {
    assert!(relocated.bytes.len() <= MAX_RELOCATED_LENGTH);
    let mut decoder = Decoder::with_ip(64, &relocated.bytes, slot, DecoderOptions::NONE);
    let instruction = decoder.decode();
    let jump_back = decoder.decode();
    assert!(!decoder.can_decode(), "nothing after the jump back");
    assert_eq!(jump_back.mnemonic(), Mnemonic::Jmp);
    assert_eq!(jump_back.len(), 5, "jmp rel32");
    (instruction, jump_back)
}

fn original_instruction(code: &[u8]) -> Instruction {
    Decoder::with_ip(64, code, ORIGINAL, DecoderOptions::NONE).decode()
}

#[test]
fn push_is_copied_and_followed_by_the_jump_back() {
    let relocated = relocate(&hex("41 54 55 53"), ORIGINAL, SLOT).unwrap();
    assert_eq!(relocated.original_length, 2);
    assert_eq!(&relocated.bytes[..2], &hex("41 54")[..]);
    let (instruction, jump_back) = decode_slot(&relocated, SLOT);
    assert_eq!(instruction.mnemonic(), Mnemonic::Push);
    assert_eq!(jump_back.near_branch_target(), ORIGINAL + 2);
}

#[test]
fn rip_relative_operands_keep_their_absolute_target() {
    let cases = [
        "48 8b 05 a7 51 0d 00",    // mov 0xd51a7(%rip),%rax
        "80 3d 01 02 14 00 00",    // cmpb $0x0,0x140201(%rip)
        "4c 8d 25 f0 ff ff ff",    // lea -0x10(%rip),%r12
        "f3 0f 10 05 00 10 00 00", // movss 0x1000(%rip),%xmm0
    ];
    for text in cases {
        let code = hex(text);
        let original = original_instruction(&code);
        let relocated = relocate(&code, ORIGINAL, SLOT).unwrap();
        let (instruction, jump_back) = decode_slot(&relocated, SLOT);
        assert_eq!(instruction.mnemonic(), original.mnemonic(), "{text}");
        assert_eq!(
            instruction.ip_rel_memory_address(),
            original.ip_rel_memory_address(),
            "{text}"
        );
        assert_ne!(
            &relocated.bytes[..code.len()],
            &code[..],
            "{text}: displacement rewritten"
        );
        assert_eq!(
            jump_back.near_branch_target(),
            ORIGINAL + code.len() as u64,
            "{text}"
        );
    }
}

#[test]
fn relative_branches_keep_their_target() {
    for text in ["74 05", "0f 84 bf 00 00 00", "eb 10", "e9 3b 18 00 00"] {
        let code = hex(text);
        let original = original_instruction(&code);
        let relocated = relocate(&code, ORIGINAL, SLOT).unwrap();
        assert_eq!(relocated.original_length, code.len());
        let (instruction, jump_back) = decode_slot(&relocated, SLOT);
        assert_eq!(instruction.mnemonic(), original.mnemonic(), "{text}");
        assert_eq!(
            instruction.near_branch_target(),
            original.near_branch_target(),
            "{text}"
        );
        assert_eq!(
            jump_back.near_branch_target(),
            ORIGINAL + code.len() as u64,
            "{text}"
        );
    }
}

fn assert_refused(code: &str, slot: u64, expected: &str) {
    match relocate(&hex(code), ORIGINAL, slot) {
        Err(Error::Internal(message)) => {
            assert!(message.contains(expected), "{code}: {message}");
        }
        other => panic!("{code}: expected a refusal, got {other:?}"),
    }
}

#[test]
fn refuses_instructions_that_depend_on_their_address() {
    assert_refused("e8 00 00 00 00", SLOT, "call return address");
    assert_refused("ff d0", SLOT, "call return address");
    assert_refused("0f 05", SLOT, "syscall rcx");
    assert_refused("c3", SLOT, "returns");
    assert_refused("48 cf", SLOT, "returns");
    assert_refused("cc", SLOT, "interrupt");
    assert_refused("cd 80", SLOT, "interrupt");
    assert_refused("0f 0b", SLOT, "faults");
    assert_refused("67 8b 05 00 10 00 00", SLOT, "eip-relative");
    assert_refused("48 8b", SLOT, "do not decode");
    assert_refused("", SLOT, "do not decode");
}

#[test]
fn refuses_targets_out_of_reach() {
    let far_slot = ORIGINAL + 0x8000_0000;
    assert_refused("48 8b 05 00 00 00 00", far_slot, "rip-relative operand");
    assert_refused("41 54", far_slot, "the jump back");
    // Backwards: the data 1.5 GiB before the original, the slot 1 GiB after it.
    let disp = (-0x6000_0000i32 - 7).to_le_bytes();
    let code = format!(
        "48 8b 05 {:02x} {:02x} {:02x} {:02x}",
        disp[0], disp[1], disp[2], disp[3]
    );
    assert_refused(&code, ORIGINAL + 0x4000_0000, "rip-relative operand");
    assert!(relocate(&hex(&code), ORIGINAL, ORIGINAL - 0x1000).is_ok());
    // jmp rel32 to 2 GiB - 1 past the original, relocated 1 GiB below it.
    assert_refused("e9 fa ff ff 7f", SLOT, "branch target");
}

#[test]
fn refuses_what_the_block_encoder_would_split() {
    // jrcxz and loop have no rel32 form: relocated far they become several instructions.
    assert_refused("e3 10", SLOT, "several instructions");
    assert_refused("e2 10", SLOT, "several instructions");
}

mod execute;
