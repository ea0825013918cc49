//! The hooks' machine code, assembled for one address: an entry per operation and the
//! shared routine that claims a ring slot and writes the record (`record_routine`).
//!
//! Every hook first reads `ENABLED`; when it is 0 the hook jumps straight on to the
//! function. Otherwise it builds a frame on the stack and calls the record routine with
//! the operation in `r8d`. The frame, from the record routine's `rsp` upwards:
//!
//! | offset | contents |
//! |---|---|
//! | 0 | return address into the hook |
//! | 8 | spare (the hook keeps rdx there across the record) |
//! | 16 | result (rax after the call; 0 for a free) |
//! | 24 | out pointer (posix_memalign; else 0) |
//! | 32 | TSC at entry (0 for a free) |
//! | 40..88 | rdi, rsi, rdx, rcx, r8, r9 as at entry |
//! | 88 | the caller's return address; its address is `rsp` at entry |
//!
//! The code touches only caller-saved general registers, uses no TLS of its own and no
//! libc, and makes a system call (`sched_yield`) only while waiting for room. All
//! references are rip-relative except the area's address, an immediate.

use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;

use super::code_record::{emit_record_routine, FRAME_CALLER};
use super::layout::{header, HookShape, Op};
use crate::error::{Error, Result};

/// Where the record routine finds the CPU that picks its ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuSource {
    /// glibc's rseq area at `fs:[offset]`: `cpu_id` is 4 bytes into it.
    Rseq { offset: i64 },
    /// The `rdpid` instruction (TSC_AUX, the CPU number on Linux).
    Rdpid,
    /// Always ring 0.
    Single,
}

/// Hooks assembled for `base`.
#[derive(Debug, Clone)]
pub struct AssembledHooks {
    /// The code, to be placed at `base`.
    pub bytes: Vec<u8>,
    /// Absolute address of each operation's entry, in the order of `ops`.
    pub entries: Vec<u64>,
    /// Absolute address of each operation's 8-byte slot holding where its hook continues
    /// into the real function (the relocated prologue), in the order of `ops`.
    pub continuation_slots: Vec<u64>,
}

fn asm_error(error: IcedError) -> Error {
    Error::Internal(format!("assembling hooks: {error}"))
}

/// Assembles one hook per operation in `ops`, recording into the area at `area`.
pub fn assemble(base: u64, area: u64, cpu: CpuSource, ops: &[Op]) -> Result<AssembledHooks> {
    if let CpuSource::Rseq { offset } = cpu {
        if i32::try_from(offset + 4).is_err() {
            return Err(Error::Internal(format!(
                "rseq offset {offset} out of reach"
            )));
        }
    }
    let mut a = CodeAssembler::new(64).map_err(asm_error)?;
    // The slots first: `base` is page-aligned, so each slot is 8-byte aligned.
    let mut slots = Vec::with_capacity(ops.len());
    for _ in ops {
        let mut slot = a.create_label();
        a.set_label(&mut slot).map_err(asm_error)?;
        a.dq(&[0]).map_err(asm_error)?;
        slots.push(slot);
    }
    let mut record = a.create_label();
    let mut entries = Vec::with_capacity(ops.len());
    for (op, slot) in ops.iter().zip(&slots) {
        let mut entry = a.create_label();
        a.set_label(&mut entry).map_err(asm_error)?;
        emit_hook(&mut a, *op, area, *slot, record).map_err(asm_error)?;
        entries.push(entry);
    }
    a.set_label(&mut record).map_err(asm_error)?;
    emit_record_routine(&mut a, area, cpu).map_err(asm_error)?;

    let result = a
        .assemble_options(base, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .map_err(asm_error)?;
    let address = |label: &CodeLabel| result.label_ip(label).map_err(asm_error);
    Ok(AssembledHooks {
        entries: entries.iter().map(address).collect::<Result<_>>()?,
        continuation_slots: slots.iter().map(address).collect::<Result<_>>()?,
        bytes: result.inner.code_buffer,
    })
}

fn emit_hook(
    a: &mut CodeAssembler,
    op: Op,
    area: u64,
    slot: CodeLabel,
    record: CodeLabel,
) -> std::result::Result<(), IcedError> {
    let mut pass_through = a.create_label();
    a.mov(rax, area)?;
    a.cmp(dword_ptr(rax + header::ENABLED as i32), 0)?;
    a.je(pass_through)?;
    push_arguments(a)?;
    match op.shape() {
        HookShape::Before => emit_before(a, op, slot, record)?,
        HookShape::After => emit_after(a, op, slot, record, false)?,
        HookShape::AfterWithOutPointer => emit_after(a, op, slot, record, true)?,
    }
    a.set_label(&mut pass_through)?;
    a.jmp(qword_ptr(slot))
}

/// Pushes rdi..r9 so that rdi ends lowest.
fn push_arguments(a: &mut CodeAssembler) -> std::result::Result<(), IcedError> {
    a.push(r9)?;
    a.push(r8)?;
    a.push(rcx)?;
    a.push(rdx)?;
    a.push(rsi)?;
    a.push(rdi)
}

/// Records at entry, restores the arguments and falls through to the jump on.
fn emit_before(
    a: &mut CodeAssembler,
    op: Op,
    slot: CodeLabel,
    record: CodeLabel,
) -> std::result::Result<(), IcedError> {
    a.xor(eax, eax)?;
    a.push(rax)?; // entry tsc
    a.push(rax)?; // out
    a.push(rax)?; // result
    a.push(rax)?; // spare
    a.mov(r8d, op as u32)?;
    a.call(record)?;
    a.add(rsp, 32)?;
    a.pop(rdi)?;
    a.pop(rsi)?;
    a.pop(rdx)?;
    a.pop(rcx)?;
    a.pop(r8)?;
    a.pop(r9)?;
    a.jmp(qword_ptr(slot))
}

/// Calls the function, then records with its result and returns to the caller.
fn emit_after(
    a: &mut CodeAssembler,
    op: Op,
    slot: CodeLabel,
    record: CodeLabel,
    with_out_pointer: bool,
) -> std::result::Result<(), IcedError> {
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    // Seven pushes since entry: rsp is 16-byte aligned at the call, as the ABI wants.
    a.push(rax)?;
    a.mov(rdx, qword_ptr(rsp + 24))?;
    a.call(qword_ptr(slot))?;
    if with_out_pointer {
        let mut failed = a.create_label();
        a.xor(ecx, ecx)?;
        a.test(eax, eax)?;
        a.jne(failed)?;
        a.mov(rcx, qword_ptr(rsp + 8))?;
        a.mov(rcx, qword_ptr(rcx))?;
        a.set_label(&mut failed)?;
        a.push(rcx)?;
    } else {
        a.push(0)?;
    }
    a.push(rax)?;
    a.push(rdx)?;
    a.mov(r8d, op as u32)?;
    a.call(record)?;
    a.pop(rdx)?;
    a.pop(rax)?;
    a.add(rsp, (FRAME_CALLER - 24) as i32)?;
    a.ret()
}
