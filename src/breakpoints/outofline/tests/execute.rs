//! Small functions written into an RWX mapping, called once directly and once through a
//! relocated first instruction in another page that jumps back into the original body.

use super::hex;
use crate::breakpoints::outofline::relocate;
use crate::breakpoints::test_pages::ExecutablePages;

const PAGE: usize = 4096;
const MAPPING_BYTES: usize = 2 * PAGE;
/// The function starts here; the slot is in the second page.
const FUNCTION_OFFSET: usize = 0x40;
const SLOT_OFFSET: usize = PAGE + 0x80;

struct ExecutableMapping(ExecutablePages);

impl ExecutableMapping {
    fn new() -> ExecutableMapping {
        ExecutableMapping(ExecutablePages::new(MAPPING_BYTES))
    }

    fn address(&self, offset: usize) -> u64 {
        self.0.address(offset)
    }

    fn write(&mut self, offset: usize, bytes: &[u8]) {
        self.0.write(offset, bytes);
    }

    /// Writes `function` and its relocated entry; returns (original, relocated) entry points.
    fn install(&mut self, function: &[u8]) -> (u64, u64) {
        self.write(FUNCTION_OFFSET, function);
        let original = self.address(FUNCTION_OFFSET);
        let slot = self.address(SLOT_OFFSET);
        let relocated = relocate(function, original, slot).expect("relocatable");
        self.write(SLOT_OFFSET, &relocated.bytes);
        (original, slot)
    }
}

/// Calls `entry` as `extern "C" fn(u64) -> u64`.
fn call(entry: u64, argument: u64) -> u64 {
    // SAFETY: entry points at code written by the test that follows the C ABI for one
    // integer argument and result.
    let function: extern "C" fn(u64) -> u64 = unsafe { std::mem::transmute(entry as usize) };
    function(argument)
}

/// Calls `entry` with ZF set by `cmp first, second`: for functions whose first instruction
/// is a conditional branch on the caller's flags.
fn call_after_compare(entry: u64, first: u64, second: u64) -> u64 {
    let result: u64;
    // SAFETY: entry is test code that clobbers at most rax and the flags and returns; the asm
    // block may use the stack below rsp for the call since `nostack` is not given.
    unsafe {
        std::arch::asm!(
            "cmp {first}, {second}",
            "call {entry}",
            first = in(reg) first,
            second = in(reg) second,
            entry = in(reg) entry,
            out("rax") result,
            clobber_abi("C"),
        );
    }
    result
}

#[test]
fn rip_relative_load_runs_out_of_line() {
    let mut mapping = ExecutableMapping::new();
    // mov 0x9(%rip),%rax ; add %rdi,%rax ; ret ; (pad) ; .quad 1234 at function + 0x10
    let function = [
        hex("48 8b 05 09 00 00 00 48 01 f8 c3 90 90 90 90 90"),
        1234u64.to_le_bytes().to_vec(),
    ]
    .concat();
    let (original, slot) = mapping.install(&function);
    assert_eq!(call(original, 5), 1239);
    assert_eq!(call(slot, 5), 1239);
    assert_eq!(call(slot, u64::MAX), 1233);
}

#[test]
fn push_entry_runs_out_of_line() {
    let mut mapping = ExecutableMapping::new();
    // push %rbx ; lea 0x2(%rdi),%rax ; pop %rbx ; ret
    let (original, slot) = mapping.install(&hex("53 48 8d 47 02 5b c3"));
    assert_eq!(call(original, 40), 42);
    assert_eq!(call(slot, 40), 42);
}

#[test]
fn unconditional_jump_entry_runs_out_of_line() {
    let mut mapping = ExecutableMapping::new();
    // jmp +2 ; ud2 ; lea 0x1(%rdi),%rax ; ret
    let (original, slot) = mapping.install(&hex("eb 02 0f 0b 48 8d 47 01 c3"));
    assert_eq!(call(original, 41), 42);
    assert_eq!(call(slot, 41), 42);
}

#[test]
fn conditional_branch_entry_runs_out_of_line() {
    let mut mapping = ExecutableMapping::new();
    // je +6 ; mov $1,%eax ; ret ; mov $2,%eax ; ret
    let (original, slot) = mapping.install(&hex("74 06 b8 01 00 00 00 c3 b8 02 00 00 00 c3"));
    for entry in [original, slot] {
        assert_eq!(call_after_compare(entry, 7, 7), 2, "taken at {entry:#x}");
        assert_eq!(
            call_after_compare(entry, 7, 8),
            1,
            "not taken at {entry:#x}"
        );
    }
}
