//! `memsup report` choosing what to show and where: the overview of several process images
//! (fixtures/fork_exec.c: three images), `--pid` and `--exe`, the newest profile when none
//! is named, report files named after the profile, and `memsup ./app`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use memsup::report::text::{human_duration, short_bytes};
use serde_json::Value;

use crate::common::chromium::{dumped_dom, start_chromium};
use crate::common::report::{processes, report_json_with, report_output};
use crate::common::run::{clean_command, memsup_binary, run_command};
use crate::common::*;

/// fork_exec's three images: the parent, its child until exec, the child as exit3.
struct ForkExec {
    recording: Recording,
    parent_pid: u64,
    child_pid: u64,
    fork_exec: String,
    exit3: String,
}

fn fork_exec() -> ForkExec {
    let fixture = crate::common::fixture("fork_exec", Variant::Dynamic);
    let child_program = crate::common::fixture("exit3", Variant::Dynamic);
    let child_path = child_program.to_string_lossy().into_owned();
    let recording = record(&fixture, &[child_path.as_str()], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with status 3\n\
         fork_exec: child exited with status 3\n"
    );
    let report = &recording.report;
    let parent_pid = number(
        process_image(report, &file_name(&fixture), "launch"),
        "/pid",
    );
    let child_pid = number(process_image(report, &file_name(&fixture), "fork"), "/pid");
    ForkExec {
        parent_pid,
        child_pid,
        fork_exec: file_name(&fixture),
        exit3: file_name(&child_program),
        recording,
    }
}

