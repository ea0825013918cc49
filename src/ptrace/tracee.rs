//! The boundary the event handlers act through: a stopped thread's registers, its resumption,
//! and its process's memory. `Ptrace` is the real one; tests put a fake in its place, so the
//! hot path runs on tables without a process.

use std::ops::Range;

use libc::user_regs_struct;

use crate::error::Result;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::ptrace::memory::{ProcessMemory, TraceeMemory};
use crate::ptrace::regs;

/// What a handler may ask of the threads it supervises.
pub trait Tracee {
    fn registers(&mut self, tid: i32) -> Result<user_regs_struct>;

    fn set_registers(&mut self, tid: i32, registers: &user_regs_struct) -> Result<()>;

    /// Lets the thread run, delivering `signal` (0 for none).
    fn resume(&mut self, tid: i32, signal: i32) -> Result<()>;

    /// Lets the thread run to its next system call stop.
    fn resume_to_syscall(&mut self, tid: i32, signal: i32) -> Result<()>;

    /// Leaves a group-stopped thread stopped, to report SIGCONT.
    fn listen(&mut self, tid: i32) -> Result<()>;

    /// Sends `signal` to thread `tid` of process `pid` (tgkill); a thread already gone is
    /// not an error.
    fn signal_thread(&mut self, pid: i32, tid: i32, signal: i32);

    /// The value a ptrace event stop carries (a clone or fork's new thread ID).
    fn event_message(&mut self, tid: i32) -> Result<u64>;

    /// Up to `length` bytes of thread `tid`'s memory from `address`: what could be read of
    /// them (a stack copy may run into an unmapped page), None when nothing could.
    fn read_partial(&mut self, tid: i32, address: u64, length: usize) -> Option<Vec<u8>>;

    /// The mapping that holds `address` in thread `tid`'s address space.
    fn mapping_containing(&mut self, tid: i32, address: u64) -> Option<Range<u64>>;

    /// The memory of process `pid` (a new process, or a new image after exec).
    fn open_memory(&mut self, pid: i32) -> Box<dyn TraceeMemory>;
}

/// Threads traced with ptrace by this thread.
#[derive(Debug, Default)]
pub struct Ptrace;

impl Tracee for Ptrace {
    fn registers(&mut self, tid: i32) -> Result<user_regs_struct> {
        regs::get_registers(tid)
    }

    fn set_registers(&mut self, tid: i32, registers: &user_regs_struct) -> Result<()> {
        regs::set_registers(tid, registers)
    }

    fn resume(&mut self, tid: i32, signal: i32) -> Result<()> {
        regs::resume(tid, signal)
    }

    fn resume_to_syscall(&mut self, tid: i32, signal: i32) -> Result<()> {
        regs::resume_to_syscall(tid, signal)
    }

    fn listen(&mut self, tid: i32) -> Result<()> {
        regs::listen(tid)
    }

    fn signal_thread(&mut self, pid: i32, tid: i32, signal: i32) {
        // SAFETY: tgkill has no memory effects.
        unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) };
    }

    fn event_message(&mut self, tid: i32) -> Result<u64> {
        regs::event_message(tid)
    }

    fn read_partial(&mut self, tid: i32, address: u64, length: usize) -> Option<Vec<u8>> {
        read_stack(tid, address, length)
    }

    fn mapping_containing(&mut self, tid: i32, address: u64) -> Option<Range<u64>> {
        let maps = read_maps(tid).ok()?;
        mapping_containing(&maps, address).map(|m| m.start..m.end)
    }

    fn open_memory(&mut self, pid: i32) -> Box<dyn TraceeMemory> {
        Box::new(ProcessMemory::new(nix::unistd::Pid::from_raw(pid)))
    }
}

/// `length` bytes of thread `tid`'s memory from `address`, or what could be read of them.
fn read_stack(tid: i32, address: u64, length: usize) -> Option<Vec<u8>> {
    let mut buffer: Vec<u8> = Vec::with_capacity(length);
    let local = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: length,
    };
    let remote = libc::iovec {
        iov_base: address as *mut libc::c_void,
        iov_len: length,
    };
    // SAFETY: the local iovec covers exactly the buffer's capacity; the kernel writes at
    // most `length` bytes and returns how many, which is all `set_len` exposes.
    let read = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if read <= 0 {
        return None;
    }
    // SAFETY: the kernel initialised the first `read` bytes.
    unsafe { buffer.set_len(read as usize) };
    Some(buffer)
}
