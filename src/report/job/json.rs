//! The JSON report's `job` object (docs/report-json.md, "Job"): a row per rank with the
//! columns of the job table under their keys, the statistics of each column, the launchers.

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::analysis::job::{
    ColumnStatistics, Job, LauncherRow, MpiFunctionRow, RankRow, COLUMNS, MPI_COLUMNS,
};

#[derive(serde::Serialize)]
pub struct JobJson<'a> {
    profiles: usize,
    ranks: Vec<RankJson<'a>>,
    /// One object per column key, null when no rank has a value there.
    statistics: StatisticsJson,
    launchers: Vec<LauncherJson<'a>>,
    other_images: usize,
    mpi_functions: Vec<MpiFunctionJson<'a>>,
}

impl<'a> JobJson<'a> {
    pub fn new(job: &'a Job) -> Self {
        JobJson {
            profiles: job.profiles,
            ranks: job.ranks.iter().map(RankJson).collect(),
            statistics: StatisticsJson(job.statistics.clone()),
            launchers: job.launchers.iter().map(LauncherJson::new).collect(),
            other_images: job.other_images,
            mpi_functions: job.mpi_functions.iter().map(MpiFunctionJson).collect(),
        }
    }
}

/// `{"host", "rank", "world_size", "pid", "profile", the column keys..., "split"}`.
struct RankJson<'a>(&'a RankRow);

impl Serialize for RankJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let row = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("host", &row.host)?;
        map.serialize_entry("rank", &row.rank)?;
        map.serialize_entry("world_size", &row.world_size)?;
        map.serialize_entry("pid", &row.pid)?;
        map.serialize_entry("profile", &row.profile)?;
        for column in COLUMNS {
            map.serialize_entry(&column.key(), &column.value(row))?;
        }
        let split = row.split.as_ref().map(|split| SplitJson {
            time_ns: split.time_ns,
            measured: split.measured,
            estimated: split.estimated,
            components: split
                .components
                .iter()
                .map(|(name, resident)| ComponentAtPeakJson {
                    name,
                    rss_bytes: resident.rss,
                    pss_bytes: resident.pss,
                })
                .collect(),
        });
        map.serialize_entry("split", &split)?;
        map.end()
    }
}

#[derive(serde::Serialize)]
struct SplitJson<'a> {
    time_ns: u64,
    measured: bool,
    estimated: bool,
    components: Vec<ComponentAtPeakJson<'a>>,
}

#[derive(serde::Serialize)]
struct ComponentAtPeakJson<'a> {
    name: &'a str,
    rss_bytes: u64,
    pss_bytes: u64,
}

struct StatisticsJson(Vec<Option<ColumnStatistics>>);

impl Serialize for StatisticsJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(COLUMNS.len()))?;
        for (column, statistics) in COLUMNS.iter().zip(&self.0) {
            map.serialize_entry(&column.key(), &statistics.as_ref().map(ColumnJson::new))?;
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
struct ColumnJson {
    count: usize,
    min: u64,
    max: u64,
    mean: f64,
    std: f64,
    max_rank: u32,
    max_pid: u32,
    max_over_mean: f64,
}

impl ColumnJson {
    fn new(statistics: &ColumnStatistics) -> Self {
        ColumnJson {
            count: statistics.count,
            min: statistics.min,
            max: statistics.max,
            mean: statistics.mean,
            std: statistics.standard_deviation,
            max_rank: statistics.max_rank,
            max_pid: statistics.max_pid,
            max_over_mean: statistics.max_over_mean(),
        }
    }
}

#[derive(serde::Serialize)]
struct LauncherJson<'a> {
    host: &'a str,
    pid: u32,
    program: &'a str,
    profile: &'a str,
    peak_requested_bytes: u64,
    peak_rss_bytes: u64,
    peak_pss_bytes: u64,
}

impl<'a> LauncherJson<'a> {
    fn new(launcher: &'a LauncherRow) -> Self {
        LauncherJson {
            host: &launcher.host,
            pid: launcher.pid,
            program: &launcher.program,
            profile: &launcher.profile,
            peak_requested_bytes: launcher.peak_requested_bytes,
            peak_rss_bytes: launcher.peak_rss_bytes,
            peak_pss_bytes: launcher.peak_pss_bytes,
        }
    }
}

/// `{"function", "ranks", "delta_bytes", then per quantity ("calls", "time_ns", ...) its
/// statistics across the ranks that called it}`.
struct MpiFunctionJson<'a>(&'a MpiFunctionRow);

impl Serialize for MpiFunctionJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let row = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("function", &row.function)?;
        map.serialize_entry("ranks", &row.ranks)?;
        map.serialize_entry("delta_bytes", &row.delta_bytes)?;
        for (column, statistics) in MPI_COLUMNS.iter().zip(&row.statistics) {
            map.serialize_entry(column.key(), &ColumnJson::new(statistics))?;
        }
        map.end()
    }
}
