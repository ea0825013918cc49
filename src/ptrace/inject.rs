//! Remote system calls and the scratch page: the only memory memsup adds to a tracee.
//!
//! Page layout: `SCRATCH_MAGIC`, the return trampoline (one int3 that every hijacked return address points
//! at), out-of-line instruction slots, and at the end the stub later remote calls run from
//! (`stub`). The rest is int3 so a stray jump traps instead of running garbage.

use libc::user_regs_struct;

use crate::error::{Error, Result};
use crate::proc::maps::{find_gap, read_maps};
use crate::ptrace::memory::RemoteMemoryMut;
use crate::ptrace::regs;
use crate::ptrace::seccomp_judge;
use crate::ptrace::stop::{hand_back, wait_for_thread_until, Deadline, Stop, STOP_TIMEOUT};
use crate::ptrace::stub::{resume_point, stub_code, STUB_BYTES, SYSCALL};

pub const PAGE_SIZE: u64 = 4096;
/// `MEMSUPSC`, little-endian: the first 8 bytes of a scratch page (never executed), so a
/// later memsup can tell one that a dead memsup left.
pub const SCRATCH_MAGIC: u64 = u64::from_le_bytes(*b"MEMSUPSC");
/// The remote-call stub, at the page's end.
const STUB_OFFSET: u64 = PAGE_SIZE - STUB_BYTES;
const TRAMPOLINE_OFFSET: u64 = 16;
const FIRST_SLOT_OFFSET: u64 = 64;
pub const SLOT_SIZE: u64 = 32;
/// How far a scratch page may be from the code it serves (rel32 reach, with margin).
const REACH: u64 = 1 << 30;

/// A system call run by a stopped tracee thread on memsup's behalf.
pub struct RemoteSyscall {
    pub number: u64,
    pub args: [u64; 6],
}

/// Runs `call` in thread `tid` (stopped), from `stub` (the scratch page's stub area, written
/// for this thread first: see `stub`) or, with no page yet, from a `syscall` written over the
/// current instruction and put back. The result is taken at the syscall-exit stop, so no
/// int3 is ever executed. The thread may be stopped between instructions or inside an
/// interrupted system call: it runs the call with no restart state (see `call_registers`),
/// then gets its registers back, an interrupted call set to restart (`resume_point`).
/// Signals that arrive meanwhile are returned for the caller to deliver.
pub fn remote_syscall(
    memory: &mut dyn RemoteMemoryMut,
    tid: i32,
    stub: Option<u64>,
    call: &RemoteSyscall,
) -> Result<(i64, Vec<i32>)> {
    let original = regs::get_registers(tid)?;
    let code_address = stub.unwrap_or(original.rip);
    seccomp_judge::check(tid, call, code_address)?;
    let saved_code = match stub {
        Some(stub) => {
            memory.write_code(stub, &stub_code(&original))?;
            None
        }
        None => {
            let mut bytes = [0u8; SYSCALL.len()];
            memory.read(code_address, &mut bytes)?;
            memory.write_code(code_address, &SYSCALL)?;
            Some(bytes)
        }
    };
    let call_regs = call_registers(&original, code_address, call);
    let outcome = run_until_syscall_exit(tid, code_address, &call_regs)
        .and_then(|signals| Ok((regs::get_registers(tid)?.rax as i64, signals)));
    // Registers first. The thread is at our call's exit stop, past the kernel's restart
    // logic: one interrupted in a system call goes back over its `syscall` with the call's
    // number, as that logic would have sent it (`resume_point`).
    let mut resumed = original;
    (resumed.rip, resumed.rax) = resume_point(&original);
    let restored = regs::set_registers(tid, &resumed);
    if let Some(bytes) = saved_code {
        memory.write_code(code_address, &bytes)?;
    }
    restored?;
    outcome
}

