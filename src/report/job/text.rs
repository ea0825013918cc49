//! The job table as text: the ranks' high-water marks, then their components at each
//! rank's peak RSS (by RSS, then by PSS), each table followed by the statistics across
//! ranks; then the launchers.

use std::io::Write;

use crate::analysis::job::{
    Column, ColumnStatistics, Job, MpiColumn, MpiFunctionRow, COLUMNS, GROUPS, MPI_COLUMNS,
};
use crate::report::text::{human_duration, short_bytes};

pub fn render(job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{}", headline(job))?;
    if job.ranks.is_empty() {
        writeln!(
            out,
            "No image of these profiles has an MPI rank: memsup learns ranks from each \
             process's MPI launcher variables, and these recordings name none."
        )?;
    } else {
        writeln!(out)?;
        let peaks = [Column::PeakRequested, Column::PeakRss, Column::PeakPss];
        let headers = ["rank", "host", "pid", "requested", "RSS", "PSS"];
        writeln!(
            out,
            "high-water marks (peak requested, peak sampled RSS and PSS)"
        )?;
        table(job, &headers, 3, &peaks, out)?;
        let rss: Vec<Column> = (0..GROUPS.len()).map(Column::SplitRss).collect();
        let pss: Vec<Column> = (0..GROUPS.len()).map(Column::SplitPss).collect();
        let mut headers = vec!["rank"];
        headers.extend(GROUPS);
        writeln!(out, "\ncomponents at each rank's peak RSS snapshot, by RSS")?;
        table(job, &headers, 1, &rss, out)?;
        writeln!(out, "\ncomponents at each rank's peak RSS snapshot, by PSS")?;
        table(job, &headers, 1, &pss, out)?;
        split_notes(job, out)?;
        mpi_functions(job, out)?;
    }
    launchers(job, out)
}

/// "job: 4 profiles, 4 ranks (world size 4) on 1 host (vm), 1 launcher".
fn headline(job: &Job) -> String {
    let mut parts = vec![plural(job.profiles, "profile", "profiles")];
    let hosts = job.hosts();
    let mut world_sizes: Vec<u32> = job.ranks.iter().filter_map(|r| r.world_size).collect();
    world_sizes.sort_unstable();
    world_sizes.dedup();
    let world = match world_sizes.as_slice() {
        [size] => format!(" (world size {size})"),
        _ => String::new(),
    };
    parts.push(format!(
        "{}{world} on {} ({})",
        plural(job.ranks.len(), "rank", "ranks"),
        plural(hosts.len(), "host", "hosts"),
        hosts.join(", ")
    ));
    if !job.launchers.is_empty() {
        parts.push(plural(job.launchers.len(), "launcher", "launchers"));
    }
    if job.other_images > 0 {
        parts.push(plural(job.other_images, "other image", "other images"));
    }
    format!("job: {}", parts.join(", "))
}

/// One table: a row per rank (`leading` identity columns, then `columns`), then the
/// statistics rows.
fn table(
    job: &Job,
    headers: &[&str],
    leading: usize,
    columns: &[Column],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for row in &job.ranks {
        let identity = [row.rank.to_string(), row.host.clone(), row.pid.to_string()];
        let mut cells: Vec<String> = identity[..leading].to_vec();
        for column in columns {
            cells.push(column.value(row).map_or("-".to_string(), short_bytes));
        }
        rows.push(cells);
    }
    let statistics: Vec<Option<ColumnStatistics>> = columns
        .iter()
        .map(|column| {
            let index = COLUMNS.iter().position(|c| c == column).expect("a column");
            job.statistics[index]
        })
        .collect();
    let lines: [StatisticCell; 6] = [
        ("min", |s| short_bytes(s.min)),
        ("max", |s| short_bytes(s.max)),
        ("mean", |s| short_bytes(s.mean.round() as u64)),
        ("std dev", |s| {
            short_bytes(s.standard_deviation.round() as u64)
        }),
        ("max at rank", |s| s.max_rank.to_string()),
        ("max/mean", |s| format!("{:.2}", s.max_over_mean())),
    ];
    for (label, cell) in lines {
        let mut cells = vec![label.to_string()];
        cells.resize(leading, String::new());
        cells.extend(
            statistics
                .iter()
                .map(|s| s.as_ref().map_or("-".to_string(), cell)),
        );
        rows.push(cells);
    }
    let ranks = job.ranks.len();
    write_table(headers, leading, &rows, Some(ranks), out)
}

