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
/// The thread's walk memory slot (0: none this walk), the buffer this walk writes, the
/// entry of the last walk's buffer the merge is at and that buffer's end entry (0: no
/// last walk), the saved rbp read on the way to the current frame (0: none), and 1 while
/// this walk can become the thread's memory.
const LOCAL_MEMORY: i32 = 88;
const LOCAL_NEXT: i32 = 96;
const LOCAL_CURSOR: i32 = 104;
const LOCAL_PREVIOUS_END: i32 = 112;
const LOCAL_BP_READ: i32 = 120;
const LOCAL_SAVEABLE: i32 = 128;
/// The stack's hash, kept across a second pass.
const LOCAL_HASH: i32 = 136;
/// How the current step treats the frame's rbp: `STEP_PASSES` it on, `STEP_USES` it, or
/// neither (0: the caller's rbp is read from the stack, or the walk ends).
const LOCAL_STEP: i32 = 144;
pub(super) const LOCALS: i32 = 152;
/// What the walker leaves in its locals: non-canonical, so no unwinder takes it
/// for a return address or a frame pointer.
pub(super) const LEFT_BEHIND: u64 = 0x5a5a_5a5a_5a5a_5a5a;

const STEP_PASSES: i32 = 1;
const STEP_USES: i32 = 2;
/// Bits of an entry's fourth field above the address of the rbp read on the way to it:
/// the step's `STEP_*` (shifted), and whether the walk from the entry on uses its rbp.
const STEP_SHIFT: u32 = 61;
const USED_BIT: u32 = 63;

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
    for local in [LOCAL_MEMORY, LOCAL_PREVIOUS_END, LOCAL_SAVEABLE] {
        a.mov(qword_ptr(rsp + local), 0)?;
    }
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
    emit_memory_slot(a, area)?;
    a.xor(edi, edi)?;
    a.mov(r9d, MAX_DEPTH as u32)?;
    a.call(labels.pass)?;
    emit_known_set(a, area, &labels, done)?;
    a.set_label(&mut none)?;
    a.xor(eax, eax)?;
    a.set_label(&mut done)?;
    let mut released = a.create_label();
    a.mov(rcx, qword_ptr(rsp + LOCAL_MEMORY))?;
    a.test(rcx, rcx)?;
    a.je(released)?;
    a.mov(qword_ptr(rcx + stacks::MEMORY_BUSY as i32), 0)?;
    a.set_label(&mut released)?;
    a.mov(rdx, qword_ptr(rsp + LOCAL_LOOKUPS))?;
    a.shl(rdx, 32)?;
    a.or(rdx, qword_ptr(rsp + LOCAL_MISSES))?;
    // The program's own frame-pointer guesses may later read this stack as
    // uninitialised locals; a zero left here would read as a clean end of stack.
    a.mov(rcx, LEFT_BEHIND)?;
    for offset in (0..LOCALS).step_by(8) {
        a.mov(qword_ptr(rsp + offset), rcx)?;
    }
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

