//! The MPI hooks' machine code (`HookShape::Mpi`). A message loop makes millions of MPI
//! calls a second, each as cheap as a few dozen nanoseconds natively, so a call in which
//! nothing is recorded writes no record: the hook keeps the call in its thread's slot of the
//! area's MPI section (`layout::mpi`) and, at return, adds it to the slot's counters. Only a
//! call inside which something was recorded, or one memsup claimed while it lasted, writes
//! its return record; a thread without a slot, a call inside another (the slot is busy) and a
//! function numbered past `mpi::FUNCTIONS` write an entry and a return record as before.
//!
//! Either way the function is called with the `MPI_STACK_WORDS` words above the caller's
//! return address copied under its own (the arguments passed on the stack), and nothing
//! else between: the detach's `add rsp, 8 * MPI_STACK_WORDS; ret` relies on that.

use iced_x86::code_asm::*;

use super::code::{emit_entry_record, ReturnSites};
use super::code_record::{emit_rdtsc, FRAME_CALLER};
use super::layout::{header, mpi, Op};

type Emit = Result<(), IcedError>;

/// Words above the return address an MPI hook copies for the function it calls: the
/// arguments passed on the stack (after the first six). The MPI function with the most has
/// 13 (`MPI_Isendrecv`: 7 on the stack); odd, so that the call stays 16-byte aligned.
pub const MPI_STACK_WORDS: i32 = 11;

/// Bytes the return path reserves under the entry rsp: the record routine's frame
/// (`code`), whose caller slot is then the caller's return address.
const RETURN_FRAME: i32 = (FRAME_CALLER - 8) as i32;

/// The hook of MPI function `function`, after the common prologue: rax holds the area,
/// the hooks are on and the six argument registers are pushed.
pub(super) fn emit_mpi(
    a: &mut CodeAssembler,
    function: u32,
    area: u64,
    slot: CodeLabel,
    record_routine: CodeLabel,
    returns: &mut ReturnSites,
) -> Emit {
    let mut recorded = a.create_label();
    if u64::from(function) < mpi::FUNCTIONS {
        emit_pending_entry(a, function, recorded)?;
        emit_call(a, slot, returns)?;
        emit_pending_return(a, function, area, record_routine)?;
    }
    a.set_label(&mut recorded)?;
    emit_entry_record(a, Op::MpiEntry, function, record_routine)?;
    emit_call(a, slot, returns)?;
    emit_return_record(a, function, record_routine)?;
    a.ret()
}

/// r11 = the slot of the thread whose pointer is in r10, in the section at rsi; r9 = its
/// counters. Clobbers nothing else.
fn emit_slot_address(a: &mut CodeAssembler) -> Emit {
    a.mov(r11, mpi::SLOT_HASH)?;
    a.imul_2(r11, r10)?;
    a.shr(r11, 64 - mpi::SLOT_BITS)?;
    a.mov(r9, r11)?;
    a.shl(r9, mpi::SLOT_COUNTERS_BYTES.trailing_zeros())?;
    a.lea(r9, qword_ptr(rsi + r9 + mpi::COUNTERS as i32))?;
    a.shl(r11, mpi::SLOT_BYTES.trailing_zeros())?;
    a.add(r11, rsi)
}

