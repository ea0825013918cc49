//! The MPI functions across the ranks of a job: for each function any rank called, how its
//! calls, time, allocations inside and what they left live at `MPI_Finalize` spread over the
//! ranks (from each rank's `mpi_calls`, `analysis::mpi_calls`).

use super::{ColumnStatistics, RankRow};
use crate::analysis::mpi_calls::MpiFunctionStats;
use crate::analysis::Analysis;
use crate::trace::format::ProcessRole;

/// A quantity of one MPI function per rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiColumn {
    Calls,
    TimeNs,
    Allocations,
    AllocatedBytes,
    LiveBytesAtFinalize,
}

pub const MPI_COLUMNS: [MpiColumn; 5] = [
    MpiColumn::Calls,
    MpiColumn::TimeNs,
    MpiColumn::Allocations,
    MpiColumn::AllocatedBytes,
    MpiColumn::LiveBytesAtFinalize,
];

impl MpiColumn {
    /// Its key in JSON.
    pub fn key(self) -> &'static str {
        match self {
            MpiColumn::Calls => "calls",
            MpiColumn::TimeNs => "time_ns",
            MpiColumn::Allocations => "allocations",
            MpiColumn::AllocatedBytes => "allocated_bytes",
            MpiColumn::LiveBytesAtFinalize => "live_bytes_at_finalize",
        }
    }

    fn value(self, stats: &MpiFunctionStats) -> u64 {
        match self {
            MpiColumn::Calls => stats.calls,
            MpiColumn::TimeNs => stats.time_ns,
            MpiColumn::Allocations => stats.allocations,
            MpiColumn::AllocatedBytes => stats.allocated_bytes,
            MpiColumn::LiveBytesAtFinalize => stats.live_bytes_at_finalize,
        }
    }
}

/// One MPI function across the ranks that called it.
#[derive(Debug, Clone, PartialEq)]
pub struct MpiFunctionRow {
    pub function: String,
    /// Ranks that called it at least once.
    pub ranks: usize,
    /// Sum over those ranks of the live-bytes change across its calls.
    pub delta_bytes: i64,
    /// One per column of `MPI_COLUMNS`, over the ranks that called it.
    pub statistics: Vec<ColumnStatistics>,
}

/// The rows of the ranks' MPI functions, by function name; the ranks in `ranks` order
/// (table order), each rank's image found by its pid in its profile.
pub fn mpi_function_rows(analyses: &[Analysis], ranks: &[RankRow]) -> Vec<MpiFunctionRow> {
    let mut per_rank: Vec<(&RankRow, &[MpiFunctionStats])> = Vec::new();
    for row in ranks {
        let image = analyses
            .iter()
            .filter(|analysis| analysis.profile.path == row.profile)
            .flat_map(|analysis| &analysis.processes)
            .find(|image| {
                image.pid == row.pid
                    && matches!(&image.role, Some(ProcessRole::Rank(r)) if r.rank == row.rank)
            });
        if let Some(image) = image {
            per_rank.push((row, &image.mpi_calls));
        }
    }
    let mut functions: Vec<&str> = per_rank
        .iter()
        .flat_map(|(_, calls)| calls.iter().map(|stats| stats.function.as_str()))
        .collect();
    functions.sort_unstable();
    functions.dedup();
    functions
        .into_iter()
        .map(|function| {
            let calling: Vec<(&RankRow, &MpiFunctionStats)> = per_rank
                .iter()
                .filter_map(|(row, calls)| {
                    let stats = calls.iter().find(|stats| stats.function == function)?;
                    (stats.calls > 0).then_some((*row, stats))
                })
                .collect();
            let statistics = MPI_COLUMNS
                .iter()
                .map(|column| {
                    let values = calling
                        .iter()
                        .map(|(row, stats)| (column.value(stats), row.rank, row.pid));
                    ColumnStatistics::of(values).expect("a function some rank called")
                })
                .collect();
            MpiFunctionRow {
                function: function.to_string(),
                ranks: calling.len(),
                delta_bytes: calling.iter().map(|(_, stats)| stats.delta_bytes).sum(),
                statistics,
            }
        })
        .filter(|row| row.ranks > 0)
        .collect()
}
