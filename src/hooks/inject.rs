//! The engine's memory in a target, put there by system calls a stopped thread runs on
//! memsup's behalf: a code page within rel32 reach of the functions it serves, and the ring
//! area — a memfd mapped shared in the target and, taken with `pidfd_getfd`, in memsup, so
//! no file name ever exists.

use crate::error::{Error, Result};
use crate::proc::maps::{find_gap, read_maps};
use crate::ptrace::inject::{remote_syscall, RemoteSyscall, PAGE_SIZE};
use crate::ptrace::memory::RemoteMemoryMut;
use crate::ptrace::regs;

/// How far a code page may be from the code it serves (rel32 reach, with margin).
const REACH: u64 = 1 << 30;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const MADV_POPULATE_WRITE: u64 = 23;
/// The memfd's name as `/proc/PID/maps` shows it (`/memfd:memsup-hooks (deleted)`).
const AREA_NAME: &[u8] = b"memsup-hooks\0";

/// memsup's own mapping of a target's area; unmapped when dropped.
#[derive(Debug)]
pub struct LocalMapping {
    pointer: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access goes through atomics or volatile
// reads in `ring`, whichever thread makes it.
unsafe impl Send for LocalMapping {}
unsafe impl Sync for LocalMapping {}

impl LocalMapping {
    pub fn pointer(&self) -> *mut u8 {
        self.pointer
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maps `len` bytes of `fd` shared into memsup.
    fn map(fd: i32, len: usize) -> Result<LocalMapping> {
        // SAFETY: a fresh shared mapping of a file we hold; nothing else uses that range.
        let pointer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if pointer == libc::MAP_FAILED {
            return Err(Error::io(
                "mapping the hook area",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(LocalMapping {
            pointer: pointer.cast(),
            len,
        })
    }
}

impl Drop for LocalMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing refers to it once dropped.
        unsafe { libc::munmap(self.pointer.cast(), self.len) };
    }
}

/// A target's ring area: where the target sees it, and memsup's view of the same pages.
#[derive(Debug)]
pub struct SharedArea {
    pub address: u64,
    pub bytes: u64,
    pub local: LocalMapping,
}

/// Runs system calls in one stopped thread of a target, through a `syscall; int3` stub.
pub struct Injector<'a> {
    pub memory: &'a mut dyn RemoteMemoryMut,
    pub pid: i32,
    pub tid: i32,
    pub stub: u64,
    /// Signals that arrived meanwhile, for the caller to deliver.
    pub signals: Vec<i32>,
}

impl Injector<'_> {
    pub fn call(&mut self, number: i64, args: [u64; 6]) -> Result<i64> {
        let call = RemoteSyscall {
            number: number as u64,
            args,
        };
        let (result, mut signals) =
            remote_syscall(&mut *self.memory, self.tid, Some(self.stub), &call)?;
        self.signals.append(&mut signals);
        Ok(result)
    }

    fn checked(&mut self, what: &str, number: i64, args: [u64; 6]) -> Result<u64> {
        let result = self.call(number, args)?;
        if (-4095..0).contains(&result) {
            return Err(Error::Internal(format!(
                "{what} in process {} failed: {}",
                self.pid,
                std::io::Error::from_raw_os_error(-result as i32)
            )));
        }
        Ok(result as u64)
    }

    /// Maps `bytes` of read+execute memory within rel32 reach of `anchor`, or fails.
    pub fn map_code(&mut self, anchor: u64, bytes: u64) -> Result<u64> {
        let maps = read_maps(self.pid).map_err(|e| Error::io("/proc/PID/maps", e))?;
        let address = find_gap(&maps, anchor, bytes, REACH)
            .ok_or_else(|| Error::Internal(format!("no free gap within reach of {anchor:#x}")))?;
        let protection = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64 | MAP_FIXED_NOREPLACE;
        let args = [address, bytes, protection, flags, u64::MAX, 0];
        let mapped = self.checked("mapping the hook code", libc::SYS_mmap, args)?;
        if mapped != address {
            // A kernel without MAP_FIXED_NOREPLACE treats it as a hint.
            let _ = self.call(libc::SYS_munmap, [mapped, bytes, 0, 0, 0, 0]);
            return Err(Error::Internal(format!(
                "the hook code landed at {mapped:#x}, not {address:#x}"
            )));
        }
        Ok(address)
    }