/// Takes the thread's slot (or goes to `recorded`: no section, the slot another thread's,
/// or busy with an outer call) and keeps the call there; pops the arguments.
fn emit_pending_entry(a: &mut CodeAssembler, function: u32, recorded: CodeLabel) -> Emit {
    let mut owned = a.create_label();
    let slot_field = |offset: u64| qword_ptr(r11 + offset as i32);
    a.mov(rsi, qword_ptr(rax + header::MPI_OFFSET as i32))?;
    a.test(rsi, rsi)?;
    a.je(recorded)?;
    a.add(rsi, rax)?;
    a.mov(r10, qword_ptr(0u64).fs())?;
    emit_slot_address(a)?;
    a.cmp(slot_field(mpi::OWNER), r10)?;
    a.je(owned)?;
    a.mov(rdi, rax)?;
    a.xor(eax, eax)?;
    a.lock().cmpxchg(slot_field(mpi::OWNER), r10)?;
    a.jne(recorded)?;
    a.mov(rax, rdi)?;
    a.mov(rdx, r11)?;
    a.sub(rdx, rsi)?;
    a.shr(rdx, mpi::SLOT_BYTES.trailing_zeros())?;
    a.lock()
        .bts(qword_ptr(rax + header::MPI_OWNED as i32), rdx)?;
    a.set_label(&mut owned)?;
    a.cmp(dword_ptr(r11 + mpi::STATE as i32), mpi::IDLE as i32)?;
    a.jne(recorded)?;
    // Counted first (a locked instruction: a full barrier), the generation read next and
    // the TSC last: a record stamped after the entry TSC then sees the count and adds to
    // the generation, or added before this read of it and was stamped before the entry.
    a.lock().inc(qword_ptr(rax + header::MPI_ACTIVE as i32))?;
    a.mov(rdx, qword_ptr(rax + header::MPI_GENERATION as i32))?;
    a.mov(slot_field(mpi::GENERATION), rdx)?;
    a.mov(dword_ptr(r11 + mpi::FUNCTION as i32), function)?;
    a.lea(rdx, qword_ptr(rsp + 48))?;
    a.mov(slot_field(mpi::STACK_POINTER), rdx)?;
    a.lfence()?;
    emit_rdtsc(a)?;
    a.mov(slot_field(mpi::ENTRY_TSC), rax)?;
    // Published last: memsup reads the fields above only in a pending slot.
    a.mov(dword_ptr(r11 + mpi::STATE as i32), mpi::PENDING)?;
    for register in [rdi, rsi, rdx, rcx, r8, r9] {
        a.pop(register)?;
    }
    Ok(())
}

/// Calls the function with the stack arguments copied; rsp is as at entry before and after.
fn emit_call(a: &mut CodeAssembler, slot: CodeLabel, returns: &mut ReturnSites) -> Emit {
    // rsp is as at entry, 8 past a 16-byte boundary; an odd number of words aligns the call.
    let copied = 8 * MPI_STACK_WORDS;
    a.sub(rsp, copied)?;
    for word in 0..MPI_STACK_WORDS {
        a.mov(r11, qword_ptr(rsp + (copied + 8 + 8 * word)))?;
        a.mov(qword_ptr(rsp + 8 * word), r11)?;
    }
    returns.call_mpi(a, slot, i64::from(copied) + 8)?;
    a.add(rsp, copied)
}

