//! Counting one mapping system call into a process's or a call site's `MappingStats`.

use super::MappingStats;
use crate::trace::format::MapCall;

/// One recorded mapping call with its result.
#[derive(Debug, Clone, Copy)]
pub(super) struct MappingCall {
    pub call: MapCall,
    /// The length argument (mmap, munmap).
    pub length: u64,
    pub result: i64,
    /// How far this call moved the program break up (brk only; 0 for the first brk, which
    /// only reports where the break is).
    pub brk_growth: u64,
}

impl MappingStats {
    pub(super) fn count(&mut self, mapping: MappingCall) {
        *self.calls.entry(mapping.call).or_default() += 1;
        match mapping.call {
            MapCall::Mmap if !is_errno(mapping.result) => self.mmap_bytes += mapping.length,
            MapCall::Munmap if mapping.result == 0 => self.munmap_bytes += mapping.length,
            MapCall::Brk => self.brk_growth_bytes += mapping.brk_growth,
            _ => {}
        }
    }

    /// Bytes this caller added to the address space: mmap'd plus break growth.
    pub fn bytes_mapped(&self) -> u64 {
        self.mmap_bytes + self.brk_growth_bytes
    }

    /// Adds another caller's counts.
    pub(super) fn add(&mut self, other: &MappingStats) {
        for (&call, &count) in &other.calls {
            *self.calls.entry(call).or_default() += count;
        }
        self.mmap_bytes += other.mmap_bytes;
        self.munmap_bytes += other.munmap_bytes;
        self.brk_growth_bytes += other.brk_growth_bytes;
        self.peak_bytes += other.peak_bytes;
    }

    /// Every call counted.
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
}

/// Mapping calls return -errno (-4095..=-1) on failure.
fn is_errno(result: i64) -> bool {
    (-4095..=-1).contains(&result)
}
