//! The tracer's side of the hook engine: planting hooks in a module's allocator entries
//! (with every thread of the process stopped), giving a fork child its own rings before it
//! runs, naming threads for the drain, and taking everything out again at detach.

use libc::user_regs_struct;

use crate::breakpoints::table::ProbeKind;
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::hooks::budget::{own_file_size_limit, shape_within, Limits};
use crate::hooks::code::CpuSource;
use crate::hooks::drain::{op_of, op_of_map_call, ring_capacity, ring_count, Drain};
use crate::hooks::inject::Injector;
use crate::hooks::layout::{header, Hook, Op, Shape};
use crate::hooks::placement::{page_bytes, plan, Target};
use crate::module::loaded::LoadedModule;
use crate::proc::limits::read_address_space_soft_limit;
use crate::ptrace::detach::stub_is_mapped;
use crate::ptrace::inject::choose_live_injector;
use crate::ptrace::leave_hooks::HookCode;
use crate::ptrace::memory::TraceeMemory;
use crate::ptrace::patch_clearance::PatchedBytes;
use crate::ptrace::regs;
use crate::ptrace::state::{HookedProbe, PatchedEntry, Process, ProcessHooks};
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{Engine, ProbeSite};

/// Longest function read to check that no branch lands in its patched bytes.
const MAX_FUNCTION_BYTES: u64 = 64 << 10;
/// Bytes read at the rendezvous function, at least.
const RENDEZVOUS_READ_BYTES: u64 = 16;
/// Offset of `tls` in the kernel's `struct clone_args`.
const CLONE_ARGS_TLS: u64 = 56;

/// A function a module defines that memsup probes: an allocator function, a mapping
/// wrapper (attach mode) or the dynamic linker's rendezvous.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub address: u64,
    pub size: u64,
    pub kind: ProbeKind,
}

/// The hook of a probe.
fn hook_of_probe(kind: ProbeKind) -> Option<Hook> {
    match kind {
        ProbeKind::Alloc(function) => Some(op_of(function).into()),
        ProbeKind::Map(call) => Some(op_of_map_call(call).into()),
        ProbeKind::Rendezvous => Some(Op::Rendezvous.into()),
        ProbeKind::Mpi(function) => Some(Hook {
            op: Op::MpiEntry,
            function,
        }),
        ProbeKind::IfuncResolver(_) => None,
    }
}

/// Puts back the entries `hooks` patched in `process` (a fork child, not run yet, that
/// cannot have rings of its own) and plants an int3 probe at each instead, so its calls are
/// recorded all the same, at a stop each.
pub(super) fn probe_with_int3_instead(process: &mut Process, hooks: ProcessHooks, reason: &str) {
    // An entry whose jump is no longer there (its library replaced, or patched again) gets
    // neither its old bytes nor a probe.
    let mut restored = Vec::new();
    for entry in &hooks.patched {
        let mut current = vec![0u8; entry.written.len()];
        if process.memory.read(entry.address, &mut current).is_err() || current != entry.written {
            continue;
        }
        if process
            .memory
            .write_code(entry.address, &entry.original)
            .is_ok()
        {
            restored.push(entry.address);
        }
    }
    for probe in hooks.probes {
        if !restored.contains(&probe.patch) {
            continue;
        }
        let planted = process.breakpoints.insert(
            &mut process.memory,
            process.scratch.as_mut(),
            probe.entry,
            probe.kind,
            &probe.module,
        );
        if planted.is_ok() {
            process
                .hook_refusals
                .insert(probe.entry, reason.to_string());
        }
    }
}

/// The start of the reason of entries whose module's hooks could not be placed at all.
const PLACING_FAILED: &str = "placing hooks failed";

/// Every candidate, with the same reason it keeps an int3.
fn refuse_all(candidates: Vec<Candidate>, reason: &str) -> Vec<(Candidate, String)> {
    candidates
        .into_iter()
        .map(|candidate| (candidate, reason.to_string()))
        .collect()
}

