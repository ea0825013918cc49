//! Remote system calls and the scratch page: the only memory memsup adds to a tracee.
//!
//! Page layout: a `syscall; int3` stub for later remote calls, the return trampoline (one
//! int3 that every hijacked return address points at), then out-of-line instruction slots.
//! The rest is int3 so a stray jump traps instead of running garbage.

use libc::user_regs_struct;

use crate::error::{Error, Result};
use crate::proc::maps::{find_gap, read_maps};
use crate::ptrace::memory::{ProcessMemory, RemoteMemory};
use crate::ptrace::regs;
use crate::ptrace::stop::{wait_for_thread_until, Deadline, Event, Stop, STOP_TIMEOUT};

pub const PAGE_SIZE: u64 = 4096;
const SYSCALL_INT3: [u8; 3] = [0x0f, 0x05, 0xcc];
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

/// Runs `call` in thread `tid` (stopped), at `stub` (a `syscall; int3` already in the tracee)
/// or, with no stub yet, by writing one over the current instruction and putting it back.
/// Signals that arrive meanwhile are returned for the caller to deliver later.
pub fn remote_syscall(
    memory: &mut ProcessMemory,
    tid: i32,
    stub: Option<u64>,
    call: &RemoteSyscall,
) -> Result<(i64, Vec<i32>)> {
    let original = regs::get_registers(tid)?;
    let mut saved_code = None;
    let code_address = match stub {
        Some(address) => address,
        None => {
            let mut bytes = [0u8; 3];
            memory.read(original.rip, &mut bytes)?;
            memory.write_code(original.rip, &SYSCALL_INT3)?;
            saved_code = Some(bytes);
            original.rip
        }
    };
    let mut call_regs: user_regs_struct = original;
    call_regs.rip = code_address;
    call_regs.rax = call.number;
    call_regs.orig_rax = u64::MAX; // not inside a syscall: no restart logic on resume
    call_regs.rdi = call.args[0];
    call_regs.rsi = call.args[1];
    call_regs.rdx = call.args[2];
    call_regs.r10 = call.args[3];
    call_regs.r8 = call.args[4];
    call_regs.r9 = call.args[5];
    regs::set_registers(tid, &call_regs)?;
    let outcome = run_until_trap(tid);
    let result = outcome.and_then(|signals| Ok((regs::get_registers(tid)?.rax as i64, signals)));
    if let Some(bytes) = saved_code {
        memory.write_code(code_address, &bytes)?;
    }
    regs::set_registers(tid, &original)?;
    result
}

fn run_until_trap(tid: i32) -> Result<Vec<i32>> {
    let mut deferred_signals = Vec::new();
    // A system call of ours that never ends must not hold memsup (and an attach) forever.
    let deadline = Deadline::after(STOP_TIMEOUT);
    regs::resume(tid, 0)?;
    loop {
        let status = wait_for_thread_until(tid, &deadline)
            .map_err(|failure| failure.into_error(tid, &deadline, "running a system call in it"))?;
        match Stop::from_wait_status(status) {
            Some(Stop::Signal { signal, .. }) if signal == libc::SIGTRAP => {
                return Ok(deferred_signals)
            }
            // A fault in our own stub would repeat forever: give up (the caller restores).
            Some(Stop::Signal { signal, .. })
                if [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL].contains(&signal) =>
            {
                return Err(Error::Internal(format!(
                    "signal {signal} while running a system call in thread {tid}"
                )));
            }
            Some(Stop::Signal { signal, .. }) => {
                deferred_signals.push(signal);
                regs::resume(tid, 0)?;
            }
            // Our own call passing through the seccomp filter, or a syscall stop.
            Some(Stop::Event {
                event: Event::Seccomp,
                ..
            })
            | Some(Stop::Syscall { .. }) => regs::resume(tid, 0)?,
            Some(Stop::Event { .. }) => regs::resume(tid, 0)?,
            Some(Stop::Exited { .. }) | Some(Stop::Killed { .. }) => {
                return Err(Error::ProcessGone(tid))
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
    /// Maps a page within rel32 reach of `anchor` when a gap allows, and fills it.
    pub fn create(
        memory: &mut ProcessMemory,
        tid: i32,
        anchor: u64,
    ) -> Result<(ScratchPage, Vec<i32>)> {
        let pid = memory.pid().as_raw();
        let maps = read_maps(pid).map_err(|e| Error::io(format!("/proc/{pid}/maps"), e))?;
        let hint = find_gap(&maps, anchor, PAGE_SIZE, REACH);
        let (base, signals) = map_page(memory, tid, hint)?;
        let mut page = vec![0xccu8; PAGE_SIZE as usize];
        page[..3].copy_from_slice(&SYSCALL_INT3);
        memory.write_code(base, &page)?;
        let scratch = ScratchPage {
            base,
            next_slot: base + FIRST_SLOT_OFFSET,
            slots: Vec::new(),
        };
        Ok((scratch, signals))
    }

    /// The `syscall; int3` stub for later remote calls.
    pub fn syscall_stub(&self) -> u64 {
        self.base
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
        (self.next_slot + SLOT_SIZE <= self.base + PAGE_SIZE).then_some(self.next_slot)
    }

    /// Writes relocated code into the next slot.
    pub fn fill_slot(
        &mut self,
        memory: &mut ProcessMemory,
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

fn map_page(memory: &mut ProcessMemory, tid: i32, hint: Option<u64>) -> Result<(u64, Vec<i32>)> {
    const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
    let protection = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    let private_anonymous = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    // The first call run from a stop at PTRACE_EVENT_EXEC sees argument registers other than
    // the ones set (mmap with MAP_ANONYMOUS failed with EBADF); a harmless call first.
    let getpid = RemoteSyscall {
        number: libc::SYS_getpid as u64,
        args: [0; 6],
    };
    let (_, mut signals) = remote_syscall(memory, tid, None, &getpid)?;
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
        let (result, mut pending) = remote_syscall(memory, tid, None, &call)?;
        signals.append(&mut pending);
        if result as u64 == address {
            return Ok((address, signals));
        }
    }
    let call = RemoteSyscall {
        number: libc::SYS_mmap as u64,
        args: [0, PAGE_SIZE, protection, private_anonymous, u64::MAX, 0],
    };
    let (result, mut pending) = remote_syscall(memory, tid, None, &call)?;
    signals.append(&mut pending);
    if (-4095..0).contains(&result) {
        return Err(Error::Internal(format!(
            "mapping the scratch page failed: errno {}",
            -result
        )));
    }
    Ok((result as u64, signals))
}
