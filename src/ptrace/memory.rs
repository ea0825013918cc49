//! The process boundary for memory: traits for reading and writing, so the emulator, the
//! probe table, the hot path and their tests never see ptrace. Reads use `process_vm_readv`;
//! code writes use `/proc/PID/mem`, which (unlike process_vm_writev) can write read-only
//! text pages.

use std::fs::File;
use std::io::IoSliceMut;
use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;

use crate::error::{Error, Result};
use crate::proc::status::parse_status_memory;

/// Read access to another address space.
pub trait RemoteMemory {
    /// Fills `buffer` with the bytes at `address`, or fails without partial results.
    fn read(&self, address: u64, buffer: &mut [u8]) -> Result<()>;

    fn read_u64(&self, address: u64) -> Result<u64> {
        let mut bytes = [0u8; 8];
        self.read(address, &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn read_u8(&self, address: u64) -> Result<u8> {
        let mut byte = [0u8; 1];
        self.read(address, &mut byte)?;
        Ok(byte[0])
    }
}

/// Write access too: planting and lifting probes, hijacking return slots.
pub trait RemoteMemoryMut: RemoteMemory {
    /// Writes memory the process itself may write (stack slots).
    fn write_data(&mut self, address: u64, bytes: &[u8]) -> Result<()>;

    /// Writes any page regardless of its protection (code).
    fn write_code(&mut self, address: u64, bytes: &[u8]) -> Result<()>;
}

/// The memory of one traced process, reached through one of its threads.
pub trait TraceeMemory: RemoteMemoryMut {
    /// Goes through thread `tid` (a stopped thread of this process) from now on: once the
    /// main thread has exited, its ID no longer leads to the memory.
    fn use_thread(&mut self, tid: i32);
}

impl<M: RemoteMemory + ?Sized> RemoteMemory for Box<M> {
    fn read(&self, address: u64, buffer: &mut [u8]) -> Result<()> {
        (**self).read(address, buffer)
    }
}

impl<M: RemoteMemoryMut + ?Sized> RemoteMemoryMut for Box<M> {
    fn write_data(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        (**self).write_data(address, bytes)
    }

    fn write_code(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        (**self).write_code(address, bytes)
    }
}

/// A copy of some memory at a known base address: for tests and for offline unwinding.
#[derive(Debug, Clone)]
pub struct SliceMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl SliceMemory {
    /// The byte range of `length` bytes at `address`, when all of them are in the copy.
    fn range(&self, address: u64, length: usize) -> Result<std::ops::Range<usize>> {
        let start = address.checked_sub(self.base).map(|o| o as usize);
        match start {
            Some(start) if start + length <= self.bytes.len() => Ok(start..start + length),
            _ => Err(Error::Memory {
                pid: 0,
                address,
                source: Errno::EFAULT,
            }),
        }
    }

    pub fn contains(&self, address: u64) -> bool {
        self.range(address, 1).is_ok()
    }
}

impl RemoteMemory for SliceMemory {
    fn read(&self, address: u64, buffer: &mut [u8]) -> Result<()> {
        let range = self.range(address, buffer.len())?;
        buffer.copy_from_slice(&self.bytes[range]);
        Ok(())
    }
}

/// A copy has no page protections: code and data are written alike.
impl RemoteMemoryMut for SliceMemory {
    fn write_data(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        let range = self.range(address, bytes.len())?;
        self.bytes[range].copy_from_slice(bytes);
        Ok(())
    }

    fn write_code(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        self.write_data(address, bytes)
    }
}

/// The live memory of a traced process, reached through one of its threads: once the main
/// thread has exited (pthread_exit) its ID no longer leads to the memory, a live thread's does.
pub struct ProcessMemory {
    pid: Pid,
    /// The thread whose ID memory accesses go through.
    thread: Pid,
    /// `/proc/TID/mem` of a thread, opened when memsup meets the image and again for the
    /// thread accesses go through: writes to protected pages go through it, and every access
    /// that `process_vm_readv`/`writev` are refused (a program that made itself non-dumpable,
    /// with memsup lacking CAP_SYS_PTRACE): the kernel checks the file's access when it is
    /// opened, not at each read.
    mem_file: Option<(Pid, File)>,
}

impl ProcessMemory {
    pub fn new(pid: Pid) -> ProcessMemory {
        ProcessMemory {
            pid,
            thread: pid,
            mem_file: open_mem(pid).ok().map(|file| (pid, file)),
        }
    }

    /// The mem file, opened again for the current thread when it can be (an open one keeps
    /// the address space it was opened on, which every thread of the process shares).
    fn mem_file(&mut self) -> Result<&File> {
        if self.mem_file.as_ref().map(|(thread, _)| *thread) != Some(self.thread) {
            match open_mem(self.thread) {
                Ok(file) => self.mem_file = Some((self.thread, file)),
                Err(error) if self.mem_file.is_none() => {
                    return Err(Error::io(format!("/proc/{}/mem", self.thread), error))
                }
                Err(_) => {}
            }
        }
        Ok(&self.mem_file.as_ref().expect("opened above").1)
    }

    fn file_error(&self, address: u64, error: std::io::Error) -> Error {
        let errno = Errno::from_raw(error.raw_os_error().unwrap_or(libc::EIO));
        self.memory_error(address, errno)
    }

    fn memory_error(&self, address: u64, source: Errno) -> Error {
        // A process killed meanwhile answers ESRCH, or EIO once its address space is
        // released: either way it is gone, not a failure of memsup.
        if source == Errno::ESRCH || !has_address_space(self.pid.as_raw()) {
            Error::ProcessGone(self.pid.as_raw())
        } else {
            Error::Memory {
                pid: self.pid.as_raw(),
                address,
                source,
            }
        }
    }
}

/// Whether process `pid` still has its memory: false once it is gone, a zombie, or exiting
/// past the release of its address space (its status then has no memory lines).
fn has_address_space(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/status"))
        .is_ok_and(|status| parse_status_memory(&status).is_some())
}

impl TraceeMemory for ProcessMemory {
    fn use_thread(&mut self, tid: i32) {
        self.thread = Pid::from_raw(tid);
    }
}

impl RemoteMemoryMut for ProcessMemory {
    /// One `process_vm_writev`, or through the mem file when that is refused.
    fn write_data(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        let remote = [RemoteIoVec {
            base: address as usize,
            len: bytes.len(),
        }];
        let local = [std::io::IoSlice::new(bytes)];
        match process_vm_writev(self.thread, &local, &remote) {
            Ok(n) if n == bytes.len() => Ok(()),
            Ok(_) => Err(self.memory_error(address, Errno::EFAULT)),
            Err(Errno::EPERM) if self.mem_file.is_some() => self.write_code(address, bytes),
            Err(errno) => Err(self.memory_error(address, errno)),
        }
    }

    /// Through `/proc/PID/mem`.
    fn write_code(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        let written = self.mem_file()?.write_all_at(bytes, address);
        written.map_err(|error| self.file_error(address, error))
    }
}

impl RemoteMemory for ProcessMemory {
    fn read(&self, address: u64, buffer: &mut [u8]) -> Result<()> {
        let len = buffer.len();
        let remote = [RemoteIoVec {
            base: address as usize,
            len,
        }];
        let mut local = [IoSliceMut::new(buffer)];
        match process_vm_readv(self.thread, &mut local, &remote) {
            Ok(n) if n == len => Ok(()),
            Ok(_) => Err(self.memory_error(address, Errno::EFAULT)),
            Err(Errno::EPERM) => match self.mem_file.as_ref() {
                Some((_, file)) => file
                    .read_exact_at(buffer, address)
                    .map_err(|error| self.file_error(address, error)),
                None => Err(self.memory_error(address, Errno::EPERM)),
            },
            Err(errno) => Err(self.memory_error(address, errno)),
        }
    }
}

/// `/proc/TID/mem`, for reading and writing.
fn open_mem(thread: Pid) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{thread}/mem"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_or_reaped_process_has_no_address_space() {
        assert!(has_address_space(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Until it is reaped the child is a zombie: its memory is already released (and is
        // so a moment before: an exiting process drops its memory, then becomes a zombie).
        let stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !stat().contains(") Z ") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let zombie = stat();
        assert!(zombie.contains(") Z "), "{zombie}");
        assert!(!has_address_space(pid));
        child.wait().unwrap();
        assert!(!has_address_space(pid));
        let error = ProcessMemory::new(Pid::from_raw(pid)).memory_error(0x1000, Errno::EIO);
        assert!(
            matches!(error, Error::ProcessGone(p) if p == pid),
            "{error:?}"
        );
    }
}