/// The registers that run `call` at `code_address` from the state `original`. orig_rax is -1:
/// the call starts from user mode, and no restart logic of an interrupted system call applies
/// to it on resume (the kernel restarts only when orig_rax >= 0 and rax is -ERESTART*).
pub fn call_registers(
    original: &user_regs_struct,
    code_address: u64,
    call: &RemoteSyscall,
) -> user_regs_struct {
    let mut call_regs = *original;
    call_regs.rip = code_address;
    call_regs.rax = call.number;
    call_regs.orig_rax = u64::MAX;
    call_regs.rdi = call.args[0];
    call_regs.rsi = call.args[1];
    call_regs.rdx = call.args[2];
    call_regs.r10 = call.args[3];
    call_regs.r8 = call.args[4];
    call_regs.r9 = call.args[5];
    call_regs
}

/// The thread to run remote system calls from, among stopped threads and their registers:
/// one running user code if any (nothing to preserve), else one interrupted inside a system
/// call. Never one whose rip is in `avoid` (the scratch page about to be unmapped: the stub
/// written at its rip would vanish under it).
pub fn choose_injector(
    candidates: &[(i32, user_regs_struct)],
    avoid: Option<&ScratchPage>,
) -> Option<i32> {
    let usable = || {
        candidates
            .iter()
            .filter(move |(_, registers)| !avoid.is_some_and(|page| page.contains(registers.rip)))
    };
    usable()
        .find(|(_, registers)| !in_system_call(registers))
        .or_else(|| usable().next())
        .map(|(tid, _)| *tid)
}

/// Whether the thread stopped inside a system call (its number kept in orig_rax).
pub fn in_system_call(registers: &user_regs_struct) -> bool {
    (registers.orig_rax as i64) >= 0
}

/// `choose_injector` over live threads: those whose registers can be read (not zombies).
pub fn choose_live_injector(tids: &[i32], avoid: Option<&ScratchPage>) -> Option<i32> {
    let candidates: Vec<(i32, user_regs_struct)> = tids
        .iter()
        .filter_map(|&tid| regs::get_registers(tid).ok().map(|r| (tid, r)))
        .collect();
    choose_injector(&candidates, avoid)
}

/// Runs the thread through the `syscall` at `code_address` to its syscall-exit stop. A
/// syscall stop before ours is the exit of the call the thread was stopped inside (an exec
/// or clone event): that call's return wrote rax, so the call's registers are set again.
fn run_until_syscall_exit(
    tid: i32,
    code_address: u64,
    call_regs: &user_regs_struct,
) -> Result<Vec<i32>> {
    let mut deferred_signals = Vec::new();
    let mut entered = false;
    // A system call of ours that never ends must not hold memsup (and an attach) forever.
    let deadline = Deadline::after(STOP_TIMEOUT);
    regs::set_registers(tid, call_regs)?;
    regs::resume_to_syscall(tid, 0)?;
    loop {
        let status = wait_for_thread_until(tid, &deadline)
            .map_err(|failure| failure.into_error(tid, &deadline, "running a system call in it"))?;
        match Stop::from_wait_status(status) {
            Some(Stop::Syscall { .. }) if entered => return Ok(deferred_signals),
            Some(Stop::Syscall { .. }) => {
                let now = regs::get_registers(tid)?;
                let ours =
                    now.rip == code_address + SYSCALL.len() as u64 && now.orig_rax == call_regs.rax;
                if ours {
                    entered = true;
                } else {
                    regs::set_registers(tid, call_regs)?;
                }
                regs::resume_to_syscall(tid, 0)?;
            }
            // A fault in our own stub would repeat forever, and a SIGTRAP here is an int3
            // probe's: give up (the caller restores the registers).
            Some(Stop::Signal { signal, .. })
                if [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGTRAP].contains(&signal) =>
            {
                return Err(Error::Internal(format!(
                    "signal {signal} while running a system call in thread {tid}"
                )));
            }
            Some(Stop::Signal { signal, .. }) => {
                deferred_signals.push(signal);
                regs::resume_to_syscall(tid, 0)?;
            }
            // Our own call passing through the seccomp filter, or another event.
            Some(Stop::Event { .. }) => regs::resume_to_syscall(tid, 0)?,
            Some(end @ (Stop::Exited { .. } | Stop::Killed { .. })) => {
                // Reaped here, recorded by the event loop.
                hand_back(end);
                return Err(Error::ProcessGone(tid));
            }
            None => {}
        }
    }
}

