//! Finding the tracee's modules in /proc/PID/maps and planting probes in them: at exec, at
//! attach, and at every dynamic-linker rendezvous (dlopen, dlclose).

use crate::breakpoints::probes::direct_jump_target;
use crate::breakpoints::table::ProbeKind;
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::module::loaded::{self, LoadedModule};
use crate::module::{MappedInode, ModuleFile};
use crate::platform::allocators::{ALLOCATOR_SYMBOLS, MAPPING_SYMBOLS};
use crate::platform::libraries::{LibraryKind, RENDEZVOUS_SYMBOL};
use crate::proc::auxv::{read_auxv_value, AT_BASE};
use crate::proc::maps::{mapping_containing, read_maps};
use crate::ptrace::hooks::Candidate;
use crate::ptrace::inject::ScratchPage;
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::padding::stub_room;
use crate::ptrace::tracer::{Mode, Tracer};
use crate::trace::format::{AllocFunction, Engine};

impl Tracer<'_> {
    /// At an exec stop (one thread, nothing run yet): scratch page, then probes in what is
    /// mapped (the executable and the dynamic linker; libc arrives at the first rendezvous).
    pub(crate) fn setup_image(&mut self, pid: i32) -> Result<()> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let maps = read_maps(pid).map_err(|e| Error::io(format!("/proc/{pid}/maps"), e))?;
        let exe_mapping = maps
            .iter()
            .find(|m| m.path.as_deref() == Some(exe.as_str()));
        let parse_error = exe_mapping
            .and_then(|m| self.modules.of_process(pid, &exe, MappedInode::of(m)).ok())
            .and_then(|found| found.file.elf().err());
        if let Some(error @ Error::UnsupportedExecutable { .. }) = parse_error {
            self.warn(pid, format!("{error}; not probed"));
            return Ok(());
        }
        let interpreter_base = read_auxv_value(pid, AT_BASE).ok().flatten().unwrap_or(0);
        let anchor = if interpreter_base != 0 {
            interpreter_base
        } else {
            exe_mapping.map_or(0, |m| m.start)
        };
        match self.create_scratch(pid, pid, anchor) {
            // Probes need the page; without them the program still runs as it would.
            Err(error @ Error::SeccompForbids { .. }) => {
                let calls = match self.mode {
                    Mode::Run => "its allocator calls are not recorded, its mapping calls are",
                    Mode::Attach => "its allocator and mapping calls are not recorded",
                };
                self.warn(pid, format!("{error}, so {calls}"));
                return Ok(());
            }
            outcome => outcome?,
        }
        self.scan_modules(pid, Some(pid))?;
        let process = self.process(pid)?;
        let has_allocator = process
            .breakpoints
            .iter()
            .any(|b| matches!(b.kind, ProbeKind::Alloc(_)))
            || process.hooks.as_ref().is_some_and(|h| !h.sites.is_empty());
        if interpreter_base == 0 && !has_allocator {
            self.warn(
                pid,
                format!("{exe}: no allocator symbols found (stripped static binary?); recording mapping system calls only"),
            );
        }
        Ok(())
    }

    pub(crate) fn create_scratch(&mut self, pid: i32, tid: i32, anchor: u64) -> Result<()> {
        let room = read_maps(pid)
            .ok()
            .and_then(|maps| stub_room(pid, &maps, &self.modules));
        let process = self
            .processes
            .get_mut(&pid)
            .ok_or(Error::ProcessGone(pid))?;
        let (scratch, signals) = ScratchPage::create(&mut process.memory, pid, tid, anchor, room)?;
        let page = EventKind::ScratchPage {
            address: scratch.base,
        };
        self.sink.send(pid as u32, pid as u32, page);
        process.scratch = Some(scratch);
        if let Some(thread) = self.threads.get_mut(&tid) {
            thread.pending_signals.extend(signals);
        }
        Ok(())
    }

    /// Probes every module not seen before, and forgets probes of modules that went away.
    /// `injector`: a stopped thread of the process that can run system calls for the hook
    /// engine (None: allocator entries keep int3 probes).
    pub(crate) fn scan_modules(&mut self, pid: i32, injector: Option<i32>) -> Result<()> {
        // What the hooks recorded goes first: a stack through a library unloaded since must
        // be interned before a library mapped in its place is announced.
        self.flush_hooks_before_int3(pid);
        let modules = loaded::of_process(pid)?;
        let process = self
            .processes
            .get_mut(&pid)
            .ok_or(Error::ProcessGone(pid))?;
        process.breakpoints.forget_modules_not_in(&|path, address| {
            modules
                .iter()
                .any(|m| m.path == path && (m.start..m.end).contains(&address))
        });
        process
            .known_modules
            .retain(|path| modules.iter().any(|m| &m.path == path));
        for module in &modules {
            if self.process(pid)?.known_modules.contains(&module.path) {
                continue;
            }
            self.processes
                .get_mut(&pid)
                .expect("checked")
                .known_modules
                .insert(module.path.clone());
            match self.probe_module(pid, injector, module) {
                Ok(()) => {}
                // Killed meanwhile: its end is reported, nothing is missed.
                Err(gone @ Error::ProcessGone(_)) => return Err(gone),
                Err(error) => self.warn(pid, format!("{}: not probed: {error}", module.path)),
            }
        }
        self.publish_unwind_tables(pid, &modules);
        Ok(())
    }

    /// An allocator IFUNC's resolver returned `target` in thread `tid`: hook (hook engine)
    /// or probe the function it chose.
    pub(crate) fn probe_ifunc_target(
        &mut self,
        pid: i32,
        tid: i32,
        function: AllocFunction,
        target: u64,
    ) {
        if self.engine == Engine::Hooks && self.hook_ifunc_target(pid, tid, function, target) {
            return;
        }
        let module = read_maps(pid)
            .ok()
            .and_then(|maps| mapping_containing(&maps, target).and_then(|m| m.path.clone()))
            .unwrap_or_default();
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        let kind = ProbeKind::Alloc(function);
        let planted = process.breakpoints.insert(
            &mut process.memory,
            process.scratch.as_mut(),
            target,
            kind,
            &module,
        );
        if let Err(error) = planted {
            self.warn(
                pid,
                format!("{module}: IFUNC target {target:#x} not probed: {error}"),
            );
        }
    }

    /// Hooks the function an IFUNC resolver chose: an ordinary function, checked and
    /// relocated like any other once its symbol gives its size. False: it keeps an int3
    /// probe (no symbol, not relocatable, other threads running, or probed already).
    fn hook_ifunc_target(
        &mut self,
        pid: i32,
        tid: i32,
        function: AllocFunction,
        target: u64,
    ) -> bool {
        let Ok(process) = self.process(pid) else {
            return false;
        };
        let hooked = process
            .hooks
            .as_ref()
            .is_some_and(|hooks| hooks.sites.iter().any(|site| site.address == target));
        if hooked || process.breakpoints.get(target).is_some() {
            // Resolved before (a resolver runs once per relocation that names it).
            return hooked;
        }
        let Some(module) = loaded::of_process(pid).ok().and_then(|modules| {
            modules
                .into_iter()
                .find(|m| (m.start..m.end).contains(&target))
        }) else {
            return false;
        };
        let found = self.modules.of_process(pid, &module.path, module.inode);
        let size = found.ok().and_then(|found| {
            let file = found.file;
            let elf = file.elf().ok()?;
            let bias = module.load_bias(elf);
            let size = elf.size_of_function_at(target.wrapping_sub(bias))?;
            // In a file memsup could not verify, the size holds only where the code is its.
            let length = size.clamp(16, MOST_COMPARED);
            let trusted = found.verified || self.holds_files_code(pid, &file, bias, target, length);
            trusted.then_some(size)
        });
        let Some(size) = size else {
            if let Some(process) = self.processes.get_mut(&pid) {
                let reason = "no symbol gives the size of the IFUNC's target".to_string();
                process.hook_refusals.insert(target, reason);
            }
            return false;
        };
        let candidate = Candidate {
            address: target,
            size,
            kind: ProbeKind::Alloc(function),
        };
        self.hook_module(pid, Some(tid), &module, vec![candidate])
            .is_empty()
    }

    fn probe_module(
        &mut self,
        pid: i32,
        injector: Option<i32>,
        module: &LoadedModule,
    ) -> Result<()> {
        let found = self.modules.of_process(pid, &module.path, module.inode)?;
        let file = found.file;
        let elf = file.elf()?;
        let bias = module.load_bias(elf);
        self.send(
            pid,
            pid,
            EventKind::Module {
                path: module.path.clone(),
                inode: module.inode,
                start: module.start,
                end: module.end,
                bias,
            },
        );
        self.note_mpi_program(pid, &module.path, elf);
        let mut targets: Vec<(u64, ProbeKind)> = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        // Every probe but an IFUNC resolver's: the hook engine hooks what it can.
        let mut probe = |address: u64, size: u64, kind: ProbeKind| {
            candidates.push(Candidate {
                address,
                size,
                kind,
            })
        };
        if LibraryKind::of(&module.path) == LibraryKind::DynamicLinker {
            for symbol in elf.find_functions(&[RENDEZVOUS_SYMBOL]) {
                let address = symbol.address.wrapping_add(bias);
                probe(address, symbol.size, ProbeKind::Rendezvous);
            }
        } else {
            for (function, names) in ALLOCATOR_SYMBOLS {
                let (indirect, direct): (Vec<_>, Vec<_>) = elf
                    .find_functions(names)
                    .into_iter()
                    .partition(|s| s.is_ifunc);
                // The function an IFUNC stands for is known once its resolver returns; one
                // resolved before an attach is not resolved again.
                for symbol in indirect {
                    if self.mode == Mode::Attach && !self.is_attached() {
                        self.warnings.push(format!(
                            "{}: {} is an IFUNC resolved before the attach; its calls are not probed",
                            module.path, symbol.name
                        ));
                    }
                    targets.push((
                        symbol.address.wrapping_add(bias),
                        ProbeKind::IfuncResolver(*function),
                    ));
                }
                for symbol in direct {
                    let address = symbol.address.wrapping_add(bias);
                    probe(address, symbol.size, ProbeKind::Alloc(*function));
                }
            }
            if self.process(pid)?.probe_mapping_wrappers {
                for (call, names) in MAPPING_SYMBOLS {
                    for symbol in elf
                        .find_functions(names)
                        .into_iter()
                        .filter(|s| !s.is_ifunc)
                    {
                        let address = symbol.address.wrapping_add(bias);
                        probe(address, symbol.size, ProbeKind::Map(*call));
                    }
                }
            }
        }
        if LibraryKind::of(&module.path) != LibraryKind::DynamicLinker {
            let entries = self.mpi_probes(pid, &file, elf, bias);
            let hook_mpi = !entries.is_empty() && self.may_hook_mpi(pid, module);
            for entry in entries {
                if hook_mpi && entry.hookable {
                    probe(entry.address, entry.size, entry.kind);
                } else {
                    targets.push((entry.address, entry.kind));
                }
            }
        }
        // One entry under several names (malloc, __libc_malloc) is one probe.
        candidates.sort_by_key(|c| c.address);
        candidates.dedup_by_key(|c| c.address);
        if !found.verified {
            // A hook relocates from the whole function: all of it must be the file's.
            let same = |address: u64, length: u64| {
                self.holds_files_code(pid, &file, bias, address, length)
            };
            let before = candidates.len() + targets.len();
            candidates.retain(|c| same(c.address, c.size.clamp(16, MOST_COMPARED)));
            targets.retain(|(address, _)| same(*address, 16));
            let refused = before - candidates.len() - targets.len();
            if refused > 0 {
                self.warn(pid, other_code_warning(&module.path, refused, before));
            }
        }
        let process = self
            .processes
            .get_mut(&pid)
            .ok_or(Error::ProcessGone(pid))?;
        let all: Vec<(u64, ProbeKind)> = candidates.iter().map(|c| (c.address, c.kind)).collect();
        // A forwarder to a probed function of the same kind needs no probe.
        candidates.retain(|c| {
            let mut code = [0u8; 16];
            let forwards = process.memory.read(c.address, &mut code).is_ok()
                && direct_jump_target(&code, c.address)
                    .is_some_and(|target| all.contains(&(target, c.kind)));
            !forwards
        });
        if self.engine == Engine::Hooks {
            candidates = self
                .hook_module(pid, injector, module, candidates)
                .into_iter()
                .map(|(candidate, _)| candidate)
                .collect();
        }
        targets.extend(candidates.iter().map(|c| (c.address, c.kind)));
        let process = self
            .processes
            .get_mut(&pid)
            .ok_or(Error::ProcessGone(pid))?;
        // A forwarder to a probed function of the same kind (musl's malloc, free, realloc)
        // needs no probe; one to another kind (musl's memalign) keeps its name with one.
        let probed = targets.clone();
        targets.retain(|(address, kind)| {
            let mut code = [0u8; 16];
            let forwards = process.memory.read(*address, &mut code).is_ok()
                && direct_jump_target(&code, *address)
                    .is_some_and(|target| probed.contains(&(target, *kind)));
            !forwards
        });
        for (address, kind) in targets {
            process.breakpoints.insert(
                &mut process.memory,
                process.scratch.as_mut(),
                address,
                kind,
                &module.path,
            )?;
        }
        Ok(())
    }
}

