//! The MPI hooks' machine code (`HookShape::Mpi`). A message loop makes millions of MPI
//! calls a second, each as cheap as a few dozen nanoseconds natively, so a call inside
//! which its thread records nothing writes no record: the hook keeps the call in its
//! thread's slot of the area's MPI section (`layout::mpi`) and, at return, adds it to the
//! slot's counters. Only a call inside which its thread recorded something, or one memsup
//! claimed while it lasted, writes its return record; a thread without a slot, a call inside
//! another (the slot is busy) and a function numbered past `mpi::FUNCTIONS` write an entry
//! and a return record as before.
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
    let mut unslotted = a.create_label();
    if u64::from(function) < mpi::FUNCTIONS {
        emit_take_slot(a, mpi::ENTERING, unslotted)?;
        emit_pending_entry(a, function)?;
        emit_call(a, slot, returns)?;
        emit_pending_return(a, function, area, record_routine)?;
    } else {
        // Recorded at both ends, with the slot held so that calls inside record too.
        emit_take_slot(a, mpi::RECORDED, unslotted)?;
        emit_entry_record(a, Op::MpiEntry, function, record_routine)?;
        emit_call(a, slot, returns)?;
        emit_return_record(a, function, Some(area), record_routine)?;
        a.ret()?;
    }
    a.set_label(&mut unslotted)?;
    emit_entry_record(a, Op::MpiEntry, function, record_routine)?;
    emit_call(a, slot, returns)?;
    emit_return_record(a, function, None, record_routine)?;
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

/// Takes the thread's slot, owning it first if nobody does, from `IDLE` to `state` (a
/// compare-and-swap: a signal handler's call finds it busy), or goes to `unslotted`: no
/// section, no thread pointer yet, the slot another thread's, or busy with an outer call.
/// r11 = the slot, r9 = its counters; the arguments stay pushed.
fn emit_take_slot(a: &mut CodeAssembler, state: u32, unslotted: CodeLabel) -> Emit {
    let mut owned = a.create_label();
    let owner = qword_ptr(r11 + mpi::OWNER as i32);
    a.mov(rsi, qword_ptr(rax + header::MPI_OFFSET as i32))?;
    a.test(rsi, rsi)?;
    a.je(unslotted)?;
    a.add(rsi, rax)?;
    a.mov(r10, qword_ptr(0u64).fs())?;
    a.test(r10, r10)?;
    a.je(unslotted)?;
    emit_slot_address(a)?;
    a.cmp(owner, r10)?;
    a.je(owned)?;
    // Announced before the slot is taken: records look at the slots, and memsup reads this
    // one, from the moment a call can be kept in it.
    a.mov(dword_ptr(rax + header::MPI_TAKEN as i32), 1)?;
    a.mov(rdx, r11)?;
    a.sub(rdx, rsi)?;
    a.shr(rdx, mpi::SLOT_BYTES.trailing_zeros())?;
    a.lock()
        .bts(qword_ptr(rax + header::MPI_OWNED as i32), rdx)?;
    a.xor(eax, eax)?;
    a.lock().cmpxchg(owner, r10)?;
    a.jne(unslotted)?;
    a.set_label(&mut owned)?;
    a.xor(eax, eax)?;
    a.mov(edx, state)?;
    a.lock().cmpxchg(dword_ptr(r11 + mpi::STATE as i32), edx)?;
    a.jne(unslotted)
}