/// `memsup ARGUMENTS` run in `directory`.
fn memsup_in(directory: &Path, arguments: &[&str]) -> Output {
    let mut command = clean_command(memsup_binary());
    command.current_dir(directory).args(arguments);
    run_command(command, None)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What a memsup that succeeded printed.
fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{}", stderr(output));
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

/// (pid, program) of each image, in report order.
fn images(report: &Value) -> Vec<(u64, String)> {
    processes(report)
        .iter()
        .map(|image| {
            let exe = image["exe"].as_str().unwrap_or_default();
            (
                number(image, "/pid"),
                exe.rsplit('/').next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_overview_lists_the_images_by_peak_with_the_json_s_numbers() {
    let run = fork_exec();
    let report = &run.recording.report;
    let overview = report["overview"].as_array().expect("an overview array");
    // The parent peaks at 2222 + 3333 bytes, exit3 at 500, the child before exec at 77.
    let expected = [
        (run.parent_pid, None, &run.fork_exec, 5555, 0),
        (run.child_pid, Some(run.parent_pid), &run.exit3, 500, 400),
        (run.child_pid, Some(run.parent_pid), &run.fork_exec, 77, 77),
    ];
    assert_eq!(overview.len(), expected.len());
    for (row, (pid, parent, program, peak, leaked)) in overview.iter().zip(expected) {
        assert_eq!(number(row, "/pid"), pid);
        assert_eq!(row["parent_pid"].as_u64(), parent);
        assert_eq!(row["program"], program.as_str());
        assert_eq!(row["rank"], Value::Null);
        assert_eq!(number(row, "/peak_requested_bytes"), peak);
        assert_eq!(number(row, "/leaked_bytes"), leaked);
        // The same numbers as the image's own entry.
        let image = processes(report)
            .iter()
            .find(|image| image["pid"] == row["pid"] && image["start_ns"] == row["start_ns"])
            .expect("the overview's image among the processes");
        assert_eq!(row["peak_requested_bytes"], image["peak_live_bytes"]);
        assert_eq!(row["leaked_bytes"], image["live_bytes_at_exit"]);
        // The highest RSS of the samples and the snapshots, as the text summary gives it.
        let snapshots = image["snapshots"].as_array().unwrap().iter();
        let highest = snapshots
            .map(|snapshot| number(snapshot, "/rss"))
            .fold(number(image, "/residency/peak_rss_bytes"), u64::max);
        assert_eq!(row["peak_rss_bytes"], highest);
        assert_eq!(row["duration_ns"], image["duration_ns"]);
        assert_eq!(row["exe"], image["exe"]);
    }

    let profile = run.recording.profile.to_string_lossy().into_owned();
    let text = stdout(&memsup_in(Path::new("/"), &["report", &profile]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "3 process images, by peak requested bytes:");
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        ["pid", "parent", "program", "rank", "peak", "req", "peak", "RSS", "leaked", "duration"]
    );
    for (line, row) in lines[2..5].iter().zip(overview) {
        let parent = row["parent_pid"]
            .as_u64()
            .map_or("-".to_string(), |pid| pid.to_string());
        let expected = format!(
            "{} {} {} - {} {} {} {}",
            row["pid"],
            parent,
            row["program"].as_str().unwrap(),
            short_bytes(number(row, "/peak_requested_bytes")),
            short_bytes(number(row, "/peak_rss_bytes")),
            short_bytes(number(row, "/leaked_bytes")),
            human_duration(number(row, "/duration_ns")),
        );
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>().join(" "),
            expected
        );
    }
    assert_eq!(lines[5], "");
    assert_eq!(lines[6], format!("memsup profile {profile}"));
}

#[test]
fn pid_and_exe_select_exactly_the_images_asked_for() {
    let run = fork_exec();
    let profile = &run.recording.profile;
    let (parent, child) = (run.parent_pid, run.child_pid);
    let selected = |options: &[&str]| images(&report_json_with(profile, options));
    let child_text = child.to_string();
    let parent_text = parent.to_string();
    assert_eq!(
        selected(&["--pid", &child_text]),
        [(child, run.fork_exec.clone()), (child, run.exit3.clone())]
    );
    assert_eq!(
        selected(&["--exe", "^exit3-"]),
        [(child, run.exit3.clone())]
    );
    // The file name or the whole path.
    assert_eq!(
        selected(&["--exe", "/fork_exec-dynamic$"]),
        [
            (parent, run.fork_exec.clone()),
            (child, run.fork_exec.clone())
        ]
    );
    assert_eq!(
        selected(&["--exe", "^fork_exec", "--pid", &child_text]),
        [(child, run.fork_exec.clone())]
    );
    assert_eq!(
        selected(&["--pid", &parent_text, "--pid", &child_text]).len(),
        3
    );
    // The overview is of the images shown.
    let report = report_json_with(profile, &["--pid", &child_text]);
    let overview: Vec<u64> = report["overview"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| number(row, "/peak_requested_bytes"))
        .collect();
    assert_eq!(overview, [500, 77]);

    let profile_text = profile.to_string_lossy().into_owned();
    let none = memsup_in(Path::new("/"), &["report", "--pid", "1", &profile_text]);
    assert_eq!(none.status.code(), Some(83));
    assert_eq!(
        stderr(&none),
        format!(
            "memsup: error: no process image matches --pid/--exe (images recorded: \
             {parent} ({0}), {child} ({0}), {child} ({1}))\n",
            run.fork_exec, run.exit3
        )
    );
    assert!(none.stdout.is_empty());
    let bad = memsup_in(Path::new("/"), &["report", "--exe", "(", &profile_text]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
}

/// A copy of `profile` at `directory/name`, last modified `seconds` after the epoch.
fn copy_at(profile: &Path, directory: &Path, name: &str, seconds: u64) -> PathBuf {
    let path = directory.join(name);
    std::fs::copy(profile, &path).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
        .unwrap();
    path
}

#[test]
fn without_a_profile_the_newest_one_here_is_read() {
    let run = fork_exec();
    let directory = tempfile::tempdir().unwrap();
    let here = directory.path();
    let empty = memsup_in(here, &["report"]);
    assert_eq!(empty.status.code(), Some(84));
    assert_eq!(
        stderr(&empty),
        "memsup: error: no PROFILE given, and the current directory holds no *.msup profile\n"
    );
    copy_at(&run.recording.profile, here, "b.msup", 2_000_000_000);
    for (newest, at) in [("a.msup", 2_000_000_100), ("b.msup", 2_000_000_200)] {
        copy_at(&run.recording.profile, here, newest, at);
        let output = memsup_in(here, &["report", "--format", "json"]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert_eq!(
            stderr(&output),
            format!("memsup: reading {newest}, the newest profile in the current directory\n")
        );
        let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(report["profile"]["path"], newest);
        assert_eq!(report["overview"], run.recording.report["overview"]);
    }
}

#[test]
fn pages_and_traces_go_to_a_file_named_after_the_profile_never_overwritten() {
    let run = fork_exec();
    let directory = tempfile::tempdir().unwrap();
    let here = directory.path();
    copy_at(&run.recording.profile, here, "job.msup", 2_000_000_000);
    let page = memsup_in(here, &["report", "--format", "html", "job.msup"]);
    assert!(page.status.success(), "{}", stderr(&page));
    assert!(page.stdout.is_empty(), "HTML on stdout");
    assert_eq!(stderr(&page), "memsup: report written to job.html\n");
    let html = std::fs::read(here.join("job.html")).unwrap();
    let piped = memsup_in(here, &["report", "--format", "html", "-o", "-", "job.msup"]);
    assert_eq!(piped.stdout, html, "-o - writes the same page to stdout");
    assert!(html.starts_with(b"<!DOCTYPE html>"));

    // A second report is refused, the first kept; --force replaces it.
    std::fs::write(here.join("job.html"), "older\n").unwrap();
    let again = memsup_in(here, &["report", "--format", "html", "job.msup"]);
    assert_eq!(again.status.code(), Some(73));
    assert_eq!(
        stderr(&again),
        "memsup: error: cannot write the report job.html: the file exists; --force \
         overwrites it\n"
    );
    assert_eq!(
        std::fs::read_to_string(here.join("job.html")).unwrap(),
        "older\n"
    );
    let forced = memsup_in(here, &["report", "--format", "html", "--force", "job.msup"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(std::fs::read(here.join("job.html")).unwrap(), html);

    let trace = memsup_in(here, &["report", "--format", "perfetto", "job.msup"]);
    assert_eq!(
        stderr(&trace),
        "memsup: report written to job.perfetto.json\n"
    );
    let trace_file = std::fs::read_to_string(here.join("job.perfetto.json")).unwrap();
    let piped = memsup_in(
        here,
        &["report", "--format", "perfetto", "-o", "-", "job.msup"],
    );
    assert_eq!(stdout(&piped), trace_file);
    serde_json::from_str::<Value>(&trace_file).expect("the trace is JSON");

    // -o FILE for a format that goes to stdout: the same report in the file, nothing said.
    let text = stdout(&memsup_in(here, &["report", "job.msup"]));
    let to_file = memsup_in(here, &["report", "-o", "report.txt", "job.msup"]);
    assert!(to_file.status.success(), "{}", stderr(&to_file));
    assert_eq!(
        (stdout(&to_file), stderr(&to_file)),
        (String::new(), String::new())
    );
    assert_eq!(
        std::fs::read_to_string(here.join("report.txt")).unwrap(),
        text
    );

    // A planted link is never written through, with or without --force.
    std::fs::write(here.join("victim"), "precious\n").unwrap();
    std::os::unix::fs::symlink(here.join("victim"), here.join("link.html")).unwrap();
    for force in [&[][..], &["--force"][..]] {
        let mut arguments = vec!["report", "--format", "html", "-o", "link.html"];
        arguments.extend(force);
        arguments.push("job.msup");
        let refused = memsup_in(here, &arguments);
        assert_eq!(refused.status.code(), Some(73), "{force:?}");
        assert_eq!(
            stderr(&refused),
            "memsup: error: cannot write the report link.html: it is a symbolic link; memsup \
             never writes a profile through one\n"
        );
    }
    assert_eq!(
        std::fs::read_to_string(here.join("victim")).unwrap(),
        "precious\n"
    );
}

#[test]
fn a_program_where_a_verb_belongs_is_suggested_to_run() {
    let fixture = crate::common::fixture("exit3", Variant::Dynamic);
    let directory = fixture.parent().unwrap();
    let program = format!("./{}", file_name(&fixture));
    let output = memsup_in(directory, &[&program, "--size", "3"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!(
            "memsup: error: '{program}' is not a memsup command; to record it: memsup run -- \
             {program} --size 3\n"
        )
    );
    assert!(output.stdout.is_empty());
    // Nothing was run: exit3 would have printed.
    let typo = memsup_in(directory, &["reprot", "p.msup"]);
    assert_eq!(typo.status.code(), Some(2));
    let message = stderr(&typo);
    assert!(
        message.starts_with("memsup: error: unrecognized subcommand 'reprot'"),
        "{message}"
    );
    assert!(!message.contains("memsup run --"), "{message}");
}

/// Chooses the selector's second image and notes which sections are left visible.
const CHOOSE_SECOND: &str = r#"<script>
const selector = document.getElementById("process-selector");
selector.value = selector.options[2].value;
selector.dispatchEvent(new Event("change"));
document.body.dataset.visible = [...document.querySelectorAll("section.timelines")]
  .filter((section) => !section.hidden && section.getBoundingClientRect().height > 0)
  .map((section) => section.id + ":" + section.dataset.pid).join(",");
</script>
</body>"#;

#[test]
fn the_page_s_process_selector_is_in_the_overview_s_order() {
    if !require_tool("chromium") {
        return;
    }
    let run = fork_exec();
    let overview = run.recording.report["overview"].as_array().unwrap().clone();
    let page_html = report_output(&run.recording.profile, &["--format", "html", "-o", "-"]);
    let directory = tempfile::tempdir().unwrap();
    let page = directory.path().join("page.html");
    std::fs::write(&page, page_html.replace("</body>", CHOOSE_SECOND)).unwrap();
    let dom = dumped_dom(start_chromium(&page, &directory.path().join("profile")));

    let options: Vec<String> = dom
        .split("<option value=\"timelines-")
        .skip(1)
        .map(|option| {
            option[option.find('>').unwrap() + 1..option.find("</option>").unwrap()].to_string()
        })
        .collect();
    let expected: Vec<String> = overview
        .iter()
        .map(|row| {
            format!(
                "{} {} (peak {})",
                row["pid"],
                row["program"].as_str().unwrap(),
                short_bytes(number(row, "/peak_requested_bytes"))
            )
        })
        .collect();
    assert_eq!(options, expected);
    // The second image by peak is exit3, the third of the profile's images.
    let start = run.recording.report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .position(|image| image["exe"] == overview[1]["exe"])
        .unwrap();
    assert_eq!(start, 2);
    assert!(
        dom.contains(&format!("data-visible=\"timelines-2:{}\"", run.child_pid)),
        "{}",
        &dom[dom.find("<body").unwrap()..][..200]
    );
}
