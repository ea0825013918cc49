//! The instructions, in groups. Byte strings are written out where they are the real entries
//! or a form worth naming; register sweeps are encoded with iced.

use super::*;

const RSI: usize = 6;
const R12: usize = 12;

fn check_all(texts: &[&str], operands: Operands) {
    for text in texts {
        check(&hex(text), operands);
    }
}

#[test]
fn no_ops_change_nothing() {
    let no_ops = [
        "f3 0f 1e fa",
        "90",
        "66 90",
        "48 90",
        "0f 1f 00",
        "0f 1f 40 00",
        "0f 1f 44 00 00",
        "66 0f 1f 44 00 00",
        "0f 1f 80 00 00 00 00",
        "0f 1f 84 00 00 00 00 00",
        "66 0f 1f 84 00 00 00 00 00",
        "66 2e 0f 1f 84 00 00 00 00 00",
    ];
    check_all(&no_ops, NO_OPERANDS);
}

#[test]
fn direct_jumps_to_the_next_instruction() {
    check_all(&["eb 00", "e9 00 00 00 00"], NO_OPERANDS);
}

#[test]
fn push_every_register_and_immediates() {
    for (number, register) in ALL_GPRS.iter().enumerate() {
        let code = encode(Instruction::with1(Code::Push_r64, *register).unwrap());
        let operands = Operands {
            first: Some(number),
            // push %rsp stores the old rsp, which must stay a usable stack.
            pointer: Some((RSP, Pointer::Stack)),
            ..NO_OPERANDS
        };
        check(&code, operands);
    }
    check_all(&["41 54", "55", "41 55", "41 57", "53"], NO_OPERANDS);
    check_all(
        &["6a ff", "6a 7f", "68 00 00 00 80", "68 78 56 34 12"],
        NO_OPERANDS,
    );
}

#[test]
fn mov_between_every_pair_of_registers() {
    // The filler gives each register a distinct value with a non-zero upper half, so a wrong
    // source or a missing zero-extension shows.
    let forms = [
        Code::Mov_r64_rm64,
        Code::Mov_rm64_r64,
        Code::Mov_r32_rm32,
        Code::Mov_rm32_r32,
    ];
    for form in forms {
        for destination in ALL_GPRS {
            for source in ALL_GPRS {
                let (destination, source) =
                    if matches!(form, Code::Mov_r32_rm32 | Code::Mov_rm32_r32) {
                        (gpr32(destination), gpr32(source))
                    } else {
                        (destination, source)
                    };
                check(
                    &encode(Instruction::with2(form, destination, source).unwrap()),
                    NO_OPERANDS,
                );
            }
        }
    }
    check_all(&["48 89 f0", "41 89 ca", "48 89 e5"], registers(0, RSI));
}

fn gpr32(register: Register) -> Register {
    Register::EAX + (register.number() as u32)
}

#[test]
fn mov_narrow_registers_merge() {
    let forms = [
        "88 e0",       // mov %ah,%al
        "88 c4",       // mov %al,%ah
        "40 88 f7",    // mov %sil,%dil
        "44 88 c0",    // mov %r8b,%al
        "66 89 f8",    // mov %di,%ax
        "66 44 89 c7", // mov %r8w,%di
    ];
    check_all(&forms, registers(0, RDI));
}

#[test]
fn mov_immediates() {
    for register in ALL_GPRS {
        let imm32 =
            Instruction::with2(Code::Mov_r32_imm32, gpr32(register), 0x8000_0001u32).unwrap();
        let imm64 =
            Instruction::with2(Code::Mov_r64_imm64, register, 0x8123_4567_89ab_cdefu64).unwrap();
        check(&encode(imm32), NO_OPERANDS);
        check(&encode(imm64), NO_OPERANDS);
    }
    let forms = [
        "b8 0b 00 00 00",
        "48 c7 c0 ff ff ff ff",
        "49 c7 c4 00 00 00 80",
        "c7 c0 ff ff ff ff",
        "b0 7f",
        "b4 80",
        "66 b8 34 12",
        "41 b0 01",
        "48 b8 fe ef ff ff ff ff ff 7f",
    ];
    check_all(&forms, NO_OPERANDS);
}

#[test]
fn mov_loads_from_memory() {
    for (prefix, index) in [
        ("48 8b 05", 0),
        ("4c 8b 25", 1),
        ("8b 05", 0),
        ("8a 05", 1),
        ("66 8b 05", 0),
        ("8a 25", 1),
    ] {
        check(&rip_relative(prefix, "", index), memory(None));
    }
    check(&hex("48 8b 47 08"), memory(Some(RDI)));
    check(&hex("48 8b 44 24 08"), memory(Some(RSP)));
    check(&hex("8b 45 00"), memory(Some(RBP)));
    // mov moffs64,%rax: the absolute address of data qword 0.
    check_built(
        |machine| [hex("48 a1"), machine.data_address(0).to_le_bytes().to_vec()].concat(),
        memory(None),
    );
}

#[test]
fn lea_computes_addresses_without_reading() {
    check_all(
        &[
            "48 8d 04 f7",
            "48 8d 44 37 f0",
            "8d 04 37",
            "66 8d 04 37",
            "4a 8d 44 a7 80",
        ],
        registers(RDI, RSI),
    );
    check(&rip_relative("48 8d 05", "", 3), NO_OPERANDS);
    check(&hex("4c 8d 64 24 08"), one(RSP));
}