/// How the hook code picks its ring on this machine.
pub fn cpu_source() -> CpuSource {
    let features = std::arch::x86_64::__cpuid_count(7, 0);
    if features.ecx & (1 << 22) != 0 {
        CpuSource::Rdpid
    } else {
        CpuSource::Single
    }
}

impl Tracer<'_> {
    /// Hooks what it can of `candidates` (in `module` of process `pid`, whose thread
    /// `injector` is stopped); returns the others, each with the reason it keeps an int3.
    pub(crate) fn hook_module(
        &mut self,
        pid: i32,
        injector: Option<i32>,
        module: &LoadedModule,
        candidates: Vec<Candidate>,
    ) -> Vec<(Candidate, String)> {
        if candidates.is_empty() {
            return Vec::new();
        }
        let taken_out = self
            .process(pid)
            .ok()
            .and_then(|p| p.hooks_taken_out.clone());
        let injector = injector.filter(|&tid| self.only_stopped_threads(pid, tid));
        let refused = match (taken_out, injector) {
            (Some(reason), _) => refuse_all(candidates, &reason),
            (None, None) => refuse_all(candidates, "other threads were running when it was loaded"),
            (None, Some(tid)) => match self.try_hook_module(pid, tid, module, &candidates) {
                Ok(refused) => refused,
                Err(error) => {
                    let reason = format!("{PLACING_FAILED}: {error}");
                    // A process killed meanwhile has nothing left to be told about.
                    if !matches!(error, Error::ProcessGone(_)) {
                        self.warn_once_of_failed_hooks(pid, &reason);
                    }
                    refuse_all(candidates, &reason)
                }
            },
        };
        if let Some(process) = self.processes.get_mut(&pid) {
            for (candidate, reason) in &refused {
                process
                    .hook_refusals
                    .insert(candidate.address, reason.clone());
            }
        }
        refused
    }

    /// A module's hooks that could not be placed at all leave its allocator calls to int3
    /// breakpoints, a stop each: said once per image, since it is why such a run is slow.
    fn warn_once_of_failed_hooks(&mut self, pid: i32, reason: &str) {
        let said = self.process(pid).is_ok_and(|process| {
            process
                .hook_refusals
                .values()
                .any(|earlier| earlier.starts_with(PLACING_FAILED))
        });
        if !said {
            self.warn(
                pid,
                format!("{reason}: its allocator calls stop it at int3 breakpoints instead, a stop each"),
            );
        }
    }

    fn try_hook_module(
        &mut self,
        pid: i32,
        tid: i32,
        module: &LoadedModule,
        candidates: &[Candidate],
    ) -> Result<Vec<(Candidate, String)>> {
        self.ensure_area(pid, tid)?;
        let process = self.process_mut(pid)?;
        let hooks = process.hooks.as_ref().expect("ensured above");
        let (area, cpu) = (hooks.area, hooks.cpu);
        let mut targets = Vec::new();
        for candidate in candidates {
            // The rendezvous function may be a lone `ret`: its padding is read with it.
            let length = match candidate.kind {
                ProbeKind::Rendezvous => candidate.size.max(RENDEZVOUS_READ_BYTES),
                _ => candidate.size,
            };
            let mut code = vec![0u8; length.min(MAX_FUNCTION_BYTES) as usize];
            process.memory.read(candidate.address, &mut code)?;
            let hook = hook_of_probe(candidate.kind)
                .ok_or_else(|| Error::Internal("an IFUNC resolver is not hooked".into()))?;
            targets.push(Target {
                address: candidate.address,
                hook,
                code,
            });
        }
        let hooks: Vec<Hook> = targets.iter().map(|target| target.hook).collect();
        let bytes = page_bytes(&hooks, cpu)?;
        let base =
            self.with_injector(pid, tid, |injector| injector.map_code(module.start, bytes))?;
        let mut page = plan(base, area, cpu, &targets)?;
        let patched_bytes: Vec<PatchedBytes> = page
            .patches
            .iter()
            .map(|patch| {
                let start = candidates[patch.target].address + patch.patch.offset;
                (start, patch.patch.length as u64)
            })
            .collect();
        let blocked = self.clear_patched_bytes(pid, &patched_bytes);
        let names: Vec<String> = candidates
            .iter()
            .map(|candidate| match candidate.kind {
                ProbeKind::Mpi(function) => self.mpi_names.name(function).to_string(),
                kind => kind.name().to_string(),
            })
            .collect();
        let process = self.process_mut(pid)?;
        process.memory.write_code(base, &page.bytes)?;
        let hooks = process.hooks.as_mut().expect("ensured above");
        hooks.pages.push((base, page.bytes.len() as u64));
        hooks.page_tables.push(page.unwind.clone());
        hooks
            .mpi_return_sites
            .extend_from_slice(&page.mpi_return_sites);
        for (patch, blocked) in page.patches.iter().zip(blocked) {
            if let Some(reason) = blocked {
                page.refused.push((patch.target, reason));
                continue;
            }
            let candidate = &candidates[patch.target];
            let address = candidate.address + patch.patch.offset;
            process.memory.write_code(address, &patch.jump)?;
            let hooks = process.hooks.as_mut().expect("ensured above");
            hooks.patched.push(PatchedEntry {
                address,
                original: patch.patch.original.clone(),
                written: patch.jump.clone(),
            });
            hooks.sites.push(ProbeSite {
                function: names[patch.target].clone(),
                address: candidate.address,
                implementation: "hook".to_string(),
            });
            hooks.probes.push(HookedProbe {
                entry: candidate.address,
                patch: address,
                kind: candidate.kind,
                module: module.path.clone(),
            });
        }
        let drain = self.drain.as_ref().expect("the hook engine has a drain");
        let page_end = base + page.bytes.len() as u64;
        drain.add_hook_page(pid as u32, base, page_end, &page.mpi_return_sites);
        for (candidate, name) in candidates.iter().zip(&names) {
            match candidate.kind {
                ProbeKind::Mpi(function) => drain.name_mpi_function(function, name),
                // An allocator call from inside an MPI function is the program's: only
                // allocator bodies make inner calls.
                _ => drain.add_internal_range(
                    pid as u32,
                    candidate.address,
                    candidate.address + candidate.size,
                ),
            }
        }
        self.send(pid, pid, EventKind::ScratchPage { address: base });
        Ok(page
            .refused
            .into_iter()
            .map(|(index, reason)| (candidates[index].clone(), reason))
            .collect())
    }

    /// The process's ring area, created and registered with the drain on first use.
    fn ensure_area(&mut self, pid: i32, tid: i32) -> Result<()> {
        if self.process(pid)?.hooks.is_some() {
            return Ok(());
        }
        let full = Shape::full(ring_count(), ring_capacity());
        let limits = Limits {
            address_space: read_address_space_soft_limit(pid).unwrap_or(None),
            file_size: own_file_size_limit(),
        };
        let shape = shape_within(full, limits).map_err(Error::Internal)?;
        let bytes = shape.bytes();
        let scratch = self.process(pid)?.scratch.as_ref().map(|page| page.base);
        if scratch.is_some_and(|page| new_mappings_are_locked(pid, page)) {
            return Err(Error::Internal(format!(
                "the program locks every new mapping (mlockall with MCL_FUTURE), and the hook area's {} MiB would be locked with it",
                bytes >> 20
            )));
        }
        let area = self.with_injector(pid, tid, |injector| {
            injector.create_area(bytes, shape.rings_end(), None)
        })?;
        let address = area.address;
        self.process_mut(pid)?.hooks = Some(ProcessHooks::new(address, shape, cpu_source()));
        let drain = self.drain.as_ref().expect("the hook engine has a drain");
        drain.register(pid as u32, area, &shape);
        self.send(pid, pid, EventKind::ScratchPage { address });
        self.name_stopped_threads(pid);
        self.publish_stopped_thread_stacks(pid);
        Ok(())
    }

    /// Tells the drain each stopped thread's self pointer (its fs base).
    fn name_stopped_threads(&self, pid: i32) {
        let Some(drain) = self.drain.as_ref() else {
            return;
        };
        for (&tid, thread) in self.threads.iter() {
            if thread.pid != pid {
                continue;
            }
            if let Ok(registers) = regs::get_registers(tid) {
                if registers.fs_base != 0 {
                    drain.name_thread(pid as u32, registers.fs_base, tid as u32);
                }
            }
        }
    }

    /// Whether every known thread of `pid` is stopped: `tid` alone, or all joining.
    fn only_stopped_threads(&self, pid: i32, tid: i32) -> bool {
        self.threads
            .iter()
            .filter(|(_, thread)| thread.pid == pid)
            .all(|(other, _)| *other == tid || self.joining.contains(other))
    }

    /// A new thread of a hooked process: its records carry the self pointer its clone gave
    /// it (`registers` are the creating thread's, stopped at the clone event).
    pub(crate) fn name_new_thread(&self, pid: i32, child: i32, registers: &user_regs_struct) {
        let Some(drain) = self.drain.as_ref() else {
            return;
        };
        let Ok(process) = self.process(pid) else {
            return;
        };
        if process.hooks.is_none() {
            return;
        }
        let tls = match registers.orig_rax as i64 {
            libc::SYS_clone => Some(registers.r8),
            libc::SYS_clone3 => process.memory.read_u64(registers.rdi + CLONE_ARGS_TLS).ok(),
            _ => None,
        };
        if let Some(key) = tls.filter(|&key| key != 0) {
            drain.name_thread(pid as u32, key, child as u32);
        }
        self.publish_new_thread_stack(pid, child, registers);
    }

    /// A vfork child runs on thread `tid`'s stack and TLS, in its parent's memory, so its
    /// hooks write into its parent's rings with that thread's self pointer: until the
    /// child execs or ends (or the parent resumes), such records are the child's.
    pub(crate) fn tag_vfork_child(&self, tid: i32, child: i32) {
        let (Some(drain), Ok(registers)) = (self.drain.as_ref(), regs::get_registers(tid)) else {
            return;
        };
        if let Ok(thread) = self.thread(tid) {
            drain.start_vfork_child(thread.pid as u32, registers.fs_base, child as u32);
        }
    }

    /// The vfork child `child` execs or ends, or its parent resumes (vfork done).
    pub(crate) fn untag_vfork_child(&self, child: i32) {
        if let Some(drain) = self.drain.as_ref() {
            drain.end_vfork_child(child as u32);
        }
    }

    /// A fork child shares its parent's ring area until it gets its own, at the same
    /// address, before it runs. If that fails its hooks are taken out.
    pub(crate) fn rearm_fork_child(&mut self, child: i32) {
        let Ok(process) = self.process(child) else {
            return;
        };
        let Some(hooks) = process.hooks.as_ref() else {
            return;
        };
        if process.shares_parent_memory {
            return;
        }
        let (address, shape) = (hooks.area, hooks.shape);
        let outcome = self.replace_area(child, address, &shape);
        if let Err(error) = outcome {
            self.warn(
                child,
                format!("its own hook rings could not be made ({error}); its allocator calls stop it at int3 breakpoints instead, a stop each"),
            );
            let reason = format!("its own hook rings could not be made: {error}");
            if let Ok(process) = self.process_mut(child) {
                if let Some(hooks) = process.hooks.take() {
                    probe_with_int3_instead(process, hooks, &reason);
                }
            }
        }
    }

    fn replace_area(&mut self, child: i32, address: u64, shape: &Shape) -> Result<()> {
        let area = self.with_injector(child, child, |injector| {
            injector.create_area(shape.bytes(), shape.rings_end(), Some(address))
        })?;
        let drain = self.drain.as_ref().expect("the hook engine has a drain");
        drain.register(child as u32, area, shape);
        let hooks = self.process(child)?.hooks.as_ref();
        let pages = hooks.map(|h| h.pages.clone()).unwrap_or_default();
        let mpi_returns = hooks
            .map(|h| h.mpi_return_sites.clone())
            .unwrap_or_default();
        for (start, length) in pages {
            drain.add_hook_page(child as u32, start, start + length, &mpi_returns);
        }
        self.name_stopped_threads(child);
        self.publish_stopped_thread_stacks(child);
        let modules = crate::module::loaded::of_process(child)?;
        self.publish_unwind_tables(child, &modules);
        Ok(())
    }

    /// Runs `work` with system calls in `pid`'s stopped thread `tid`, through the scratch
    /// page's stub; signals that arrive meanwhile are kept for the thread.
    pub(crate) fn with_injector<T>(
        &mut self,
        pid: i32,
        tid: i32,
        work: impl FnOnce(&mut Injector) -> Result<T>,
    ) -> Result<T> {
        let process = self.process_mut(pid)?;
        let stub = process
            .scratch
            .as_ref()
            .map(|s| s.syscall_stub())
            .ok_or_else(|| Error::Internal("no scratch page".into()))?;
        let mut injector = Injector {
            memory: &mut process.memory,
            pid,
            tid,
            stub,
            signals: Vec::new(),
        };
        let outcome = work(&mut injector);
        let signals = injector.signals;
        if let Some(thread) = self.threads.get_mut(&tid) {
            thread.pending_signals.extend(signals);
        }
        outcome
    }

    /// Before an event of an int3 probe in a hooked image: what the hooks recorded earlier
    /// goes first (a block freed through a hook and returned by an int3-probed allocator).
    pub(crate) fn flush_hooks_before_int3(&self, pid: i32) {
        let hooked = |p: &Process| p.hooks.is_some() || p.hooks_taken_out.is_some();
        if self.processes.get(&pid).is_some_and(hooked) {
            self.flush_hooks(pid);
        }
    }

    /// Sends what `pid`'s hooks recorded so far (before a thread's end is reported).
    pub(crate) fn flush_hooks(&self, pid: i32) {
        if let Some(drain) = self.drain.as_ref() {
            drain.flush(pid as u32);
        }
    }

    /// The image of `pid` ends (exit, exec, detach): its last records, then how they were
    /// recorded.
    pub(crate) fn finish_image(&mut self, pid: i32) {
        if self
            .processes
            .get(&pid)
            .is_some_and(|p| p.shares_parent_memory)
        {
            self.untag_vfork_child(pid);
        }
        let finished = self
            .drain
            .as_ref()
            .and_then(|drain| drain.finish(pid as u32))
            .unwrap_or_default();
        let Ok(process) = self.process_mut(pid) else {
            return;
        };
        // Calls inside another allocator call count as the int3 engine counts them.
        process.counters.nested_calls += finished.counters.nested;
        let mut sites: Vec<ProbeSite> = process
            .hooks
            .as_ref()
            .map(|hooks| hooks.sites.clone())
            .unwrap_or_default();
        let hooked = !sites.is_empty() || process.hooks_taken_out.is_some();
        sites.extend(process.breakpoints.iter().map(|breakpoint| ProbeSite {
            function: breakpoint.kind.name().to_string(),
            address: breakpoint.address,
            implementation: process.hook_refusals.get(&breakpoint.address).map_or_else(
                || format!("int3, {}", breakpoint.step_over.name()),
                |reason| format!("int3, {} (no hook: {reason})", breakpoint.step_over.name()),
            ),
        }));
        let engine = if hooked { Engine::Hooks } else { Engine::Int3 };
        self.name_mpi_sites(pid, &mut sites);
        self.send(
            pid,
            pid,
            EventKind::ProbeSites {
                engine,
                sites,
                hooks: finished.counters,
            },
        );
        if !hooked {
            return;
        }
        if let Some(costs) = finished.stacks {
            self.send(pid, pid, EventKind::HookStacks(costs));
            if costs.lost > 0 {
                let store_bytes = finished.store_region_bytes;
                self.warn(pid, lost_stacks_warning(costs.lost, store_bytes));
            }
            if finished.tables_full {
                let table_bytes = finished.table_region_bytes;
                self.warn(pid, full_tables_warning(table_bytes));
            }
        }
        self.send(pid, pid, EventKind::HookCalls(finished.calls));
        if finished.switched_off > 0 {
            let times = match finished.switched_off {
                1 => "once".to_string(),
                n => format!("{n} times"),
            };
            self.warn(
                pid,
                format!(
                    "its hooks found memsup's heartbeat over a second old {times} (memsup stopped or starved of CPU) and passed calls through until memsup switched them back on or the image ended: calls made meanwhile are missing, blocks freed then stay live, and blocks allocated then are unknown frees"
                ),
            );
        }
    }

    /// Detach (every int3 already removed): every entry gets its bytes back; the code pages
    /// and the area go once no thread can be in them (the threads run out of them first),
    /// else the hooks are left switched off.
    pub(crate) fn remove_hooks(&mut self, pid: i32) {
        let Some(hooks) = self.processes.get_mut(&pid).and_then(|p| p.hooks.take()) else {
            return;
        };
        let process = self.processes.get_mut(&pid).expect("checked");
        // Off through the target's memory: the drain has let go of the image already
        // (`finish_image`), and a rendezvous hook waiting in the page leaves once it reads 0.
        switch_hooks_off(self.drain.as_ref(), process.memory.as_mut(), hooks.area);
        for entry in &hooks.patched {
            let mut current = vec![0u8; entry.original.len()];
            let bytes = match process.memory.read(entry.address, &mut current) {
                Ok(()) => {
                    let (bytes, foreign) = entry.restored(&current);
                    process.counters.foreign_patches += u64::from(foreign);
                    bytes
                }
                Err(_) => entry.original.clone(),
            };
            let _ = process.memory.write_code(entry.address, &bytes);
        }
        self.send_mpi_calls_home(pid, &hooks.mpi_return_sites);
        let (code, forked) = self.leave_hook_code(pid, &hooks.pages);
        // A process forked during the turns has copies of the pages and the area, its
        // entries already put back: its own detach removes them. It recorded nothing through
        // them, so it lists no hooked site. One sharing this memory has no copies.
        for child in forked {
            if shares_memory(pid, child) {
                continue;
            }
            if let Some(process) = self.processes.get_mut(&child) {
                process.hooks = Some(ProcessHooks {
                    patched: Vec::new(),
                    sites: Vec::new(),
                    probes: Vec::new(),
                    ..hooks.clone()
                });
            }
        }
        match code {
            HookCode::Unused => {}
            HookCode::ImageGone => return,
            HookCode::MaybeInUse => {
                self.warn(
                    pid,
                    "a thread may still be inside memsup's hook code: it stays mapped, switched off"
                        .into(),
                );
                return;
            }
        }
        let tids = self.threads.of(pid);
        let candidates = self
            .process(pid)
            .map(|process| self.remote_call_threads(process, &tids))
            .unwrap_or_default();
        let Some(tid) = choose_live_injector(&candidates, None) else {
            return;
        };
        let stub = self
            .process(pid)
            .ok()
            .and_then(|p| p.scratch.as_ref())
            .map(|s| s.syscall_stub());
        if !stub.is_some_and(|stub| stub_is_mapped(pid, stub)) {
            return;
        }
        let unmapped = self.with_injector(pid, tid, |injector| {
            for &(base, length) in &hooks.pages {
                injector.unmap(base, length)?;
            }
            injector.unmap(hooks.area, hooks.area_bytes)
        });
        if let Err(error @ Error::SeccompForbids { .. }) = unmapped {
            self.warn(
                pid,
                format!("{error}: memsup's hook pages and ring area stay mapped, switched off"),
            );
        }
    }
}

