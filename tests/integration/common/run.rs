//! Running memsup and fixtures, and comparing a supervised run with a native one.
//!
//! Every program runs with an empty environment except PATH: glibc's static start-up reads
//! LD_LIBRARY_PATH (which cargo sets for tests) and allocates for it, and GLIBC_TUNABLES could
//! change the tcache; the expected numbers assume neither is set.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::report::report_json;

/// Prefix of every line memsup itself writes to stderr.
pub const MEMSUP_PREFIX: &str = "memsup: ";

/// How long any single command may take before the test kills it and fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

pub fn memsup_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_memsup"))
}

/// A command with the controlled environment described above.
pub fn clean_command(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    // The suite runs once per engine (scripts/test).
    if let Ok(engine) = std::env::var("MEMSUP_ENGINE") {
        command.env("MEMSUP_ENGINE", engine);
    }
    command
}

/// `memsup run -o PROFILE -- PROGRAM` in the controlled environment (more arguments of the
/// program may follow).
pub fn memsup_run_command(profile: &Path, program: &Path) -> Command {
    let mut command = clean_command(memsup_binary());
    command
        .arg("run")
        .arg("-o")
        .arg(profile)
        .arg("--")
        .arg(program);
    command
}

/// Waits for `child`, killing it and failing the test if it runs longer than the timeout.
pub fn wait_with_timeout(child: Child, what: &str) -> Output {
    wait_within(child, what, COMMAND_TIMEOUT)
}

/// Waits for `child` at most `limit`, reading its output meanwhile; kills it and fails the
/// test naming `what` after that.
pub fn wait_within(mut child: Child, what: &str, limit: Duration) -> Output {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let stdout_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = stdout.as_mut() {
            pipe.read_to_end(&mut bytes).ok();
        }
        bytes
    });
    let stderr_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = stderr.as_mut() {
            pipe.read_to_end(&mut bytes).ok();
        }
        bytes
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            break status;
        }
        if Instant::now() > deadline {
            let state = super::stuck::describe(child.id());
            child.kill().ok();
            child.wait().ok();
            panic!("{what} did not finish within {limit:?}; its threads then:\n{state}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout_reader.join().unwrap(),
        stderr: stderr_reader.join().unwrap(),
    }
}

/// Starts `command` with all three standard streams piped; returns it with its description.
/// A program a test has just copied can be busy for a moment: a process another test thread
/// forked while the copy was open for writing holds the file open until it execs.
pub fn spawn_piped(mut command: Command) -> (Child, String) {
    let description = format!("{command:?}");
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match command.spawn() {
            Ok(child) => return (child, description),
            Err(error)
                if error.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < deadline =>
            {
                thread::sleep(Duration::from_millis(10));
            }
            Err(error) => panic!("starting {description}: {error}"),
        }
    }
}

/// Runs `command` with `stdin` (or an empty stdin) and captures its output.
pub fn run_command(command: Command, stdin: Option<&[u8]>) -> Output {
    let (mut child, description) = spawn_piped(command);
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.unwrap_or_default().to_vec();
    let writer = thread::spawn(move || {
        // The program may exit without reading everything: a broken pipe is not an error here.
        pipe.write_all(&input).ok();
    });
    let output = wait_with_timeout(child, &description);
    writer.join().unwrap();
    output
}

/// Runs memsup with `args` in the controlled environment.
pub fn run_memsup<I, S>(args: I, stdin: Option<&[u8]>) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = clean_command(memsup_binary());
    command.args(args);
    run_command(command, stdin)
}

/// Runs a fixture without memsup.
pub fn run_native(fixture: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut command = clean_command(fixture);
    command.args(args);
    run_command(command, stdin)
}

/// memsup's stderr split into (the program's own stderr, memsup's lines).
pub fn split_stderr(stderr: &[u8]) -> (String, Vec<String>) {
    let text = String::from_utf8_lossy(stderr);
    let mut program = String::new();
    let mut memsup = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with(MEMSUP_PREFIX) {
            memsup.push(line.trim_end_matches('\n').to_string());
        } else {
            program.push_str(line);
        }
    }
    (program, memsup)
}

/// The exit status memsup must have after supervising a program that ended with `native`:
/// the program's code, or 128 + N when it was killed by signal N.
pub fn expected_memsup_status(native: &ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (native.code(), native.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        _ => panic!("native run ended without a code or a signal: {native:?}"),
    }
}

/// The program under memsup wrote exactly what it writes natively, and memsup exited with the
/// program's status.
pub fn assert_same_behaviour(supervised: &Output, native: &Output) {
    let (program_stderr, memsup_lines) = split_stderr(&supervised.stderr);
    assert_eq!(
        String::from_utf8_lossy(&supervised.stdout),
        String::from_utf8_lossy(&native.stdout),
        "stdout under memsup differs from the native run (memsup said: {memsup_lines:?})"
    );
    assert_eq!(
        program_stderr,
        String::from_utf8_lossy(&native.stderr),
        "stderr under memsup (memsup's own lines removed) differs from the native run"
    );
    assert_eq!(
        supervised.status.code(),
        Some(expected_memsup_status(&native.status)),
        "memsup's exit status must be the program's (native: {:?}; memsup said: {memsup_lines:?})",
        native.status
    );
}

/// A fixture run under `memsup run`, its native twin, and the report of the profile.
pub struct Recording {
    pub native: Output,
    pub supervised: Output,
    pub profile: PathBuf,
    pub report: Value,
    /// Holds the profile; removed when the recording is dropped.
    pub _directory: TempDir,
}

/// Runs `fixture args` natively and under `memsup run -o PROFILE --`, checks that both behave
/// the same, and returns the JSON report of the profile.
pub fn record(fixture: &Path, args: &[&str], stdin: Option<&[u8]>) -> Recording {
    record_with_options(&[], fixture, args, stdin)
}

/// `record` with extra memsup options before `--` (`["--step-over", "out-of-line"]`).
pub fn record_with_options(
    options: &[&str],
    fixture: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Recording {
    record_with_environment(options, &[], fixture, args, stdin)
}

/// `record_with_options` with `environment` added to memsup's (and so the program's)
/// controlled environment; the native run has it too.
pub fn record_with_environment(
    options: &[&str],
    environment: &[(&str, &str)],
    fixture: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Recording {
    let mut native = clean_command(fixture);
    native.args(args).envs(environment.iter().copied());
    let native = run_command(native, stdin);
    let directory = tempfile::tempdir().expect("creating a temporary directory");
    let profile = directory.path().join("run.msup");
    let mut command = clean_command(memsup_binary());
    command.arg("run").arg("-o").arg(&profile).args(options);
    command.arg("--").arg(fixture).args(args);
    command.envs(environment.iter().copied());
    let supervised = run_command(command, stdin);
    assert_same_behaviour(&supervised, &native);
    let report = report_json(&profile);
    Recording {
        native,
        supervised,
        profile,
        report,
        _directory: directory,
    }
}
