//! Test support: an anonymous read-write-execute mapping to run generated code natively.

use iced_x86::Register;

/// The 16 general-purpose registers in encoding order (rax … r15).
pub const GENERAL_PURPOSE_REGISTERS: [Register; 16] = [
    Register::RAX,
    Register::RCX,
    Register::RDX,
    Register::RBX,
    Register::RSP,
    Register::RBP,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

pub struct ExecutablePages {
    base: *mut u8,
    length: usize,
}

impl ExecutablePages {
    pub fn new(length: usize) -> ExecutablePages {
        // SAFETY: a fresh anonymous mapping, owned by this value and unmapped in drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap of the RWX test pages failed");
        ExecutablePages {
            base: base.cast(),
            length,
        }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    pub fn address(&self, offset: usize) -> u64 {
        self.base as u64 + offset as u64
    }

    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.length);
        // SAFETY: in bounds, checked above; the mapping is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(offset), bytes.len())
        };
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `length` bytes long and readable while self lives.
        unsafe { std::slice::from_raw_parts(self.base, self.length) }
    }
}

impl Drop for ExecutablePages {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping created in new, no longer referenced.
        unsafe { libc::munmap(self.base.cast(), self.length) };
    }
}