impl Tracer<'_> {
    /// Whether `length` bytes at `address` in `pid` are `file`'s code there (loaded at
    /// `bias`): what a module memsup could not verify must show before it is probed.
    fn holds_files_code(
        &self,
        pid: i32,
        file: &ModuleFile,
        bias: u64,
        address: u64,
        length: u64,
    ) -> bool {
        let (Ok(process), Ok(elf)) = (self.process(pid), file.elf()) else {
            return false;
        };
        let mut read = |at: u64, code: &mut [u8]| process.memory.read(at, code).is_ok();
        let virtual_address = address.wrapping_sub(bias);
        code_is_the_files(
            file.bytes(),
            elf,
            virtual_address,
            length,
            address,
            &mut read,
        )
    }
}

/// The most bytes of a function compared with its file's (`code_is_the_files`).
const MOST_COMPARED: u64 = 1 << 16;

/// Whether the code at `address` in the process (read by `read`) is the file's at ELF
/// virtual address `virtual_address`: its first `length` bytes, or those up to its
/// segment's end.
fn code_is_the_files(
    bytes: &[u8],
    elf: &crate::symbols::elf::ElfFile,
    virtual_address: u64,
    length: u64,
    address: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
) -> bool {
    let Some(segment) = elf.load_segments().iter().find(|segment| {
        let end = segment.virtual_address.saturating_add(segment.file_size);
        (segment.virtual_address..end).contains(&virtual_address)
    }) else {
        return false;
    };
    let into = virtual_address - segment.virtual_address;
    let length = (segment.file_size - into).min(length) as usize;
    let Some(start) = segment.offset.checked_add(into).map(|start| start as usize) else {
        return false;
    };
    let Some(expected) = bytes.get(start..start.saturating_add(length)) else {
        return false;
    };
    let mut code = vec![0; length];
    read(address, &mut code) && code == expected
}

