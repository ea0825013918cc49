//! The hooks' stack walker, assembled for one area: `unwind::tables::walk` in machine code.
//! It walks the caller's stack over the tables memsup published in the area, hashes the
//! return addresses, and finds the stack in the known-stack set; a stack not found there is
//! walked a second time into the stack store, and published in the set. It returns the
//! stack's `StackRef` in rax (0: nothing walked), and in rdx its rule lookups (high half)
//! and how many of them the rule cache missed (low half).
//!
//! No libc, no TLS, no lock, no system call. Every read of the stack is checked against
//! `[entry rsp, high)`, where high is the top of the thread stack holding the entry rsp in
//! memsup's list: an rsp on no listed stack (a signal stack, a fiber) walks nothing.
//!
//! Input: rdi = rsp at the allocator's entry (it points at the return address), rbp as at
//! entry. Clobbers the caller-saved registers; keeps the others.

use iced_x86::code_asm::*;

use super::layout::header;
use super::layout::stacks;
use crate::unwind::tables::rule::{
    Kind, CFA_OFFSET_SHIFT, RBP_OFFSET_BITS, RBP_OFFSET_SHIFT, RBP_REGISTER_BIT, RBP_SAVED_BIT,
};
use crate::unwind::tables::walk::{UCONTEXT_RBP, UCONTEXT_RIP, UCONTEXT_RSP};
use crate::unwind::MAX_DEPTH;

type Emit = Result<(), IcedError>;

/// The walker's locals, from its rsp (`pass` sees them 8 bytes further up).
const LOCAL_LOW: i32 = 0;
const LOCAL_HIGH_LESS_8: i32 = 8;
const LOCAL_DIRECTORY: i32 = 16;
const LOCAL_ENTRY_BP: i32 = 24;
const LOCAL_SLOT: i32 = 32;
const LOCAL_REFERENCE: i32 = 40;
const LOCAL_CACHE: i32 = 48;
const LOCAL_CACHE_SLOT: i32 = 56;
const LOCAL_CACHE_TAG: i32 = 64;
const LOCAL_LOOKUPS: i32 = 72;
const LOCAL_MISSES: i32 = 80;
const LOCALS: i32 = 88;

/// Labels of the walker's subroutines.
struct Labels {
    pass: CodeLabel,
    find: CodeLabel,
}

/// Emits the walk routine at the current position.
pub(super) fn emit_walk_routine(a: &mut CodeAssembler, area: u64) -> Emit {
    let mut labels = Labels {
        pass: a.create_label(),
        find: a.create_label(),
    };
    let mut walking = a.create_label();
    a.mov(rax, area)?;
    a.cmp(dword_ptr(rax + header::STACKS as i32), 0)?;
    a.jne(walking)?;
    a.xor(eax, eax)?;
    a.xor(edx, edx)?;
    a.ret()?;
    a.set_label(&mut walking)?;
    for register in [rbx, rbp, r12, r13, r14, r15] {
        a.push(register)?;
    }
    a.sub(rsp, LOCALS)?;
    a.mov(qword_ptr(rsp + LOCAL_LOW), rdi)?;
    a.mov(qword_ptr(rsp + LOCAL_ENTRY_BP), rbp)?;
    a.mov(qword_ptr(rsp + LOCAL_LOOKUPS), 0)?;
    a.mov(qword_ptr(rsp + LOCAL_MISSES), 0)?;
    let mut none = a.create_label();
    let mut done = a.create_label();
    emit_thread_bounds(a, area, none)?;
    a.mov(rax, area)?;
    a.mov(rax, qword_ptr(rax + header::DIRECTORY as i32))?;
    a.test(rax, rax)?;
    a.je(none)?;
    a.mov(qword_ptr(rsp + LOCAL_DIRECTORY), rax)?;
    a.mov(rax, area)?;
    a.add(rax, qword_ptr(rax + header::CACHE_OFFSET as i32))?;
    a.mov(qword_ptr(rsp + LOCAL_CACHE), rax)?;
    a.xor(edi, edi)?;
    a.mov(r9d, MAX_DEPTH as u32)?;
    a.call(labels.pass)?;
    emit_known_set(a, area, &labels, done)?;
    a.set_label(&mut none)?;
    a.xor(eax, eax)?;
    a.set_label(&mut done)?;
    a.mov(rdx, qword_ptr(rsp + LOCAL_LOOKUPS))?;
    a.shl(rdx, 32)?;
    a.or(rdx, qword_ptr(rsp + LOCAL_MISSES))?;
    a.add(rsp, LOCALS)?;
    for register in [r15, r14, r13, r12, rbp, rbx] {
        a.pop(register)?;
    }
    a.ret()?;
    emit_pass(a, &mut labels)?;
    emit_find(a, &mut labels.find)
}

