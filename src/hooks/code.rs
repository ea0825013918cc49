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
//! | 32 | TSC at entry (an MPI call kept in its slot; else 0) |
//! | 40..88 | rdi, rsi, rdx, rcx, r8, r9 as at entry |
//! | 88 | the caller's return address; its address is `rsp` at entry |
//!
//! The code touches only caller-saved general registers (the record routine and the walker
//! save the callee-saved ones they use), uses no TLS of its own and no
//! libc, and makes system calls only while waiting: `futex` for room in its ring,
//! `sched_yield` for the tracer at a rendezvous. All
//! references are rip-relative except the area's address, an immediate.

use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;

use super::code_mpi::emit_mpi;
use super::code_record::{
    emit_rdtsc, emit_record_routine, FRAME_CALLER, SPINS_PER_YIELD, SYS_SCHED_YIELD,
};
use super::layout::{header, record, Hook, HookShape, Op};
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
    /// Where each call of a hooked function returns into its hook, with the CFA there
    /// (rsp + this many bytes: the caller's frame): the rows of the page's unwind table.
    pub return_sites: Vec<(u64, i64)>,
    /// Those of MPI hooks: a thread blocked inside an MPI call has one on its stack.
    pub mpi_return_sites: Vec<u64>,
    /// Absolute address of each hook's entry, in the order of the hooks given.
    pub entries: Vec<u64>,
    /// Absolute address of the stack walker the record routine calls (`code_walk`).
    pub walk_routine: u64,
    /// Absolute address of each operation's 8-byte slot holding where its hook continues
    /// into the real function (the relocated prologue), in the order of the hooks given.
    pub continuation_slots: Vec<u64>,
}

fn asm_error(error: IcedError) -> Error {
    Error::Internal(format!("assembling hooks: {error}"))
}