/// What memsup says of a module whose file it could not verify, `refused` of whose
/// `sites` probe sites held other code than that file.
fn other_code_warning(path: &str, refused: usize, sites: usize) -> String {
    format!(
        "{path}: {refused} of its {sites} probe sites hold other code than the file at that path, which is not the file the program mapped (replaced or mounted over since): they are not probed"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::elf::ElfFile;

    #[test]
    fn a_site_is_probed_only_where_the_code_in_memory_is_the_file_s() {
        let path = std::env::current_exe().unwrap();
        let path = path.to_str().unwrap();
        let bytes = std::fs::read(path).unwrap();
        let elf = ElfFile::parse(path, &bytes).unwrap();
        let main = elf
            .find_functions(&["main"])
            .pop()
            .expect("the test's main");
        let segment = elf
            .load_segments()
            .iter()
            .find(|s| (s.virtual_address..s.virtual_address + s.file_size).contains(&main.address))
            .unwrap();
        let start = (segment.offset + main.address - segment.virtual_address) as usize;
        let file_code = bytes[start..start + 16].to_vec();
        let address = 0x5555_0000_0000 + main.address;
        let mut asked = Vec::new();
        let mut same_code = |at: u64, code: &mut [u8]| {
            asked.push((at, code.len()));
            code.copy_from_slice(&file_code);
            true
        };
        let compare = |virtual_address: u64, read: &mut dyn FnMut(u64, &mut [u8]) -> bool| {
            code_is_the_files(&bytes, &elf, virtual_address, 16, address, read)
        };
        assert!(compare(main.address, &mut same_code));
        assert_eq!(asked, [(address, 16)]);
        let mut other_code = |_: u64, code: &mut [u8]| {
            code.copy_from_slice(&file_code);
            code[3] ^= 1;
            true
        };
        assert!(!compare(main.address, &mut other_code));
        assert!(!compare(main.address, &mut |_: u64, _: &mut [u8]| false));
        let mut never = |_: u64, _: &mut [u8]| -> bool { unreachable!("outside every segment") };
        assert!(!compare(u64::MAX - 8, &mut never));
        assert_eq!(
            other_code_warning("/usr/lib/libx.so", 2, 9),
            "/usr/lib/libx.so: 2 of its 9 probe sites hold other code than the file at that path, which is not the file the program mapped (replaced or mounted over since): they are not probed"
        );
    }
}