/// Finds the stack holding rdi (rsp at entry) in the thread stack list and keeps its
/// bound, or jumps to `none`.
fn emit_thread_bounds(a: &mut CodeAssembler, area: u64, none: CodeLabel) -> Emit {
    a.mov(rsi, area)?;
    a.mov(rsi, qword_ptr(rsi + header::THREAD_STACKS as i32))?;
    a.test(rsi, rsi)?;
    a.je(none)?;
    // The number of stacks starting at or below rdi.
    emit_count_at_or_below(
        a,
        rdi,
        stacks::STACK_LIST_ENTRIES,
        stacks::STACK_LIST_ENTRY_BYTES,
    )?;
    a.test(r10, r10)?;
    a.je(none)?;
    a.shl(r10, stacks::STACK_LIST_ENTRY_BYTES.trailing_zeros())?;
    // The entry's high: 8 bytes into entry r10 - 1.
    a.mov(
        r9,
        qword_ptr(rsi + r10 + (stacks::STACK_LIST_ENTRIES - 8) as i32),
    )?;
    a.sub(r9, 8)?;
    a.mov(qword_ptr(rsp + LOCAL_HIGH_LESS_8), r9)?;
    a.cmp(rdi, r9)?;
    a.ja(none)
}

/// After the first pass (rbx hash, r15 frames, r8 stop): the stack's reference from the
/// known-stack set, or a second pass into the store. Ends at `done` with rax.
fn emit_known_set(a: &mut CodeAssembler, area: u64, labels: &Labels, done: CodeLabel) -> Emit {
    let mut hashed = a.create_label();
    let mut probe = a.create_label();
    let mut next = a.create_label();
    let mut found = a.create_label();
    let mut copy = a.create_label();
    let mut lost = a.create_label();
    // The hash covers the frames, their count and the stop; 0 marks an empty slot.
    a.xor(rbx, r15)?;
    a.mov(r11, stacks::STACK_HASH)?;
    a.imul_2(rbx, r11)?;
    a.xor(rbx, r8)?;
    a.jne(hashed)?;
    a.mov(ebx, 1)?;
    a.set_label(&mut hashed)?;
    a.mov(rsi, area)?;
    a.add(rsi, qword_ptr(rsi + header::KNOWN_OFFSET as i32))?;
    a.mov(rax, rbx)?;
    a.shr(rax, 64 - stacks::KNOWN_BITS)?;
    a.mov(ecx, stacks::KNOWN_PROBES)?;
    a.set_label(&mut probe)?;
    a.mov(rdx, rax)?;
    a.shl(rdx, stacks::KNOWN_SLOT_BYTES.trailing_zeros())?;
    a.add(rdx, rsi)?;
    a.mov(r10, qword_ptr(rdx))?;
    a.cmp(r10, rbx)?;
    a.je(found)?;
    a.test(r10, r10)?;
    a.jne(next)?;
    a.mov(r11, rax)?;
    a.xor(eax, eax)?;
    a.lock().cmpxchg(qword_ptr(rdx), rbx)?;
    a.mov(r10, rax)?;
    a.mov(rax, r11)?;
    a.je(copy)?;
    a.cmp(r10, rbx)?;
    a.je(found)?;
    a.set_label(&mut next)?;
    a.inc(rax)?;
    a.and(rax, (stacks::KNOWN_SLOTS - 1) as i32)?;
    a.dec(ecx)?;
    a.jne(probe)?;
    // The set is crowded here: a copy of its own, published nowhere.
    a.xor(edx, edx)?;
    a.jmp(copy)?;
    a.set_label(&mut found)?;
    a.mov(rax, qword_ptr(rdx + 8))?;
    a.test(rax, rax)?;
    a.jne(done)?;
    // Another thread is still writing this stack: a copy of its own.
    a.xor(edx, edx)?;
    a.jmp(copy)?;
    a.set_label(&mut copy)?;
    a.mov(qword_ptr(rsp + LOCAL_SLOT), rdx)?;
    a.mov(rcx, r15)?;
    a.shl(rcx, 3)?;
    a.mov(rsi, area)?;
    a.mov(rax, rcx)?;
    a.lock()
        .xadd(qword_ptr(rsi + header::STORE_USED as i32), rax)?;
    a.lea(rdx, qword_ptr(rax + rcx))?;
    a.cmp(rdx, stacks::STORE_BYTES as i32)?;
    a.ja(lost)?;
    a.mov(r10, rax)?;
    a.shl(r10, 24)?;
    a.mov(r11, r15)?;
    a.shl(r11, 8)?;
    a.or(r10, r11)?;
    a.or(r10, r8)?;
    a.mov(qword_ptr(rsp + LOCAL_REFERENCE), r10)?;
    a.mov(rdi, qword_ptr(rsi + header::STORE_OFFSET as i32))?;
    a.add(rdi, rsi)?;
    a.add(rdi, rax)?;
    a.mov(r9, r15)?;
    a.call(labels.pass)?;
    a.mov(rax, qword_ptr(rsp + LOCAL_REFERENCE))?;
    a.mov(rdx, qword_ptr(rsp + LOCAL_SLOT))?;
    a.test(rdx, rdx)?;
    a.je(done)?;
    // Published after its frames (x86 keeps stores in order).
    a.mov(qword_ptr(rdx + 8), rax)?;
    a.jmp(done)?;
    a.set_label(&mut lost)?;
    a.lock().inc(qword_ptr(rsi + header::STACKS_LOST as i32))?;
    a.xor(eax, eax)?;
    a.jmp(done)
}

