//! memsup attached to running processes for a window that the test ends by an event it has
//! observed (a line the program printed), never after a fixed time: SIGINT detaches.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Output};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::live_process::tracer_pid;
use super::report::report_json;
use super::run::{clean_command, memsup_binary, spawn_piped, split_stderr, wait_with_timeout};

/// How long a loaded machine may take to attach, or a program to print its next line.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(60);

/// The line memsup prints once every process is joined (unless -q).
const ATTACHED: &str = "memsup: attached to ";

/// `memsup attach -o PROFILE OPTIONS PIDS`, running until `close`.
pub struct AttachWindow {
    /// None once closed.
    memsup: Option<Child>,
    /// memsup's standard error, read line by line as it comes.
    stderr: Option<StderrLines>,
    pub directory: TempDir,
}

/// A child's standard error, each line handed over as it is read and all of it kept.
struct StderrLines {
    lines: Receiver<String>,
    whole: JoinHandle<Vec<u8>>,
}

impl StderrLines {
    fn read(child: &mut Child) -> StderrLines {
        let pipe = child.stderr.take().expect("a piped standard error");
        let (sender, lines) = mpsc::channel();
        let whole = thread::spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut whole = Vec::new();
            let mut line = Vec::new();
            while reader
                .read_until(b'\n', &mut line)
                .is_ok_and(|read| read > 0)
            {
                let _ = sender.send(String::from_utf8_lossy(&line).into_owned());
                whole.append(&mut line);
            }
            whole
        });
        StderrLines { lines, whole }
    }
}

impl AttachWindow {
    /// Starts memsup and returns once it traces every process of `pids`: without -q, once
    /// memsup says it has joined them all (they run recorded from then on); with -q, once
    /// it has seized them (what it does next happens before any signal sent to them from
    /// now on is delivered, since ptrace hands such signals to memsup first; but a program
    /// that ends on input may end before it is joined).
    pub fn open(pids: &[u32], options: &[&str]) -> AttachWindow {
        AttachWindow::open_with_env(pids, options, &[])
    }

    /// `open`, with memsup's environment holding `env` too.
    pub fn open_with_env(pids: &[u32], options: &[&str], env: &[(&str, &str)]) -> AttachWindow {
        AttachWindow::start(clean_command(memsup_binary()), pids, options, env)
    }

    /// `open`, with memsup run by `wrapper` (a command that ends by running its arguments
    /// in the same process, as `unshare` and `sh -c '... exec "$0" "$@"'` do).
    pub fn open_wrapped(wrapper: &[&str], pids: &[u32], options: &[&str]) -> AttachWindow {
        let mut command = clean_command(wrapper[0]);
        command.args(&wrapper[1..]).arg(memsup_binary());
        AttachWindow::start(command, pids, options, &[])
    }

    fn start(
        mut command: std::process::Command,
        pids: &[u32],
        options: &[&str],
        env: &[(&str, &str)],
    ) -> AttachWindow {
        let directory = tempfile::tempdir().expect("a temporary directory");
        command
            .envs(env.iter().copied())
            .arg("attach")
            .arg("-o")
            .arg(directory.path().join("attach.msup"))
            .args(options)
            .args(pids.iter().map(u32::to_string));
        let (mut memsup, _) = spawn_piped(command);
        let stderr = StderrLines::read(&mut memsup);
        let mut window = AttachWindow {
            memsup: Some(memsup),
            stderr: Some(stderr),
            directory,
        };
        let memsup_pid = window.memsup.as_ref().expect("just started").id();
        let deadline = Instant::now() + EVENT_TIMEOUT;
        for &pid in pids {
            while tracer_pid(pid) != memsup_pid {
                if let Some(status) = window.memsup.as_mut().and_then(|m| m.try_wait().ok()?) {
                    let output = window.wait("memsup");
                    panic!("memsup attach ended ({status}) before tracing {pid}: {output:?}");
                }
                assert!(
                    Instant::now() < deadline,
                    "memsup did not attach to {pid} within {EVENT_TIMEOUT:?}"
                );
                thread::sleep(Duration::from_millis(1));
            }
        }
        if !options
            .iter()
            .any(|option| ["-q", "--quiet"].contains(option))
        {
            window.wait_for_attached_line(deadline);
        }
        window
    }

    /// Waits until memsup says it has joined every process.
    fn wait_for_attached_line(&mut self, deadline: Instant) {
        let lines = &self.stderr.as_ref().expect("an open window").lines;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.starts_with(ATTACHED) => return,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!("memsup did not say it attached within {EVENT_TIMEOUT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let output = self.wait("memsup attach");
                    panic!("memsup attach ended before it said it attached: {output:?}");
                }
            }
        }
    }

    /// Waits for memsup to end; its output, standard error included.
    fn wait(&mut self, what: &str) -> Output {
        let memsup = self.memsup.take().expect("a window is ended once");
        let mut output = wait_with_timeout(memsup, what);
        if let Some(stderr) = self.stderr.take() {
            output.stderr = stderr.whole.join().expect("the standard error reader");
        }
        output
    }

    /// memsup's PID.
    pub fn memsup_pid(&self) -> u32 {
        self.memsup.as_ref().expect("an open window").id()
    }

    /// The profile memsup writes.
    pub fn profile(&self) -> PathBuf {
        self.directory.path().join("attach.msup")
    }

    /// Ends the window with SIGINT, requires memsup to exit 0, and returns its output and
    /// the profile's JSON report.
    pub fn close(mut self) -> (Output, Value) {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(self.memsup_pid() as i32, libc::SIGINT) };
        let output = self.wait("memsup attach after SIGINT");
        let (_, memsup_lines) = split_stderr(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "memsup attach failed: {memsup_lines:?}"
        );
        let report = report_json(&self.profile());
        (output, report)
    }
}

impl AttachWindow {
    /// Ends the window with SIGINT (`detach`) or waits for memsup to end as the processes
    /// exit; requires memsup to exit 0, and returns its output and the directory of the profile.
    pub fn end(mut self, detach: bool) -> (Output, TempDir) {
        if detach {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(self.memsup_pid() as i32, libc::SIGINT) };
        }
        let output = self.wait("memsup attach");
        let (_, memsup_lines) = split_stderr(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "memsup attach: {memsup_lines:?}"
        );
        let directory = tempfile::tempdir().expect("a temporary directory");
        (output, std::mem::replace(&mut self.directory, directory))
    }
}

impl Drop for AttachWindow {
    /// A test that failed inside the window still detaches (SIGINT), so memsup never dies
    /// with its probes in the program.
    fn drop(&mut self) {
        if let Some(memsup) = &self.memsup {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(memsup.id() as i32, libc::SIGINT) };
            let _ = self.wait("memsup attach after SIGINT");
        }
    }
}

/// The line memsup attach prints once it has joined `pids` (given in increasing order; up
/// to 4), each named as the kernel names it; `end` says how the recording ends ("Ctrl-C
/// detaches", "detaching after 1 s or on Ctrl-C").
pub fn attached_line(pids: &[u32], end: &str) -> String {
    let named = |pid: &u32| {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_else(|error| panic!("reading the name of {pid}: {error}"));
        format!("{pid} ({})", name.trim_end())
    };
    assert!(pids.len() <= 4, "more processes are only counted");
    let processes = match pids {
        [pid] => format!("process {}", named(pid)),
        _ => {
            let listed: Vec<String> = pids.iter().map(named).collect();
            format!("{} processes: {}", pids.len(), listed.join(", "))
        }
    };
    format!("{ATTACHED}{processes}; {end}")
}
