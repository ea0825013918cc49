//! The record routine every hook calls: walks the caller's stack (`code_walk`, unless the
//! operation says not: `Op::walks_stack`), then picks a ring by CPU, claims a slot, writes the record from the hook's frame
//! (layout in `code`) and publishes it.
//!
//! Registers while claiming: r9 the ring, rsi its capacity, r8 the op in the low half and
//! the ring's number in the high half (one store writes both `OP` and `CPU`), r10 the TSC,
//! rdi the TSC when the ring was first found full (0 until then), r11 the head.

use iced_x86::code_asm::*;

use super::code::CpuSource;
use super::code_walk::emit_walk_routine;
use super::layout::{header, mpi, record, ring, Op, AREA_HEADER_BYTES, POLICY_DROP, RECORD_BYTES};

/// Odd, so that heads map one to one; its top bits spread consecutive heads (and every
/// second one, a malloc-free loop's) evenly over the sampled byte.
const SAMPLE_SCRAMBLE: u64 = 0x9e37_79b9_7f4a_7c15;

/// Whether the record routine times a record taking a ring at `head` (as its code decides).
#[cfg(test)]
pub(super) fn sampled_head(head: u64, mask: u32) -> bool {
    (head.wrapping_mul(SAMPLE_SCRAMBLE) >> 56) as u32 & mask == 0
}

/// Frame offsets from the record routine's `rsp`.
pub(super) const FRAME_RESULT: u64 = 16;
pub(super) const FRAME_OUT: u64 = 24;
pub(super) const FRAME_ENTRY_TSC: u64 = 32;
pub(super) const FRAME_ARGUMENTS: u64 = 40;
pub(super) const FRAME_CALLER: u64 = 88;

/// Pause rounds before the rendezvous hook yields its CPU.
pub(super) const SPINS_PER_YIELD: u32 = 256;
pub(super) const SYS_SCHED_YIELD: u32 = 24;
/// Pause rounds a producer spins on a full ring before it checks the clock and sleeps.
const SPINS_PER_SLEEP: u32 = 256;
const SYS_FUTEX: u32 = 202;
const FUTEX_WAIT: u32 = 0;

/// Bytes between the inner routine's rsp and the hook's frame: its return address into
/// the record routine and the rbx and r12 the record routine saved.
const INNER: u64 = 24;

type Emit = Result<(), IcedError>;

/// The record routine. Callee-saved registers carry what must outlive the inner routine:
/// rbx the walk's stack reference, r12 the TSC at entry of a timed call (0 for the others).
/// About one record in 256 (`sampled_head`: its ring's head at entry, scrambled, has none
/// of the header's `SAMPLE_MASK` bits set) adds its time here to the header's timed totals,
/// unless it waited for room or was dropped. The others read no clock here: `rdtsc` costs
/// 20-30 ns on some machines.
/// `walk` labels the stack walker it calls (`code_walk`).
pub(super) fn emit_record_routine(
    a: &mut CodeAssembler,
    area: u64,
    cpu: CpuSource,
    walk: &mut CodeLabel,
) -> Emit {
    let mut inner = a.create_label();
    let mut unwalked = a.create_label();
    let mut untimed = a.create_label();
    let mut backwards = a.create_label();
    let mut unsampled = a.create_label();
    a.push(rbx)?;
    a.push(r12)?;
    a.xor(r12d, r12d)?;
    emit_ring_address(a, area, cpu)?;
    a.mov(rax, qword_ptr(rcx + ring::HEAD as i32))?;
    a.mov(rdx, SAMPLE_SCRAMBLE)?;
    a.imul_2(rax, rdx)?;
    a.shr(rax, 56)?;
    a.test(dword_ptr(rdi + header::SAMPLE_MASK as i32), eax)?;
    a.jne(unsampled)?;
    emit_rdtsc(a)?;
    a.mov(r12, rax)?;
    a.set_label(&mut unsampled)?;
    a.xor(ebx, ebx)?;
    a.mov(eax, r8d)?;
    a.and(eax, 0xffff)?;
    for op in Op::ALL.into_iter().filter(|op| !op.walks_stack()) {
        a.cmp(eax, op as i32)?;
        a.je(unwalked)?;
    }
    a.push(r8)?;
    // rsp at the allocator's entry: the caller slot of the hook's frame, three pushes up.
    a.lea(rdi, qword_ptr(rsp + (24 + FRAME_CALLER) as i32))?;
    a.call(*walk)?;
    a.pop(r8)?;
    a.mov(rbx, rax)?;
    // The counts ride in the record's CPU word: lookups << 20 | misses << 8 | ring.
    a.mov(rax, rdx)?;
    a.shr(rax, 32)?;
    a.shl(eax, record::CPU_LOOKUPS_SHIFT)?;
    a.shl(edx, record::CPU_MISSES_SHIFT)?;
    a.or(eax, edx)?;
    a.shl(rax, 32)?;
    a.or(r8, rax)?;
    a.set_label(&mut unwalked)?;
    a.call(inner)?;
    // rax and rcx are the inner routine's answer to a holding hook: kept in r8 and r9.
    a.mov(rdx, area)?;
    emit_mark_mpi_call(a)?;
    a.test(r12, r12)?;
    a.je(untimed)?;
    a.test(rdi, rdi)?;
    a.jne(untimed)?;
    // Dropped (no record): a ring stuck full at a sampled head would time every drop.
    a.test(rcx, rcx)?;
    a.je(untimed)?;
    a.mov(r8, rax)?;
    a.mov(r9, rcx)?;
    emit_rdtsc(a)?;
    a.sub(rax, r12)?;
    // A thread moved to a CPU whose TSC lags: no time to add.
    a.js(backwards)?;
    a.mov(rdx, area)?;
    a.lock().inc(qword_ptr(rdx + header::TIMED_CALLS as i32))?;
    a.lock()
        .add(qword_ptr(rdx + header::TIMED_TICKS as i32), rax)?;
    a.set_label(&mut backwards)?;
    a.mov(rax, r8)?;
    a.mov(rcx, r9)?;
    a.set_label(&mut untimed)?;
    a.pop(r12)?;
    a.pop(rbx)?;
    a.ret()?;
    a.set_label(&mut inner)?;
    emit_inner_routine(a, area, cpu)?;
    a.set_label(walk)?;
    emit_walk_routine(a, area)
}

