//! The heap census at an attach: what glibc's heap held before memsup joined, so that blocks
//! allocated before the attach are counted by size class, and the arena pages glibc holds
//! free are told from those in use, instead of all being `unknown`; and each block it
//! found in use, so that its free while attached is known by size.

use crate::census::{self, Allocator, ThreadPointer};
use crate::events::EventKind;
use crate::proc::maps::MapEntry;
use crate::ptrace::regs;
use crate::ptrace::tracer::Tracer;
use crate::trace::census_format::LiveBlocks;

/// Blocks per `BlocksAtAttach` record: a few hundred KiB encoded, far below what a profile
/// block holds, however large the heap.
const BLOCKS_PER_RECORD: usize = 100_000;

impl Tracer<'_> {
    /// Reads the heap of `pid` while its threads `tids` are stopped at the attach, before
    /// memsup maps anything in it; nothing is written to the process. `allocator` was found
    /// before the stop, so that only the heap's reads lengthen it.
    pub(crate) fn census_at_attach(
        &mut self,
        pid: i32,
        maps: &[MapEntry],
        allocator: &Result<Allocator, String>,
        tids: &[i32],
    ) {
        let mut pointers = Vec::new();
        let mut stack_pointers = Vec::new();
        for &tid in tids {
            if let Ok(registers) = regs::get_registers(tid) {
                pointers.push(ThreadPointer {
                    tid,
                    fs_base: registers.fs_base,
                });
                stack_pointers.push(registers.rsp);
            }
        }
        let (census, blocks) =
            census::take_with_blocks(pid, maps, allocator, &pointers, &stack_pointers);
        self.send(pid, pid, EventKind::HeapCensus(census));
        for piece in LiveBlocks::pieces(blocks, BLOCKS_PER_RECORD) {
            self.send(pid, pid, EventKind::BlocksAtAttach(piece));
        }
    }
}