/// The pass subroutine: rdi = where frames go (0: nowhere), r9 = frames at most.
/// Returns rbx = running hash, r15 = frames, r8 = stop (`STOP_END` or `STOP_TRUNCATED`).
/// Registers while walking: r12 sp, r13 ip, r14 bp, rbp the segment's directory entry,
/// r8 bit 0 set while the frame's ip is an interrupted instruction, rsi the directory.
fn emit_pass(a: &mut CodeAssembler, labels: &mut Labels) -> Emit {
    let local = |offset: i32| qword_ptr(rsp + 8 + offset);
    let mut stop_end = a.create_label();
    let mut stop_truncated = a.create_label();
    let mut next_frame = a.create_label();
    let mut exact = a.create_label();
    let mut lookup = a.create_label();
    let mut search = a.create_label();
    let mut upper = a.create_label();
    let mut searched = a.create_label();
    let mut no_fde = a.create_label();
    let mut frame_pointer_rule = a.create_label();
    let mut dispatch = a.create_label();
    let mut kind_sp = a.create_label();
    let mut kind_frame_pointer = a.create_label();
    let mut kind_no_fde = a.create_label();
    let mut kind_general = a.create_label();
    let mut kind_plt = a.create_label();
    let mut frame_pointer_walk = a.create_label();
    let mut common = a.create_label();

    a.set_label(&mut labels.pass)?;
    a.mov(rax, local(LOCAL_LOW))?;
    a.mov(r13, qword_ptr(rax))?;
    a.lea(r12, qword_ptr(rax + 8))?;
    a.mov(r14, local(LOCAL_ENTRY_BP))?;
    a.mov(rbx, stacks::STACK_HASH_SEED)?;
    a.xor(r15d, r15d)?;
    a.xor(r8d, r8d)?;
    a.xor(ebp, ebp)?;
    a.mov(rsi, local(LOCAL_DIRECTORY))?;
    a.mov(rax, r13)?;
    a.call(labels.find)?;
    emit_push_frame(a, r13)?;
    a.test(rdx, rdx)?;
    a.je(stop_truncated)?;
    a.mov(rbp, rdx)?;

    a.set_label(&mut next_frame)?;
    a.cmp(r15, r9)?;
    a.jae(stop_truncated)?;
    a.mov(rax, r13)?;
    a.test(r8d, 1)?;
    a.jne(exact)?;
    a.dec(rax)?;
    a.jmp(lookup)?;
    a.set_label(&mut exact)?;
    a.call(labels.find)?;
    a.test(rdx, rdx)?;
    a.je(frame_pointer_rule)?;
    a.mov(rbp, rdx)?;
    a.mov(rax, r13)?;

    // The rule for rax: from the cache, else the table's row (the number of row starts at
    // or below it), then cached.
    a.set_label(&mut lookup)?;
    let mut miss = a.create_label();
    let mut found = a.create_label();
    a.inc(local(LOCAL_LOOKUPS))?;
    a.mov(rcx, stacks::CACHE_HASH)?;
    a.imul_2(rcx, rax)?;
    a.mov(rdx, rcx)?;
    a.shr(rdx, 64 - stacks::CACHE_BITS)?;
    a.shl(rdx, stacks::CACHE_SLOT_BYTES.trailing_zeros())?;
    a.add(rdx, local(LOCAL_CACHE))?;
    a.shr(rcx, 32)?;
    a.cmp(rax, qword_ptr(rdx))?;
    a.jne(miss)?;
    a.mov(r10, qword_ptr(rdx + 8))?;
    a.mov(r11, r10)?;
    a.shr(r11, 32)?;
    a.cmp(r11, rcx)?;
    a.jne(miss)?;
    a.mov(ecx, r10d)?;
    a.jmp(dispatch)?;
    a.set_label(&mut miss)?;
    a.inc(local(LOCAL_MISSES))?;
    a.mov(local(LOCAL_CACHE_SLOT), rdx)?;
    a.shl(rcx, 32)?;
    a.mov(local(LOCAL_CACHE_TAG), rcx)?;
    a.mov(qword_ptr(rdx), rax)?;
    a.sub(rax, qword_ptr(rbp + stacks::ENTRY_BIAS as i32))?;
    a.mov(rcx, rax)?;
    a.shr(rcx, 32)?;
    a.jne(no_fde)?;
    a.mov(r10, qword_ptr(rbp + stacks::ENTRY_STARTS as i32))?;
    a.mov(r11, qword_ptr(rbp + stacks::ENTRY_ROWS as i32))?;
    a.xor(ecx, ecx)?;
    a.set_label(&mut search)?;
    a.cmp(rcx, r11)?;
    a.jae(searched)?;
    a.lea(rdx, qword_ptr(rcx + r11))?;
    a.shr(rdx, 1)?;
    a.cmp(eax, dword_ptr(r10 + rdx * 4))?;
    a.jb(upper)?;
    a.lea(rcx, qword_ptr(rdx + 1))?;
    a.jmp(search)?;
    a.set_label(&mut upper)?;
    a.mov(r11, rdx)?;
    a.jmp(search)?;
    a.set_label(&mut searched)?;
    a.test(rcx, rcx)?;
    a.je(no_fde)?;
    a.mov(r10, qword_ptr(rbp + stacks::ENTRY_RULES as i32))?;
    a.mov(ecx, dword_ptr(r10 + rcx * 4 - 4))?;
    a.jmp(found)?;
    a.set_label(&mut no_fde)?;
    a.xor(ecx, ecx)?;
    a.set_label(&mut found)?;
    a.mov(rdx, local(LOCAL_CACHE_SLOT))?;
    a.mov(r10, local(LOCAL_CACHE_TAG))?;
    a.mov(r11d, ecx)?;
    a.or(r10, r11)?;
    a.mov(qword_ptr(rdx + 8), r10)?;
    a.jmp(dispatch)?;
    a.set_label(&mut frame_pointer_rule)?;
    a.mov(ecx, Kind::FramePointer as u32)?;

    a.set_label(&mut dispatch)?;
    a.mov(eax, ecx)?;
    a.and(eax, 7)?;
    let kinds = [
        (Kind::Sp, kind_sp),
        (Kind::FramePointer, kind_frame_pointer),
        (Kind::NoFde, kind_no_fde),
        (Kind::General, kind_general),
        (Kind::Plt, kind_plt),
        (Kind::End, stop_end),
    ];
    for (kind, label) in kinds {
        a.cmp(eax, kind as i32)?;
        a.je(label)?;
    }
    a.jmp(stop_truncated)?;

    // Each kind leaves rax = CFA, rdx = the caller's rbp, r10 = 1 when the CFA must not
    // move down (the unwinder's checks on rules it evaluates generally).
    a.set_label(&mut kind_sp)?;
    emit_cfa_offset(a, rax, eax)?;
    a.add(rax, r12)?;
    a.mov(rdx, r14)?;
    a.xor(r10d, r10d)?;
    a.test(ecx, RBP_SAVED_BIT)?;
    a.je(common)?;
    emit_rbp_slot(a)?;
    let mut sp_unreadable = a.create_label();
    emit_bounded_read(a, rdx, r11, sp_unreadable, &local)?;
    a.jmp(common)?;
    a.set_label(&mut sp_unreadable)?;
    // At the innermost frame an epilogue may name a slot already popped: rbp stays.
    a.test(r8d, 1)?;
    a.je(stop_truncated)?;
    a.cmp(r11, r12)?;
    a.jae(stop_truncated)?;
    a.jmp(common)?;

    a.set_label(&mut kind_frame_pointer)?;
    a.test(r14, r14)?;
    a.je(stop_end)?;
    a.set_label(&mut frame_pointer_walk)?;
    a.lea(rax, qword_ptr(r14 + 16))?;
    a.cmp(rax, r12)?;
    a.jbe(stop_truncated)?;
    emit_bounded_read(a, rdx, r14, stop_truncated, &local)?;
    a.xor(r10d, r10d)?;
    a.jmp(common)?;

    a.set_label(&mut kind_no_fde)?;
    a.test(r8d, 1)?;
    a.je(frame_pointer_walk)?;
    a.lea(rax, qword_ptr(r12 + 8))?;
    a.mov(rdx, r14)?;
    a.xor(r10d, r10d)?;
    a.jmp(common)?;

    a.set_label(&mut kind_general)?;
    a.mov(rax, r12)?;
    a.test(ecx, RBP_REGISTER_BIT)?;
    a.cmovne(rax, r14)?;
    emit_cfa_offset(a, r11, r11d)?;
    a.add(rax, r11)?;
    a.mov(rdx, r14)?;
    a.mov(r10d, 1)?;
    a.test(ecx, RBP_SAVED_BIT)?;
    a.je(common)?;
    emit_rbp_slot(a)?;
    // An rbp that cannot be read stays as it was.
    emit_bounded_read(a, rdx, r11, common, &local)?;
    a.jmp(common)?;

    a.set_label(&mut kind_plt)?;
    let mut before_threshold = a.create_label();
    emit_cfa_offset(a, r11, r11d)?;
    a.mov(eax, r13d)?;
    a.and(eax, 15)?;
    a.lea(r10, qword_ptr(r12 + 8))?;
    a.cmp(eax, r11d)?;
    a.jl(before_threshold)?;
    a.add(r10, 8)?;
    a.set_label(&mut before_threshold)?;
    a.mov(rax, r10)?;
    a.mov(rdx, r14)?;
    a.mov(r10d, 1)?;

    emit_common(
        a,
        &mut common,
        labels,
        next_frame,
        stop_end,
        stop_truncated,
        &local,
    )?;

    a.set_label(&mut stop_end)?;
    a.mov(r8d, stacks::STOP_END as u32)?;
    a.ret()?;
    a.set_label(&mut stop_truncated)?;
    a.mov(r8d, stacks::STOP_TRUNCATED as u32)?;
    a.ret()
}

