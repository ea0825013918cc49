//! A tracee made of tables: registers per thread, memory as a few slices, and a log of how
//! each thread was let go. Clones share one state, so a test keeps a handle on what the
//! tracer it handed a clone to did.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

use libc::user_regs_struct;
use nix::errno::Errno;

use crate::error::{Error, Result};
use crate::ptrace::memory::{RemoteMemory, RemoteMemoryMut, SliceMemory, TraceeMemory};
use crate::ptrace::tracee::Tracee;

/// How the tracer let a thread go, or signalled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    Continue { tid: i32, signal: i32 },
    ToSyscall { tid: i32, signal: i32 },
    Listen { tid: i32 },
    Signalled { tid: i32, signal: i32 },
}

#[derive(Default)]
struct State {
    registers: HashMap<i32, user_regs_struct>,
    event_messages: HashMap<i32, u64>,
    /// Every process of the fake shares these regions (a fork child sees its parent's bytes).
    regions: Vec<SliceMemory>,
    resumes: Vec<Resume>,
}

impl State {
    fn region_of(&mut self, address: u64) -> Result<&mut SliceMemory> {
        self.regions
            .iter_mut()
            .find(|region| region.contains(address))
            .ok_or(Error::Memory {
                pid: 0,
                address,
                source: Errno::EFAULT,
            })
    }
}

#[derive(Clone, Default)]
pub struct FakeTracee {
    state: Rc<RefCell<State>>,
}

impl FakeTracee {
    /// Adds `length` zero bytes of memory at `base`.
    pub fn map(&self, base: u64, length: usize) {
        self.state.borrow_mut().regions.push(SliceMemory {
            base,
            bytes: vec![0; length],
        });
    }

    pub fn write(&self, address: u64, bytes: &[u8]) {
        let mut state = self.state.borrow_mut();
        let region = state.region_of(address).expect("a mapped address");
        region
            .write_data(address, bytes)
            .expect("inside the region");
    }

    pub fn bytes(&self, address: u64, length: usize) -> Vec<u8> {
        let mut state = self.state.borrow_mut();
        let mut bytes = vec![0; length];
        let region = state.region_of(address).expect("a mapped address");
        region.read(address, &mut bytes).expect("inside the region");
        bytes
    }

    pub fn word(&self, address: u64) -> u64 {
        let bytes = self.bytes(address, 8);
        u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
    }

    pub fn set_thread_registers(&self, tid: i32, registers: user_regs_struct) {
        self.state.borrow_mut().registers.insert(tid, registers);
    }

    pub fn thread_registers(&self, tid: i32) -> user_regs_struct {
        self.state.borrow().registers[&tid]
    }

    pub fn set_event_message(&self, tid: i32, value: u64) {
        self.state.borrow_mut().event_messages.insert(tid, value);
    }

    /// The resumes so far, oldest first; the log starts again empty.
    pub fn take_resumes(&self) -> Vec<Resume> {
        std::mem::take(&mut self.state.borrow_mut().resumes)
    }
}

impl Tracee for FakeTracee {
    fn registers(&mut self, tid: i32) -> Result<user_regs_struct> {
        let state = self.state.borrow();
        state
            .registers
            .get(&tid)
            .copied()
            .ok_or(Error::ProcessGone(tid))
    }

    fn set_registers(&mut self, tid: i32, registers: &user_regs_struct) -> Result<()> {
        self.set_thread_registers(tid, *registers);
        Ok(())
    }

    fn resume(&mut self, tid: i32, signal: i32) -> Result<()> {
        let resume = Resume::Continue { tid, signal };
        self.state.borrow_mut().resumes.push(resume);
        Ok(())
    }

    fn resume_to_syscall(&mut self, tid: i32, signal: i32) -> Result<()> {
        let resume = Resume::ToSyscall { tid, signal };
        self.state.borrow_mut().resumes.push(resume);
        Ok(())
    }

    fn listen(&mut self, tid: i32) -> Result<()> {
        self.state.borrow_mut().resumes.push(Resume::Listen { tid });
        Ok(())
    }

    fn signal_thread(&mut self, _pid: i32, tid: i32, signal: i32) {
        let resume = Resume::Signalled { tid, signal };
        self.state.borrow_mut().resumes.push(resume);
    }

    fn event_message(&mut self, tid: i32) -> Result<u64> {
        let state = self.state.borrow();
        let message = state.event_messages.get(&tid).copied();
        message.ok_or(Error::ProcessGone(tid))
    }

    fn read_partial(&mut self, _tid: i32, address: u64, length: usize) -> Option<Vec<u8>> {
        let mut state = self.state.borrow_mut();
        let region = state.region_of(address).ok()?;
        let start = (address - region.base) as usize;
        let end = region.bytes.len().min(start + length);
        Some(region.bytes[start..end].to_vec())
    }

    fn mapping_containing(&mut self, _tid: i32, address: u64) -> Option<Range<u64>> {
        let mut state = self.state.borrow_mut();
        let region = state.region_of(address).ok()?;
        Some(region.base..region.base + region.bytes.len() as u64)
    }

    fn open_memory(&mut self, _pid: i32) -> Box<dyn TraceeMemory> {
        Box::new(FakeMemory {
            state: Rc::clone(&self.state),
        })
    }
}

/// A process's view of the fake's regions.
struct FakeMemory {
    state: Rc<RefCell<State>>,
}

impl RemoteMemory for FakeMemory {
    fn read(&self, address: u64, buffer: &mut [u8]) -> Result<()> {
        self.state
            .borrow_mut()
            .region_of(address)?
            .read(address, buffer)
    }
}

impl RemoteMemoryMut for FakeMemory {
    fn write_data(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        let mut state = self.state.borrow_mut();
        state.region_of(address)?.write_data(address, bytes)
    }

    fn write_code(&mut self, address: u64, bytes: &[u8]) -> Result<()> {
        let mut state = self.state.borrow_mut();
        state.region_of(address)?.write_code(address, bytes)
    }
}

impl TraceeMemory for FakeMemory {
    fn use_thread(&mut self, _tid: i32) {}
}
