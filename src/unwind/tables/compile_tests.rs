//! The compiler on the system's libc and dynamic linker, and row by row on a fixture whose
//! CFI is written out in assembly.

use std::process::Command;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use super::compile::{compile, CompiledTable};
use super::rule::{CfaRegister, Kind, Rule};
use crate::module::ModuleStore;
use crate::unwind::modules::UnwindSections;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";

fn compiled(path: &str) -> (CompiledTable, Arc<crate::module::ModuleFile>) {
    let store = ModuleStore::new();
    let file = store.get(path).unwrap();
    let table = compile(file.unwind().unwrap()).unwrap();
    (table, file)
}

/// The ELF virtual addresses of the rows whose rule is of `kind`, as ranges.
fn ranges_of(table: &CompiledTable, kind: Kind) -> Vec<(u32, u32)> {
    let table = &table.table;
    (0..table.starts.len())
        .filter(|&row| table.rules[row].kind() == kind)
        .map(|row| {
            let end = table.starts.get(row + 1).copied().unwrap_or(u32::MAX);
            (table.starts[row], end)
        })
        .collect()
}

#[test]
fn compiles_libc() {
    let (libc, file) = compiled(LIBC);
    let counts = &libc.counts;
    assert!(counts.fdes > 3000 && counts.cfi_rows > 20_000, "{counts:?}");
    assert_eq!(counts.table_rows, libc.table.starts.len() as u64);
    assert!(libc.table.starts.windows(2).all(|pair| pair[0] < pair[1]));
    let object = object::File::parse(&**file.bytes()).unwrap();
    // The PLT: its first 16 bytes push twice, then every entry has the PLT expression.
    let plt_section = object.section_by_name(".plt").unwrap().address();
    assert_eq!(libc.table.lookup(plt_section + 0x10).kind(), Kind::Plt);
    assert_eq!(libc.table.lookup(plt_section + 0x10), Rule::plt(11));
    assert_eq!(
        libc.table.lookup(plt_section),
        Rule::cfa(Kind::Sp, CfaRegister::Rsp, 16, None)
    );
    // The child sides of clone and clone3 mark the outermost frame (RA undefined) and
    // nothing else does: two End rows.
    let ends = ranges_of(&libc, Kind::End);
    assert_eq!(ends.len(), 2, "{ends:x?}");
    let clone = file.elf().unwrap().find_functions(&["__clone"]);
    let clone = clone.first().expect("libc exports __clone");
    assert!(
        ends.iter()
            .any(|&(start, _)| u64::from(start) > clone.address
                && u64::from(start) < clone.address + 0x100),
        "{ends:x?}"
    );
    // The other is clone3's child side: the End row follows its `mov $435, %eax; syscall`
    // (libc.so.6 does not name clone3) within a few bytes.
    let code_before = |address: u32| -> Vec<u8> {
        let start = u64::from(address) - 32;
        object
            .segments()
            .find_map(|segment| segment.data_range(start, 32).ok().flatten())
            .unwrap()
            .to_vec()
    };
    let clone3_syscall = [0xb8, 0xb3, 0x01, 0x00, 0x00, 0x0f, 0x05];
    assert!(
        ends.iter().any(|&(start, _)| code_before(start)
            .windows(clone3_syscall.len())
            .any(|window| window == clone3_syscall)),
        "{ends:x?}"
    );
    // The only rows the walk cannot apply: vfork keeps its return address in rdi.
    let vfork = file.elf().unwrap().find_functions(&["__vfork"]);
    let vfork = vfork.first().expect("libc exports __vfork");
    assert_eq!(counts.unsupported.len(), 2, "{:x?}", counts.unsupported);
    for range in &counts.unsupported {
        assert!(range.start > vfork.address && range.end <= vfork.address + vfork.size);
    }
    assert_eq!(counts.rows_of(Kind::Unsupported), 1);
    assert!(counts.rows_of(Kind::Sp) > 10_000);
    assert!(counts.rows_of(Kind::NoFde) > 1000);
}

#[test]
fn compiles_the_dynamic_linker_and_ends_at_its_start() {
    let (ld_so, file) = compiled(LD_SO);
    let sections: &UnwindSections = file.unwind().unwrap();
    let entry_code = sections.entry_code.clone().unwrap();
    // A return address anywhere in `_start`/`_dl_start_user` ends the walk: its lookup
    // address, one below, is End; the one past the entry code is not.
    for return_address in entry_code.clone() {
        assert_eq!(ld_so.table.lookup(return_address - 1), Rule::END);
    }
    assert_ne!(ld_so.table.lookup(entry_code.end - 1), Rule::END);
    assert_ne!(ld_so.table.lookup(entry_code.start - 2), Rule::END);
    // ld.so's lazy-binding trampolines compute the CFA from rbx: framehop cannot, and
    // falls back to frame pointers.
    assert!(ld_so.counts.rows_of(Kind::FramePointer) > 0);
    assert!(ld_so.counts.fdes > 200);
}

/// Functions whose CFI the compiler must turn into known rules, row by row. Each function
/// starts 16-byte aligned; the bytes between functions have no FDE.
const FIXTURE: &str = r#"
    .text
    .globl sp_frame, fp_frame, general, outermost, wide, from_rbx, deref_cfa, odd_offset
    .p2align 4
sp_frame:                       # rows at +0 +1 +5 +9 +10
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    sub $8, %rsp
    .cfi_def_cfa_offset 24
    add $8, %rsp
    .cfi_def_cfa_offset 16
    pop %rbp
    .cfi_def_cfa_offset 8
    .cfi_restore %rbp
    ret
    .cfi_endproc
    .p2align 4
fp_frame:                       # rows at +0 +1 +4 +5
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov %rsp, %rbp
    .cfi_def_cfa_register %rbp
    pop %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .p2align 4