/// rax = CFA, rdx = the caller's rbp, r10 = checked: reads the return address, moves to
/// the caller, records it and follows a signal frame.
fn emit_common(
    a: &mut CodeAssembler,
    common: &mut CodeLabel,
    labels: &Labels,
    next_frame: CodeLabel,
    stop_end: CodeLabel,
    stop_truncated: CodeLabel,
    local: &dyn Fn(i32) -> AsmMemoryOperand,
) -> Emit {
    let mut unchecked = a.create_label();
    let mut moved = a.create_label();
    a.set_label(common)?;
    a.lea(r11, qword_ptr(rax - 8))?;
    emit_bounded_read(a, r11, r11, stop_truncated, local)?;
    a.test(r10d, r10d)?;
    a.je(unchecked)?;
    a.test(r8d, 1)?;
    a.jne(unchecked)?;
    a.cmp(rax, r12)?;
    a.jb(stop_truncated)?;
    a.set_label(&mut unchecked)?;
    a.test(r11, r11)?;
    a.je(stop_end)?;
    a.cmp(rax, r12)?;
    a.jne(moved)?;
    a.cmp(r11, r13)?;
    a.je(stop_truncated)?;
    a.set_label(&mut moved)?;
    a.mov(r12, rax)?;
    a.mov(r13, r11)?;
    a.mov(r14, rdx)?;
    a.xor(r8d, r8d)?;
    a.mov(rax, r13)?;
    a.call(labels.find)?;
    a.test(rdx, rdx)?;
    a.je(stop_truncated)?;
    a.mov(rbp, rdx)?;
    emit_push_frame(a, r13)?;
    a.cmp(r13, qword_ptr(rbp + stacks::ENTRY_SIGRETURN as i32))?;
    a.jne(next_frame)?;
    // A signal handler returns here: the interrupted registers are in the ucontext at sp.
    a.lea(rax, qword_ptr(r12 + UCONTEXT_RIP as i32))?;
    a.cmp(rax, local(LOCAL_HIGH_LESS_8))?;
    a.ja(stop_truncated)?;
    a.mov(r13, qword_ptr(r12 + UCONTEXT_RIP as i32))?;
    a.mov(r14, qword_ptr(r12 + UCONTEXT_RBP as i32))?;
    a.mov(r12, qword_ptr(r12 + UCONTEXT_RSP as i32))?;
    a.mov(r8d, 1)?;
    a.mov(r10, r13)?;
    a.bts(r10, 63)?;
    emit_push_frame(a, r10)?;
    a.jmp(next_frame)
}