/// The page memsup maps into a tracee.
#[derive(Debug, Clone)]
pub struct ScratchPage {
    pub base: u64,
    next_slot: u64,
    /// (slot address, original address, relocated length, original length)
    slots: Vec<(u64, u64, u64, u64)>,
}

impl ScratchPage {
    /// Maps a page within rel32 reach of `anchor` when a gap allows, and fills it. The
    /// mapping call runs from `room` (`padding::stub_room`, put back after) when there is
    /// one, else from a `syscall` written over the thread's current instruction.
    pub fn create(
        memory: &mut dyn RemoteMemoryMut,
        pid: i32,
        tid: i32,
        anchor: u64,
        room: Option<u64>,
    ) -> Result<(ScratchPage, Vec<i32>)> {
        let maps = read_maps(pid).map_err(|error| Error::maps_read(pid, error))?;
        let hint = find_gap(&maps, anchor, PAGE_SIZE, REACH);
        let mut saved = vec![0u8; STUB_BYTES as usize];
        let room = room.filter(|&address| memory.read(address, &mut saved).is_ok());
        let mapped = map_page(memory, tid, hint, room);
        if let Some(address) = room {
            memory.write_code(address, &saved)?;
        }
        let (base, signals) = mapped?;
        let mut page = vec![0xccu8; PAGE_SIZE as usize];
        page[..8].copy_from_slice(&SCRATCH_MAGIC.to_le_bytes());
        memory.write_code(base, &page)?;
        let scratch = ScratchPage {
            base,
            next_slot: base + FIRST_SLOT_OFFSET,
            slots: Vec::new(),
        };
        Ok((scratch, signals))
    }

    /// A page already at `base`, for tables tested without a process.
    #[cfg(test)]
    pub fn at(base: u64) -> ScratchPage {
        ScratchPage {
            base,
            next_slot: base + FIRST_SLOT_OFFSET,
            slots: Vec::new(),
        }
    }

    /// Where later remote calls run from (`stub`).
    pub fn syscall_stub(&self) -> u64 {
        self.base + STUB_OFFSET
    }

    /// The int3 every hijacked return address points at.
    pub fn trampoline(&self) -> u64 {
        self.base + TRAMPOLINE_OFFSET
    }

    pub fn contains(&self, address: u64) -> bool {
        (self.base..self.base + PAGE_SIZE).contains(&address)
    }

    /// Address the next out-of-line slot would get, if the page has room.
    pub fn next_slot(&self) -> Option<u64> {
        (self.next_slot + SLOT_SIZE <= self.base + STUB_OFFSET).then_some(self.next_slot)
    }

    /// Writes relocated code into the next slot.
    pub fn fill_slot(
        &mut self,
        memory: &mut dyn RemoteMemoryMut,
        code: &[u8],
        original: u64,
        original_length: u64,
    ) -> Result<u64> {
        let slot = self
            .next_slot()
            .ok_or_else(|| Error::Internal("scratch page full".into()))?;
        if code.len() as u64 > SLOT_SIZE {
            return Err(Error::Internal(
                "relocated instruction too long for a slot".into(),
            ));
        }
        memory.write_code(slot, code)?;
        self.slots
            .push((slot, original, code.len() as u64, original_length));
        self.next_slot += SLOT_SIZE;
        Ok(slot)
    }

    /// Where a thread stopped inside a slot should continue in the original code.
    pub fn original_address_for(&self, rip: u64) -> Option<u64> {
        self.slots
            .iter()
            .find_map(|&(slot, original, relocated_length, original_length)| {
                if rip == slot {
                    Some(original)
                } else if rip > slot && rip < slot + SLOT_SIZE {
                    // Past the relocated instruction, at or in the jump back.
                    let _ = relocated_length;
                    Some(original + original_length)
                } else {
                    None
                }
            })
    }
}