/// Marks the MPI call this thread has in its slot (`layout::mpi`), if any, as one inside
/// which something was recorded, once any thread has taken a slot. rdx = the area; keeps
/// rax, rcx and rdi.
fn emit_mark_mpi_call(a: &mut CodeAssembler) -> Emit {
    let mut none = a.create_label();
    a.cmp(dword_ptr(rdx + header::MPI_TAKEN as i32), 0)?;
    a.je(none)?;
    a.mov(rsi, qword_ptr(rdx + header::MPI_OFFSET as i32))?;
    a.mov(r10, qword_ptr(0u64).fs())?;
    a.mov(r11, mpi::SLOT_HASH)?;
    a.imul_2(r11, r10)?;
    a.shr(r11, 64 - mpi::SLOT_BITS)?;
    a.shl(r11, mpi::SLOT_BYTES.trailing_zeros())?;
    a.add(r11, rsi)?;
    a.add(r11, rdx)?;
    a.cmp(qword_ptr(r11 + mpi::OWNER as i32), r10)?;
    a.jne(none)?;
    a.cmp(dword_ptr(r11 + mpi::STATE as i32), mpi::IDLE as i32)?;
    a.je(none)?;
    a.mov(dword_ptr(r11 + mpi::DIRTY as i32), 1)?;
    a.set_label(&mut none)
}

/// rax = the TSC (rdx clobbered).
pub(super) fn emit_rdtsc(a: &mut CodeAssembler) -> Emit {
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)
}

/// Claims, writes and publishes, reading the hook's frame `INNER` bytes up.
fn emit_inner_routine(a: &mut CodeAssembler, area: u64, cpu: CpuSource) -> Emit {
    let mut claim = a.create_label();
    let mut full = a.create_label();
    emit_ring_choice(a, area, cpu)?;
    a.xor(edi, edi)?;
    a.set_label(&mut claim)?;
    // The head, THEN the TSC (rdtscp waits for the load): the TSC is then monotonic in
    // claim order within a ring, which the drain's release rule relies on.
    a.mov(r11, qword_ptr(r9 + ring::HEAD as i32))?;
    a.rdtscp()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    a.mov(r10, rax)?;
    a.mov(rax, r11)?;
    a.sub(r11, qword_ptr(r9 + ring::TAIL as i32))?;
    a.cmp(r11, rsi)?;
    a.jae(full)?;
    a.lea(r11, qword_ptr(rax + 1))?;
    a.lock().cmpxchg(qword_ptr(r9 + ring::HEAD as i32), r11)?;
    a.jne(claim)?;
    emit_write(a)?;
    a.set_label(&mut full)?;
    emit_full(a, area, claim)
}

