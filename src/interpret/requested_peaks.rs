//! New highs of each process's live requested bytes, for the sampler's peak snapshots. Only
//! highs that grew by a tenth (and at least 1 MiB) over the last one noted are passed on:
//! the sampler takes them within the CPU its budget gives snapshots.

use std::sync::Arc;

use crate::events::heap::IntegerMap;
use crate::events::{RequestedHigh, Watched};

/// Live requested bytes below which no peak snapshot is asked for.
const FIRST_PEAK: u64 = 1 << 20;

#[derive(Debug, Default)]
pub struct RequestedPeaks {
    /// None in tests that only count.
    watched: Option<Arc<Watched>>,
    levels: IntegerMap<u32, Level>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Level {
    live: u64,
    /// The last high passed on (0 before the first).
    noted: u64,
}

impl RequestedPeaks {
    pub fn new(watched: Arc<Watched>) -> RequestedPeaks {
        RequestedPeaks {
            watched: Some(watched),
            levels: IntegerMap::default(),
        }
    }

    /// A block of `size` bytes became live at `time_ns` (monotonic); returns whether that
    /// made a noted new high.
    pub fn add(&mut self, pid: u32, size: u64, time_ns: u64) -> bool {
        let level = self.levels.entry(pid).or_default();
        level.live += size;
        if level.live < next_high(level.noted) {
            return false;
        }
        level.noted = level.live;
        if let Some(watched) = &self.watched {
            let high = RequestedHigh {
                bytes: level.live,
                time_ns,
            };
            watched.note_peak(pid as i32, high);
        }
        true
    }

    pub fn remove(&mut self, pid: u32, size: u64) {
        if let Some(level) = self.levels.get_mut(&pid) {
            level.live = level.live.saturating_sub(size);
        }
    }

    /// The process image ended (exit or exec): its next image starts from nothing.
    pub fn forget(&mut self, pid: u32) {
        self.levels.remove(&pid);
    }
}

fn next_high(noted: u64) -> u64 {
    if noted == 0 {
        FIRST_PEAK
    } else {
        noted + (noted / 10).max(FIRST_PEAK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highs_are_noted_when_they_grow_by_a_tenth_and_a_mebibyte() {
        let mut peaks = RequestedPeaks::default();
        let mib = 1 << 20;
        assert!(!peaks.add(1, mib - 1, 0));
        assert!(peaks.add(1, 1, 0)); // 1 MiB: the first high
        assert!(!peaks.add(1, mib - 1, 0)); // below 2 MiB
        assert!(peaks.add(1, 1, 0)); // 2 MiB
        peaks.remove(1, 2 * mib);
        assert!(!peaks.add(1, 2 * mib + mib - 1, 0)); // back at 3 MiB - 1: no new high
        assert!(peaks.add(1, 1, 0)); // 3 MiB
        assert!(peaks.add(1, 30 * mib, 0)); // 33 MiB
        assert!(!peaks.add(1, 3 * mib, 0)); // 36 MiB < 33 + 3.3
        assert!(peaks.add(1, mib, 0)); // 37 MiB
                                       // Another process counts on its own; a new image starts over.
        assert!(peaks.add(2, mib, 0));
        peaks.forget(1);
        assert!(peaks.add(1, mib, 0));
    }
}
