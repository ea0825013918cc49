//! A rank's components at its high-water mark: the smaps snapshot with the highest RSS
//! (`peak_split`), each component's RSS and PSS there, grouped as the job table shows them.

use crate::analysis::components::Components;

/// The job table's component groups; every other component name goes to `other`. `mpi:shm`
/// is the MPI library's shared-memory transport; any other `mpi:` component counts as `mpi`.
pub const GROUPS: [&str; 5] = ["app", "mpi", "mpi:shm", "libc", "other"];

/// Resident bytes of a component or group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resident {
    pub rss: u64,
    pub pss: u64,
}

/// The components at one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// When the snapshot was taken (ns since the recording started).
    pub time_ns: u64,
    /// The snapshot reached the peak RSS the status samples saw (`PeakSplit::measured`).
    pub measured: bool,
    /// The snapshot is an estimate from pagemap (`PeakSplit::estimated`).
    pub estimated: bool,
    /// By `GROUPS`.
    pub groups: [Resident; 5],
    /// Every component with its bytes at the snapshot, by name as the analysis orders them.
    pub components: Vec<(String, Resident)>,
}

/// The index in `GROUPS` of a component name.
pub fn group_of(name: &str) -> usize {
    match name {
        "app" => 0,
        "mpi" => 1,
        "mpi:shm" => 2,
        "libc" => 3,
        _ if name.starts_with("mpi:") => 1,
        _ => 4,
    }
}

impl Split {
    /// The split at the snapshot with the highest RSS; None without snapshots.
    pub fn at_peak_rss(components: &Components) -> Option<Split> {
        let peak = components.peak_split?;
        let mut groups = [Resident::default(); 5];
        let mut at_peak = Vec::new();
        for component in &components.components {
            let Some(point) = component
                .resident
                .iter()
                .find(|point| point.time_ns == peak.snapshot_time_ns)
            else {
                continue;
            };
            let group = &mut groups[group_of(&component.name)];
            group.rss += point.rss;
            group.pss += point.pss;
            let resident = Resident {
                rss: point.rss,
                pss: point.pss,
            };
            at_peak.push((component.name.clone(), resident));
        }
        Some(Split {
            time_ns: peak.snapshot_time_ns,
            measured: peak.measured,
            estimated: peak.estimated,
            groups,
            components: at_peak,
        })
    }
}