/// `register` = the rule's signed CFA offset (rule in ecx); `low` is its 32-bit half.
fn emit_cfa_offset(a: &mut CodeAssembler, register: AsmRegister64, low: AsmRegister32) -> Emit {
    a.mov(low, ecx)?;
    a.sar(low, CFA_OFFSET_SHIFT)?;
    a.movsxd(register, low)
}

/// r11 = CFA (rax) + the rule's rbp offset (rule in ecx).
fn emit_rbp_slot(a: &mut CodeAssembler) -> Emit {
    a.mov(r11d, ecx)?;
    a.shl(r11d, 32 - RBP_OFFSET_SHIFT - RBP_OFFSET_BITS)?;
    a.sar(r11d, 32 - RBP_OFFSET_BITS)?;
    a.movsxd(r11, r11d)?;
    a.shl(r11, 3)?;
    a.add(r11, rax)
}

/// `target` = the word at `address` when `[address, address + 8)` lies in the thread's
/// bounds, else jumps to `outside`.
fn emit_bounded_read(
    a: &mut CodeAssembler,
    target: AsmRegister64,
    address: AsmRegister64,
    outside: CodeLabel,
    local: &dyn Fn(i32) -> AsmMemoryOperand,
) -> Emit {
    a.cmp(address, local(LOCAL_LOW))?;
    a.jb(outside)?;
    a.cmp(address, local(LOCAL_HIGH_LESS_8))?;
    a.ja(outside)?;
    a.mov(target, qword_ptr(address))
}