/// Finds or takes the thread's walk memory slot (keyed by its stack's high bound less 8)
/// and marks it busy; sets the locals of the memory, or leaves `LOCAL_MEMORY` 0 when the
/// slots are taken or a walk of this thread is already using it (a signal handler's).
fn emit_memory_slot(a: &mut CodeAssembler, area: u64) -> Emit {
    let mut probe = a.create_label();
    let mut next = a.create_label();
    let mut found = a.create_label();
    let mut no_memory = a.create_label();
    a.mov(rax, area)?;
    a.mov(rcx, qword_ptr(rax + header::MEMORY_OFFSET as i32))?;
    a.test(rcx, rcx)?;
    a.je(no_memory)?;
    a.add(rcx, rax)?;
    a.mov(rdx, qword_ptr(rsp + LOCAL_HIGH_LESS_8))?;
    a.mov(rax, stacks::CACHE_HASH)?;
    a.imul_2(rax, rdx)?;
    a.shr(rax, 64 - stacks::MEMORY_BITS)?;
    a.mov(r8d, stacks::MEMORY_PROBES)?;
    a.set_label(&mut probe)?;
    a.mov(r10, rax)?;
    a.shl(r10, stacks::MEMORY_SLOT_BYTES.trailing_zeros())?;
    a.add(r10, rcx)?;
    a.mov(r11, qword_ptr(r10 + stacks::MEMORY_KEY as i32))?;
    a.cmp(r11, rdx)?;
    a.je(found)?;
    a.test(r11, r11)?;
    a.jne(next)?;
    a.mov(r11, rax)?;
    a.xor(eax, eax)?;
    a.lock()
        .cmpxchg(qword_ptr(r10 + stacks::MEMORY_KEY as i32), rdx)?;
    a.mov(rax, r11)?;
    a.je(found)?;
    a.set_label(&mut next)?;
    a.inc(rax)?;
    a.and(rax, (stacks::MEMORY_SLOTS - 1) as i32)?;
    a.dec(r8d)?;
    a.jne(probe)?;
    a.jmp(no_memory)?;
    a.set_label(&mut found)?;
    // Taken atomically: two threads whose stacks memsup has not told apart yet (a thread
    // list not yet updated) share a key.
    a.mov(eax, 1)?;
    a.xchg(qword_ptr(r10 + stacks::MEMORY_BUSY as i32), rax)?;
    a.test(rax, rax)?;
    a.jne(no_memory)?;
    a.mov(qword_ptr(rsp + LOCAL_MEMORY), r10)?;
    a.mov(qword_ptr(rsp + LOCAL_SAVEABLE), 1)?;
    // The last walk's buffer and this walk's, the other one.
    a.mov(rax, qword_ptr(r10 + stacks::MEMORY_CURRENT as i32))?;
    a.and(eax, 1)?;
    a.imul_3(rcx, rax, stacks::MEMORY_BUFFER_BYTES as i32)?;
    a.lea(rdx, qword_ptr(r10 + rcx + stacks::MEMORY_BUFFERS as i32))?;
    a.mov(qword_ptr(rsp + LOCAL_CURSOR), rdx)?;
    a.xor(eax, 1)?;
    a.imul_3(rcx, rax, stacks::MEMORY_BUFFER_BYTES as i32)?;
    a.lea(r11, qword_ptr(r10 + rcx + stacks::MEMORY_BUFFERS as i32))?;
    a.mov(qword_ptr(rsp + LOCAL_NEXT), r11)?;
    // The last walk is of use only over the same tables.
    a.mov(rax, qword_ptr(r10 + stacks::MEMORY_DIRECTORY as i32))?;
    a.cmp(rax, qword_ptr(rsp + LOCAL_DIRECTORY))?;
    a.jne(no_memory)?;
    a.mov(rax, qword_ptr(r10 + stacks::MEMORY_FRAMES as i32))?;
    a.test(rax, rax)?;
    a.je(no_memory)?;
    a.shl(rax, stacks::MEMORY_ENTRY_BYTES.trailing_zeros())?;
    a.add(rax, rdx)?;
    a.mov(qword_ptr(rsp + LOCAL_PREVIOUS_END), rax)?;
    a.set_label(&mut no_memory)?;
    Ok(())
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
    // The thread's recently found stacks first.
    let mut global = a.create_label();
    a.mov(r10, qword_ptr(rsp + LOCAL_MEMORY))?;
    a.test(r10, r10)?;
    a.je(global)?;
    emit_recent_slot(a)?;
    a.cmp(qword_ptr(r10), rbx)?;
    a.jne(global)?;
    a.mov(rax, qword_ptr(r10 + 8))?;
    a.jmp(done)?;
    a.set_label(&mut global)?;
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
    let mut recent = a.create_label();
    a.jne(recent)?;
    // Another thread is still writing this stack: a copy of its own.
    a.xor(edx, edx)?;
    a.jmp(copy)?;
    a.set_label(&mut copy)?;
    a.mov(qword_ptr(rsp + LOCAL_SLOT), rdx)?;
    a.mov(qword_ptr(rsp + LOCAL_HASH), rbx)?;
    a.mov(rcx, r15)?;
    a.shl(rcx, 3)?;
    a.mov(rsi, area)?;
    a.mov(rax, rcx)?;
    a.lock()
        .xadd(qword_ptr(rsi + header::STORE_USED as i32), rax)?;
    a.lea(rdx, qword_ptr(rax + rcx))?;
    a.cmp(rdx, qword_ptr(rsi + header::STORE_SIZE as i32))?;
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
    a.mov(rbx, qword_ptr(rsp + LOCAL_HASH))?;
    a.mov(rdx, qword_ptr(rsp + LOCAL_SLOT))?;
    a.test(rdx, rdx)?;
    a.je(recent)?;
    // Published after its frames (x86 keeps stores in order).
    a.mov(qword_ptr(rdx + 8), rax)?;
    // rax = the stack's reference, rbx its hash: kept among the thread's recent ones.
    a.set_label(&mut recent)?;
    a.mov(r10, qword_ptr(rsp + LOCAL_MEMORY))?;
    a.test(r10, r10)?;
    a.je(done)?;
    emit_recent_slot(a)?;
    a.mov(qword_ptr(r10 + 8), rax)?;
    a.mov(qword_ptr(r10), rbx)?;
    a.jmp(done)?;
    a.set_label(&mut lost)?;
    a.lock().inc(qword_ptr(rsi + header::STACKS_LOST as i32))?;
    a.xor(eax, eax)?;
    a.jmp(done)
}

