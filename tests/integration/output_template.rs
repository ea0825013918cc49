//! `-o` templates and directories: every specifier expands from memsup's own environment
//! (the rank a launcher would give it), `-o DIR/` names a file per process, an unknown
//! specifier is one line of error (exit 2), and a name another memsup is writing is refused
//! (exit 78) before anything is launched. fixtures/exit3.c, exitcode_marker.c, blocked_read.c.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use crate::bad_input::assert_one_error_line;
use crate::common::report::report_json;
use crate::common::run::{
    assert_same_behaviour, clean_command, memsup_binary, run_command, spawn_piped,
    wait_with_timeout,
};
use crate::common::*;

fn host() -> String {
    let output = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// `memsup run -q -o OUTPUT -- PROGRAM ARGS` in `directory` with `variables` set.
fn memsup_run(
    directory: &Path,
    output: &str,
    variables: &[(&str, &str)],
    program: &Path,
    args: &[&str],
) -> std::process::Command {
    let mut command = clean_command(memsup_binary());
    command
        .current_dir(directory)
        .envs(variables.iter().copied());
    command
        .args(["run", "-q", "-o", output, "--"])
        .arg(program)
        .args(args);
    command
}

/// The files in `directory`, sorted.
fn listing(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_specifier_expands_from_memsup_s_environment() {
    if !require_tool("gcc") {
        return;
    }
    let program = fixture("exit3", Variant::Dynamic);
    let native = run_native(&program, &[], None);
    let directory = tempfile::tempdir().unwrap();
    let variables = [
        ("PMI_RANK", "5"),
        ("SLURM_PROCID", "9"),
        ("SLURM_JOB_ID", "4711"),
    ];
    let command = memsup_run(
        directory.path(),
        "%n.r%r.j%j.%h.%%.%p.msup",
        &variables,
        &program,
        &[],
    );
    let (child, description) = spawn_piped(command);
    let memsup_pid = child.id();
    let supervised = wait_with_timeout(child, &description);
    assert_same_behaviour(&supervised, &native);
    let name = file_name(&program);
    let expected = format!("{name}.r5.j4711.{}.%.{memsup_pid}.msup", host());
    assert_eq!(listing(directory.path()), std::slice::from_ref(&expected));
    let report = report_json(&directory.path().join(&expected));
    assert_image_count(&report, 1);
    assert_exit(process_image(&report, &name, "launch"), "code", Some(3));
}

#[test]
fn without_a_rank_the_rank_is_memsup_s_pid_and_a_directory_gets_default_names() {
    if !require_tool("gcc") {
        return;
    }
    let program = fixture("exit3", Variant::Dynamic);
    let name = file_name(&program);
    let native = run_native(&program, &[], None);
    let directory = tempfile::tempdir().unwrap();
    // `DIR/` is made when missing; a rank from the environment names the file.
    let supervised = run_command(
        memsup_run(
            directory.path(),
            "job/",
            &[("OMPI_COMM_WORLD_RANK", "2")],
            &program,
            &[],
        ),
        None,
    );
    assert_same_behaviour(&supervised, &native);
    assert_eq!(
        listing(&directory.path().join("job")),
        [format!("memsup.{name}.2.msup")]
    );
    // An existing directory without the slash; no rank: memsup's pid.
    let command = memsup_run(directory.path(), "job", &[], &program, &[]);
    let (child, description) = spawn_piped(command);
    let memsup_pid = child.id();
    let supervised = wait_with_timeout(child, &description);
    assert_same_behaviour(&supervised, &native);
    let mut expected = [
        format!("memsup.{name}.2.msup"),
        format!("memsup.{name}.{memsup_pid}.msup"),
    ];
    expected.sort();
    assert_eq!(listing(&directory.path().join("job")), expected);
    // The same rank again: the next free name, as default names do.
    let supervised = run_command(
        memsup_run(
            directory.path(),
            "job/",
            &[("PMIX_RANK", "2")],
            &program,
            &[],
        ),
        None,
    );
    assert_same_behaviour(&supervised, &native);
    assert!(directory
        .path()
        .join(format!("job/memsup.{name}.2.1.msup"))
        .is_file());
}

#[test]
fn an_unknown_specifier_is_one_line_and_nothing_runs() {
    if !require_tool("gcc") {
        return;
    }
    let program = fixture("exitcode_marker", Variant::Dynamic);
    let directory = tempfile::tempdir().unwrap();
    let marker = directory.path().join("marker");
    let marker_text = marker.to_string_lossy().into_owned();
    for template in ["rank.%d.msup", "rank.%"] {
        let output = run_command(
            memsup_run(directory.path(), template, &[], &program, &[&marker_text]),
            None,
        );
        assert_one_error_line(&output, 2, &[template]);
        assert!(!marker.exists(), "{template}: the program was launched");
    }
    assert!(listing(directory.path()).is_empty());
}

/// Two memsups whose template gives one name: the second is refused in one line (exit 78)
/// while the first writes, with or without --force, and launches nothing; the first's
/// profile is whole.
#[test]
fn a_name_another_memsup_is_writing_is_refused() {
    if !require_tool("gcc") {
        return;
    }
    let waiting = fixture("blocked_read", Variant::Dynamic);
    let marker_program = fixture("exitcode_marker", Variant::Dynamic);
    let directory = tempfile::tempdir().unwrap();
    let template = "job.%n.msup";
    let first = memsup_run(directory.path(), template, &[], &waiting, &[]);
    let (mut child, description) = spawn_piped(first);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert_ne!(
            stdout.read_line(&mut line).unwrap(),
            0,
            "{description} ended"
        );
    }
    // The second names the first's file: blocked_read's name is the template's %n of both.
    let held = directory
        .path()
        .join(format!("job.{}.msup", file_name(&waiting)));
    let marker = directory.path().join("marker");
    let marker_text = marker.to_string_lossy().into_owned();
    for force in [false, true] {
        let mut second = clean_command(memsup_binary());
        second.current_dir(directory.path()).arg("run");
        if force {
            second.arg("--force");
        }
        second
            .args(["-o", held.to_str().unwrap(), "--"])
            .arg(&marker_program)
            .arg(&marker_text);
        let output = run_command(second, None);
        assert_one_error_line(
            &output,
            78,
            &[&held.to_string_lossy(), "another memsup is writing it"],
        );
        assert!(!marker.exists(), "force {force}: the program was launched");
    }
    child.stdin.take().unwrap().write_all(b"one\n").unwrap();
    let output = wait_with_timeout(child, &description);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        listing(directory.path()),
        [held.file_name().unwrap().to_string_lossy()]
    );
    let report = report_json(&held);
    assert_image_count(&report, 1);
    assert_exit(
        process_image(&report, &file_name(&waiting), "launch"),
        "code",
        Some(0),
    );
}
