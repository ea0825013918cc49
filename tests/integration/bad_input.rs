//! Every bad input gets exactly one line on stderr and its own exit code (src/error.rs), and
//! never a launched or disturbed program.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::run::memsup_binary;
use crate::common::strace::{strace_mapping_totals, MappingTotals};
use crate::common::*;

/// memsup failed with `code` and said so in exactly one line that names each of `mentions`.
pub(crate) fn assert_one_error_line(output: &Output, code: i32, mentions: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit code; stderr: {stderr}"
    );
    assert_eq!(lines.len(), 1, "exactly one line on stderr, got: {stderr}");
    assert!(
        lines[0].starts_with("memsup: "),
        "memsup's line starts with its name: {stderr}"
    );
    for mention in mentions {
        assert!(
            lines[0].contains(mention),
            "the message names {mention}: {stderr}"
        );
    }
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout: {:?}",
        output.stdout
    );
}

fn temporary_directory() -> tempfile::TempDir {
    tempfile::tempdir().expect("creating a temporary directory")
}

fn profile_in(directory: &Path) -> String {
    directory.join("p.msup").to_string_lossy().into_owned()
}

#[test]
fn missing_command_exits_127() {
    let directory = temporary_directory();
    let profile = profile_in(directory.path());
    let output = run_memsup(["run", "-o", &profile, "--", "/nonexistent/cmd"], None);
    assert_one_error_line(&output, 127, &["/nonexistent/cmd"]);
}