/// Adds `value` to the hash and, in the second pass, stores it as frame r15.
fn emit_push_frame(a: &mut CodeAssembler, value: AsmRegister64) -> Emit {
    let mut skip = a.create_label();
    a.xor(rbx, value)?;
    a.mov(r11, stacks::STACK_HASH)?;
    a.imul_2(rbx, r11)?;
    a.test(rdi, rdi)?;
    a.je(skip)?;
    a.cmp(r15, r9)?;
    a.jae(skip)?;
    a.mov(qword_ptr(rdi + r15 * 8), value)?;
    a.set_label(&mut skip)?;
    a.inc(r15)
}

/// The find subroutine: rdx = the directory entry (rsi) of the segment holding rax, or 0.
/// Tries the current segment (rbp) first. Clobbers rcx, r10, r11.
fn emit_find(a: &mut CodeAssembler, find: &mut CodeLabel) -> Emit {
    let mut search = a.create_label();
    let mut none = a.create_label();
    a.set_label(find)?;
    a.test(rbp, rbp)?;
    a.je(search)?;
    a.cmp(rax, qword_ptr(rbp + stacks::ENTRY_START as i32))?;
    a.jb(search)?;
    a.cmp(rax, qword_ptr(rbp + stacks::ENTRY_END as i32))?;
    a.jae(search)?;
    a.mov(rdx, rbp)?;
    a.ret()?;
    a.set_label(&mut search)?;
    emit_count_at_or_below(a, rax, stacks::DIRECTORY_ENTRIES, stacks::ENTRY_BYTES)?;
    a.test(r10, r10)?;
    a.je(none)?;
    a.dec(r10)?;
    a.shl(r10, stacks::ENTRY_BYTES.trailing_zeros())?;
    a.lea(rdx, qword_ptr(rsi + r10 + stacks::DIRECTORY_ENTRIES as i32))?;
    a.cmp(rax, qword_ptr(rdx + stacks::ENTRY_END as i32))?;
    a.jae(none)?;
    a.ret()?;
    a.set_label(&mut none)?;
    a.xor(edx, edx)?;
    a.ret()
}