/// rax = the number of the ring this CPU records into, rdi = the area (ecx clobbered).
fn emit_ring_number(a: &mut CodeAssembler, area: u64, cpu: CpuSource) -> Emit {
    match cpu {
        CpuSource::Rseq { offset } => {
            let mut registered = a.create_label();
            a.mov(eax, dword_ptr(offset + 4).fs())?;
            // 0xffff_fffe / 0xffff_ffff: the thread has no rseq registration.
            a.cmp(eax, 0xffff_fff0u32 as i32)?;
            a.jb(registered)?;
            a.xor(eax, eax)?;
            a.set_label(&mut registered)?;
        }
        CpuSource::Rdpid => a.rdpid(rax)?,
        CpuSource::Single => a.xor(eax, eax)?,
    }
    a.mov(rdi, area)?;
    a.mov(ecx, dword_ptr(rdi + header::RING_COUNT as i32))?;
    a.dec(ecx)?;
    a.and(eax, ecx)
}

/// rcx = the ring this CPU records into, rsi = capacity, rdi = the area; rax = its number.
fn emit_ring_address(a: &mut CodeAssembler, area: u64, cpu: CpuSource) -> Emit {
    emit_ring_number(a, area, cpu)?;
    a.mov(rsi, qword_ptr(rdi + header::CAPACITY as i32))?;
    // ring_bytes = (capacity + 1) * RECORD_BYTES (its header is one record's size).
    a.lea(rcx, qword_ptr(rsi + 1))?;
    a.shl(rcx, RECORD_BYTES.trailing_zeros())?;
    a.imul_2(rcx, rax)?;
    a.lea(rcx, qword_ptr(rdi + rcx + AREA_HEADER_BYTES as i32))
}

/// r9 = the ring, rsi = capacity, r8 = op | ring << 32.
fn emit_ring_choice(a: &mut CodeAssembler, area: u64, cpu: CpuSource) -> Emit {
    emit_ring_address(a, area, cpu)?;
    a.mov(r9, rcx)?;
    a.shl(rax, 32)?;
    a.or(r8, rax)
}

/// Index in rax: writes every field, `SEQ` last. With `record::HOLD` in the operation it
/// leaves `SEQ` to the hook: returns the record's address in rcx and its `SEQ` in rax.
fn emit_write(a: &mut CodeAssembler) -> Emit {
    let mut held = a.create_label();
    a.lea(rcx, qword_ptr(rsi - 1))?;
    a.and(rcx, rax)?;
    a.shl(rcx, RECORD_BYTES.trailing_zeros())?;
    a.lea(
        rcx,
        qword_ptr(r9 + rcx + super::layout::RING_HEADER_BYTES as i32),
    )?;
    let field = |offset: u64| qword_ptr(rcx + offset as i32);
    // CF = the hold bit, cleared from the operation; only mov, lea and inc follow, none of
    // which changes CF.
    a.btr(r8, record::HOLD.trailing_zeros())?;
    a.mov(field(record::OP), r8)?;
    a.mov(field(record::TSC), r10)?;
    a.mov(rdx, qword_ptr(0u64).fs())?;
    a.mov(field(record::THREAD), rdx)?;
    a.mov(rdx, qword_ptr(rsp + (INNER + FRAME_CALLER) as i32))?;
    a.mov(field(record::CALLER), rdx)?;
    a.lea(rdx, qword_ptr(rsp + (INNER + FRAME_CALLER) as i32))?;
    a.mov(field(record::STACK_POINTER), rdx)?;
    a.mov(field(record::STACK), rbx)?;
    let copies = [
        (FRAME_RESULT, record::RESULT),
        (FRAME_OUT, record::OUT),
        (FRAME_ENTRY_TSC, record::ENTRY_TSC),
    ];
    for (from, to) in copies {
        a.mov(rdx, qword_ptr(rsp + (INNER + from) as i32))?;
        a.mov(field(to), rdx)?;
    }
    for argument in 0..6u64 {
        a.mov(
            rdx,
            qword_ptr(rsp + (INNER + FRAME_ARGUMENTS + 8 * argument) as i32),
        )?;
        a.mov(field(record::ARGUMENTS + 8 * argument), rdx)?;
    }
    a.inc(rax)?;
    a.jb(held)?;
    a.mov(field(record::SEQ), rax)?;
    a.set_label(&mut held)?;
    a.ret()
}