    /// Creates a ring area of `bytes` in the target and maps it into memsup too, its first
    /// `populated` bytes (header and rings, which every hook touches) backed at once. With
    /// `at`, the area replaces whatever is mapped there (a fork child's copy of its parent's).
    pub fn create_area(
        &mut self,
        bytes: u64,
        populated: u64,
        at: Option<u64>,
    ) -> Result<SharedArea> {
        let name = self.scratch_string(AREA_NAME)?;
        let fd = self.checked(
            "memfd_create",
            libc::SYS_memfd_create,
            [name, libc::MFD_CLOEXEC as u64, 0, 0, 0, 0],
        )?;
        let outcome = self.map_area(fd, bytes, populated, at);
        let _ = self.call(libc::SYS_close, [fd, 0, 0, 0, 0, 0]);
        outcome
    }

    fn map_area(
        &mut self,
        fd: u64,
        bytes: u64,
        populated: u64,
        at: Option<u64>,
    ) -> Result<SharedArea> {
        let taken = take_fd(self.pid, fd as i32)?;
        // Sized by memsup, not by the target: an ftruncate past the target's file-size limit
        // (RLIMIT_FSIZE) would send it SIGXFSZ. memsup's own limit is weighed before
        // (`hooks::budget`).
        // SAFETY: ftruncate of a descriptor memsup holds.
        if unsafe { libc::ftruncate(taken.0, bytes as libc::off_t) } != 0 {
            return Err(Error::io(
                "sizing the hook area",
                std::io::Error::last_os_error(),
            ));
        }
        let local = LocalMapping::map(taken.0, bytes as usize)?;
        let protection = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let mut flags = libc::MAP_SHARED as u64;
        if at.is_some() {
            flags |= libc::MAP_FIXED as u64;
        }
        let args = [at.unwrap_or(0), bytes, protection, flags, fd, 0];
        let address = self.checked("mapping the hook area", libc::SYS_mmap, args)?;
        // Best effort (Linux 5.14): without it the rings fault in on first use.
        let _ = self.call(
            libc::SYS_madvise,
            [address, populated, MADV_POPULATE_WRITE, 0, 0, 0],
        );
        Ok(SharedArea {
            address,
            bytes,
            local,
        })
    }

    pub fn unmap(&mut self, address: u64, bytes: u64) -> Result<()> {
        self.checked("munmap", libc::SYS_munmap, [address, bytes, 0, 0, 0, 0])?;
        Ok(())
    }

    /// Puts a short string below the stopped thread's red zone, where nothing lives while
    /// it is stopped, for a system call to read.
    fn scratch_string(&mut self, text: &[u8]) -> Result<u64> {
        let rsp = regs::get_registers(self.tid)?.rsp;
        let address = (rsp - 1024) & !15;
        self.memory.write_data(address, text)?;
        Ok(address)
    }
}

/// A file descriptor of memsup's own, closed when dropped.
struct OwnedFd(i32);

impl Drop for OwnedFd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.0) };
    }
}

/// memsup's duplicate of the target's descriptor `fd` (pidfd_getfd: the same open file, no
/// name needed; ptrace access is what it requires).
fn take_fd(pid: i32, fd: i32) -> Result<OwnedFd> {
    let failure = |what: &str| Error::io(what.to_string(), std::io::Error::last_os_error());
    // SAFETY: plain system calls on integers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(failure("pidfd_open"));
    }
    let pidfd = OwnedFd(pidfd as i32);
    // SAFETY: as above.
    let local = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.0, fd, 0) };
    if local < 0 {
        return Err(failure("pidfd_getfd"));
    }
    Ok(OwnedFd(local as i32))
}

/// Pages needed for `bytes`.
pub fn page_align(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_SIZE) * PAGE_SIZE
}
