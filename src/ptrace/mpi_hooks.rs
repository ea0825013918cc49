//! MPI hooks in attach mode: the detach must let go of threads blocked inside hooked MPI
//! calls (a hung job's ranks), and such a thread holds the hook page until its call returns.
//! Its stack holds, where the MPI function will return, an MPI hook's return site with the
//! hook's copy of the stack arguments under it (DESIGN §4c). The detach writes over that
//! return address the address of an `add rsp, 88; ret` in the program's own code (libc has
//! several; a static program's own copy of libc too): the call then returns past the copy
//! straight to its caller, as if it had never been hooked, and the page can go. Without such
//! bytes in the process, its MPI entries keep their int3 probes.

use crate::hooks::code_mpi::MPI_STACK_WORDS;
use crate::module::loaded::LoadedModule;
use crate::platform::libraries::LibraryKind;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::regs;
use crate::ptrace::tracer::Tracer;

/// `add rsp, 8 * MPI_STACK_WORDS; ret`.
const RETURN_PAST_COPY: [u8; 5] = [0x48, 0x83, 0xc4, 8 * MPI_STACK_WORDS as u8, 0xc3];

/// The most of a thread's stack read for MPI return sites.
const STACK_READ_MAX: u64 = 64 << 20;

/// Where `code` (read from `start`) holds `RETURN_PAST_COPY`.
fn find_return_past_copy(code: &[u8], start: u64) -> Option<u64> {
    code.windows(RETURN_PAST_COPY.len())
        .position(|window| window == RETURN_PAST_COPY)
        .map(|offset| start + offset as u64)
}

impl Tracer<'_> {
    /// Whether `pid`'s MPI entries in `module` may be hooked: always in run mode; in attach
    /// mode when the process's C library (or `module` itself, a static program) holds
    /// `RETURN_PAST_COPY`, found once per process.
    pub(crate) fn may_hook_mpi(&mut self, pid: i32, module: &LoadedModule) -> bool {
        if self.mode == crate::ptrace::tracer::Mode::Run {
            return true;
        }
        let Ok(process) = self.process_mut(pid) else {
            return false;
        };
        if let Some(found) = process.mpi.return_past_copy {
            return found.is_some();
        }
        let maps = read_maps(pid).unwrap_or_default();
        let found = maps
            .iter()
            .filter(|mapping| mapping.executable)
            .filter(|mapping| {
                mapping.path.as_deref().is_some_and(|path| {
                    path == module.path || LibraryKind::of(path) == LibraryKind::Libc
                })
            })
            .find_map(|mapping| {
                let mut code = vec![0u8; (mapping.end - mapping.start) as usize];
                process.memory.read(mapping.start, &mut code).ok()?;
                find_return_past_copy(&code, mapping.start)
            });
        process.mpi.return_past_copy = Some(found);
        found.is_some()
    }

    /// Detach: each stopped thread of `pid` blocked in a hooked MPI call returns straight to
    /// its caller instead of into the hook. Every word of its stack that is an MPI hook's
    /// return site is overwritten: a live one is the call's return address; a stale copy
    /// in a frame's unused slot is garbage either way.
    pub(crate) fn send_mpi_calls_home(&mut self, pid: i32, return_sites: &[u64]) {
        if return_sites.is_empty() {
            return;
        }
        let tids = self.threads.of(pid);
        let maps = read_maps(pid).unwrap_or_default();
        let Ok(process) = self.process_mut(pid) else {
            return;
        };
        let Some(Some(gadget)) = process.mpi.return_past_copy else {
            return;
        };
        for tid in tids {
            let Ok(registers) = regs::get_registers(tid) else {
                continue;
            };
            let Some(stack) = mapping_containing(&maps, registers.rsp) else {
                continue;
            };
            let end = stack.end.min(registers.rsp.saturating_add(STACK_READ_MAX));
            let mut words = vec![0u8; (end - registers.rsp) as usize];
            if process.memory.read(registers.rsp, &mut words).is_err() {
                continue;
            }
            for (index, word) in words.chunks_exact(8).enumerate() {
                let value = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                if return_sites.contains(&value) {
                    let at = registers.rsp + 8 * index as u64;
                    let _ = process.memory.write_data(at, &gadget.to_le_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_return_past_the_copy_is_found_anywhere_in_code() {
        let mut code = vec![0x90u8; 64];
        assert_eq!(find_return_past_copy(&code, 0x1000), None);
        code[37..42].copy_from_slice(&[0x48, 0x83, 0xc4, 0x58, 0xc3]);
        assert_eq!(find_return_past_copy(&code, 0x1000), Some(0x1000 + 37));
    }
}