/// Keeps the call in the slot taken as `ENTERING`, `PENDING` last (memsup reads the fields
/// only in a pending slot); pops the arguments.
fn emit_pending_entry(a: &mut CodeAssembler, function: u32) -> Emit {
    let slot_field = |offset: u64| qword_ptr(r11 + offset as i32);
    // memsup compares and swaps state and sequence only while the state is PENDING.
    a.inc(dword_ptr(r11 + mpi::SEQUENCE as i32))?;
    a.mov(dword_ptr(r11 + mpi::DIRTY as i32), 0)?;
    a.mov(dword_ptr(r11 + mpi::FUNCTION as i32), function)?;
    a.lea(rdx, qword_ptr(rsp + 48))?;
    a.mov(slot_field(mpi::STACK_POINTER), rdx)?;
    emit_rdtsc(a)?;
    a.mov(slot_field(mpi::ENTRY_TSC), rax)?;
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

/// After a call kept in the slot: sums it when its thread recorded nothing inside and
/// memsup did not claim it, else writes its return record (with the entry TSC when memsup
/// has not sent the entry). Returns the function's rax, rdx and xmm0 untouched.
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
    let state = dword_ptr(r11 + mpi::STATE as i32);
    // The record routine's frame from the start: spare (rdx), result (rax), out, entry TSC,
    // six arguments; rsp + RETURN_FRAME is the caller's return address.
    a.sub(rsp, RETURN_FRAME)?;
    a.mov(qword_ptr(rsp), rdx)?;
    a.mov(qword_ptr(rsp + 8), rax)?;
    emit_rdtsc(a)?;
    a.mov(r8, rax)?;
    emit_section(a, area)?;
    // Read while the call is still this thread's: a signal handler's call may take the
    // slot once it is idle.
    a.mov(rdi, qword_ptr(r11 + mpi::ENTRY_TSC as i32))?;
    a.cmp(dword_ptr(r11 + mpi::DIRTY as i32), 0)?;
    a.jne(changed)?;
    a.mov(eax, mpi::PENDING)?;
    a.mov(edx, mpi::IDLE)?;
    a.lock().cmpxchg(state, edx)?;
    a.jne(not_pending)?;
    // Summed: only this thread writes its slot's counters.
    let counters = u64::from(function) * mpi::COUNTER_BYTES;
    a.sub(r8, rdi)?;
    // A thread moved to a CPU whose TSC lags: no time to add.
    a.mov(edx, 0)?;
    a.cmovs(r8, rdx)?;
    // Ticks first: memsup reads calls, then ticks, so the ticks it reads cover the calls.
    a.add(qword_ptr(r9 + (counters + 8) as i32), r8)?;
    a.inc(qword_ptr(r9 + counters as i32))?;
    let (word, bit) = (function / 64, function % 64);
    a.mov(rdx, 1u64 << bit)?;
    a.or(
        qword_ptr(r11 + (mpi::TOUCHED + 8 * u64::from(word)) as i32),
        rdx,
    )?;
    a.jmp(done)?;

    // Something was recorded inside: the return record carries the entry, unless memsup
    // claimed the call meanwhile.
    a.set_label(&mut changed)?;
    a.mov(eax, mpi::PENDING)?;
    a.mov(edx, mpi::FLUSHING)?;
    a.lock().cmpxchg(state, edx)?;
    a.jne(not_pending)?;
    a.mov(rdx, rdi)?;
    a.jmp(write)?;
    // eax = the state: CLAIMED (memsup sent the entry), or IDLE in a fork child's fresh
    // area, where the call is not in the slot at all.
    a.set_label(&mut not_pending)?;
    a.cmp(eax, mpi::CLAIMED as i32)?;
    a.jne(foreign)?;
    a.xor(edx, edx)?;
    a.set_label(&mut write)?;
    emit_return_frame(a, function, Some(rdx))?;
    a.mov(r8d, Op::MpiReturn as u32)?;
    a.call(record_routine)?;
    emit_section(a, area)?;
    a.mov(state, mpi::IDLE)?;
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
/// function in out, its result), then the slot given back when the hook of the area at
/// `held` held it, and back with rax and rdx as the function left them.
fn emit_return_record(
    a: &mut CodeAssembler,
    function: u32,
    held: Option<u64>,
    record_routine: CodeLabel,
) -> Emit {
    a.sub(rsp, RETURN_FRAME)?;
    a.mov(qword_ptr(rsp), rdx)?;
    a.mov(qword_ptr(rsp + 8), rax)?;
    emit_return_frame(a, function, None)?;
    a.mov(r8d, Op::MpiReturn as u32)?;
    a.call(record_routine)?;
    if let Some(area) = held {
        emit_section(a, area)?;
        a.mov(dword_ptr(r11 + mpi::STATE as i32), mpi::IDLE)?;
    }
    a.mov(rdx, qword_ptr(rsp))?;
    a.mov(rax, qword_ptr(rsp + 8))?;
    a.add(rsp, RETURN_FRAME)
}
