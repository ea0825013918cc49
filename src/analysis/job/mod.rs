//! The job table: one row per MPI rank of one or many profiles (one per rank, or one holding
//! every rank of `memsup run -- mpirun`), with its high-water marks and the component split
//! at its peak RSS, then each column's statistics across the ranks. Launchers are listed
//! apart; images with no role are counted.

mod mpi_functions;
mod split;
mod statistics;

pub use mpi_functions::{MpiColumn, MpiFunctionRow, MPI_COLUMNS};
pub use split::{group_of, Resident, Split, GROUPS};
pub use statistics::ColumnStatistics;

use crate::analysis::{Analysis, ProcessAnalysis};
use crate::trace::format::ProcessRole;

/// One rank's row.
#[derive(Debug, Clone, PartialEq)]
pub struct RankRow {
    /// The host of the profile that recorded it.
    pub host: String,
    pub rank: u32,
    pub world_size: Option<u32>,
    pub pid: u32,
    /// The profile's path, as the user named it.
    pub profile: String,
    /// Highest live requested bytes.
    pub peak_requested_bytes: u64,
    /// Highest RSS and PSS the residency samples saw.
    pub peak_rss_bytes: u64,
    pub peak_pss_bytes: u64,
    /// The components at the snapshot with the highest RSS; None without snapshots.
    pub split: Option<Split>,
}

/// A launcher image (mpirun, orted, hydra_pmi_proxy ...): no rank, listed apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherRow {
    pub host: String,
    pub pid: u32,
    pub program: String,
    pub profile: String,
    pub peak_requested_bytes: u64,
    pub peak_rss_bytes: u64,
    pub peak_pss_bytes: u64,
}

/// A column of the job table with a number per rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    PeakRequested,
    PeakRss,
    PeakPss,
    /// A group's RSS or PSS at the rank's peak RSS (index into `GROUPS`).
    SplitRss(usize),
    SplitPss(usize),
}

/// Every column, in table order.
pub const COLUMNS: [Column; 13] = [
    Column::PeakRequested,
    Column::PeakRss,
    Column::PeakPss,
    Column::SplitRss(0),
    Column::SplitPss(0),
    Column::SplitRss(1),
    Column::SplitPss(1),
    Column::SplitRss(2),
    Column::SplitPss(2),
    Column::SplitRss(3),
    Column::SplitPss(3),
    Column::SplitRss(4),
    Column::SplitPss(4),
];

impl Column {
    /// Its key in JSON and its CSV header: `peak_rss_bytes`, `mpi_shm_pss_bytes` ...
    pub fn key(self) -> String {
        let group_key = |group: usize| GROUPS[group].replace(':', "_");
        match self {
            Column::PeakRequested => "peak_requested_bytes".to_string(),
            Column::PeakRss => "peak_rss_bytes".to_string(),
            Column::PeakPss => "peak_pss_bytes".to_string(),
            Column::SplitRss(group) => format!("{}_rss_bytes", group_key(group)),
            Column::SplitPss(group) => format!("{}_pss_bytes", group_key(group)),
        }
    }

    /// The rank's value; None for a split column of a rank without a split.
    pub fn value(self, row: &RankRow) -> Option<u64> {
        match self {
            Column::PeakRequested => Some(row.peak_requested_bytes),
            Column::PeakRss => Some(row.peak_rss_bytes),
            Column::PeakPss => Some(row.peak_pss_bytes),
            Column::SplitRss(group) => row.split.as_ref().map(|split| split.groups[group].rss),
            Column::SplitPss(group) => row.split.as_ref().map(|split| split.groups[group].pss),
        }
    }
}

/// The job table of a set of profiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Profiles read.
    pub profiles: usize,
    /// By rank, then host, then pid.
    pub ranks: Vec<RankRow>,
    pub launchers: Vec<LauncherRow>,
    /// Images that are neither (a shell, a helper without MPI variables, a profile recorded
    /// before ranks were known).
    pub other_images: usize,
    /// One per column of `COLUMNS`; None when no rank has a value there.
    pub statistics: Vec<Option<ColumnStatistics>>,
    /// The MPI functions the ranks called, by name, across the ranks.
    pub mpi_functions: Vec<MpiFunctionRow>,
}

impl Job {
    /// The table of `analyses`, one per profile.
    pub fn of(analyses: &[Analysis]) -> Job {
        let mut ranks = Vec::new();
        let mut launchers = Vec::new();
        let mut other_images = 0;
        for analysis in analyses {
            let host = &analysis.profile.host;
            let path = &analysis.profile.path;
            for image in &analysis.processes {
                match &image.role {
                    Some(ProcessRole::Rank(rank)) => ranks.push(RankRow {
                        host: host.clone(),
                        rank: rank.rank,
                        world_size: rank.world_size,
                        pid: image.pid,
                        profile: path.clone(),
                        peak_requested_bytes: image.peak_live_bytes,
                        peak_rss_bytes: image.residency.peak_rss_bytes,
                        peak_pss_bytes: image.residency.peak_pss_bytes,
                        split: Split::at_peak_rss(&image.components),
                    }),
                    Some(ProcessRole::Launcher { program }) => {
                        launchers.push(launcher_row(host, path, program, image))
                    }
                    None => other_images += 1,
                }
            }
        }
        ranks.sort_by(|a, b| (a.rank, &a.host, a.pid).cmp(&(b.rank, &b.host, b.pid)));
        let statistics = COLUMNS
            .iter()
            .map(|&column| {
                let values = ranks
                    .iter()
                    .filter_map(|row| column.value(row).map(|value| (value, row.rank, row.pid)));
                ColumnStatistics::of(values)
            })
            .collect();
        let mpi_functions = mpi_functions::mpi_function_rows(analyses, &ranks);
        Job {
            profiles: analyses.len(),
            mpi_functions,
            ranks,
            launchers,
            other_images,
            statistics,
        }
    }

    /// Whether the profiles make a job report: more than one, or any image with an MPI role.
    /// One profile of a program that is no MPI job keeps the report it always had.
    pub fn applies_to(analyses: &[Analysis]) -> bool {
        analyses.len() > 1
            || analyses
                .iter()
                .flat_map(|analysis| &analysis.processes)
                .any(|image| image.role.is_some())
    }

    /// The hosts of the ranks, sorted, each once.
    pub fn hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = self.ranks.iter().map(|row| row.host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        hosts
    }

    /// Every component name that went into the `other` group, sorted, each once.
    pub fn other_components(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .ranks
            .iter()
            .filter_map(|row| row.split.as_ref())
            .flat_map(|split| split.components.iter())
            .map(|(name, _)| name.as_str())
            .filter(|name| group_of(name) == GROUPS.len() - 1)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

fn launcher_row(host: &str, path: &str, program: &str, image: &ProcessAnalysis) -> LauncherRow {
    LauncherRow {
        host: host.to_string(),
        pid: image.pid,
        program: program.to_string(),
        profile: path.to_string(),
        peak_requested_bytes: image.peak_live_bytes,
        peak_rss_bytes: image.residency.peak_rss_bytes,
        peak_pss_bytes: image.residency.peak_pss_bytes,
    }
}

#[cfg(test)]
pub(crate) mod tests;
