//! Stack unwinding from a snapshot: the tracer copies registers and stack bytes at a stop,
//! resumes the thread, and a worker walks the copy later with the module files on disk.
//!
//! DWARF CFI (`.eh_frame` with `.eh_frame_hdr`, else `.debug_frame`) through framehop, with
//! framehop's frame-pointer rule for code without CFI. Every walk ends in a `Stack`; what
//! cannot be walked marks it truncated instead of failing.

pub mod coverage;
pub mod modules;
pub mod snapshot;
pub mod tables;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fixture;

use std::cell::Cell;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Unwinder as _};

use crate::error::Result;
use crate::module::{MappedInode, ModuleFile, ModuleStore};
use modules::SectionBytes;
pub use snapshot::StackSnapshot;

/// Frames beyond this many (the ip included) are cut off and the stack marked truncated.
pub const MAX_DEPTH: usize = 256;

/// Offsets in the `struct ucontext` (x86-64) a signal handler returns over: `uc_mcontext`
/// starts after uc_flags, uc_link and uc_stack (40 bytes); its gregs are r8..r15, rdi,
/// rsi, rbp, rbx, rdx, rax, rcx, rsp, rip.
const UCONTEXT_RBP: u64 = 40 + 10 * 8;
const UCONTEXT_RSP: u64 = 40 + 15 * 8;
const UCONTEXT_RIP: u64 = 40 + 16 * 8;

/// The registers of the code a signal interrupted, from the ucontext at `context`.
fn signal_context(snapshot: &StackSnapshot, context: u64) -> Option<UnwindRegsX86_64> {
    let word = |offset: u64| snapshot.read_word(context.checked_add(offset)?);
    Some(UnwindRegsX86_64::new(
        word(UCONTEXT_RIP)?,
        word(UCONTEXT_RSP)?,
        word(UCONTEXT_RBP)?,
    ))
}

/// The result of one unwind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stack {
    /// `frames[0]` is the ip (at a function's entry: the return address into its caller);
    /// the others are return addresses (symbolise them at `a - 1`).
    pub frames: Vec<u64>,
    /// The walk stopped before the outermost frame: the copy ended, a return address pointed
    /// outside every known module's code, or `MAX_DEPTH` was reached.
    pub truncated: bool,
    /// Indices in `frames` of signal return trampolines (`__restore_rt`): the frame after
    /// each is the instruction the signal interrupted, not a return address, so it is
    /// symbolised at itself rather than at `a - 1`.
    pub signal_frames: Vec<usize>,
    /// The walk stopped at a read past the end of the copy: a longer copy would go further.
    pub ran_off_copy: bool,
}

/// A module mapped in the process, in runtime addresses.
#[derive(Debug, Clone)]
struct MappedModule {
    path: String,
    /// Its file, for the CFI check of every walk.
    file: Arc<ModuleFile>,
    range: Range<u64>,
    bias: u64,
    executable: Vec<Range<u64>>,
    /// Runtime addresses of signal return trampolines.
    sigreturn: Vec<u64>,
    /// The entry code no CFI covers (see `UnwindSections::entry_code`), in runtime addresses.
    entry_code: Option<Range<u64>>,
}

/// The modules of one process image and the unwind rule cache of their walks.
pub struct Unwinder {
    files: Arc<ModuleStore>,
    framehop: UnwinderX86_64<SectionBytes>,
    /// Sorted by start address.
    modules: Vec<MappedModule>,
    cache: Mutex<CacheX86_64>,
}

impl Default for Unwinder {
    fn default() -> Unwinder {
        Unwinder::new()
    }
}

impl Clone for Unwinder {
    /// A copy with the same modules (their parsed sections are shared) and an empty rule
    /// cache: for keeping the module list of an older event while dlopen adds to it.
    fn clone(&self) -> Unwinder {
        Unwinder {
            files: Arc::clone(&self.files),
            framehop: self.framehop.clone(),
            modules: self.modules.clone(),
            cache: Mutex::new(CacheX86_64::new()),
        }
    }
}

impl Unwinder {
    /// An unwinder with its own module store.
    pub fn new() -> Unwinder {
        Unwinder::with_module_store(Arc::new(ModuleStore::new()))
    }

