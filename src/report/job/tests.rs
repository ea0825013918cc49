//! The job renderers on the hand-built four-rank job of `analysis::job::tests`.

use super::*;
use crate::analysis::job::tests::four_rank_job;

fn rendered(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    render(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The keys of the outermost object, in the order written (pretty JSON indents them by 2).
fn top_level_keys(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| line.strip_prefix("  \""))
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .collect()
}

#[test]
fn the_text_table_lists_ranks_in_order_then_their_statistics() {
    let job = Job::of(&four_rank_job());
    let text = rendered(|out| text::render(&job, out));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "job: 6 profiles, 4 ranks (world size 4) on 2 hosts (node1, node2), 1 launcher, 1 other image"
    );
    assert_eq!(
        lines[3],
        "  rank        host  pid requested       RSS       PSS"
    );
    assert_eq!(
        lines[4],
        "  0           node1 300  1.95 KiB  9.77 KiB  5.86 KiB"
    );
    assert_eq!(
        lines[7],
        "  3           node2 303  5.86 KiB 19.53 KiB 11.72 KiB"
    );
    assert_eq!(
        lines[9],
        "  min                    1.95 KiB  9.77 KiB  5.86 KiB"
    );
    assert_eq!(
        lines[13],
        "  max at rank                   2         2         2"
    );
    assert_eq!(
        lines[14],
        "  max/mean                   1.60      1.60      1.76"
    );
    assert!(text.contains("\n  3                   -         -        -         -        -\n"));
    assert!(text.contains("\n  other: overhead, stacks\n"));
    assert!(text.contains("below the status samples' peak RSS): rank 2\n"));
    assert!(text.contains(
        "\n  estimated from pagemap at the peak (a full snapshot was too dear then): rank 0\n"
    ));
    assert!(text.contains("\n  no smaps snapshot: rank 3\n"));
    assert!(text.ends_with("  mpiexec.hydra node1 299 100 bytes 4.88 KiB 3.91 KiB\n"));
}

#[test]
fn a_job_without_ranks_says_so() {
    let mut analyses = four_rank_job();
    for analysis in &mut analyses {
        analysis.processes[0].role = None;
    }
    let job = Job::of(&analyses);
    let text = rendered(|out| text::render(&job, out));
    assert!(text.starts_with("job: 6 profiles, 0 ranks on 0 hosts (), 6 other images\nNo image of these profiles has an MPI rank"), "{text}");
    let html = job_section(&job);
    assert!(html.contains("Nothing to show: no image has an MPI rank."));
}

#[test]
fn the_csv_table_has_a_line_per_rank_launcher_and_statistic() {
    let job = Job::of(&four_rank_job());
    let text = rendered(|out| csv::render(&job, out));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 4 + 1 + 6);
    assert!(lines[0].starts_with("row,host,rank,pid,profile,peak_requested_bytes,peak_rss_bytes,peak_pss_bytes,app_rss_bytes,app_pss_bytes,mpi_rss_bytes"));
    assert!(lines[0].ends_with(",other_rss_bytes,other_pss_bytes,split_estimated"));
    assert_eq!(
        lines[1],
        "rank,node1,0,300,node1.300.msup,2000,10000,6000,4096,3072,9216,5120,2048,1024,16384,8192,3072,3072,1"
    );
    assert!(lines[2].ends_with(",0"), "{}", lines[2]);
    assert_eq!(
        lines[4],
        "rank,node2,3,303,node2.303.msup,6000,20000,12000,,,,,,,,,,,"
    );
    assert_eq!(
        lines[5],
        "launcher,node1,,299,node1.299.msup,100,5000,4000,,,,,,,,,,,"
    );
    assert!(lines[8].starts_with("mean,,,,,5000,25000,17000,8192,"));
    assert!(lines[9].starts_with(&format!("std,,,,,{},", 5_000_000f64.sqrt())));
    assert_eq!(lines[10], "max_rank,,,,,2,2,2,2,2,2,2,2,2,2,2,2,2,");
}

