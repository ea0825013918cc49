//! Whether a stopped thread may still be inside memsup's hook code, before the code is
//! unmapped: its rip is in a page, or a frame of its stack returns into one (an allocator
//! call a hook made and that has not returned, a signal handler running on top of a hook).
//! The stack is unwound with the modules' CFI; a walk that cannot reach the outermost frame,
//! or that went through code no CFI covers (where the unwinder guesses, and a guess can end
//! a walk early), falls back to a conservative scan (any word of the stack copy pointing into
//! a page).

use std::sync::Arc;

use crate::module::loaded;
use crate::module::ModuleStore;
use crate::proc::maps::read_maps;
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::regs;
use crate::unwind::{Stack, StackSnapshot, Unwinder};

/// Bytes of a thread's stack read above rsp.
const STACK_BYTES: u64 = 256 << 10;
const PAGE: u64 = 4096;

/// An unwinder over one process's modules.
pub(crate) struct InsideCheck {
    unwinder: Unwinder,
    /// The process's mappings (start, end, whether readable, private and not executable, as
    /// stack memory is; a guard page is not), sorted: a stack is read to the end of the
    /// stack-like mappings that hold it.
    mappings: Vec<(u64, u64, bool)>,
}

impl InsideCheck {
    pub(crate) fn for_process(pid: i32, store: &Arc<ModuleStore>) -> InsideCheck {
        let mut unwinder = Unwinder::with_module_store(Arc::clone(store));
        // A module whose file memsup could not verify gets no unwind rules: walks through it
        // count as guessed, and the stack is then scanned whole.
        for module in loaded::of_process(pid).unwrap_or_default() {
            let Ok(found) = store.of_process(pid, &module.path, module.inode) else {
                continue;
            };
            let Ok(elf) = found.file.elf() else {
                continue;
            };
            if !found.verified {
                continue;
            }
            let bias = module.load_bias(elf);
            let (start, end) = (module.start, module.end);
            let _ = unwinder.add_module(&module.path, module.inode, start, end, bias);
        }
        let mappings = read_maps(pid)
            .unwrap_or_default()
            .iter()
            .map(|mapping| {
                (
                    mapping.start,
                    mapping.end,
                    mapping.readable && !mapping.shared && !mapping.executable,
                )
            })
            .collect();
        InsideCheck { unwinder, mappings }
    }

    /// Where a stack that holds `address` ends: at the end of its mapping and of the readable,
    /// private, non-executable mappings right after it (a stack split by mprotect or mlock of
    /// a part), not in a neighbour of another kind (a thread's stack may lie just below
    /// anything, memsup's own code pages and shared ring area too). None when no mapping
    /// holds it.
    fn end_of_stack(&self, address: u64) -> Option<u64> {
        let index = self
            .mappings
            .partition_point(|&(start, _, _)| start <= address);
        let (start, mut end, _) = *self.mappings.get(index.checked_sub(1)?)?;
        if !(start..end).contains(&address) {
            return None;
        }
        for &(next, next_end, stack_like) in &self.mappings[index..] {
            if next != end || !stack_like {
                break;
            }
            end = next_end;
        }
        Some(end)
    }

    /// Whether thread `tid` (stopped) runs in one of `pages` (start, length) or has a frame
    /// returning into one. A stack that cannot be read hides every frame above the rip: the
    /// thread may be inside.
    pub(crate) fn may_be_inside(
        &self,
        tid: i32,
        memory: &dyn RemoteMemory,
        pages: &[(u64, u64)],
    ) -> bool {
        let stack_unreadable = regs::get_registers(tid)
            .is_ok_and(|registers| memory.read_u64(registers.rsp & !7).is_err());
        stack_unreadable
            || self
                .code_references(tid, memory)
                .into_iter()
                .any(|address| in_ranges(pages, address))
    }

    /// The addresses thread `tid` (stopped) may go on at: its rip first, then the return
    /// address of each frame and the instruction each signal interrupted, of a complete
    /// walk, or else every word of its stack copy too.
    pub(crate) fn code_references(&self, tid: i32, memory: &dyn RemoteMemory) -> Vec<u64> {
        let Ok(registers) = regs::get_registers(tid) else {
            return Vec::new();
        };
        let snapshot = StackSnapshot {
            ip: registers.rip,
            at_function_entry: false,
            sp: registers.rsp,
            bp: registers.rbp,
            stack: read_stack(memory, registers.rsp, self.end_of_stack(registers.rsp)),
        };
        let walk = self.unwinder.unwind(&snapshot, &mut |_| None);
        // The rip, each return address and each instruction a signal interrupted.
        let mut references = walk.frames.clone();
        if references.first() != Some(&registers.rip) {
            references.insert(0, registers.rip);
        }
        let guessed = walk_was_guessed(&walk, |address| {
            self.unwinder.has_cfi(address) || self.unwinder.is_entry_code(address)
        });
        if walk.truncated || guessed {
            references.extend(
                snapshot
                    .stack
                    .chunks_exact(8)
                    .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes"))),
            );
        }
        references
    }
}