    /// An unwinder that shares the recording's module files (one unwinder per process image).
    pub fn with_module_store(files: Arc<ModuleStore>) -> Unwinder {
        Unwinder {
            files,
            framehop: UnwinderX86_64::new(),
            modules: Vec::new(),
            cache: Mutex::new(CacheX86_64::new()),
        }
    }

    /// Adds the module file at `path`, mapped at `[start, end)` with load bias `bias`
    /// (runtime address minus ELF virtual address). Modules overlapping `[start, end)` were
    /// unmapped (dlclose) for it to be mapped there: they are forgotten, even when the new
    /// file cannot be read.
    pub fn add_module(
        &mut self,
        path: &str,
        inode: MappedInode,
        start: u64,
        end: u64,
        bias: u64,
    ) -> Result<()> {
        let overlapping: Vec<u64> = self
            .modules
            .iter()
            .filter(|module| module.range.start < end && start < module.range.end)
            .map(|module| module.range.start)
            .collect();
        for old_start in overlapping {
            self.remove_module(old_start);
        }
        let module_file = self.files.get_mapped(path, inode)?;
        let file = module_file.unwind()?;
        let module = framehop::Module::new(path.to_string(), start..end, bias, file.section_info());
        self.framehop.add_module(module);
        let executable = file
            .executable
            .iter()
            .map(|range| range.start.wrapping_add(bias)..range.end.wrapping_add(bias))
            .collect();
        let index = self
            .modules
            .partition_point(|module| module.range.start < start);
        self.modules.insert(
            index,
            MappedModule {
                path: path.to_string(),
                file: Arc::clone(&module_file),
                range: start..end,
                bias,
                executable,
                sigreturn: file
                    .sigreturn
                    .iter()
                    .map(|a| a.wrapping_add(bias))
                    .collect(),
                entry_code: file
                    .entry_code
                    .as_ref()
                    .map(|range| range.start.wrapping_add(bias)..range.end.wrapping_add(bias)),
            },
        );
        Ok(())
    }

    /// Forgets the module mapped at `start`. Unknown starts are ignored.
    pub fn remove_module(&mut self, start: u64) {
        if let Ok(index) = self
            .modules
            .binary_search_by_key(&start, |module| module.range.start)
        {
            self.modules.remove(index);
            self.framehop.remove_module(start);
        }
    }

    /// The path and load bias of the module whose mapped range holds `address`, for
    /// symbolising the frames of a walk.
    pub fn module_at(&self, address: u64) -> Option<(&str, u64)> {
        self.module_holding(address)
            .map(|module| (module.path.as_str(), module.bias))
    }

    /// Whether `address` is inside an executable segment of a known module: the test every
    /// return address must pass, so that a misread word does not start a garbage chain.
    pub fn is_code(&self, address: u64) -> bool {
        let index = self
            .modules
            .partition_point(|module| module.range.start <= address);
        index.checked_sub(1).is_some_and(|index| {
            self.modules[index]
                .executable
                .iter()
                .any(|range| range.contains(&address))
        })
    }

    /// The known module whose mapped range holds `address`.
    fn module_holding(&self, address: u64) -> Option<&MappedModule> {
        let index = self
            .modules
            .partition_point(|module| module.range.start <= address);
        let module = self.modules.get(index.checked_sub(1)?)?;
        module.range.contains(&address).then_some(module)
    }

    /// Whether CFI covers the code at `address`; false outside every known module. A walk
    /// through code without CFI went on by a guess (see `coverage`).
    pub fn has_cfi(&self, address: u64) -> bool {
        let Some(module) = self.module_holding(address) else {
            return false;
        };
        module
            .file
            .unwind()
            .is_ok_and(|sections| sections.has_cfi_at(address.wrapping_sub(module.bias)))
    }

    fn is_sigreturn(&self, address: u64) -> bool {
        self.module_holding(address)
            .is_some_and(|module| module.sigreturn.contains(&address))
    }

    /// Whether `address` is in a module's entry code, where the kernel started the process:
    /// a return address there belongs to the outermost frame.
    pub fn is_entry_code(&self, address: u64) -> bool {
        self.module_holding(address).is_some_and(|module| {
            module
                .entry_code
                .as_ref()
                .is_some_and(|range| range.contains(&address))
        })
    }