/// r10 = the slot for hash rbx among the recent stacks of the memory at r10. Clobbers r11.
fn emit_recent_slot(a: &mut CodeAssembler) -> Emit {
    a.mov(r11, rbx)?;
    a.shr(r11, 64 - stacks::MEMORY_KNOWN_BITS)?;
    a.shl(r11, stacks::KNOWN_SLOT_BYTES.trailing_zeros())?;
    a.lea(r10, qword_ptr(r10 + r11 + stacks::MEMORY_KNOWN as i32))
}

/// The pass subroutine: rdi = where frames go (0: nowhere), r9 = frames at most.
/// Returns rbx = running hash, r15 = frames, r8 = stop (`STOP_END` or `STOP_TRUNCATED`).
/// Registers while walking: r12 sp, r13 ip, r14 bp, rbp the segment's directory entry,
/// r8 bit 0 set while the frame's ip is an interrupted instruction, rsi the directory.
fn emit_pass(a: &mut CodeAssembler, labels: &mut Labels) -> Emit {
    let local = |offset: i32| qword_ptr(rsp + 8 + offset);
    let mut stop_end = a.create_label();
    let mut stop_end_read = a.create_label();
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
    a.mov(local(LOCAL_BP_READ), 0)?;
    a.mov(local(LOCAL_STEP), 0)?;
    a.mov(rsi, local(LOCAL_DIRECTORY))?;
    a.mov(rax, r13)?;
    a.call(labels.find)?;
    emit_push_frame(a, r13)?;
    a.test(rdx, rdx)?;
    a.je(stop_truncated)?;
    a.mov(rbp, rdx)?;

    a.set_label(&mut next_frame)?;
    emit_memory_frame(a, &local)?;
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
    a.mov(local(LOCAL_STEP), STEP_PASSES)?;
    emit_cfa_offset(a, rax, eax)?;
    a.add(rax, r12)?;
    a.mov(rdx, r14)?;
    a.xor(r10d, r10d)?;
    a.test(ecx, RBP_SAVED_BIT)?;
    a.je(common)?;
    emit_rbp_slot(a)?;
    let mut sp_unreadable = a.create_label();
    emit_bounded_read(a, rdx, r11, sp_unreadable, &local)?;
    a.mov(local(LOCAL_BP_READ), r11)?;
    a.mov(local(LOCAL_STEP), 0)?;
    a.jmp(common)?;
    a.set_label(&mut sp_unreadable)?;
    // At the innermost frame an epilogue may name a slot already popped: rbp stays.
    a.test(r8d, 1)?;
    a.je(stop_truncated)?;
    a.cmp(r11, r12)?;
    a.jae(stop_truncated)?;
    a.mov(local(LOCAL_SAVEABLE), 0)?;
    a.jmp(common)?;

    a.set_label(&mut kind_frame_pointer)?;
    a.mov(local(LOCAL_STEP), STEP_USES)?;
    a.test(r14, r14)?;
    a.je(stop_end)?;
    a.set_label(&mut frame_pointer_walk)?;
    a.lea(rax, qword_ptr(r14 + 16))?;
    a.cmp(rax, r12)?;
    a.jbe(stop_truncated)?;
    emit_bounded_read(a, rdx, r14, stop_truncated, &local)?;
    a.mov(local(LOCAL_BP_READ), r14)?;
    a.xor(r10d, r10d)?;
    a.jmp(common)?;

    a.set_label(&mut kind_no_fde)?;
    a.mov(local(LOCAL_STEP), STEP_USES)?;
    a.test(r8d, 1)?;
    a.je(frame_pointer_walk)?;
    a.lea(rax, qword_ptr(r12 + 8))?;
    a.mov(rdx, r14)?;
    a.xor(r10d, r10d)?;
    a.jmp(common)?;

    a.set_label(&mut kind_general)?;
    let mut passes = a.create_label();
    a.mov(local(LOCAL_STEP), STEP_PASSES)?;
    a.test(ecx, RBP_REGISTER_BIT)?;
    a.je(passes)?;
    a.mov(local(LOCAL_STEP), STEP_USES)?;
    a.set_label(&mut passes)?;
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
    // An rbp that cannot be read stays as it was (a walk the memory cannot repeat: the
    // bounds differ from call to call).
    let mut general_unreadable = a.create_label();
    emit_bounded_read(a, rdx, r11, general_unreadable, &local)?;
    a.mov(local(LOCAL_BP_READ), r11)?;
    a.and(local(LOCAL_STEP), STEP_USES)?;
    a.jmp(common)?;
    a.set_label(&mut general_unreadable)?;
    a.mov(local(LOCAL_SAVEABLE), 0)?;
    a.jmp(common)?;

    a.set_label(&mut kind_plt)?;
    a.mov(local(LOCAL_STEP), STEP_PASSES)?;
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
        stop_end_read,
        stop_truncated,
        &local,
    )?;

    // The walk ended: rcx = the address of the return address read as 0, or 0 when the
    // rule said so.
    let mut stop_end_at = a.create_label();
    a.set_label(&mut stop_end_read)?;
    a.lea(rcx, qword_ptr(rax - 8))?;
    a.jmp(stop_end_at)?;
    a.set_label(&mut stop_end)?;
    a.xor(ecx, ecx)?;
    a.set_label(&mut stop_end_at)?;
    emit_remember_end(a, &local)?;
    a.mov(r8d, stacks::STOP_END as u32)?;
    a.ret()?;
    a.set_label(&mut stop_truncated)?;
    a.mov(r8d, stacks::STOP_TRUNCATED as u32)?;
    a.ret()
}