/// Whether a frame of `walk` was unwound from code that `has_cfi` says no CFI covers. A
/// signal return trampoline is walked by its saved context, not by CFI; the frame after it is
/// the interrupted instruction itself, and every other return address is looked up at the
/// call instruction before it.
fn walk_was_guessed(walk: &Stack, has_cfi: impl Fn(u64) -> bool) -> bool {
    walk.frames.iter().enumerate().any(|(index, &address)| {
        if walk.signal_frames.contains(&index) {
            return false;
        }
        let interrupted = index == 0 || walk.signal_frames.contains(&(index - 1));
        let lookup = if interrupted {
            address
        } else {
            address.wrapping_sub(1)
        };
        !has_cfi(lookup)
    })
}

/// Whether `address` lies in one of `ranges` (start, length).
pub(crate) fn in_ranges(ranges: &[(u64, u64)], address: u64) -> bool {
    ranges
        .iter()
        .any(|&(start, length)| (start..start + length).contains(&address))
}

/// Up to `STACK_BYTES` from `rsp`, and not past `end` (its mapping's), page by page, so the
/// read that meets the stack's end fails alone.
fn read_stack(memory: &dyn RemoteMemory, rsp: u64, end: Option<u64>) -> Vec<u8> {
    let mut stack = Vec::new();
    let mut address = rsp & !7;
    let mut buffer = vec![0u8; PAGE as usize];
    let end = end
        .unwrap_or(u64::MAX)
        .min((rsp & !7).saturating_add(STACK_BYTES));
    while address < end {
        let length = (PAGE - (address & (PAGE - 1))).min(end - address) as usize;
        if memory.read(address, &mut buffer[..length]).is_err() {
            break;
        }
        stack.extend_from_slice(&buffer[..length]);
        address += length as u64;
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[u64], signal_frames: &[usize]) -> Stack {
        Stack {
            frames: frames.to_vec(),
            signal_frames: signal_frames.to_vec(),
            ..Stack::default()
        }
    }

    #[test]
    fn a_stack_is_read_to_the_end_of_its_mapping_and_no_further() {
        use crate::ptrace::memory::SliceMemory;
        // Two pages of stack at 0x10000, then a neighbour whose words would look like
        // return addresses into a hook page.
        let memory = SliceMemory {
            base: 0x10000,
            bytes: vec![0x11; 3 * PAGE as usize],
        };
        let stack = read_stack(&memory, 0x10ff8, Some(0x12000));
        assert_eq!(stack.len(), 0x12000 - 0x10ff8);
        // With no mapping known, the read goes on until it fails.
        assert_eq!(read_stack(&memory, 0x10ff8, None).len(), 0x13000 - 0x10ff8);
        // Never more than STACK_BYTES.
        let big = SliceMemory {
            base: 0x10000,
            bytes: vec![0; 2 * STACK_BYTES as usize],
        };
        assert_eq!(read_stack(&big, 0x10000, None).len(), STACK_BYTES as usize);
    }

    #[test]
    fn a_stack_ends_where_its_stack_like_mappings_do() {
        let check = InsideCheck {
            unwinder: Unwinder::with_module_store(Arc::new(ModuleStore::default())),
            mappings: vec![
                // A stack split in two (a part mlocked), then a code page right above it.
                (0x1000, 0x3000, true),
                (0x3000, 0x4000, true),
                (0x4000, 0x5000, false),
                // A stack alone, then a gap and another mapping.
                (0x8000, 0x9000, true),
                (0xa000, 0xb000, true),
            ],
        };
        assert_eq!(check.end_of_stack(0x1000), Some(0x4000));
        assert_eq!(check.end_of_stack(0x2fff), Some(0x4000));
        assert_eq!(check.end_of_stack(0x3000), Some(0x4000));
        assert_eq!(check.end_of_stack(0x4000), Some(0x5000));
        assert_eq!(check.end_of_stack(0x8000), Some(0x9000));
        assert_eq!(check.end_of_stack(0x5000), None);
        assert_eq!(check.end_of_stack(0x0fff), None);
        assert_eq!(check.end_of_stack(0xb000), None);
    }

    /// CFI covers [0x1000, 0x2000) only.
    fn covered(address: u64) -> bool {
        (0x1000..0x2000).contains(&address)
    }

    #[test]
    fn a_walk_through_covered_code_only_is_trusted() {
        // A return address at the very end of a covered function is looked up at its call.
        assert!(!walk_was_guessed(
            &stack(&[0x1000, 0x1800, 0x2000], &[]),
            covered
        ));
    }

    #[test]
    fn a_first_frame_without_cfi_makes_the_walk_a_guess() {
        // A static musl `__mmap` called from hook code: no CFI, so the walk ended on a guess.
        assert!(walk_was_guessed(&stack(&[0x3000], &[]), covered));
        assert!(walk_was_guessed(&stack(&[0x1800, 0x3001], &[]), covered));
    }

    #[test]
    fn a_signal_trampoline_is_walked_by_its_context_and_the_next_frame_at_itself() {
        // 0x5000 is the trampoline (no CFI needed); 0x2000 was interrupted: outside.
        assert!(walk_was_guessed(
            &stack(&[0x1800, 0x5000, 0x2000], &[1]),
            covered
        ));
        assert!(!walk_was_guessed(
            &stack(&[0x1800, 0x5000, 0x1000], &[1]),
            covered
        ));
    }
}