#[test]
fn json_has_the_job_and_one_report_per_profile() {
    let analyses = four_rank_job();
    let job = Job::of(&analyses);
    let text = rendered(|out| crate::report::json::render_job(&analyses, &job, out));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        top_level_keys(&text),
        ["schema", "schema_version", "overview", "job", "profiles"]
    );
    let peaks: Vec<u64> = json["overview"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["peak_requested_bytes"].as_u64().unwrap())
        .collect();
    let images: usize = analyses
        .iter()
        .map(|analysis| analysis.processes.len())
        .sum();
    assert_eq!(peaks.len(), images);
    assert!(peaks.windows(2).all(|pair| pair[0] >= pair[1]), "{peaks:?}");
    let job_json = &json["job"];
    assert_eq!(job_json["profiles"], 6);
    assert_eq!(job_json["other_images"], 1);
    let rank = &job_json["ranks"][3];
    assert_eq!(
        (&rank["rank"], &rank["pid"], &rank["host"]),
        (&3.into(), &303.into(), &"node2".into())
    );
    assert_eq!(rank["peak_requested_bytes"], 6000);
    assert_eq!(rank["app_rss_bytes"], serde_json::Value::Null);
    assert_eq!(rank["split"], serde_json::Value::Null);
    assert_eq!(job_json["ranks"][0]["split"]["estimated"], true);
    assert_eq!(job_json["ranks"][1]["split"]["estimated"], false);
    assert_eq!(
        job_json["ranks"][0]["split"]["components"][4],
        serde_json::json!({"name": "mpi:extra", "rss_bytes": 1024, "pss_bytes": 1024})
    );
    assert_eq!(
        job_json["statistics"]["peak_requested_bytes"],
        serde_json::json!({"count": 4, "min": 2000, "max": 8000, "mean": 5000.0,
            "std": 5_000_000f64.sqrt(), "max_rank": 2, "max_pid": 302, "max_over_mean": 1.6})
    );
    assert_eq!(job_json["statistics"]["libc_rss_bytes"]["count"], 3);
    assert_eq!(job_json["launchers"][0]["program"], "mpiexec.hydra");
    let profiles = json["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 6);
    assert_eq!(profiles[1]["processes"][0]["rank"], 0);
    assert_eq!(profiles[1]["profile"]["host"], "node1");
    // One profile keeps its own keys, with the job added.
    let one = &analyses[..1];
    let text = rendered(|out| crate::report::json::render_job(one, &Job::of(one), out));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["job"]["ranks"][0]["rank"], 2);
    assert_eq!(
        top_level_keys(&text),
        [
            "schema",
            "schema_version",
            "overview",
            "job",
            "profile",
            "unwind_costs",
            "sampler_costs",
            "recorder",
            "processes",
            "node_totals"
        ]
    );
}

#[test]
fn the_chart_stacks_each_rank_s_groups_and_a_rank_without_snapshot_whole() {
    let job = Job::of(&four_rank_job());
    let html = job_section(&job);
    let bars: Vec<(String, String, String)> = html
        .lines()
        .filter(|line| line.starts_with("<rect class=\"bar\""))
        .map(|line| {
            let attribute = |name: &str| {
                let start = line.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                line[start..start + line[start..].find('"').unwrap()].to_string()
            };
            (
                attribute("data-rank"),
                attribute("data-component"),
                attribute("data-bytes"),
            )
        })
        .collect();
    assert_eq!(bars.len(), 3 * 5 + 1);
    let owned = |rank: &str, component: &str, bytes: u64| {
        (rank.to_string(), component.to_string(), bytes.to_string())
    };
    assert_eq!(bars[0], owned("0", "app", 4096));
    assert_eq!(bars[4], owned("0", "other", 3072));
    assert_eq!(bars[7], owned("1", "mpi:shm", 4096));
    assert_eq!(bars[15], owned("3", "unsplit", 20000));
    // Rank 0's split is an estimate: its five bars say so, and no other.
    let estimated = html
        .lines()
        .filter(|line| line.contains("data-estimated=\"true\""));
    let marked: Vec<&str> = estimated.collect();
    assert_eq!(marked.len(), 5);
    assert!(marked.iter().all(|line| line.contains("data-rank=\"0\"")
        && line.contains(" (estimated from pagemap)</title>")));
    // The highest bar, rank 2's 102 KiB, under an axis of 3 steps of 50 KiB.
    assert!(
        html.contains("data-highest=\"104448\" data-axis-max=\"153600\""),
        "{html}"
    );
}

#[test]
fn selecting_a_rank_keeps_only_its_images_and_an_absent_rank_is_none() {
    let selected = select_rank(four_rank_job(), 1).unwrap();
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0].processes[0].pid, 301);
    assert_eq!(select_rank(four_rank_job(), 9).unwrap_err(), [0, 1, 2, 3]);
    let merged = merged(&four_rank_job());
    let pids: Vec<u32> = merged.processes.iter().map(|image| image.pid).collect();
    assert_eq!(pids, [302, 300, 299, 303, 301, 298]);
}