general:                        # CFA = rbp + 32, rbp saved at CFA - 24
    .cfi_startproc
    .cfi_def_cfa %rbp, 32
    .cfi_offset %rbp, -24
    nop
    ret
    .cfi_endproc
    .p2align 4
outermost:
    .cfi_startproc
    .cfi_undefined %rip
    nop
    ret
    .cfi_endproc
    .p2align 4
wide:                           # an rsp offset beyond the packed field
    .cfi_startproc
    .cfi_def_cfa_offset 200000
    nop
    ret
    .cfi_endproc
    .p2align 4
from_rbx:
    .cfi_startproc
    .cfi_def_cfa %rbx, 16
    nop
    ret
    .cfi_endproc
    .p2align 4
deref_cfa:                      # DW_CFA_def_cfa_expression: breg7 8; deref
    .cfi_startproc
    .cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06
    nop
    ret
    .cfi_endproc
    .p2align 4
odd_offset:                     # framehop rounds rsp + 12 down to rsp + 8
    .cfi_startproc
    .cfi_def_cfa_offset 12
    nop
    ret
    .cfi_endproc
"#;

#[test]
fn compiles_a_fixture_row_by_row() {
    let directory = tempfile::tempdir().unwrap();
    let source = directory.path().join("cfi.s");
    std::fs::write(&source, FIXTURE).unwrap();
    let library = directory.path().join("libcfi.so");
    let status = Command::new("gcc")
        .args(["-shared", "-nostdlib", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    let path = library.to_str().unwrap();
    let data: Arc<[u8]> = Arc::from(std::fs::read(path).unwrap());
    let object = object::File::parse(&*data).unwrap();
    let symbol = |name: &str| {
        object
            .symbols()
            .find(|symbol| symbol.name() == Ok(name))
            .unwrap()
            .address() as u32
    };
    let sections = UnwindSections::parse(path, &data).unwrap();
    let compiled = compile(&sections).unwrap();

    let sp = |offset, rbp| Rule::cfa(Kind::Sp, CfaRegister::Rsp, offset, rbp);
    let at = |name: &str, offset: u32| symbol(name) + offset;
    let expected = vec![
        (at("sp_frame", 0), sp(8, None)),
        (at("sp_frame", 1), sp(16, Some(-16))),
        (at("sp_frame", 5), sp(24, Some(-16))),
        (at("sp_frame", 9), sp(16, Some(-16))),
        (at("sp_frame", 10), sp(8, None)),
        (at("sp_frame", 11), Rule::NO_FDE),
        (at("fp_frame", 0), sp(8, None)),
        (at("fp_frame", 1), sp(16, Some(-16))),
        (at("fp_frame", 4), Rule::FRAME_POINTER),
        // The epilogue pops rbp without saying so: the slot below the CFA still counts.
        (at("fp_frame", 5), sp(8, Some(-16))),
        (at("fp_frame", 6), Rule::NO_FDE),
        (
            at("general", 0),
            Rule::cfa(Kind::General, CfaRegister::Rbp, 32, Some(-24)),
        ),
        (at("general", 2), Rule::NO_FDE),
        (at("outermost", 0), Rule::END),
        (at("outermost", 2), Rule::NO_FDE),
        (at("wide", 0), Rule::UNSUPPORTED),
        (at("wide", 2), Rule::NO_FDE),
        (at("from_rbx", 0), Rule::FRAME_POINTER),
        (at("from_rbx", 2), Rule::NO_FDE),
        (at("deref_cfa", 0), Rule::FRAME_POINTER),
        (at("deref_cfa", 2), Rule::NO_FDE),
        (at("odd_offset", 0), sp(8, None)),
        (at("odd_offset", 2), Rule::NO_FDE),
    ];
    let table = &compiled.table;
    let found: Vec<(u32, Rule)> = table
        .starts
        .iter()
        .copied()
        .zip(table.rules.iter().copied())
        .collect();
    assert_eq!(found, expected);
    let counts = &compiled.counts;
    assert_eq!((counts.fdes, counts.cfi_rows), (8, 15));
    assert_eq!(counts.table_rows, 23);
    // NoFde, FramePointer, Sp, General, Plt, End, Unsupported
    assert_eq!(counts.rows_per_kind, [8, 3, 9, 1, 0, 1, 1]);
    assert_eq!(counts.unsupported.len(), 1);
}

/// The largest modules the differential test walks through compile whole, fast enough to
/// do at attach time; prints the numbers DESIGN.md quotes (`--nocapture`).
#[test]
fn compiles_python_and_cc1() {
    let cc1 = Command::new("gcc")
        .arg("-print-prog-name=cc1")
        .output()
        .unwrap();
    let cc1 = String::from_utf8(cc1.stdout).unwrap().trim().to_string();
    for path in [LIBC, LD_SO, "/usr/bin/python3.11", &cc1] {
        let (compiled, file) = compiled(path);
        let counts = &compiled.counts;
        let eh_frame = file
            .unwind()
            .unwrap()
            .eh_frame
            .as_ref()
            .map(|(_, b)| b.len());
        eprintln!(
            "{path}: {} FDEs, {} CFI rows, {} table rows, {} table bytes (.eh_frame {:?}), \
             rows per kind {:?}, {} unsupported CFI rows, compiled in {:?}",
            counts.fdes,
            counts.cfi_rows,
            counts.table_rows,
            compiled.table.bytes(),
            eh_frame,
            counts.rows_per_kind,
            counts.unsupported.len(),
            counts.time
        );
        assert!(
            counts.fdes > 200 && counts.table_rows > counts.fdes,
            "{path}"
        );
        assert!(
            counts.unsupported.len() < 10,
            "{path}: {:x?}",
            counts.unsupported
        );
    }
}