/// After a call kept in the slot: sums it when nothing was recorded inside and memsup did
/// not claim it, else writes its return record (with the entry TSC when memsup has not sent
/// the entry). Returns the function's rax, rdx and xmm0 untouched.
fn emit_pending_return(
    a: &mut CodeAssembler,
    function: u32,
    area: u64,
    record_routine: CodeLabel,
) -> Emit {
    let mut changed = a.create_label();
    let mut not_pending = a.create_label();
    let mut write = a.create_label();
    let mut foreign = a.create_label();
    let mut done = a.create_label();
    let slot_field = |offset: u64| qword_ptr(r11 + offset as i32);
    let state = dword_ptr(r11 + mpi::STATE as i32);
    // The record routine's frame from the start: spare (rdx), result (rax), out, entry TSC,
    // six arguments; rsp + RETURN_FRAME is the caller's return address.
    a.sub(rsp, RETURN_FRAME)?;
    a.mov(qword_ptr(rsp), rdx)?;
    a.mov(qword_ptr(rsp + 8), rax)?;
    emit_rdtsc(a)?;
    a.mov(r8, rax)?;
    emit_section(a, area)?;
    a.mov(rdx, qword_ptr(rcx + header::MPI_GENERATION as i32))?;
    a.cmp(rdx, slot_field(mpi::GENERATION))?;
    a.jne(changed)?;
    a.mov(eax, mpi::PENDING)?;
    a.mov(edx, mpi::IDLE)?;
    a.lock().cmpxchg(state, edx)?;
    a.jne(not_pending)?;
    // Summed: only this thread writes its slot's counters.
    let counters = u64::from(function) * mpi::COUNTER_BYTES;
    a.sub(r8, slot_field(mpi::ENTRY_TSC))?;
    // A thread moved to a CPU whose TSC lags: no time to add.
    a.mov(edx, 0)?;
    a.cmovs(r8, rdx)?;
    a.inc(qword_ptr(r9 + counters as i32))?;
    a.add(qword_ptr(r9 + (counters + 8) as i32), r8)?;
    let (word, bit) = (function / 64, function % 64);
    a.mov(rdx, 1u64 << bit)?;
    a.or(
        qword_ptr(r11 + (mpi::TOUCHED + 8 * u64::from(word)) as i32),
        rdx,
    )?;
    a.lock().dec(qword_ptr(rcx + header::MPI_ACTIVE as i32))?;
    a.jmp(done)?;

    // Something was recorded inside: the return record carries the entry, unless memsup
    // claimed the call meanwhile.
    a.set_label(&mut changed)?;
    a.mov(eax, mpi::PENDING)?;
    a.mov(edx, mpi::FLUSHING)?;
    a.lock().cmpxchg(state, edx)?;
    a.jne(not_pending)?;
    a.mov(rdx, slot_field(mpi::ENTRY_TSC))?;
    a.jmp(write)?;
    // eax = the state: CLAIMED (memsup sent the entry and took the call off MPI_ACTIVE), or
    // IDLE in a fork child's fresh area, where the call is not in the slot at all.
    a.set_label(&mut not_pending)?;
    a.cmp(eax, mpi::CLAIMED as i32)?;
    a.jne(foreign)?;
    a.xor(edx, edx)?;
    a.set_label(&mut write)?;
    emit_return_frame(a, function, Some(rdx))?;
    a.mov(r8d, Op::MpiReturn as u32)?;
    a.call(record_routine)?;
    emit_section(a, area)?;
    a.cmp(state, mpi::FLUSHING as i32)?;
    a.mov(state, mpi::IDLE)?;
    a.jne(done)?;
    a.lock().dec(qword_ptr(rcx + header::MPI_ACTIVE as i32))?;
    a.jmp(done)?;
    a.set_label(&mut foreign)?;
    emit_return_frame(a, function, None)?;
    a.mov(r8d, Op::MpiReturn as u32)?;
    a.call(record_routine)?;
    a.set_label(&mut done)?;
    a.mov(rdx, qword_ptr(rsp))?;
    a.mov(rax, qword_ptr(rsp + 8))?;
    a.add(rsp, RETURN_FRAME)?;
    a.ret()
}

/// rcx = the area, rsi = its MPI section, r10 = the thread pointer, r11 = its slot, r9 =
/// the slot's counters.
fn emit_section(a: &mut CodeAssembler, area: u64) -> Emit {
    a.mov(rcx, area)?;
    a.mov(rsi, qword_ptr(rcx + header::MPI_OFFSET as i32))?;
    a.add(rsi, rcx)?;
    a.mov(r10, qword_ptr(0u64).fs())?;
    emit_slot_address(a)
}

/// Fills the return frame reserved under the entry rsp: `function` in out, `entry_tsc` (a
/// register; None: 0) as the entry TSC, no arguments. Clobbers rax.
fn emit_return_frame(
    a: &mut CodeAssembler,
    function: u32,
    entry_tsc: Option<AsmRegister64>,
) -> Emit {
    a.mov(eax, function)?;
    a.mov(qword_ptr(rsp + 16), rax)?;
    if let Some(register) = entry_tsc {
        a.mov(qword_ptr(rsp + 24), register)?;
    }
    a.xor(eax, eax)?;
    if entry_tsc.is_none() {
        a.mov(qword_ptr(rsp + 24), rax)?;
    }
    for argument in 0..6 {
        a.mov(qword_ptr(rsp + 32 + 8 * argument), rax)?;
    }
    Ok(())
}

/// After a call recorded at entry: the return record (no arguments, no entry TSC, the
/// function in out, its result), then back with rax and rdx as the function left them.
fn emit_return_record(a: &mut CodeAssembler, function: u32, record_routine: CodeLabel) -> Emit {
    a.sub(rsp, RETURN_FRAME)?;
    a.mov(qword_ptr(rsp), rdx)?;
    a.mov(qword_ptr(rsp + 8), rax)?;
    emit_return_frame(a, function, None)?;
    a.mov(r8d, Op::MpiReturn as u32)?;
    a.call(record_routine)?;
    a.mov(rdx, qword_ptr(rsp))?;
    a.mov(rax, qword_ptr(rsp + 8))?;
    a.add(rsp, RETURN_FRAME)
}