/// At each frame of a first pass with a memory: writes the frame's entry into this walk's
/// buffer, and when the frame's state is one of the last walk's, reads again every stack
/// word that walk read from there on; if all are as they were, takes its remaining frames
/// (hashing them, copying their entries) and returns as the walk would have, `STOP_END`.
/// Otherwise the walk goes on, and tries the memory again from the entry that differed.
fn emit_memory_frame(a: &mut CodeAssembler, local: &dyn Fn(i32) -> AsmMemoryOperand) -> Emit {
    let mut after = a.create_label();
    let mut merge = a.create_label();
    let mut advance = a.create_label();
    let mut at_or_above = a.create_label();
    let mut verify = a.create_label();
    let mut verify_end = a.create_label();
    let mut verify_end_bp = a.create_label();
    let mut verified = a.create_label();
    let mut mismatch = a.create_label();
    let mut take = a.create_label();
    let mut taken = a.create_label();
    let mut unsaved = a.create_label();
    a.test(rdi, rdi)?;
    a.jne(after)?;
    a.cmp(local(LOCAL_MEMORY), 0)?;
    a.je(after)?;
    a.cmp(local(LOCAL_SAVEABLE), 0)?;
    a.je(merge)?;
    // Entry r15 - 1: this frame.
    emit_entry_of_r15(a, rax, local)?;
    a.mov(qword_ptr(rax - 32), r12)?;
    a.mov(qword_ptr(rax - 24), r13)?;
    a.mov(qword_ptr(rax - 16), r14)?;
    a.mov(rcx, local(LOCAL_STEP))?;
    a.shl(rcx, STEP_SHIFT)?;
    a.or(rcx, local(LOCAL_BP_READ))?;
    a.mov(qword_ptr(rax - 8), rcx)?;
    a.set_label(&mut merge)?;
    a.mov(local(LOCAL_BP_READ), 0)?;
    a.mov(local(LOCAL_STEP), 0)?;
    // The last walk's sps rise from entry to entry: the cursor moves to the first at or
    // above this frame's.
    a.mov(rax, local(LOCAL_CURSOR))?;
    a.mov(rcx, local(LOCAL_PREVIOUS_END))?;
    let mut past_end = a.create_label();
    a.set_label(&mut advance)?;
    a.cmp(rax, rcx)?;
    a.jae(past_end)?;
    a.cmp(qword_ptr(rax), r12)?;
    a.jae(at_or_above)?;
    a.add(rax, stacks::MEMORY_ENTRY_BYTES as i32)?;
    a.jmp(advance)?;
    a.set_label(&mut at_or_above)?;
    a.mov(local(LOCAL_CURSOR), rax)?;
    a.jne(after)?;
    a.cmp(qword_ptr(rax + 8), r13)?;
    a.jne(after)?;
    // rbp matters only where the rest of the walk uses it.
    let mut bp_unused = a.create_label();
    a.bt(qword_ptr(rax + 24), USED_BIT)?;
    a.jae(bp_unused)?;
    a.cmp(qword_ptr(rax + 16), r14)?;
    a.jne(after)?;
    a.set_label(&mut bp_unused)?;
    a.test(r8d, 1)?;
    a.jne(after)?;
    // The same state: the words the last walk read from here on, within this call's bounds.
    a.mov(r10, rax)?;
    a.set_label(&mut verify)?;
    a.add(r10, stacks::MEMORY_ENTRY_BYTES as i32)?;
    a.cmp(r10, rcx)?;
    a.jae(verify_end)?;
    a.mov(r11, qword_ptr(r10))?;
    a.sub(r11, 8)?;
    emit_bounded_read(a, rdx, r11, mismatch, local)?;
    a.cmp(rdx, qword_ptr(r10 + 8))?;
    a.jne(mismatch)?;
    a.mov(r11, qword_ptr(r10 + 24))?;
    a.shl(r11, 64 - STEP_SHIFT)?;
    a.shr(r11, 64 - STEP_SHIFT)?;
    a.je(verify)?;
    emit_bounded_read(a, rdx, r11, mismatch, local)?;
    a.bt(qword_ptr(r10 + 24), USED_BIT)?;
    a.jae(verify)?;
    a.cmp(rdx, qword_ptr(r10 + 16))?;
    a.jne(mismatch)?;
    a.jmp(verify)?;
    a.set_label(&mut verify_end)?;
    a.mov(r11, qword_ptr(r10 + 8))?;
    a.test(r11, r11)?;
    a.je(verify_end_bp)?;
    emit_bounded_read(a, rdx, r11, mismatch, local)?;
    a.test(rdx, rdx)?;
    a.jne(mismatch)?;
    a.set_label(&mut verify_end_bp)?;
    a.mov(r11, qword_ptr(r10 + 16))?;
    a.test(r11, r11)?;
    a.je(verified)?;
    emit_bounded_read(a, rdx, r11, mismatch, local)?;
    a.set_label(&mut verified)?;
    // The walk would have ended within its depth: all its frames are below r9.
    a.mov(rdx, rcx)?;
    a.sub(rdx, rax)?;
    a.shr(rdx, stacks::MEMORY_ENTRY_BYTES.trailing_zeros())?;
    a.lea(rdx, qword_ptr(rdx + r15 - 1))?;
    a.cmp(rdx, r9)?;
    a.jae(mismatch)?;
    // Take the frames after this one and the end entry. The walk ends here: r12 and r13
    // keep this frame's entry in this walk's buffer and the last walk's.
    a.mov(r10, rax)?;
    a.mov(r13, rax)?;
    emit_entry_of_r15(a, rdx, local)?;
    a.lea(r12, qword_ptr(rdx - 32))?;
    a.set_label(&mut take)?;
    a.add(r10, stacks::MEMORY_ENTRY_BYTES as i32)?;
    for offset in [0, 8, 16, 24] {
        a.mov(r11, qword_ptr(r10 + offset))?;
        a.mov(qword_ptr(rdx + offset), r11)?;
    }
    a.add(rdx, stacks::MEMORY_ENTRY_BYTES as i32)?;
    a.cmp(r10, rcx)?;
    a.jae(taken)?;
    a.xor(rbx, qword_ptr(r10 + 8))?;
    a.mov(r11, stacks::STACK_HASH)?;
    a.imul_2(rbx, r11)?;
    a.inc(r15)?;
    a.jmp(take)?;
    a.set_label(&mut taken)?;
    a.cmp(local(LOCAL_SAVEABLE), 0)?;
    a.je(unsaved)?;
    a.mov(r10, qword_ptr(r13 + 24))?;
    a.shr(r10, USED_BIT)?;
    a.mov(r11, r10)?;
    a.shl(r11, USED_BIT)?;
    a.or(qword_ptr(r12 + 24), r11)?;
    a.mov(rdx, r12)?;
    emit_mark_used(a, local)?;
    emit_remembered(a, local)?;
    a.set_label(&mut unsaved)?;
    a.mov(r8d, stacks::STOP_END as u32)?;
    a.ret()?;
    // A word read differs at entry r10 (or its walk would be too deep: r10 is the end):
    // a later frame may still be one of the entries from there on.
    a.set_label(&mut mismatch)?;
    a.mov(local(LOCAL_CURSOR), r10)?;
    a.jmp(after)?;
    // Every entry lies below this frame: none of the later frames can match.
    a.set_label(&mut past_end)?;
    a.mov(local(LOCAL_CURSOR), rcx)?;
    a.set_label(&mut after)
}

