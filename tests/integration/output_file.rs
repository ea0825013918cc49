//! The profile is never written through a symbolic link someone planted: a taken default name
//! gives the next suffix, an explicit `-o` link or existing file is refused (exit 73) unless
//! `--force` (files only), and profiles are mode 0600. fixtures/exit3.c, exitcode_marker.c.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use crate::bad_input::assert_one_error_line;
use crate::common::report::{processes, report_json};
use crate::common::run::{
    assert_same_behaviour, clean_command, memsup_binary, spawn_piped, wait_with_timeout,
};
use crate::common::*;

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The reproducer: a shell plants `memsup.NAME.$$.msup -> victim`, then execs memsup
/// (which keeps the shell's PID, so the planted name is exactly memsup's default one).
#[test]
fn a_planted_default_name_is_skipped_and_its_target_left_alone() {
    if !require_tool("gcc") {
        return;
    }
    let program = fixture("exit3", Variant::Dynamic);
    let native = run_native(&program, &[], None);
    let directory = tempfile::tempdir().unwrap();
    let victim = directory.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let name = file_name(&program);
    let script = format!("ln -s victim memsup.{name}.$$.msup && exec \"$0\" run -- \"$1\"");
    let mut command = clean_command("sh");
    command.current_dir(directory.path());
    command
        .arg("-c")
        .arg(&script)
        .arg(memsup_binary())
        .arg(&program);
    let (child, description) = spawn_piped(command);
    let pid = child.id();
    let supervised = wait_with_timeout(child, &description);

    assert_same_behaviour(&supervised, &native);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    let planted = directory.path().join(format!("memsup.{name}.{pid}.msup"));
    assert_eq!(fs::read_link(&planted).unwrap(), Path::new("victim"));
    let written = format!("memsup.{name}.{pid}.1.msup");
    let (_, memsup_lines) = split_stderr(&supervised.stderr);
    assert_eq!(
        memsup_lines,
        [format!("memsup: profile written to {written}")]
    );
    let profile = directory.path().join(&written);
    assert_eq!(mode(&profile), 0o600);
    let report = report_json(&profile);
    assert_image_count(&report, 1);
    assert_exit(process_image(&report, &name, "launch"), "code", Some(3));
    let mut names: Vec<String> = fs::read_dir(directory.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected = vec![
        format!("memsup.{name}.{pid}.1.msup"),
        format!("memsup.{name}.{pid}.msup"),
        "victim".to_string(),
    ];
    expected.sort();
    assert_eq!(names, expected, "nothing else was created");
}

/// `run -o PATH` with exitcode_marker, which creates `marker` when it runs.
fn run_with_output(options: &[&str], profile: &Path, marker: &Path) -> std::process::Output {
    let program = fixture("exitcode_marker", Variant::Dynamic);
    let mut arguments = vec!["run".to_string()];
    arguments.extend(options.iter().map(|option| option.to_string()));
    arguments.push("-o".to_string());
    arguments.push(profile.to_string_lossy().into_owned());
    arguments.push("--".to_string());
    arguments.push(program.to_string_lossy().into_owned());
    arguments.push(marker.to_string_lossy().into_owned());
    run_memsup(arguments, None)
}

#[test]
fn an_explicit_symbolic_link_is_refused_even_with_force() {
    if !require_tool("gcc") {
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let victim = directory.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let link = directory.path().join("p.msup");
    symlink(&victim, &link).unwrap();
    let marker = directory.path().join("marker");
    for options in [&[][..], &["--force"][..]] {
        let output = run_with_output(options, &link, &marker);
        assert_one_error_line(
            &output,
            73,
            &[&link.to_string_lossy(), "is a symbolic link"],
        );
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!marker.exists(), "{options:?}: the program was launched");
    }
}

#[test]
fn an_existing_profile_is_kept_unless_forced() {
    if !require_tool("gcc") {
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("p.msup");
    fs::write(&profile, "an older profile\n").unwrap();
    fs::set_permissions(&profile, fs::Permissions::from_mode(0o644)).unwrap();
    let marker = directory.path().join("marker");
    let output = run_with_output(&[], &profile, &marker);
    assert_one_error_line(
        &output,
        73,
        &[&profile.to_string_lossy(), "exists", "--force"],
    );
    assert_eq!(fs::read_to_string(&profile).unwrap(), "an older profile\n");
    assert!(!marker.exists(), "the program was launched");

    let output = run_with_output(&["-f"], &profile, &marker);
    let (_, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{memsup_lines:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("exitcode_marker: created {}\n", marker.display())
    );
    assert_eq!(fs::read_to_string(&marker).unwrap(), "ran\n");
    assert_eq!(
        memsup_lines,
        [format!("memsup: profile written to {}", profile.display())]
    );
    assert_eq!(mode(&profile), 0o600);
    let report = report_json(&profile);
    assert_image_count(&report, 1);
    assert_exit(&processes(&report)[0], "code", Some(0));
}
