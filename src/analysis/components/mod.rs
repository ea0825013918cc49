//! Components: who holds a process image's memory over time. Live requested bytes come from
//! the heap events (each block's stack names its component); resident memory (RSS, PSS,
//! swap) from the full smaps snapshots, each mapping attributed to a component, allocator
//! arenas split by the live requested bytes inside them with the rest shown as `overhead`.

mod arena;
mod arena_free;
mod attribution;
mod build;
mod census_split;
mod chunk_gaps;
mod classify;
mod fragmentation;
mod loaded_by_mpi;
mod ranges;
mod replay;
mod resolve;
mod rules;
#[cfg(test)]
mod tests;
mod timeline;
mod tracker;

pub use arena_free::ArenaFree;
pub(super) use build::{build, ClosedImage, ImageSamples};
pub(super) use census_split::split_by_census;
pub use chunk_gaps::ChunkGaps;
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
    /// The image's live requested bytes at the snapshot.
    pub requested: u64,
    /// For a snapshot taken for a new high: that high, and whether it was still there.
    pub high: Option<HighAtSnapshot>,
    /// For an estimate (taken while the snapshot for a high was too dear to take yet): how
    /// many mappings were counted from pagemap, the others as at the last snapshot.
    pub pagemap_mappings: Option<u64>,
}

/// The high a snapshot was taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HighAtSnapshot {
    /// `requested` or `rss`.
    pub kind: &'static str,
    pub bytes: u64,
    /// How long after the high the snapshot was taken.
    pub delay_ns: u64,
    /// Whether the snapshot still shows it: live requested bytes at least the high, or RSS
    /// within a 64th (at least 64 KiB) of it. When not, the memory went away first and the
    /// snapshot is no picture of the high.
    pub held: bool,
}

/// How the highest RSS the status samples saw compares with the highest snapshot: the
/// component split at the peak is measured only when that snapshot reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeakSplit {
    /// Highest VmRSS of the status samples (0 without any).
    pub peak_rss: u64,
    /// Time and RSS of the snapshot with the highest RSS.
    pub snapshot_time_ns: u64,
    pub snapshot_rss: u64,
    /// The snapshot's RSS is within a 64th (at least 64 KiB) of the peak, or above it.
    pub measured: bool,
    /// That snapshot is an estimate (`SnapshotSummary::pagemap_mappings`).
    pub estimated: bool,
}

/// The tolerance of `held` and `measured`: status counters and smaps differ by a few pages,
/// and a program keeps faulting in a few more.
pub fn near(value: u64, target: u64) -> bool {
    value + (target / 64).max(64 << 10) >= target
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
    /// None without snapshots.
    pub peak_split: Option<PeakSplit>,
}