/// `register` = entry r15 of this walk's buffer.
fn emit_entry_of_r15(
    a: &mut CodeAssembler,
    register: AsmRegister64,
    local: &dyn Fn(i32) -> AsmMemoryOperand,
) -> Emit {
    a.mov(register, r15)?;
    a.shl(register, stacks::MEMORY_ENTRY_BYTES.trailing_zeros())?;
    a.add(register, local(LOCAL_NEXT))
}

/// At the end of a first pass that can be remembered: writes the end entry (rcx = the
/// address of the return address read as 0, or 0) after the r15 frames' entries, and
/// makes this walk's buffer the memory.
fn emit_remember_end(a: &mut CodeAssembler, local: &dyn Fn(i32) -> AsmMemoryOperand) -> Emit {
    let mut skip = a.create_label();
    a.test(rdi, rdi)?;
    a.jne(skip)?;
    a.cmp(local(LOCAL_MEMORY), 0)?;
    a.je(skip)?;
    a.cmp(local(LOCAL_SAVEABLE), 0)?;
    a.je(skip)?;
    emit_entry_of_r15(a, rax, local)?;
    a.mov(qword_ptr(rax), 0)?;
    a.mov(qword_ptr(rax + 8), rcx)?;
    a.mov(rcx, local(LOCAL_BP_READ))?;
    a.mov(qword_ptr(rax + 16), rcx)?;
    a.mov(rcx, local(LOCAL_STEP))?;
    a.shl(rcx, STEP_SHIFT)?;
    a.mov(qword_ptr(rax + 24), rcx)?;
    a.mov(rdx, rax)?;
    a.xor(r10d, r10d)?;
    emit_mark_used(a, local)?;
    emit_remembered(a, local)?;
    a.set_label(&mut skip)
}

