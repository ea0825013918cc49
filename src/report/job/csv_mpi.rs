//! `memsup report --format csv --mpi-functions`: the MPI functions across the ranks of a job
//! (`analysis::job::mpi_functions`), one row per function, wide form as the job table's
//! CSV: `function,ranks,delta_bytes`, then for each quantity (`calls`, `time_ns`,
//! `allocations`, `allocated_bytes`, `live_bytes_at_finalize`) its `_min`, `_max`, `_mean`,
//! `_std` and `_max_rank` over the ranks that called the function. The same numbers as the
//! JSON's `job.mpi_functions`.

use std::io::Write;

use crate::analysis::job::{Job, MPI_COLUMNS};
use crate::report::csv::field;

/// What each quantity's cells are named after (`calls_min` ...).
const STATISTICS: [&str; 5] = ["min", "max", "mean", "std", "max_rank"];

pub fn render(job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    let mut header = vec!["function".to_string(), "ranks".into(), "delta_bytes".into()];
    for column in MPI_COLUMNS {
        header.extend(STATISTICS.map(|statistic| format!("{}_{statistic}", column.key())));
    }
    writeln!(out, "{}", header.join(","))?;
    for row in &job.mpi_functions {
        let mut cells = vec![
            field(&row.function),
            row.ranks.to_string(),
            row.delta_bytes.to_string(),
        ];
        for statistics in &row.statistics {
            cells.extend([
                statistics.min.to_string(),
                statistics.max.to_string(),
                statistics.mean.to_string(),
                statistics.standard_deviation.to_string(),
                statistics.max_rank.to_string(),
            ]);
        }
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::job::{ColumnStatistics, MpiFunctionRow};

    fn statistics(min: u64, max: u64, max_rank: u32) -> ColumnStatistics {
        ColumnStatistics {
            count: 2,
            min,
            max,
            mean: (min + max) as f64 / 2.0,
            standard_deviation: (max - min) as f64 / 2.0,
            max_rank,
            max_pid: 100 + max_rank,
        }
    }

    #[test]
    fn one_row_per_function_with_five_statistics_per_quantity() {
        let job = Job {
            profiles: 2,
            ranks: Vec::new(),
            launchers: Vec::new(),
            other_images: 0,
            statistics: Vec::new(),
            mpi_functions: vec![MpiFunctionRow {
                function: "MPI_Init".to_string(),
                ranks: 2,
                delta_bytes: -300,
                statistics: vec![
                    statistics(1, 1, 0),
                    statistics(4000, 6000, 1),
                    statistics(2, 3, 1),
                    statistics(3000, 3200, 1),
                    statistics(900, 1100, 0),
                ],
            }],
        };
        let mut out = Vec::new();
        render(&job, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "function,ranks,delta_bytes,\
                 calls_min,calls_max,calls_mean,calls_std,calls_max_rank,\
                 time_ns_min,time_ns_max,time_ns_mean,time_ns_std,time_ns_max_rank,\
                 allocations_min,allocations_max,allocations_mean,allocations_std,\
                 allocations_max_rank,\
                 allocated_bytes_min,allocated_bytes_max,allocated_bytes_mean,\
                 allocated_bytes_std,allocated_bytes_max_rank,\
                 live_bytes_at_finalize_min,live_bytes_at_finalize_max,\
                 live_bytes_at_finalize_mean,live_bytes_at_finalize_std,\
                 live_bytes_at_finalize_max_rank",
                "MPI_Init,2,-300,1,1,1,0,0,4000,6000,5000,1000,1,2,3,2.5,0.5,1,\
                 3000,3200,3100,100,1,900,1100,1000,100,0",
            ]
        );
    }
}
