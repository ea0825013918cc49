//! Reads the stopped process's memory in large windows, so that walking millions of chunk
//! headers costs one `process_vm_readv` per 4 MiB rather than one per header. A window
//! stops at the first page that is not resident: reading a page the process never touched
//! would map one (a zero page; a swapped page would be read back in).

use super::residency::Pages;
use crate::ptrace::memory::RemoteMemory;

const WINDOW: u64 = 4 << 20;

pub struct WindowReader<'a> {
    memory: &'a dyn RemoteMemory,
    /// The range the window may cover: reads never reach past it.
    limit: (u64, u64),
    start: u64,
    bytes: Vec<u8>,
    /// The resident pages of the limit's range, when known.
    pages: Option<Pages>,
    pid: i32,
    /// Bytes copied from the process, for the cost line.
    pub copied: u64,
}

impl<'a> WindowReader<'a> {
    pub fn new(memory: &'a dyn RemoteMemory, pid: i32) -> WindowReader<'a> {
        WindowReader {
            memory,
            limit: (0, u64::MAX),
            start: 0,
            bytes: Vec::new(),
            pages: None,
            pid,
            copied: 0,
        }
    }

    /// The process read.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Windows stay within `[start, end)` (one heap), and within its resident `pages`, from
    /// now on.
    pub fn limit_to(&mut self, start: u64, end: u64, pages: Option<Pages>) {
        self.limit = (start, end);
        self.pages = pages;
        self.bytes.clear();
    }

    /// The 8 bytes at `address`, from the window or a new one; None when unreadable or
    /// outside the limit.
    pub fn u64_at(&mut self, address: u64) -> Option<u64> {
        let end = address.checked_add(8)?;
        if address < self.limit.0 || end > self.limit.1 {
            return self.read_single(address);
        }
        let in_window = address >= self.start && end <= self.start + self.bytes.len() as u64;
        if !in_window {
            let mut length = WINDOW.min(self.limit.1 - address);
            if let Some(pages) = &self.pages {
                length = pages.resident_run(address, length).max(8);
            }
            self.bytes.resize(length as usize, 0);
            if self.memory.read(address, &mut self.bytes).is_err() {
                self.bytes.clear();
                return None;
            }
            self.start = address;
            self.copied += length;
        }
        let offset = (address - self.start) as usize;
        let word: [u8; 8] = self.bytes[offset..offset + 8].try_into().ok()?;
        Some(u64::from_le_bytes(word))
    }

    /// One word outside the current heap (a list link, a structure field).
    pub fn read_single(&mut self, address: u64) -> Option<u64> {
        self.copied += 8;
        self.memory.read_u64(address).ok()
    }

    /// `length` bytes at `address`, in one read.
    pub fn read_bytes(&mut self, address: u64, length: usize) -> Option<Vec<u8>> {
        let mut bytes = vec![0; length];
        self.memory.read(address, &mut bytes).ok()?;
        self.copied += length as u64;
        Some(bytes)
    }
}

/// The little-endian u64 at `offset` of `bytes`.
pub fn word(bytes: &[u8], offset: u64) -> u64 {
    let offset = offset as usize;
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}