/// Marks, from the entry before rdx down to the first of this walk's buffer, whether the
/// walk from each entry on uses its rbp: its step uses it, or passes it on to an entry
/// whose walk does (r10: 1 when rdx's does). Clobbers rcx, r11.
fn emit_mark_used(a: &mut CodeAssembler, local: &dyn Fn(i32) -> AsmMemoryOperand) -> Emit {
    let mut mark = a.create_label();
    let mut marked = a.create_label();
    a.set_label(&mut mark)?;
    a.cmp(rdx, local(LOCAL_NEXT))?;
    a.jbe(marked)?;
    // The step from the entry before rdx to rdx.
    a.mov(r11, qword_ptr(rdx + 24))?;
    a.mov(rcx, r11)?;
    a.shr(rcx, STEP_SHIFT)?;
    a.and(ecx, STEP_PASSES)?;
    a.and(ecx, r10d)?;
    a.shr(r11, STEP_SHIFT + 1)?;
    a.and(r11d, 1)?;
    a.or(ecx, r11d)?;
    a.mov(r10d, ecx)?;
    a.sub(rdx, stacks::MEMORY_ENTRY_BYTES as i32)?;
    a.shl(rcx, USED_BIT)?;
    a.or(qword_ptr(rdx + 24), rcx)?;
    a.jmp(mark)?;
    a.set_label(&mut marked)
}

/// This walk's buffer, holding r15 frames and the end entry, becomes the memory.
fn emit_remembered(a: &mut CodeAssembler, local: &dyn Fn(i32) -> AsmMemoryOperand) -> Emit {
    a.mov(rax, local(LOCAL_MEMORY))?;
    a.mov(qword_ptr(rax + stacks::MEMORY_FRAMES as i32), r15)?;
    a.mov(rcx, local(LOCAL_DIRECTORY))?;
    a.mov(qword_ptr(rax + stacks::MEMORY_DIRECTORY as i32), rcx)?;
    a.xor(qword_ptr(rax + stacks::MEMORY_CURRENT as i32), 1)
}

/// rax = CFA, rdx = the caller's rbp, r10 = checked: reads the return address, moves to
/// the caller, records it and follows a signal frame.
fn emit_common(
    a: &mut CodeAssembler,
    common: &mut CodeLabel,
    labels: &Labels,
    next_frame: CodeLabel,
    stop_end_read: CodeLabel,
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
    a.je(stop_end_read)?;
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
    // Reads of the ucontext are not in the memory's entries: this walk stays unremembered.
    a.mov(local(LOCAL_SAVEABLE), 0)?;
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