/// r10 = how many entries of the sorted list at rsi (a u64 count, then entries of
/// `entry_bytes` from byte `first_entry`, each starting with its u64 key) have a key at or
/// below `key`: a binary search. Clobbers r11, rcx and rdx.
fn emit_count_at_or_below(
    a: &mut CodeAssembler,
    key: AsmRegister64,
    first_entry: u64,
    entry_bytes: u64,
) -> Emit {
    let mut step = a.create_label();
    let mut upper = a.create_label();
    let mut searched = a.create_label();
    a.xor(r10d, r10d)?;
    a.mov(r11, qword_ptr(rsi))?;
    a.set_label(&mut step)?;
    a.cmp(r10, r11)?;
    a.jae(searched)?;
    a.lea(rcx, qword_ptr(r10 + r11))?;
    a.shr(rcx, 1)?;
    a.mov(rdx, rcx)?;
    a.shl(rdx, entry_bytes.trailing_zeros())?;
    a.cmp(key, qword_ptr(rsi + rdx + first_entry as i32))?;
    a.jb(upper)?;
    a.lea(r10, qword_ptr(rcx + 1))?;
    a.jmp(step)?;
    a.set_label(&mut upper)?;
    a.mov(r11, rcx)?;
    a.jmp(step)?;
    a.set_label(&mut searched)
}
