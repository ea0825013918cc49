//! The tracer's side of the hooks' stack walker: each hooked image gets the unwind tables of
//! the modules it maps (published whenever its modules are scanned, before new code runs)
//! and the stack bounds of each of its threads (when hooks go in, at each clone).

use std::collections::HashMap;

use libc::user_regs_struct;

use crate::hooks::stack_section::SegmentTable;
use crate::module::loaded::LoadedModule;
use crate::proc::maps::{mapping_containing, read_maps, MapEntry};
use crate::ptrace::capture::StackMode;
use crate::ptrace::regs;
use crate::ptrace::tracer::Tracer;
use crate::unwind::tables::set::{table_set, MappedFile, TableCache};

/// Offsets of `stack` and `stack_size` in the kernel's `struct clone_args`.
const CLONE_ARGS_STACK: u64 = 40;
const CLONE_ARGS_STACK_SIZE: u64 = 48;
/// How far below the top of the main thread's stack its rsp may be and still count as on
/// it: the usual stack limit (the mapping grows down as far as the limit lets it).
const MAIN_STACK_REACH: u64 = 8 << 20;

/// Compiled tables by module path, for the whole recording.
#[derive(Default)]
pub struct HookTables {
    cache: TableCache,
}

impl std::fmt::Debug for HookTables {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "HookTables({} files)", self.cache.len())
    }
}

/// `[low, high)` of the stack holding `rsp`, from `maps`.
fn stack_bounds(maps: &[MapEntry], rsp: u64) -> Option<(u64, u64)> {
    let mapping = mapping_containing(maps, rsp)?;
    let low = if mapping.path.as_deref() == Some("[stack]") {
        mapping
            .start
            .min(mapping.end.saturating_sub(MAIN_STACK_REACH))
    } else {
        mapping.start
    };
    Some((low, mapping.end))
}

impl Tracer<'_> {
    /// Whether `pid`'s hooks walk stacks (full stacks, and its area registered).
    fn hooks_walk(&self, pid: i32) -> bool {
        self.stack_mode == StackMode::Full
            && self
                .drain
                .as_ref()
                .is_some_and(|drain| drain.is_registered(pid as u32))
    }

    /// Publishes the tables of `modules`, all that `pid` maps now.
    pub(crate) fn publish_unwind_tables(&mut self, pid: i32, modules: &[LoadedModule]) {
        if !self.hooks_walk(pid) {
            return;
        }
        let files = MappedFile::of_modules(&self.modules, pid, modules);
        let tables = table_set(&self.modules, &mut self.hook_tables.cache, &files);
        let mut segments: Vec<SegmentTable> = tables
            .set
            .segments()
            .iter()
            .map(SegmentTable::from)
            .collect();
        // Walks go on through the hooks of calls that are still running (an allocation
        // inside a hooked MPI call).
        if let Some(hooks) = self.process(pid).ok().and_then(|p| p.hooks.as_ref()) {
            segments.extend(hooks.page_tables.iter().cloned());
        }
        if let Some(drain) = self.drain.as_ref() {
            drain.publish_segments(pid as u32, segments);
        }
    }

    /// Gives the drain the stack bounds of each stopped thread of `pid`.
    pub(crate) fn publish_stopped_thread_stacks(&self, pid: i32) {
        if !self.hooks_walk(pid) {
            return;
        }
        let Ok(maps) = read_maps(pid) else {
            return;
        };
        let mut bounds = HashMap::new();
        for (&tid, thread) in self.threads.iter() {
            if thread.pid != pid {
                continue;
            }
            if let Ok(registers) = regs::get_registers(tid) {
                if let Some(stack) = stack_bounds(&maps, registers.rsp) {
                    bounds.insert(tid, stack);
                }
            }
        }
        let drain = self.drain.as_ref().expect("checked by hooks_walk");
        for (tid, stack) in bounds {
            drain.set_thread_stack(pid as u32, tid as u32, Some(stack));
        }
    }

    /// A new thread `child` of `pid`: its stack from the clone's arguments (`registers`
    /// are the creating thread's, stopped at the clone event).
    pub(crate) fn publish_new_thread_stack(
        &self,
        pid: i32,
        child: i32,
        registers: &user_regs_struct,
    ) {
        if !self.hooks_walk(pid) {
            return;
        }
        let Ok(process) = self.process(pid) else {
            return;
        };
        // Only a thread's stack: a vfork-like child's (posix_spawn's) is freed once it execs.
        let flags = match registers.orig_rax as i64 {
            libc::SYS_clone => Some(registers.rdi),
            libc::SYS_clone3 => process.memory.read_u64(registers.rdi).ok(),
            _ => None,
        };
        if !flags.is_some_and(|flags| flags & libc::CLONE_THREAD as u64 != 0) {
            return;
        }
        let top = match registers.orig_rax as i64 {
            libc::SYS_clone => Some(registers.rsi),
            libc::SYS_clone3 => {
                let arguments = registers.rdi;
                let stack = process.memory.read_u64(arguments + CLONE_ARGS_STACK).ok();
                let size = process
                    .memory
                    .read_u64(arguments + CLONE_ARGS_STACK_SIZE)
                    .ok();
                stack
                    .zip(size)
                    .map(|(stack, size)| stack.wrapping_add(size))
            }
            _ => None,
        };
        let Some(top) = top.filter(|&top| top >= 8) else {
            return;
        };
        let Ok(maps) = read_maps(pid) else {
            return;
        };
        if let (Some((low, high)), Some(drain)) = (stack_bounds(&maps, top - 8), &self.drain) {
            drain.set_thread_stack(pid as u32, child as u32, Some((low, high)));
        }
    }

    /// Thread `tid` of `pid` ended: its stack is no longer walked.
    pub(crate) fn forget_thread_stack(&self, pid: i32, tid: i32) {
        if let Some(drain) = self.drain.as_ref() {
            drain.set_thread_stack(pid as u32, tid as u32, None);
        }
    }
}
