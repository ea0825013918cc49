//! `memsup report --format csv` of a job: the job table, one line per rank, then one per
//! launcher, then one per statistic (wide form, for spreadsheets and pandas):
//! `row,host,rank,pid,profile,` then the column keys (`peak_requested_bytes`, ...,
//! `other_pss_bytes`), then `split_estimated` (1 when a rank's split is an estimate from
//! pagemap, 0 when not). `row` is `rank`, `launcher`, or the statistic: `min`, `max`,
//! `mean`, `std`, `max_rank` (the rank holding the max) and `max_over_mean`; fields that do
//! not apply are empty.

use std::io::Write;

use crate::analysis::job::{ColumnStatistics, Job, COLUMNS};
use crate::report::csv::field;

/// The first fields of every line.
pub const IDENTITY: &str = "row,host,rank,pid,profile";

pub fn render(job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    let keys: Vec<String> = COLUMNS.iter().map(|column| column.key()).collect();
    writeln!(out, "{IDENTITY},{},split_estimated", keys.join(","))?;
    for row in &job.ranks {
        let estimated = row.split.as_ref().map(|split| u8::from(split.estimated));
        let values = COLUMNS
            .iter()
            .map(|column| column.value(row))
            .chain([estimated.map(u64::from)])
            .map(|value| value.map_or(String::new(), |v| v.to_string()));
        let identity = format!(
            "rank,{},{},{},{}",
            field(&row.host),
            row.rank,
            row.pid,
            field(&row.profile)
        );
        writeln!(out, "{identity},{}", join(values))?;
    }
    for launcher in &job.launchers {
        let peaks = [
            launcher.peak_requested_bytes,
            launcher.peak_rss_bytes,
            launcher.peak_pss_bytes,
        ];
        let values = (0..=COLUMNS.len()).map(|index| match peaks.get(index) {
            Some(value) => value.to_string(),
            None => String::new(),
        });
        let identity = format!(
            "launcher,{},,{},{}",
            field(&launcher.host),
            launcher.pid,
            field(&launcher.profile)
        );
        writeln!(out, "{identity},{}", join(values))?;
    }
    let statistics: [StatisticCell; 6] = [
        ("min", |s| s.min.to_string()),
        ("max", |s| s.max.to_string()),
        ("mean", |s| s.mean.to_string()),
        ("std", |s| s.standard_deviation.to_string()),
        ("max_rank", |s| s.max_rank.to_string()),
        ("max_over_mean", |s| s.max_over_mean().to_string()),
    ];
    for (name, value) in statistics {
        let values = (job.statistics.iter())
            .map(|s| s.as_ref().map_or(String::new(), value))
            .chain([String::new()]);
        writeln!(out, "{name},,,,,{}", join(values))?;
    }
    Ok(())
}

/// A statistics row's label and how it writes a column's cell.
type StatisticCell = (&'static str, fn(&ColumnStatistics) -> String);

fn join(values: impl Iterator<Item = String>) -> String {
    values.collect::<Vec<_>>().join(",")
}
