//! Components: who holds a process image's memory over time. Live requested bytes come from
//! the heap events (each block's stack names its component); resident memory (RSS, PSS,
//! swap) from the full smaps snapshots, each mapping attributed to a component, allocator
//! arenas split by the live requested bytes inside them with the rest shown as `overhead`.

mod arena;
mod attribution;
mod build;
mod classify;
mod fragmentation;
mod ranges;
mod replay;
mod resolve;
mod rules;
#[cfg(test)]
mod tests;
mod timeline;
mod tracker;

pub(super) use build::{build, ClosedImage, ImageSamples};
pub(super) use replay::{Sample, Samples};
pub(super) use resolve::Images;
pub use rules::{ComponentRule, ComponentRules};
pub(super) use tracker::ImageTracker;

use crate::trace::format::SnapshotReason;

/// The component that holds allocator arena pages no live block accounts for.
pub const OVERHEAD: &str = "overhead";

/// What one component of a process image held. Times are ns since the recording started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Component {
    /// `app`, `mpi`, `libc`, a library's file name (`libfoo.so`), `stacks`, `shm`, `memsup`,
    /// `unknown`, `overhead`, or a name from `--component`.
    pub name: String,
    /// Highest sum of live requested bytes of the blocks attributed to it.
    pub peak_requested_bytes: u64,
    /// Highest RSS, PSS and swap attributed to it in any smaps snapshot.
    pub peak_rss_bytes: u64,
    pub peak_pss_bytes: u64,
    pub peak_swap_bytes: u64,
    /// Live requested bytes over time, downsampled keeping each bucket's maximum.
    pub requested: Vec<TimePoint>,
    /// What each smaps snapshot attributed to it, in time order (one point per snapshot).
    pub resident: Vec<ResidentPoint>,
}

/// A value at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimePoint {
    pub time_ns: u64,
    pub bytes: u64,
}

/// Residency at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentPoint {
    pub time_ns: u64,
    pub rss: u64,
    pub pss: u64,
    pub swap: u64,
}

/// One full smaps snapshot of the image, summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSummary {
    pub time_ns: u64,
    pub reason: SnapshotReason,
    /// CPU time memsup spent taking it.
    pub cost_ns: u64,
    pub mappings: u64,
    /// Sums over every mapping.
    pub rss: u64,
    pub pss: u64,
    pub swap: u64,
    /// Allocator arenas (`[heap]` and anonymous mappings holding heap blocks): resident
    /// bytes, live requested bytes inside them, and the resident bytes no block accounts for.
    pub arena_rss: u64,
    pub arena_requested: u64,
    pub arena_overhead_rss: u64,
}

/// The process-wide samples of the image, downsampled keeping each bucket's maximum.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessTimeline {
    /// Live requested bytes of the whole image.
    pub requested: Vec<TimePoint>,
    /// VmRSS from /proc/PID/status.
    pub rss: Vec<TimePoint>,
    /// Pss from smaps_rollup.
    pub pss: Vec<TimePoint>,
    /// VmSwap from /proc/PID/status.
    pub swap: Vec<TimePoint>,
}

/// Every component view of one image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Components {
    /// By peak RSS, then peak requested bytes, then name.
    pub components: Vec<Component>,
    pub snapshots: Vec<SnapshotSummary>,
    pub timeline: ProcessTimeline,
}