/// Whether the mapping at `page` (memsup's scratch page, mapped last) is locked: then so is
/// every mapping `pid` makes from now on (mlockall's `MCL_FUTURE`).
fn new_mappings_are_locked(pid: i32, page: u64) -> bool {
    let mut text = Vec::new();
    crate::proc::smaps::read_into(&format!("/proc/{pid}/smaps"), &mut text).is_ok()
        && crate::proc::smaps::locked_at(&text, page)
}

/// Whether processes `a` and `b` share one address space (a vfork, or a clone with CLONE_VM
/// and without CLONE_THREAD), as the kernel's kcmp tells; when it cannot tell, they may.
pub(super) fn shares_memory(a: i32, b: i32) -> bool {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp only compares two processes' kernel objects; it has no memory effects.
    let order = unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_VM, 0, 0) };
    // 1 and 2 order two different objects; 3: different, without an order.
    !(1..=3).contains(&order)
}

/// Switches the hooks of the area at `area` in `memory`'s process off for good: marked as
/// memsup's doing before `ENABLED` is cleared, with the heartbeat held, so that it never
/// switches them back on (the area may serve another image too: a fork child shares its
/// parent's until it has its own).
pub(super) fn switch_hooks_off(drain: Option<&Drain>, memory: &mut dyn TraceeMemory, area: u64) {
    let mut write = || {
        let _ = memory.write_data(area + header::OFF_BY_MEMSUP, &1u32.to_le_bytes());
        let _ = memory.write_data(area + header::ENABLED, &0u32.to_le_bytes());
    };
    match drain {
        Some(drain) => drain.switch_off(write),
        None => write(),
    }
}