/// Assembles one hook per entry of `hooks`, recording into the area at `area`.
pub fn assemble(base: u64, area: u64, cpu: CpuSource, hooks: &[Hook]) -> Result<AssembledHooks> {
    if let CpuSource::Rseq { offset } = cpu {
        if i32::try_from(offset + 4).is_err() {
            return Err(Error::Internal(format!(
                "rseq offset {offset} out of reach"
            )));
        }
    }
    let mut a = CodeAssembler::new(64).map_err(asm_error)?;
    // The slots first: `base` is page-aligned, so each slot is 8-byte aligned.
    let mut slots = Vec::with_capacity(hooks.len());
    for _ in hooks {
        let mut slot = a.create_label();
        a.set_label(&mut slot).map_err(asm_error)?;
        a.dq(&[0]).map_err(asm_error)?;
        slots.push(slot);
    }
    let mut record = a.create_label();
    let mut entries = Vec::with_capacity(hooks.len());
    let mut returns = ReturnSites::default();
    for (hook, slot) in hooks.iter().zip(&slots) {
        let mut entry = a.create_label();
        a.set_label(&mut entry).map_err(asm_error)?;
        emit_hook(&mut a, *hook, area, *slot, record, &mut returns).map_err(asm_error)?;
        entries.push(entry);
    }
    a.set_label(&mut record).map_err(asm_error)?;
    let mut walk = a.create_label();
    emit_record_routine(&mut a, area, cpu, &mut walk).map_err(asm_error)?;

    let result = a
        .assemble_options(base, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .map_err(asm_error)?;
    let address = |label: &CodeLabel| result.label_ip(label).map_err(asm_error);
    let return_sites = returns
        .all
        .iter()
        .map(|(label, cfa)| Ok((address(label)?, *cfa)))
        .collect::<Result<_>>()?;
    let mpi_return_sites = returns.mpi.iter().map(address).collect::<Result<_>>()?;
    Ok(AssembledHooks {
        return_sites,
        mpi_return_sites,
        entries: entries.iter().map(address).collect::<Result<_>>()?,
        walk_routine: address(&walk)?,
        continuation_slots: slots.iter().map(address).collect::<Result<_>>()?,
        bytes: result.inner.code_buffer,
    })
}

/// The labels just after each call of a hooked function, with the CFA's offset from rsp there.
#[derive(Default)]
pub(super) struct ReturnSites {
    all: Vec<(CodeLabel, i64)>,
    /// The MPI hooks' among them.
    mpi: Vec<CodeLabel>,
}

impl ReturnSites {
    /// Calls the function through `slot` and marks where it returns, rsp being `cfa` bytes
    /// under the CFA there.
    fn call(
        &mut self,
        a: &mut CodeAssembler,
        slot: CodeLabel,
        cfa: i64,
    ) -> std::result::Result<(), IcedError> {
        a.call(qword_ptr(slot))?;
        let mut site = a.create_label();
        a.set_label(&mut site)?;
        self.all.push((site, cfa));
        Ok(())
    }

    /// As `call`, for an MPI hook.
    pub(super) fn call_mpi(
        &mut self,
        a: &mut CodeAssembler,
        slot: CodeLabel,
        cfa: i64,
    ) -> std::result::Result<(), IcedError> {
        self.call(a, slot, cfa)?;
        self.mpi.push(self.all.last().expect("just pushed").0);
        Ok(())
    }
}

fn emit_hook(
    a: &mut CodeAssembler,
    hook: Hook,
    area: u64,
    slot: CodeLabel,
    record: CodeLabel,
    returns: &mut ReturnSites,
) -> std::result::Result<(), IcedError> {
    let op = hook.op;
    if op.shape() == HookShape::Rendezvous {
        return emit_rendezvous(a, area, slot);
    }
    let mut pass_through = a.create_label();
    a.mov(rax, area)?;
    a.cmp(dword_ptr(rax + header::ENABLED as i32), 0)?;
    a.je(pass_through)?;
    push_arguments(a)?;
    match op.shape() {
        HookShape::Before => emit_before(a, op, slot, record)?,
        HookShape::After => emit_after(a, op, slot, record, false, returns)?,
        HookShape::AfterWithOutPointer => emit_after(a, op, slot, record, true, returns)?,
        HookShape::Around => emit_around(a, op, slot, record, returns)?,
        HookShape::Mpi => emit_mpi(a, hook.function, area, slot, record, returns)?,
        HookShape::Rendezvous => unreachable!("emitted above"),
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
    emit_entry_record(a, op, 0, record)?;
    a.jmp(qword_ptr(slot))
}

/// Publishes `op`'s record at entry, `out` in the frame's out slot, then restores the
/// arguments (pushed by `push_arguments`): rsp is as at entry again.
pub(super) fn emit_entry_record(
    a: &mut CodeAssembler,
    op: Op,
    out: u32,
    record: CodeLabel,
) -> std::result::Result<(), IcedError> {
    a.xor(eax, eax)?;
    a.push(rax)?; // entry tsc
    if out != 0 {
        a.mov(eax, out)?;
        a.push(rax)?; // out
        a.xor(eax, eax)?;
    } else {
        a.push(rax)?; // out
    }
    a.push(rax)?; // result
    a.push(rax)?; // spare
    a.mov(r8d, op as u32)?;
    a.call(record)?;
    a.add(rsp, 32)?;
    for register in [rdi, rsi, rdx, rcx, r8, r9] {
        a.pop(register)?;
    }
    Ok(())
}

/// Calls the function, then records with its result and returns to the caller.
fn emit_after(
    a: &mut CodeAssembler,
    op: Op,
    slot: CodeLabel,
    record: CodeLabel,
    with_out_pointer: bool,
    returns: &mut ReturnSites,
) -> std::result::Result<(), IcedError> {
    // No entry TSC: only MPI calls use theirs (`code_mpi`).
    // Seven pushes since entry: rsp is 16-byte aligned at the call, as the ABI wants.
    a.push(0)?;
    a.mov(rdx, qword_ptr(rsp + 24))?;
    returns.call(a, slot, 8 * 7 + 8)?;
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

/// Records at entry without publishing, calls the function, then stores its result and
/// publishes (`HookShape::Around`).
fn emit_around(
    a: &mut CodeAssembler,
    op: Op,
    slot: CodeLabel,
    record_routine: CodeLabel,
    returns: &mut ReturnSites,
) -> std::result::Result<(), IcedError> {
    let mut dropped = a.create_label();
    a.xor(eax, eax)?;
    a.push(rax)?; // entry tsc
    a.push(rax)?; // out
    a.push(rax)?; // result
    a.push(rax)?; // spare
    a.mov(r8d, op as u32 | record::HOLD)?;
    a.call(record_routine)?;
    // The record's address (0: dropped) and its SEQ, kept in the frame across the call.
    a.mov(qword_ptr(rsp), rcx)?;
    a.mov(qword_ptr(rsp + 8), rax)?;
    let arguments = [rdi, rsi, rdx, rcx, r8, r9];
    for (index, register) in arguments.into_iter().enumerate() {
        a.mov(register, qword_ptr(rsp + (32 + 8 * index) as i32))?;
    }
    // Ten pushes since entry: eight more bytes align rsp to 16 at the call.
    a.sub(rsp, 8)?;
    returns.call(a, slot, 8 * 11 + 8)?;
    a.add(rsp, 8)?;
    a.mov(rcx, qword_ptr(rsp))?;
    a.test(rcx, rcx)?;
    a.je(dropped)?;
    a.mov(qword_ptr(rcx + record::RESULT as i32), rax)?;
    a.mov(rsi, qword_ptr(rsp + 8))?;
    a.mov(qword_ptr(rcx + record::SEQ as i32), rsi)?;
    a.set_label(&mut dropped)?;
    a.add(rsp, (FRAME_CALLER - 8) as i32)?;
    a.ret()
}

/// Takes a rendezvous ticket and waits until memsup has served it, or is gone, or the wait
/// limit passed; then continues into the function (`HookShape::Rendezvous`). Uses only
/// caller-saved registers, the area's header and `sched_yield`.
fn emit_rendezvous(
    a: &mut CodeAssembler,
    area: u64,
    slot: CodeLabel,
) -> std::result::Result<(), IcedError> {
    let mut pass_through = a.create_label();
    let mut round = a.create_label();
    let mut spin = a.create_label();
    let mut stale = a.create_label();
    let field = |offset: u64| qword_ptr(rsi + offset as i32);
    a.mov(rsi, area)?;
    a.cmp(dword_ptr(rsi + header::ENABLED as i32), 0)?;
    a.je(pass_through)?;
    a.mov(r9d, 1)?;
    a.lock().xadd(field(header::RENDEZVOUS_ASKED), r9)?;
    // Served once RENDEZVOUS_DONE reaches the ticket + 1.
    a.inc(r9)?;
    emit_rdtsc(a)?;
    a.mov(rdi, rax)?;
    a.set_label(&mut round)?;
    a.mov(r8d, SPINS_PER_YIELD)?;
    a.set_label(&mut spin)?;
    a.mov(rax, field(header::RENDEZVOUS_DONE))?;
    a.sub(rax, r9)?;
    a.jns(pass_through)?;
    a.pause()?;
    a.dec(r8d)?;
    a.jne(spin)?;
    a.cmp(dword_ptr(rsi + header::ENABLED as i32), 0)?;
    a.je(pass_through)?;
    emit_rdtsc(a)?;
    a.mov(rcx, rax)?;
    a.sub(rcx, rdi)?;
    a.cmp(rcx, field(header::WAIT_LIMIT_TICKS))?;
    a.jg(pass_through)?;
    a.sub(rax, field(header::HEARTBEAT))?;
    a.cmp(rax, field(header::STALE_TICKS))?;
    a.jg(stale)?;
    a.mov(eax, SYS_SCHED_YIELD)?;
    a.syscall()?;
    a.jmp(round)?;
    a.set_label(&mut stale)?;
    a.mov(dword_ptr(rsi + header::ENABLED as i32), 0)?;
    a.set_label(&mut pass_through)?;
    a.jmp(qword_ptr(slot))
}