/// Sleeps on the full ring's `WAKE` word (a shared futex) until the drain frees room or
/// the hooks are switched off (either bumps `WAKE` and wakes the ring), or for the area's
/// sleep bound; to `claim` if the ring has room after all. The producer counts itself in
/// `WAITERS` (a locked instruction, a full barrier) before it reads `WAKE` and then `TAIL`,
/// so either it sees the drain's new `TAIL` or the drain sees it waiting and bumps `WAKE`,
/// which makes the futex wait return at once. Keeps rdi, rsi, r8 and r9.
fn emit_sleep(a: &mut CodeAssembler, area: u64, claim: CodeLabel) -> Emit {
    let mut room = a.create_label();
    let mut awake = a.create_label();
    a.lock().inc(dword_ptr(r9 + ring::WAITERS as i32))?;
    a.mov(r11d, dword_ptr(r9 + ring::WAKE as i32))?;
    a.mov(rax, qword_ptr(r9 + ring::HEAD as i32))?;
    a.sub(rax, qword_ptr(r9 + ring::TAIL as i32))?;
    a.cmp(rax, rsi)?;
    a.jb(room)?;
    a.mov(rdx, area)?;
    a.cmp(dword_ptr(rdx + header::ENABLED as i32), 0)?;
    a.je(awake)?;
    a.lock().inc(qword_ptr(rdx + header::FULL_SLEEPS as i32))?;
    a.push(rdi)?;
    a.push(rsi)?;
    a.push(r8)?;
    a.push(r9)?;
    a.lea(r10, qword_ptr(rdx + header::SLEEP_TIMESPEC as i32))?;
    a.lea(rdi, qword_ptr(r9 + ring::WAKE as i32))?;
    a.mov(esi, FUTEX_WAIT)?;
    a.mov(edx, r11d)?;
    a.xor(r8d, r8d)?;
    a.xor(r9d, r9d)?;
    a.mov(eax, SYS_FUTEX)?;
    // syscall keeps every register but rax, rcx and r11.
    a.syscall()?;
    a.pop(r9)?;
    a.pop(r8)?;
    a.pop(rsi)?;
    a.pop(rdi)?;
    a.set_label(&mut awake)?;
    a.lock().dec(dword_ptr(r9 + ring::WAITERS as i32))?;
    let mut done = a.create_label();
    a.jmp(done)?;
    a.set_label(&mut room)?;
    a.lock().dec(dword_ptr(r9 + ring::WAITERS as i32))?;
    a.jmp(claim)?;
    a.set_label(&mut done)
}

/// The ring is full (rax = head, r10 = now): drop, or wait for room within the limits.
fn emit_full(a: &mut CodeAssembler, area: u64, claim: CodeLabel) -> Emit {
    let mut drop = a.create_label();
    let mut stale = a.create_label();
    let mut round = a.create_label();
    let mut spin = a.create_label();
    a.mov(rdx, area)?;
    a.cmp(dword_ptr(rdx + header::POLICY as i32), POLICY_DROP as i32)?;
    a.je(drop)?;
    a.test(rdi, rdi)?;
    a.jne(round)?;
    a.mov(rdi, r10)?;
    a.lock().inc(qword_ptr(rdx + header::FULL_WAITS as i32))?;
    a.set_label(&mut round)?;
    a.mov(r11d, SPINS_PER_SLEEP)?;
    a.set_label(&mut spin)?;
    a.pause()?;
    a.mov(rax, qword_ptr(r9 + ring::HEAD as i32))?;
    a.sub(rax, qword_ptr(r9 + ring::TAIL as i32))?;
    a.cmp(rax, rsi)?;
    a.jb(claim)?;
    a.dec(r11d)?;
    a.jne(spin)?;
    // Signed differences: a heartbeat a little ahead of this CPU's TSC is not stale.
    emit_rdtsc(a)?;
    a.mov(rdx, area)?;
    a.cmp(dword_ptr(rdx + header::ENABLED as i32), 0)?;
    a.je(drop)?;
    a.mov(rcx, rax)?;
    a.sub(rcx, rdi)?;
    a.cmp(rcx, qword_ptr(rdx + header::WAIT_LIMIT_TICKS as i32))?;
    a.jg(drop)?;
    a.sub(rax, qword_ptr(rdx + header::HEARTBEAT as i32))?;
    a.cmp(rax, qword_ptr(rdx + header::STALE_TICKS as i32))?;
    a.jg(stale)?;
    emit_sleep(a, area, claim)?;
    a.jmp(round)?;
    a.set_label(&mut stale)?;
    a.mov(dword_ptr(rdx + header::ENABLED as i32), 0)?;
    a.set_label(&mut drop)?;
    a.mov(rdx, area)?;
    a.lock().inc(qword_ptr(rdx + header::DROPPED as i32))?;
    // No record: a hook that holds its record publishes nothing.
    a.xor(ecx, ecx)?;
    a.ret()
}