    /// Walks `snapshot`. `substitute(a)` returning `Some(real)` means `a` is memsup's return
    /// trampoline standing in for `real` (its shadow stack): the walk goes on from `real`.
    pub fn unwind(
        &self,
        snapshot: &StackSnapshot,
        substitute: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Stack {
        // One cache per unwinder; a worker that finds it busy walks with a fresh one rather
        // than waiting.
        let ran_off_copy = Cell::new(false);
        let mut stack = match self.cache.try_lock() {
            Ok(mut cache) => self.walk(snapshot, substitute, &mut cache, &ran_off_copy),
            Err(_) => self.walk(snapshot, substitute, &mut CacheX86_64::new(), &ran_off_copy),
        };
        stack.ran_off_copy = stack.truncated && ran_off_copy.get();
        stack
    }

    fn walk(
        &self,
        snapshot: &StackSnapshot,
        substitute: &mut dyn FnMut(u64) -> Option<u64>,
        cache: &mut CacheX86_64,
        ran_off_copy: &Cell<bool>,
    ) -> Stack {
        let mut read_stack = |address: u64| {
            snapshot.read_word(address).ok_or_else(|| {
                // A read above the copy: a longer copy would have let the walk go on.
                if address >= snapshot.sp && address.saturating_add(8) > snapshot.end() {
                    ran_off_copy.set(true);
                }
            })
        };
        let mut registers = UnwindRegsX86_64::new(snapshot.ip, snapshot.sp, snapshot.bp);
        let mut address = FrameAddress::from_instruction_pointer(snapshot.ip);
        if snapshot.at_function_entry {
            let caller = snapshot
                .read_word(snapshot.sp)
                .map(|a| substitute(a).unwrap_or(a));
            match caller.and_then(FrameAddress::from_return_address) {
                Some(return_address) => {
                    registers = UnwindRegsX86_64::new(
                        return_address.address(),
                        snapshot.sp + 8,
                        snapshot.bp,
                    );
                    address = return_address;
                }
                None => {
                    return Stack {
                        frames: Vec::new(),
                        truncated: true,
                        signal_frames: Vec::new(),
                        ran_off_copy: false,
                    }
                }
            }
        }
        let mut stack = Stack {
            frames: vec![address.address()],
            // Code outside every known module (generated code, an unknown mapping) has
            // no unwind rules: nothing beyond it can be trusted.
            truncated: !self.is_code(address.address()),
            signal_frames: Vec::new(),
            ran_off_copy: false,
        };
        if stack.truncated {
            return stack;
        }
        loop {
            if stack.frames.len() >= MAX_DEPTH {
                stack.truncated = true;
                return stack;
            }
            if let FrameAddress::ReturnAddress(return_address) = address {
                if self.is_entry_code(return_address.get()) {
                    // The code the kernel started the process at called this frame: there
                    // is nothing above it, though no CFI says so (the dynamic linker's
                    // `_start` and `_dl_start_user`).
                    return stack;
                }
            }
            let next = self
                .framehop
                .unwind_frame(address, &mut registers, cache, &mut read_stack);
            let return_address = match next {
                // The CFI says this is the outermost frame, or a frame-pointer chain ended.
                // In code without CFI that chain was a guess: an rbp of 0 there may be any
                // value the code kept in it, and its callers go on (musl's functions called
                // from the program). The walk over memsup's tables stops there too.
                Ok(None) | Ok(Some(0)) => {
                    stack.truncated = !self.has_cfi(address.address_for_lookup());
                    return stack;
                }
                Ok(Some(found)) => substitute(found).unwrap_or(found),
                // A read outside the copy, or a walk that would not advance.
                Err(_) => {
                    stack.truncated = true;
                    return stack;
                }
            };
            if !self.is_code(return_address) {
                stack.truncated = true;
                return stack;
            }
            stack.frames.push(return_address);
            if self.is_sigreturn(return_address) {
                stack.signal_frames.push(stack.frames.len() - 1);
                // A signal handler's frame: the interrupted registers are in the ucontext
                // at the stack pointer; the walk goes on at the interrupted instruction.
                let Some(interrupted) = signal_context(snapshot, registers.sp()) else {
                    stack.truncated = true;
                    return stack;
                };
                registers = interrupted;
                stack.frames.push(registers.ip());
                address = FrameAddress::from_instruction_pointer(registers.ip());
                continue;
            }
            // Not zero: zero is never code.
            let Some(next_address) = FrameAddress::from_return_address(return_address) else {
                return stack;
            };
            address = next_address;
        }
    }
}
