//! `memsup report FILE...|DIR`: the job table over many profiles, on synthetic rank
//! profiles (with their ProcessRole records) and on real 4-rank jobs under both MPIs, one
//! profile per rank. The table's numbers must be each rank's own report's, and its
//! statistics what those numbers give.

use std::path::Path;

use memsup::trace::synthetic_rank::{app_buffer, pid_of, write_rank_profile, MPI_BUFFER};
use serde_json::Value;

use crate::common::mpi::job_lines;
use crate::common::mpi::{mpi_fixture, mpi_libraries, MpiLibrary, MpiLinking};
use crate::common::report::report_output;
use crate::common::run::{clean_command, memsup_binary, run_command};

const STATISTICS_COLUMNS: [&str; 3] = ["peak_requested_bytes", "peak_rss_bytes", "peak_pss_bytes"];

/// `memsup report --format json` of several inputs.
fn job_json(inputs: &[&Path], options: &[&str]) -> Value {
    let mut command = clean_command(memsup_binary());
    command
        .args(["report", "--format", "json"])
        .args(options)
        .args(inputs);
    let output = run_command(command, None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// Every image of every profile of a job report, with the profile's host.
fn images(report: &Value) -> Vec<(String, Value)> {
    let profiles = report["profiles"].as_array().expect("profiles");
    profiles
        .iter()
        .flat_map(|profile| {
            let host = profile["profile"]["host"].as_str().unwrap().to_string();
            let processes = profile["processes"].as_array().unwrap().clone();
            processes
                .into_iter()
                .map(move |image| (host.clone(), image))
        })
        .collect()
}

/// The table's rows must be the ranked images' own numbers, in rank order, and each
/// column's statistics what those numbers give. Returns the rows.
fn assert_table_matches_the_images(report: &Value) -> Vec<Value> {
    let job = &report["job"];
    let mut ranked: Vec<(String, Value)> = images(report)
        .into_iter()
        .filter(|(_, image)| !image["rank"].is_null())
        .collect();
    ranked.sort_by_key(|(_, image)| (image["rank"].as_u64(), image["pid"].as_u64()));
    let rows = job["ranks"].as_array().expect("ranks").clone();
    assert_eq!(rows.len(), ranked.len(), "a row per ranked image");
    for (row, (host, image)) in rows.iter().zip(&ranked) {
        assert_eq!(row["rank"], image["rank"]);
        assert_eq!(row["pid"], image["pid"]);
        assert_eq!(row["host"].as_str(), Some(host.as_str()));
        assert_eq!(row["peak_requested_bytes"], image["peak_live_bytes"]);
        assert_eq!(row["peak_rss_bytes"], image["residency"]["peak_rss_bytes"]);
        assert_eq!(row["peak_pss_bytes"], image["residency"]["peak_pss_bytes"]);
    }
    for column in STATISTICS_COLUMNS {
        let values: Vec<u64> = rows
            .iter()
            .map(|row| row[column].as_u64().unwrap())
            .collect();
        let statistics = &job["statistics"][column];
        if values.is_empty() {
            assert!(statistics.is_null(), "{column}");
            continue;
        }
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        let variance = values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / values.len() as f64;
        let max = *values.iter().max().unwrap();
        let at_max = values.iter().position(|&v| v == max).unwrap();
        assert_eq!(statistics["min"], *values.iter().min().unwrap(), "{column}");
        assert_eq!(statistics["max"], max, "{column}");
        assert_eq!(statistics["max_rank"], rows[at_max]["rank"], "{column}");
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(
            close(statistics["mean"].as_f64().unwrap(), mean),
            "{column} mean"
        );
        let std = statistics["std"].as_f64().unwrap();
        assert!(
            close(std, variance.sqrt()),
            "{column} std {std} against {}",
            variance.sqrt()
        );
    }
    rows
}

/// Eight synthetic ranks, written out of order into one directory and read as one job.
#[test]
fn synthetic_rank_profiles_make_one_job_table() {
    let directory = tempfile::tempdir().unwrap();
    for rank in [5, 0, 7, 2, 1, 6, 3, 4] {
        let path = directory.path().join(format!("{rank}.msup"));
        write_rank_profile(&path, rank, 8, 3000).unwrap();
    }
    let report = job_json(&[directory.path()], &[]);
    assert_eq!(report["job"]["profiles"], 8);
    let rows = assert_table_matches_the_images(&report);
    for (rank, row) in rows.iter().enumerate() {
        let rank = rank as u32;
        assert_eq!(row["rank"], rank);
        assert_eq!(row["pid"], pid_of(rank));
        assert_eq!(row["world_size"], 8);
        // The two buffers held to the end, and the churn's live bytes at the peak on top.
        let peak = row["peak_requested_bytes"].as_u64().unwrap();
        let held = app_buffer(rank) + MPI_BUFFER;
        assert!(
            (held..held + 512 * 4000).contains(&peak),
            "rank {rank}: {peak}"
        );
        let split = &row["split"];
        assert_eq!(split["measured"], true, "rank {rank}");
        assert_eq!(row["libc_rss_bytes"], 1 << 20, "libc text");
        assert_eq!(row["libc_pss_bytes"], 512 << 10);
        // MPI: its text (1.5 MiB RSS, 768 KiB PSS) and its heap blocks, all resident.
        let mpi_rss = row["mpi_rss_bytes"].as_u64().unwrap();
        assert!(
            mpi_rss >= (1536 << 10) + MPI_BUFFER,
            "rank {rank}: mpi {mpi_rss}"
        );
        assert!(row["app_rss_bytes"].as_u64().unwrap() >= app_buffer(rank));
    }
    // The biggest app buffer is rank 6's ((6 % 7 + 1) MiB).
    assert_eq!(report["job"]["statistics"]["app_rss_bytes"]["max_rank"], 6);
    assert_eq!(report["job"]["launchers"], serde_json::json!([]));

    let text = report_output(directory.path(), &[]);
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        "job: 8 profiles, 8 ranks (world size 8) on 1 host (node0)"
    );
    let processes = text
        .lines()
        .filter(|line| line.starts_with("== process "))
        .count();
    assert_eq!(processes, 8, "each profile's report follows the table");

    // --rank: the whole table, then only that rank's image.
    let one = report_output(directory.path(), &["--rank", "3"]);
    assert!(one.starts_with(first));
    let shown: Vec<&str> = one
        .lines()
        .filter(|line| line.starts_with("== process "))
        .collect();
    let header = format!(
        "== process {} (launch): rank 3 of 8 (PMI_RANK, job synthetic) ==",
        pid_of(3)
    );
    assert_eq!(shown, [header]);

    let csv = report_output(directory.path(), &["--format", "csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 8 + 6);
    let rank_two: Vec<&str> = lines[3].split(',').collect();
    assert_eq!(
        rank_two[..4],
        ["rank", "node0", "2", &pid_of(2).to_string()]
    );
    assert_eq!(rank_two[5], rows[2]["peak_requested_bytes"].to_string());
}

#[test]
fn a_rank_no_image_has_and_a_directory_without_profiles_are_refused_in_one_line() {
    let directory = tempfile::tempdir().unwrap();
    write_rank_profile(&directory.path().join("0.msup"), 0, 1, 100).unwrap();
    let refused = |arguments: &[&std::ffi::OsStr]| {
        let mut command = clean_command(memsup_binary());
        command.arg("report").args(arguments);
        run_command(command, None)
    };
    let output = refused(&[
        "--rank".as_ref(),
        "5".as_ref(),
        directory.path().as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(80));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "memsup: error: no process image of the profile is MPI rank 5 (ranks recorded: 0)\n"
    );
    let empty = tempfile::tempdir().unwrap();
    let output = refused(&[empty.path().as_os_str()]);
    assert_eq!(output.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.ends_with("the directory holds no *.msup profile\n"),
        "{stderr}"
    );
}

/// The fixture's images of a job report: 4, each exiting 0 with at least its 2 × 4 MiB of
/// buffers requested at its peak.
fn assert_four_fixture_ranks(report: &Value, fixture: &Path, library: MpiLibrary) {
    let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
    let ranks: Vec<(String, Value)> = images(report)
        .into_iter()
        .filter(|(_, image)| {
            image["exe"]
                .as_str()
                .is_some_and(|exe| exe.ends_with(&name))
        })
        .collect();
    assert_eq!(
        ranks.len(),
        4,
        "{library:?}: an image of the fixture per rank"
    );
    for (_, image) in &ranks {
        assert_eq!(
            image["exit"],
            serde_json::json!({"kind": "code", "value": 0})
        );
        let peak = image["peak_live_bytes"].as_u64().unwrap();
        assert!(
            peak >= 8 << 20,
            "{library:?}: peak {peak}; warnings {}, engine {}, hooks {}, calls {}",
            image["warnings"],
            image["engine"],
            image["hooks"],
            image["calls"]
        );
    }
    let rows = assert_table_matches_the_images(report);
    let numbers: Vec<u64> = rows
        .iter()
        .map(|row| row["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [0, 1, 2, 3], "{library:?}");
    for row in &rows {
        assert_eq!(row["world_size"], 4, "{library:?}");
        assert!(
            row["split"].is_object(),
            "{library:?}: a snapshot at each rank's peak"
        );
    }
    // Across the ranks: each called MPI_Init and MPI_Finalize once and MPI_Alltoall 3 times,
    // and MPI_Init's bytes are what the ranks' own mpi_calls say.
    let functions = report["job"]["mpi_functions"].as_array().unwrap();
    let function = |name: &str| {
        functions
            .iter()
            .find(|row| row["function"] == name)
            .unwrap_or_else(|| panic!("{library:?}: no {name} in {functions:?}"))
    };
    for (name, calls) in [("MPI_Init", 1), ("MPI_Finalize", 1), ("MPI_Alltoall", 3)] {
        let row = function(name);
        assert_eq!(row["ranks"], 4, "{library:?} {name}");
        assert_eq!(
            (&row["calls"]["min"], &row["calls"]["max"]),
            (&serde_json::json!(calls), &serde_json::json!(calls)),
            "{library:?} {name}"
        );
    }
    let init_bytes: Vec<u64> = images(report)
        .iter()
        .filter_map(|(_, image)| {
            let calls = image["mpi_calls"].as_array()?;
            let init = calls.iter().find(|call| call["function"] == "MPI_Init")?;
            init["allocated_bytes"].as_u64()
        })
        .collect();
    assert_eq!(init_bytes.len(), 4, "{library:?}");
    let init = &function("MPI_Init")["allocated_bytes"];
    assert_eq!(
        init["min"],
        *init_bytes.iter().min().unwrap(),
        "{library:?}"
    );
    assert_eq!(
        init["max"],
        *init_bytes.iter().max().unwrap(),
        "{library:?}"
    );
}

/// `mpirun -n 4 memsup run -o 'DIR/%r.msup' -- FIXTURE 3`: one profile per rank, reported
/// as one job; and `memsup run -o JOB -- mpirun -n 4 FIXTURE 3`: one profile holding the
/// launcher and the four ranks. The fixture prints what it prints natively both ways; the
/// table is the ranks' own numbers, in rank order, and the launcher is no rank.
#[test]
fn a_four_rank_job_reports_as_one_job_both_ways() {
    for library in mpi_libraries() {
        let fixture = mpi_fixture("mpi_alltoall", library, MpiLinking::Dynamic);
        let native = run_command(library.launch(4, &fixture, &["3"]), None);
        assert!(native.status.success(), "{library:?}: {native:?}");
        let directory = tempfile::tempdir().unwrap();
        let per_rank = directory.path().join("ranks");
        std::fs::create_dir(&per_rank).unwrap();
        let template = format!("{}/%r.msup", per_rank.display());
        let mut command = library.launch(4, memsup_binary(), &["run", "-q", "-o", &template, "--"]);
        command.arg(&fixture).arg("3");
        let supervised = run_command(command, None);
        assert!(
            supervised.status.success(),
            "{library:?}: {}",
            String::from_utf8_lossy(&supervised.stderr)
        );
        assert_eq!(job_lines(&supervised.stdout), job_lines(&native.stdout));
        let report = job_json(&[&per_rank], &[]);
        assert_eq!(report["job"]["profiles"], 4, "{library:?}");
        assert_four_fixture_ranks(&report, &fixture, library);
        assert_mpi_functions_csv_matches(&per_rank, &report);
        let text = report_output(&per_rank, &[]);
        assert!(
            text.starts_with("job: 4 profiles, 4 ranks (world size 4) on 1 host"),
            "{text}"
        );

        let whole = directory.path().join("job.msup");
        let mut command = library.command(memsup_binary());
        command.arg("run").arg("-q").arg("-o").arg(&whole).arg("--");
        command
            .args(library.launch_arguments(4))
            .arg(&fixture)
            .arg("3");
        let supervised = run_command(command, None);
        assert!(supervised.status.success(), "{library:?}: {supervised:?}");
        assert_eq!(job_lines(&supervised.stdout), job_lines(&native.stdout));
        let report = job_json(&[&whole], &[]);
        // One profile keeps its own keys; the job table is added.
        assert!(report["processes"].is_array() && report["profiles"].is_null());
        let mut wrapped = serde_json::json!({"profiles": [report.clone()]});
        wrapped["job"] = report["job"].clone();
        assert_four_fixture_ranks(&wrapped, &fixture, library);
        let launchers = report["job"]["launchers"].as_array().unwrap();
        assert!(
            !launchers.is_empty(),
            "{library:?}: the launcher is listed apart"
        );
    }
}

/// `--format csv --mpi-functions` of `inputs` holds the JSON's `job.mpi_functions`, a row
/// each in the same order, every number equal.
fn assert_mpi_functions_csv_matches(inputs: &Path, report: &Value) {
    let csv = report_output(inputs, &["--format", "csv", "--mpi-functions"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let functions = report["job"]["mpi_functions"].as_array().unwrap();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), functions.len(), "{csv}");
    assert!(!rows.is_empty(), "MPI_Init at least");
    for (line, function) in rows.iter().zip(functions) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        assert_eq!(cells[0], function["function"].as_str().unwrap());
        for (name, cell) in header.iter().zip(&cells).skip(1) {
            let expected = match name.rsplit_once('_') {
                _ if ["ranks", "delta_bytes"].contains(name) => function[*name].as_f64(),
                Some((quantity, "rank")) => {
                    let quantity = quantity.strip_suffix("_max").unwrap();
                    function[quantity]["max_rank"].as_f64()
                }
                Some((quantity, statistic)) => function[quantity][statistic].as_f64(),
                None => None,
            };
            // serde_json parses floats to within an ulp or so, not exactly.
            let (cell, expected) = (cell.parse::<f64>().unwrap(), expected.unwrap());
            assert!(
                (cell - expected).abs() <= expected.abs() * 1e-12,
                "{name} of {}: {cell} against {expected}",
                cells[0]
            );
        }
    }
}

/// The HTML page of a synthetic job, as Chromium builds it: one bar per rank and group,
/// bottom to top, each of the rank's bytes from the JSON table and as tall as those bytes
/// on the chart's axis; the flame graphs of every profile still drawn by the page's script.
#[test]
fn the_html_chart_stacks_each_rank_s_high_water_mark_by_component() {
    if !crate::common::tools::require_tool("chromium") {
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let job = directory.path().join("job");
    std::fs::create_dir(&job).unwrap();
    for rank in 0..4 {
        write_rank_profile(&job.join(format!("{rank}.msup")), rank, 4, 2000).unwrap();
    }
    let rows = job_json(&[&job], &[])["job"]["ranks"]
        .as_array()
        .unwrap()
        .clone();
    let page = directory.path().join("job.html");
    std::fs::write(&page, report_output(&job, &["--format", "html", "-o", "-"])).unwrap();
    let browser = directory.path().join("chromium");
    let dom = crate::common::chromium::dumped_dom(crate::common::chromium::start_chromium(
        &page, &browser,
    ));
    let axis_max: f64 = attribute(
        dom_line(&dom, "<svg class=\"timeline-chart\" data-chart=\"job-hwm\""),
        "data-axis-max",
    )
    .parse()
    .unwrap();
    let bars: Vec<&str> = dom
        .lines()
        .filter(|line| line.starts_with("<rect class=\"bar\""))
        .collect();
    let groups = ["app", "mpi", "mpi_shm", "libc", "other"];
    assert_eq!(bars.len(), 4 * groups.len());
    for (bar, index) in bars.iter().zip(0..) {
        let (row, group) = (&rows[index / groups.len()], groups[index % groups.len()]);
        assert_eq!(attribute(bar, "data-rank"), row["rank"].to_string());
        assert_eq!(attribute(bar, "data-component"), group.replace('_', ":"));
        let bytes = row[format!("{group}_rss_bytes")].as_u64().unwrap();
        assert_eq!(attribute(bar, "data-bytes"), bytes.to_string());
        let height: f64 = attribute(bar, "height").parse().unwrap();
        let expected = bytes as f64 / axis_max * 220.0;
        assert!(
            (height - expected).abs() < 0.02,
            "{bar}: {height} against {expected}"
        );
    }
    assert!(dom.contains("class=\"frame"), "the flame graphs are drawn");
}

/// The first line of `dom` that starts with `prefix`.
fn dom_line<'a>(dom: &'a str, prefix: &str) -> &'a str {
    dom.lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in the page"))
}

/// The value of attribute `name` in an element's line.
fn attribute<'a>(line: &'a str, name: &str) -> &'a str {
    let start = line.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
    &line[start..start + line[start..].find('"').unwrap()]
}