#[test]
fn non_executable_file_exits_126() {
    let directory = temporary_directory();
    let script = directory.path().join("not-executable");
    fs::write(&script, "#!/bin/sh\necho should not run\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    let script = script.to_string_lossy().into_owned();
    let output = run_memsup(
        ["run", "-o", &profile_in(directory.path()), "--", &script],
        None,
    );
    assert_one_error_line(&output, 126, &[&script]);
}

#[test]
fn nonexistent_pid_exits_71() {
    let directory = temporary_directory();
    let profile = profile_in(directory.path());
    let output = run_memsup(
        ["attach", "-o", &profile, "--duration", "1", "999999999"],
        None,
    );
    assert_one_error_line(&output, 71, &["999999999"]);
}

/// A minimal i386 ELF executable (exit(0) through int 0x80), 93 bytes.
fn elf32_executable() -> Vec<u8> {
    let mut elf = vec![0x7f, b'E', b'L', b'F', 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let code: [u8; 9] = [0xb8, 1, 0, 0, 0, 0x31, 0xdb, 0xcd, 0x80];
    let base: u32 = 0x0804_8000;
    let size = (52 + 32 + code.len()) as u32;
    for half in [2u16, 3] {
        elf.extend(half.to_le_bytes()); // e_type EXEC, e_machine 386
    }
    for word in [1u32, base + 84, 52, 0, 0] {
        elf.extend(word.to_le_bytes()); // version, entry, phoff, shoff, flags
    }
    for half in [52u16, 32, 1, 0, 0, 0] {
        elf.extend(half.to_le_bytes()); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
    }
    for word in [1u32, 0, base, base, size, size, 5, 0x1000] {
        elf.extend(word.to_le_bytes()); // PT_LOAD, offset, vaddr, paddr, filesz, memsz, R+X
    }
    elf.extend(code);
    elf
}

#[test]
fn thirty_two_bit_executable_exits_69() {
    let directory = temporary_directory();
    let program = directory.path().join("elf32");
    fs::write(&program, elf32_executable()).unwrap();
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    let program = program.to_string_lossy().into_owned();
    let output = run_memsup(
        ["run", "-o", &profile_in(directory.path()), "--", &program],
        None,
    );
    assert_one_error_line(&output, 69, &[&program]);
}

fn tracer_of(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("TracerPid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn wait_until_traced_by(pid: u32, tracer: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tracer_of(pid) != Some(tracer) {
        assert!(
            Instant::now() < deadline,
            "process {pid} never got traced by {tracer}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn spawn_quiet(command: &mut Command) -> Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("starting {command:?}: {error}"))
}

/// Starts `sleep`, has `tracer_command(pid)` trace it, and checks memsup refuses to attach.
fn assert_already_traced(tracer_command: impl Fn(u32) -> Command) {
    let mut sleeper = spawn_quiet(Command::new("sleep").arg("120"));
    let pid = sleeper.id();
    let mut tracer = spawn_quiet(&mut tracer_command(pid));
    let tracer_pid = tracer.id();
    let outcome = std::panic::catch_unwind(|| {
        wait_until_traced_by(pid, tracer_pid);
        let directory = temporary_directory();
        let profile = profile_in(directory.path());
        let pid_text = pid.to_string();
        let output = run_memsup(
            ["attach", "-o", &profile, "--duration", "1", &pid_text],
            None,
        );
        assert_one_error_line(&output, 72, &[&pid_text, &tracer_pid.to_string()]);
        assert_eq!(
            tracer_of(pid),
            Some(tracer_pid),
            "the other tracer keeps the process"
        );
    });
    tracer.kill().ok();
    tracer.wait().ok();
    sleeper.kill().ok();
    sleeper.wait().ok();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn process_traced_by_strace_exits_72_naming_the_tracer() {
    if !require_tool("strace") {
        return;
    }
    assert_already_traced(|pid| {
        let mut command = Command::new("strace");
        command.args(["-o", "/dev/null", "-p", &pid.to_string()]);
        command
    });
}

#[test]
fn process_traced_by_gdb_exits_72_naming_the_tracer() {
    if !require_tool("gdb") {
        return;
    }
    assert_already_traced(|pid| {
        let mut command = Command::new("gdb");
        command.args(["-q", "-nx", "-batch", "-p", &pid.to_string()]);
        command.args(["-ex", "python import time; time.sleep(120)"]);
        command
    });
}

#[test]
fn stripped_static_binary_runs_with_a_warning_and_syscall_tracking() {
    if !require_tool("gcc") || !require_tool("strip") {
        return;
    }
    let directory = temporary_directory();
    let stripped = directory.path().join("alloc_script-stripped");
    fs::copy(fixture("alloc_script", Variant::Static), &stripped).unwrap();
    let status = Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(status.success(), "strip failed");

    let recording = record(&stripped, &[], None);
    let (_, memsup_lines) = split_stderr(&recording.supervised.stderr);
    assert!(
        memsup_lines
            .iter()
            .any(|line| line.to_lowercase().contains("symbol")),
        "memsup warns on stderr that it found no allocator symbols: {memsup_lines:?}"
    );
    let image = launched_image(&recording.report, &stripped, &[]);
    assert_exit(image, "code", Some(0));
    let warnings: Vec<String> = image["warnings"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_lowercase))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        warnings
            .iter()
            .any(|warning| warning.contains("allocator") && warning.contains("symbol")),
        "the report warns that there are no allocator symbols: {warnings:?}"
    );
    // Nothing could be probed, so no heap numbers; the mapping calls are still recorded.
    assert_heap(image, &HeapExpectation::default());
    if require_tool("strace") {
        assert_eq!(
            MappingTotals::from_image(image),
            strace_mapping_totals(&stripped, &[])
        );
    }
}

#[test]
fn unwritable_output_exits_73_before_launching() {
    if !require_tool("gcc") {
        return;
    }
    let marker_program = fixture("exitcode_marker", Variant::Dynamic);
    let directory = temporary_directory();
    // Control: with a writable profile the marker program runs and creates its file.
    let created = directory.path().join("created");
    let created_text = created.to_string_lossy().into_owned();
    let program = marker_program.to_string_lossy().into_owned();
    let profile = profile_in(directory.path());
    let output = run_memsup(["run", "-o", &profile, "--", &program, &created_text], None);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(fs::read_to_string(&created).unwrap(), "ran\n");

    let marker = directory.path().join("must-not-exist");
    let marker_text = marker.to_string_lossy().into_owned();
    let unwritable = "/nonexistent-dir/x.msup";
    let output = run_memsup(
        ["run", "-o", unwritable, "--", &program, &marker_text],
        None,
    );
    assert_one_error_line(&output, 73, &[unwritable]);
    assert!(
        !marker.exists(),
        "memsup launched the program although it could not write"
    );
}

/// A real, complete profile of a small run (kept in the recording's directory).
fn real_profile(directory: &Path) -> Option<Recording> {
    if !require_tool("gcc") {
        return None;
    }
    let program = fixture("exitcode_marker", Variant::Dynamic);
    let marker = directory.join("marker").to_string_lossy().into_owned();
    Some(record(&program, &[&marker], None))
}

fn report_of(path: &Path) -> Output {
    run_memsup(
        [
            "report".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            path.as_os_str(),
        ] as [&std::ffi::OsStr; 4],
        None,
    )
}

#[test]
fn report_of_a_text_file_exits_65() {
    let directory = temporary_directory();
    let text = directory.path().join("notes.txt");
    fs::write(&text, "this is not a memsup profile\n").unwrap();
    assert_one_error_line(&report_of(&text), 65, &[&text.to_string_lossy()]);
}

#[test]
fn report_of_a_missing_file_exits_66() {
    let directory = temporary_directory();
    let missing = directory.path().join("missing.msup");
    assert_one_error_line(&report_of(&missing), 66, &[&missing.to_string_lossy()]);
}

#[test]
fn report_of_a_newer_format_version_exits_65() {
    let directory = temporary_directory();
    let Some(recording) = real_profile(directory.path()) else {
        return;
    };
    let mut bytes = fs::read(&recording.profile).unwrap();
    assert_eq!(&bytes[..8], b"MEMSUP\0\0", "profile magic");
    bytes[8..12].copy_from_slice(&999u32.to_le_bytes());
    let newer = directory.path().join("newer.msup");
    fs::write(&newer, bytes).unwrap();
    assert_one_error_line(&report_of(&newer), 65, &["999"]);
}

#[test]
fn report_of_a_truncated_profile_says_truncated() {
    let directory = temporary_directory();
    let Some(recording) = real_profile(directory.path()) else {
        return;
    };
    assert_eq!(recording.report["profile"]["truncated"], false);
    let bytes = fs::read(&recording.profile).unwrap();
    assert!(bytes.len() > 30, "profile of {} bytes", bytes.len());
    let cut = directory.path().join("cut.msup");
    fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let report = crate::common::report::report_json(&cut);
    assert_eq!(
        report["profile"]["truncated"], true,
        "a profile cut short is reported truncated"
    );
}

/// ptrace refused: an unprivileged user attaching to root's process (the test runs as root,
/// as CI does, and drops to `nobody` for memsup alone).
#[test]
fn refused_ptrace_exits_77_with_advice() {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        crate::common::tools::record_skip("dropping privileges for this test needs root");
        return;
    }
    if !require_tool("setpriv") {
        return;
    }
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("starting sleep");
    let pid = sleeper.id().to_string();
    // The profile must be creatable by `nobody`: /tmp, not the test's private directory.
    let profile = format!("/tmp/memsup-refused-{}.msup", std::process::id());
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(memsup_binary())
        .args(["attach", "-o", &profile, "--duration", "1", &pid])
        .stdin(Stdio::null())
        .output()
        .expect("running memsup as nobody");
    sleeper.kill().ok();
    sleeper.wait().ok();
    assert_one_error_line(&output, 77, &[&pid, "ptrace_scope", "CAP_SYS_PTRACE"]);
    assert!(!Path::new(&profile).exists(), "no profile is left behind");
}

#[test]
fn malformed_component_rules_exit_2() {
    let directory = temporary_directory();
    let profile = profile_in(directory.path());
    for (rule, mention) in [
        ("solver", "expected NAME=REGEX"),
        ("=libpetsc", "the component name is empty"),
        ("io=lib(", "bad regular expression"),
    ] {
        let output = run_memsup(["report", "--component", rule, &profile], None);
        assert_one_error_line(&output, 2, &[rule, mention]);
    }
}

/// clap's usage errors, cut to their first paragraph in one line that names the verb's help.
#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let units = "expected seconds (0.2, 1.5s), milliseconds (500ms) or minutes (2m)";
    let pid_range = "is not in 1..=2147483647";
    let cases: [(&[&str], String); 11] = [
        (
            &["attach", "--no-such-flag", "5"],
            "unexpected argument '--no-such-flag' found (see memsup attach --help)".into(),
        ),
        (
            &["attach"],
            "the following required arguments were not provided: <PID>... (see memsup attach --help)"
                .into(),
        ),
        (
            &["attach", "-5"],
            format!("invalid value '-5' for '<PID>...': -5 {pid_range} (see memsup attach --help)"),
        ),
        (
            &["attach", "abc"],
            "invalid value 'abc' for '<PID>...': invalid digit found in string (see memsup attach --help)"
                .into(),
        ),
        (
            &["attach", "0"],
            format!("invalid value '0' for '<PID>...': 0 {pid_range} (see memsup attach --help)"),
        ),
        (
            &["attach", "--duration", "0", "1"],
            "invalid value '0' for '--duration <DURATION>': the duration must be at least 1ms (see memsup attach --help)"
                .into(),
        ),
        (
            &["attach", "--duration", "x", "1"],
            format!("invalid value 'x' for '--duration <DURATION>': {units} (see memsup attach --help)"),
        ),
        (
            &["attach", "--duration", "-1", "1"],
            format!("invalid value '-1' for '--duration <DURATION>': {units} (see memsup attach --help)"),
        ),
        (
            &["run"],
            "the following required arguments were not provided: <CMD>... (see memsup run --help)"
                .into(),
        ),
        (
            &["report", "--format", "svg", "p.msup"],
            "invalid value 'svg' for '--format <FORMAT>' [possible values: text, json, folded, html, csv, perfetto, pprof, speedscope, massif, heaptrack] (see memsup report --help)"
                .into(),
        ),
        (
            &["frobnicate"],
            "unrecognized subcommand 'frobnicate' (see memsup --help)".into(),
        ),
    ];
    for (arguments, message) in cases {
        let output = run_memsup(arguments, None);
        assert_one_error_line(&output, 2, &[]);
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!("memsup: error: {message}\n"),
            "memsup {arguments:?}"
        );
    }
}

#[test]
fn help_and_version_print_as_usual_and_exit_0() {
    let version = run_memsup(["--version"], None);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("memsup {}\n", env!("CARGO_PKG_VERSION"))
    );
    let help = run_memsup(["attach", "--help"], None);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("Usage: memsup attach [OPTIONS] <PID>...") && text.contains("--force"),
        "{text}"
    );
    assert!(help.stderr.is_empty());
}