/// Why a region of `bytes` whose full size is `full` is smaller: the limits' share.
fn shrunk_by_limits(bytes: u64, full: u64) -> &'static str {
    match bytes < full {
        true => " (the area's share of the resource limits)",
        false => "",
    }
}

/// What `lost` walks that did not fit in a stack store of `store_bytes` left out.
fn lost_stacks_warning(lost: u64, store_bytes: u64) -> String {
    let shrunk = shrunk_by_limits(store_bytes, crate::hooks::layout::stacks::STORE_BYTES);
    let walks = if lost == 1 { "walk" } else { "walks" };
    format!(
        "{lost} stack {walks} by the hooks did not fit in their {} MiB store{shrunk}: those calls are recorded with their caller only",
        store_bytes >> 20
    )
}

/// What a table region of `table_bytes` that filled up left out.
fn full_tables_warning(table_bytes: u64) -> String {
    let shrunk = shrunk_by_limits(table_bytes, crate::hooks::layout::stacks::TABLE_BYTES);
    format!(
        "the hooks' {} MiB for unwind tables and thread lists filled up{shrunk}: from then on, stacks through modules loaded later end there, and calls on threads started later are recorded with their caller only",
        table_bytes >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::{full_tables_warning, lost_stacks_warning};

    #[test]
    fn the_lost_stacks_warning_says_whether_the_limit_shrank_the_store() {
        assert_eq!(
            lost_stacks_warning(7, 256 << 20),
            "7 stack walks by the hooks did not fit in their 256 MiB store: those calls are recorded with their caller only"
        );
        assert_eq!(
            lost_stacks_warning(1, 18 << 20),
            "1 stack walk by the hooks did not fit in their 18 MiB store (the area's share of the resource limits): those calls are recorded with their caller only"
        );
        assert_eq!(
            full_tables_warning(18 << 20),
            "the hooks' 18 MiB for unwind tables and thread lists filled up (the area's share of the resource limits): from then on, stacks through modules loaded later end there, and calls on threads started later are recorded with their caller only"
        );
    }
}