#[test]
fn test_register_with_register_or_immediate() {
    check_all(&["48 85 ff", "85 ff", "66 85 ff", "40 84 ff"], one(RDI));
    check_all(
        &[
            "84 e4",
            "84 c4",
            "84 c0",
            "a8 01",
            "a8 80",
            "48 a9 00 00 00 80",
            "66 a9 00 80",
        ],
        one(0),
    );
    check_all(
        &["48 85 f7", "85 f7", "66 85 f7", "40 84 f7"],
        registers(RDI, RSI),
    );
    check_all(&["4d 85 c0", "41 f7 c0 ff 0f 00 00", "41 f6 c0 80"], one(8));
}

#[test]
fn add_and_subtract() {
    let rsp_forms = [
        "48 83 ec 58",
        "48 81 ec 00 10 00 00",
        "48 83 c4 08",
        "48 83 c4 80",
        "48 81 c4 00 00 00 80",
    ];
    check_all(&rsp_forms, one(RSP));
    let immediate_forms = [
        "48 83 e8 01",
        "48 2d 00 00 00 80",
        "48 05 ff ff ff 7f",
        "48 81 c0 00 00 00 80",
        "83 c0 ff",
        "83 e8 01",
        "2d ff ff ff 7f",
        "04 7f",
        "2c 80",
        "66 83 c0 01",
        "66 2d 00 80",
        "80 ec 01",
        "80 c4 80",
        "48 01 c0",
        "48 29 c0",
    ];
    check_all(&immediate_forms, one(0));
    check_all(
        &["41 83 ec 10", "49 83 c4 10", "49 81 ec ff 00 00 00"],
        one(R12),
    );
    let register_forms = [
        "48 01 f8", "48 29 f8", "01 f8", "29 f8", "66 01 f8", "40 00 f8", "40 28 f8", "48 03 c7",
        "48 2b c7",
    ];
    check_all(&register_forms, registers(0, RDI));
    check_all(&["00 e0", "28 e0", "28 c4"], one(0));
}

#[test]
fn compare_memory_with_immediate() {
    let rip_forms = [
        ("80 3d", "00", 0),
        ("80 3d", "7f", 0),
        ("80 3d", "80", 1),
        ("80 3d", "ff", 1),
        ("83 3d", "00", 0),
        ("83 3d", "ff", 1),
        ("81 3d", "00 00 00 80", 0),
        ("48 83 3d", "01", 0),
        ("48 81 3d", "ff ff ff 7f", 1),
        ("66 83 3d", "10", 0),
        ("66 81 3d", "00 80", 1),
    ];
    for (prefix, suffix, index) in rip_forms {
        check(&rip_relative(prefix, suffix, index), memory(None));
    }
    check_all(
        &["48 83 7c 24 08 05", "80 7c 24 08 00", "80 7c 24 f8 00"],
        memory(Some(RSP)),
    );
    check_all(
        &["83 7d 08 00", "48 81 7d 08 00 00 00 80"],
        memory(Some(RBP)),
    );
    check_all(
        &["80 7f 08 01", "f6 47 08 01", "48 f7 47 08 ff 00 00 00"],
        memory(Some(RDI)),
    );
    check(&hex("41 80 7c 24 08 80"), memory(Some(R12)));
}

#[test]
fn compare_and_test_registers_with_memory() {
    check(
        &rip_relative("48 3b 05", "", 1),
        register_and_memory(0, None),
    );
    check(
        &rip_relative("48 39 05", "", 1),
        register_and_memory(0, None),
    );
    check(&rip_relative("38 25", "", 1), register_and_memory(0, None));
    check(
        &rip_relative("48 85 05", "", 1),
        register_and_memory(0, None),
    );
    check_all(
        &[
            "48 39 47 08",
            "48 3b 47 08",
            "39 47 08",
            "48 85 47 08",
            "66 39 47 08",
        ],
        register_and_memory(0, Some(RDI)),
    );
}

#[test]
fn compare_registers() {
    check_all(
        &["48 39 f7", "39 f7", "66 39 f7", "40 38 f7", "48 3b fe"],
        registers(RDI, RSI),
    );
    check_all(
        &[
            "3c 05",
            "3c 80",
            "48 3d 00 00 00 80",
            "3d ff ff ff 7f",
            "80 fc 80",
            "66 3d 01 80",
            "38 e0",
        ],
        one(0),
    );
    check_all(
        &["48 83 ff 01", "48 83 ff ff", "83 ff 00", "40 80 ff 7f"],
        one(RDI),
    );
}

#[test]
fn logic_operations() {
    check_all(
        &[
            "31 c0",
            "48 31 c0",
            "30 e4",
            "20 e0",
            "08 c0",
            "24 0f",
            "0c 01",
            "34 ff",
            "66 35 ff 00",
        ],
        one(0),
    );
    check_all(
        &[
            "48 83 c8 ff",
            "83 e0 f0",
            "48 25 00 00 00 80",
            "48 0d 00 00 00 80",
            "66 83 f0 80",
        ],
        one(0),
    );
    check_all(&["45 31 c0", "4d 21 c0", "45 09 c0"], one(8));
    check_all(&["48 31 ff", "31 ff", "40 30 ff"], one(RDI));
    check(&hex("48 83 e4 f0"), one(RSP));
    let register_forms = [
        "48 21 f8", "21 f8", "48 09 f8", "09 f8", "48 31 f8", "31 f8", "66 31 f8", "40 20 f8",
        "40 08 f8", "48 23 c7", "48 0b c7", "48 33 c7",
    ];
    check_all(&register_forms, registers(0, RDI));
    check(
        &rip_relative("48 33 05", "", 1),
        register_and_memory(0, None),
    );
    check(
        &rip_relative("48 23 05", "", 1),
        register_and_memory(0, None),
    );
}