/// Columns as wide as their widest cell; the first `leading` left-aligned, the others
/// right-aligned; a blank line before row `break_before` (the statistics).
fn write_table(
    headers: &[&str],
    leading: usize,
    rows: &[Vec<String>],
    break_before: Option<usize>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::from(" ");
        for (index, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            // The label of a statistics row spans the identity columns.
            if index < leading {
                text.push_str(&format!(" {cell:<width$}"));
            } else {
                text.push_str(&format!(" {cell:>width$}"));
            }
        }
        text.trim_end().to_string()
    };
    writeln!(out, "{}", line(headers.to_vec()))?;
    for (index, row) in rows.iter().enumerate() {
        if Some(index) == break_before {
            writeln!(out)?;
        }
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}

/// Which components `other` holds, and which ranks' splits are not at their peak or are
/// estimates.
fn split_notes(job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    let others = job.other_components();
    if !others.is_empty() {
        writeln!(out, "  other: {}", others.join(", "))?;
    }
    let ranks_where = |keep: &dyn Fn(&crate::analysis::job::RankRow) -> bool| -> Vec<String> {
        let ranks = job.ranks.iter().filter(|row| keep(row));
        ranks.map(|row| row.rank.to_string()).collect()
    };
    let unmeasured = ranks_where(&|row| row.split.as_ref().is_some_and(|s| !s.measured));
    if !unmeasured.is_empty() {
        writeln!(
            out,
            "  not measured at the peak (the highest snapshot is more than a 64th below the \
             status samples' peak RSS): rank {}",
            unmeasured.join(", ")
        )?;
    }
    let estimated = ranks_where(&|row| row.split.as_ref().is_some_and(|s| s.estimated));
    if !estimated.is_empty() {
        writeln!(
            out,
            "  estimated from pagemap at the peak (a full snapshot was too dear then): rank {}",
            estimated.join(", ")
        )?;
    }
    let missing = ranks_where(&|row| row.split.is_none());
    if !missing.is_empty() {
        writeln!(out, "  no smaps snapshot: rank {}", missing.join(", "))?;
    }
    Ok(())
}

fn launchers(job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    if job.launchers.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nlaunchers (not ranks)")?;
    let headers = ["program", "host", "pid", "requested", "RSS", "PSS"];
    let rows: Vec<Vec<String>> = job
        .launchers
        .iter()
        .map(|launcher| {
            vec![
                launcher.program.clone(),
                launcher.host.clone(),
                launcher.pid.to_string(),
                short_bytes(launcher.peak_requested_bytes),
                short_bytes(launcher.peak_rss_bytes),
                short_bytes(launcher.peak_pss_bytes),
            ]
        })
        .collect();
    write_table(&headers, 3, &rows, None, out)
}

/// A statistics row's label and how it writes a column's cell.
type StatisticCell = (&'static str, fn(&ColumnStatistics) -> String);

fn plural(count: usize, one: &str, many: &str) -> String {
    match count {
        1 => format!("1 {one}"),
        _ => format!("{count} {many}"),
    }
}

/// The MPI functions across the ranks that called them: calls (min–max), time and what
/// the calls allocated and left live at MPI_Finalize (mean, and max with its rank), and the
/// change of live bytes across the calls summed over the ranks.
fn mpi_functions(job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    if job.mpi_functions.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nMPI functions across ranks (mean, max at rank; allocations by the calling thread)"
    )?;
    let headers = [
        "function",
        "ranks",
        "calls",
        "time",
        "allocated",
        "live at Finalize",
        "delta",
    ];
    let rows: Vec<Vec<String>> = job.mpi_functions.iter().map(mpi_function_cells).collect();
    write_table(&headers, 1, &rows, None, out)
}

fn mpi_function_cells(row: &MpiFunctionRow) -> Vec<String> {
    let statistics = |column: MpiColumn| {
        let index = MPI_COLUMNS
            .iter()
            .position(|c| *c == column)
            .expect("a column");
        row.statistics[index]
    };
    let calls = statistics(MpiColumn::Calls);
    let calls = if calls.min == calls.max {
        calls.min.to_string()
    } else {
        format!("{}–{}", calls.min, calls.max)
    };
    let spread = |column: MpiColumn, format: fn(u64) -> String| {
        let s = statistics(column);
        format!(
            "{}, {} at {}",
            format(s.mean.round() as u64),
            format(s.max),
            s.max_rank
        )
    };
    let delta = if row.delta_bytes < 0 {
        format!("-{}", short_bytes(row.delta_bytes.unsigned_abs()))
    } else {
        format!("+{}", short_bytes(row.delta_bytes as u64))
    };
    vec![
        row.function.clone(),
        row.ranks.to_string(),
        calls,
        spread(MpiColumn::TimeNs, human_duration),
        spread(MpiColumn::AllocatedBytes, short_bytes),
        spread(MpiColumn::LiveBytesAtFinalize, short_bytes),
        delta,
    ]
}
