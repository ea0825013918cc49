//! memsup attached to running processes for a window that the test ends by an event it has
//! observed (a line the program printed), never after a fixed time: SIGINT detaches.

use std::path::PathBuf;
use std::process::{Child, Output};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::live_process::tracer_pid;
use super::report::report_json;
use super::run::{clean_command, memsup_binary, spawn_piped, split_stderr, wait_with_timeout};

/// How long a loaded machine may take to attach, or a program to print its next line.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(60);

/// `memsup attach -o PROFILE OPTIONS PIDS`, running until `close`.
pub struct AttachWindow {
    /// None once closed.
    memsup: Option<Child>,
    pub directory: TempDir,
}

impl AttachWindow {
    /// Starts memsup and returns once it traces every process of `pids` (it has seized
    /// them; what it does next happens before any signal sent to them from now on is
    /// delivered, since ptrace hands such signals to memsup first).
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
        let (memsup, _) = spawn_piped(command);
        let mut window = AttachWindow {
            memsup: Some(memsup),
            directory,
        };
        let memsup_pid = window.memsup.as_ref().expect("just started").id();
        let deadline = Instant::now() + EVENT_TIMEOUT;
        for &pid in pids {
            while tracer_pid(pid) != memsup_pid {
                if let Some(status) = window.memsup.as_mut().and_then(|m| m.try_wait().ok()?) {
                    let output = window.memsup.take().map(|m| wait_with_timeout(m, "memsup"));
                    panic!("memsup attach ended ({status}) before tracing {pid}: {output:?}");
                }
                assert!(
                    Instant::now() < deadline,
                    "memsup did not attach to {pid} within {EVENT_TIMEOUT:?}"
                );
                thread::sleep(Duration::from_millis(1));
            }
        }
        window
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
        let memsup = self.memsup.take().expect("a window is closed once");
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(memsup.id() as i32, libc::SIGINT) };
        let output = wait_with_timeout(memsup, "memsup attach after SIGINT");
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
        let memsup = self.memsup.take().expect("a window is ended once");
        if detach {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(memsup.id() as i32, libc::SIGINT) };
        }
        let output = wait_with_timeout(memsup, "memsup attach");
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
        if let Some(memsup) = self.memsup.take() {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(memsup.id() as i32, libc::SIGINT) };
            let _ = wait_with_timeout(memsup, "memsup attach after SIGINT");
        }
    }
}
