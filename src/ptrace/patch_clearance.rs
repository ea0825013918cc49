//! Before a hook's jump is written over an entry's first instructions, no thread may be
//! about to run from the middle of those bytes: it would run the tail of the jump or its int3
//! padding (SIGILL, SIGSEGV, SIGTRAP). At attach the threads stop anywhere, so one can sit
//! after the first instruction of `malloc`. Such a thread is single-stepped out of the bytes
//! first. A frame that would return, or a signal handler that would go back, into them
//! cannot be stepped out of: that entry keeps an int3 probe, which overwrites only the
//! first byte.

use crate::ptrace::detach::thread_is_zombie;
use crate::ptrace::inside::InsideCheck;
use crate::ptrace::regs;
use crate::ptrace::stop::{Deadline, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;

/// Steps a thread takes at most to leave the bytes: a patch covers at most five instructions
/// and none of them branches back into the patch.
const MAX_STEPS: usize = 8;

/// Bytes a jump overwrites: (first byte, length).
pub(crate) type PatchedBytes = (u64, u64);

/// Whether `address` lies in `bytes` past its first byte, where no instruction of the jump
/// begins.
fn strictly_inside(bytes: PatchedBytes, address: u64) -> bool {
    let (start, length) = bytes;
    address > start && address < start + length
}

impl Tracer<'_> {
    /// Makes every stopped thread of `pid` clear of each of `patches`: a thread stopped
    /// inside one is stepped out. Returns, per patch, why it cannot be written (None: it
    /// can).
    pub(crate) fn clear_patched_bytes(
        &mut self,
        pid: i32,
        patches: &[PatchedBytes],
    ) -> Vec<Option<String>> {
        let mut reasons = vec![None; patches.len()];
        let tids: Vec<i32> = self
            .threads
            .of(pid)
            .into_iter()
            .filter(|&tid| !thread_is_zombie(pid, tid))
            .collect();
        for &tid in &tids {
            for (index, &bytes) in patches.iter().enumerate() {
                if !self.step_out_of(tid, bytes) {
                    reasons[index] = Some(format!(
                        "thread {tid} was stopped inside the bytes its jump would overwrite"
                    ));
                }
            }
        }
        // Only an attach finds threads stopped at arbitrary points with frames below them;
        // elsewhere the one running thread stands at a known event.
        if !tids.iter().any(|tid| self.joining.contains(tid)) {
            return reasons;
        }
        let Some(process) = self.processes.get(&pid) else {
            return reasons;
        };
        let check = InsideCheck::for_process(pid, &self.modules);
        for &tid in &tids {
            // The first reference is the thread's rip, stepped clear above.
            let references = check.code_references(tid, &process.memory);
            for (index, &bytes) in patches.iter().enumerate() {
                if references
                    .iter()
                    .skip(1)
                    .any(|&address| strictly_inside(bytes, address))
                {
                    reasons[index].get_or_insert_with(|| {
                        format!("a frame of thread {tid} goes back inside the bytes its jump would overwrite")
                    });
                }
            }
        }
        reasons
    }

    /// Single-steps stopped thread `tid` until its rip is not inside `bytes`; false if it
    /// is still there (or cannot be stepped).
    fn step_out_of(&mut self, tid: i32, bytes: PatchedBytes) -> bool {
        let deadline = Deadline::after(STOP_TIMEOUT);
        for _ in 0..MAX_STEPS {
            let Ok(registers) = regs::get_registers(tid) else {
                // Not stopped, or gone: a running thread is not one memsup patches under.
                return true;
            };
            if !strictly_inside(bytes, registers.rip) {
                return true;
            }
            if regs::single_step(tid)
                .and_then(|_| self.wait_for_step(tid, &deadline))
                .is_err()
            {
                return false;
            }
        }
        regs::get_registers(tid).is_ok_and(|registers| !strictly_inside(bytes, registers.rip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_past_the_first_byte_are_inside() {
        let bytes = (0x1000, 7);
        assert!(!strictly_inside(bytes, 0x1000));
        assert!(strictly_inside(bytes, 0x1001));
        assert!(strictly_inside(bytes, 0x1006));
        assert!(!strictly_inside(bytes, 0x1007));
        assert!(!strictly_inside(bytes, 0xfff));
    }
}