fn map_page(
    memory: &mut dyn RemoteMemoryMut,
    tid: i32,
    hint: Option<u64>,
    stub: Option<u64>,
) -> Result<(u64, Vec<i32>)> {
    const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
    let protection = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    let private_anonymous = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    let mut signals = Vec::new();
    if let Some(address) = hint {
        let call = RemoteSyscall {
            number: libc::SYS_mmap as u64,
            args: [
                address,
                PAGE_SIZE,
                protection,
                private_anonymous | MAP_FIXED_NOREPLACE,
                u64::MAX,
                0,
            ],
        };
        let (result, mut pending) = remote_syscall(memory, tid, stub, &call)?;
        signals.append(&mut pending);
        if result as u64 == address {
            return Ok((address, signals));
        }
    }
    let call = RemoteSyscall {
        number: libc::SYS_mmap as u64,
        args: [0, PAGE_SIZE, protection, private_anonymous, u64::MAX, 0],
    };
    let (result, mut pending) = remote_syscall(memory, tid, stub, &call)?;
    signals.append(&mut pending);
    if (-4095..0).contains(&result) {
        return Err(Error::Internal(format!(
            "mapping the scratch page failed: errno {}",
            -result
        )));
    }
    Ok((result as u64, signals))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registers of a thread interrupted in read(2): orig_rax 0, rax -ERESTARTSYS, rip just
    /// after its `syscall` instruction.
    fn interrupted_read(rip: u64) -> user_regs_struct {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut registers: user_regs_struct = unsafe { std::mem::zeroed() };
        registers.orig_rax = 0;
        registers.rax = (-512i64) as u64;
        registers.rip = rip;
        registers.rsp = 0x7ffd_0000_1000;
        registers.rbx = 0x1234;
        registers.rdi = 7;
        registers
    }

    fn running(rip: u64) -> user_regs_struct {
        let mut registers = interrupted_read(rip);
        registers.orig_rax = u64::MAX;
        registers.rax = 42;
        registers
    }

    fn page_at(base: u64) -> ScratchPage {
        ScratchPage {
            base,
            next_slot: base + FIRST_SLOT_OFFSET,
            slots: Vec::new(),
        }
    }

    #[test]
    fn a_call_runs_with_no_restart_state_and_its_arguments_in_the_syscall_registers() {
        let original = interrupted_read(0x40_1002);
        let call = RemoteSyscall {
            number: libc::SYS_munmap as u64,
            args: [0x7000_0000, 4096, 3, 4, 5, 6],
        };
        let registers = call_registers(&original, 0x40_1002, &call);
        assert_eq!(registers.orig_rax, u64::MAX);
        assert_eq!(registers.rax, libc::SYS_munmap as u64);
        assert_eq!(registers.rip, 0x40_1002);
        let arguments = [
            registers.rdi,
            registers.rsi,
            registers.rdx,
            registers.r10,
            registers.r8,
            registers.r9,
        ];
        assert_eq!(arguments, [0x7000_0000, 4096, 3, 4, 5, 6]);
        // Everything else is the thread's own.
        assert_eq!(registers.rsp, original.rsp);
        assert_eq!(registers.rbx, original.rbx);
        assert_eq!(registers.eflags, original.eflags);
    }

    #[test]
    fn orig_rax_tells_an_interrupted_system_call() {
        assert!(in_system_call(&interrupted_read(0x1000)));
        assert!(!in_system_call(&running(0x1000)));
    }

    #[test]
    fn the_injector_prefers_a_running_thread_and_else_takes_one_in_a_system_call() {
        let mixed = [(11, interrupted_read(0x1000)), (12, running(0x2000))];
        assert_eq!(choose_injector(&mixed, None), Some(12));
        let all_in_calls = [
            (11, interrupted_read(0x1000)),
            (12, interrupted_read(0x2000)),
        ];
        assert_eq!(choose_injector(&all_in_calls, None), Some(11));
        assert_eq!(choose_injector(&[], None), None);
    }

    #[test]
    fn the_injector_is_never_a_thread_inside_the_page_being_unmapped() {
        let page = page_at(0x7000_0000);
        let threads = [
            (11, running(0x7000_0010)),
            (12, interrupted_read(0x7000_0fff)),
            (13, interrupted_read(0x40_1002)),
        ];
        assert_eq!(choose_injector(&threads, Some(&page)), Some(13));
        assert_eq!(choose_injector(&threads[..2], Some(&page)), None);
        // Just past the page is outside it.
        let after = [(14, running(0x7000_1000))];
        assert_eq!(choose_injector(&after, Some(&page)), Some(14));
    }
}
