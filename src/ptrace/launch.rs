//! `memsup run`: fork, let the child stop itself, seize it, then let it install the seccomp
//! filter and exec. Exec failures come back over a close-on-exec pipe.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::ptrace::regs;
use crate::ptrace::seccomp;
use crate::ptrace::state::Thread;
use crate::ptrace::stop::{wait_for_thread, Event, Stop};
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{SnapshotReason, StartCause};

/// Finds `command` the way execvp would: as a path if it contains '/', else along $PATH.
pub fn resolve_command(command: &OsStr) -> Result<PathBuf> {
    let display = command.to_string_lossy().into_owned();
    if command.as_bytes().contains(&b'/') {
        let path = PathBuf::from(command);
        return check_runnable(&path, &display).map(|_| path);
    }
    let search =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut not_executable = None;
    for directory in std::env::split_paths(&search) {
        let candidate = directory.join(command);
        match check_runnable(&candidate, &display) {
            Ok(()) => return Ok(candidate),
            Err(error @ Error::NotExecutable { .. }) => {
                not_executable = not_executable.or(Some(error))
            }
            Err(_) => {}
        }
    }
    Err(not_executable.unwrap_or(Error::CommandNotFound(display)))
}

fn check_runnable(path: &Path, display: &str) -> Result<()> {
    let metadata =
        std::fs::metadata(path).map_err(|_| Error::CommandNotFound(display.to_string()))?;
    if metadata.is_dir() {
        return Err(Error::NotExecutable {
            path: display.to_string(),
            source: Errno::EISDIR,
        });
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Err(Error::NotExecutable {
            path: display.to_string(),
            source: Errno::EACCES,
        });
    }
    Ok(())
}

/// What the child needs, prepared before fork (the child may only make raw system calls).
struct ChildPlan {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    filter: Option<Vec<libc::sock_filter>>,
}

fn to_cstring(bytes: Vec<u8>) -> Result<CString> {
    CString::new(bytes).map_err(|_| Error::Internal("argument contains a NUL byte".into()))
}

impl ChildPlan {
    fn new(path: &Path, args: &[OsString], use_seccomp: bool) -> Result<ChildPlan> {
        let argv = args
            .iter()
            .map(|a| to_cstring(a.clone().into_vec()))
            .collect::<Result<Vec<_>>>()?;
        let envp = std::env::vars_os()
            .map(|(k, v)| {
                let mut entry = k.into_vec();
                entry.push(b'=');
                entry.extend(v.into_vec());
                to_cstring(entry)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ChildPlan {
            path: to_cstring(path.as_os_str().as_bytes().to_vec())?,
            argv,
            envp,
            filter: use_seccomp.then(seccomp::filter_program),
        })
    }
}

/// Runs in the forked child: restore default signal state, wait until the parent has seized
/// us, install the filter, exec. Never returns.
unsafe fn child_main(
    plan: &ChildPlan,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    go_pipe: i32,
    error_pipe: i32,
) -> ! {
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    crate::ptrace::signals::restore_inherited_dispositions();
    // The parent writes one byte once it traces us; end of file means it could not.
    let mut go = 0u8;
    if libc::read(go_pipe, (&mut go as *mut u8).cast(), 1) != 1 {
        libc::_exit(127);
    }
    libc::close(go_pipe);
    if let Some(filter) = &plan.filter {
        if seccomp::install(filter) != 0 {
            let errno = *libc::__errno_location();
            libc::write(error_pipe, (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    libc::execve(plan.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
    let errno = *libc::__errno_location();
    libc::write(error_pipe, (&errno as *const i32).cast(), 4);
    libc::_exit(127);
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

fn close_on_exec_pipe() -> Result<[i32; 2]> {
    let mut fds = [0i32; 2];
    // SAFETY: plain pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io("pipe2", std::io::Error::last_os_error()));
    }
    Ok(fds)
}

fn close(fd: i32) {
    // SAFETY: closes a descriptor this module opened.
    unsafe { libc::close(fd) };
}

/// A launched program, as memsup first sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launched {
    /// Stopped at its exec event, ready to be probed.
    AtExec(i32),
    /// Killed by `signal` before memsup saw its exec event (a SIGKILL right at the start):
    /// it ended as it would have without memsup, and was reaped.
    Killed { pid: i32, signal: i32 },
}

/// Launches `args[0]` (already resolved to `path`) under ptrace and returns it stopped at its
/// exec event, or killed before it. Nothing runs unless the seize succeeded.
pub fn launch(path: &Path, args: &[OsString], use_seccomp: bool) -> Result<Launched> {
    let plan = ChildPlan::new(path, args, use_seccomp)?;
    if use_seccomp {
        crate::ptrace::seccomp_judge::trust_launch_filter();
    }
    let argv = null_terminated(&plan.argv);
    let envp = null_terminated(&plan.envp);
    let error_pipe = close_on_exec_pipe()?;
    let go_pipe = close_on_exec_pipe()?;
    // SAFETY: the child only makes raw system calls on data prepared above.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            libc::close(error_pipe[0]);
            libc::close(go_pipe[1]);
            child_main(&plan, &argv, &envp, go_pipe[0], error_pipe[1]);
        }
    }
    close(error_pipe[1]);
    close(go_pipe[0]);
    if pid < 0 {
        close(error_pipe[0]);
        close(go_pipe[1]);
        return Err(Error::io("fork", std::io::Error::last_os_error()));
    }
    let result = regs::seize(pid, regs::trace_options(use_seccomp)).and_then(|_| {
        // SAFETY: writes one byte from a local.
        unsafe { libc::write(go_pipe[1], [1u8].as_ptr().cast(), 1) };
        close(go_pipe[1]);
        run_to_exec(pid, error_pipe[0], path)
    });
    if result.is_err() {
        close(go_pipe[1]);
        // The child sees end of file and exits without running anything; reap it.
        let _ = wait_for_thread(pid);
    }
    close(error_pipe[0]);
    result
}

fn run_to_exec(pid: i32, error_pipe: i32, path: &Path) -> Result<Launched> {
    loop {
        let status = wait_for_thread(pid).map_err(|e| Error::ptrace("waitpid", pid, e))?;
        match Stop::from_wait_status(status) {
            Some(Stop::Event {
                event: Event::Exec, ..
            }) => return Ok(Launched::AtExec(pid)),
            Some(Stop::Killed { signal, .. }) => {
                return match exec_errno(error_pipe) {
                    Some(errno) => Err(exec_failure(errno, path)),
                    // No exec error came back: a signal ended the program, not memsup.
                    None => Ok(Launched::Killed { pid, signal }),
                };
            }
            Some(Stop::Exited { .. }) => {
                let display = path.display().to_string();
                return Err(match exec_errno(error_pipe) {
                    Some(errno) => exec_failure(errno, path),
                    None => {
                        Error::Internal(format!("{display}: the program ended before it started"))
                    }
                });
            }
            // A signal before exec (e.g. Ctrl-C) is the program's: deliver it.
            Some(Stop::Signal { signal, .. }) => regs::resume(pid, signal)?,
            Some(other) => regs::resume(other.tid(), 0)?,
            None => {}
        }
    }
}

/// The errno the child sent when its exec failed; None when the pipe closed without one (the
/// exec succeeded, or the child died before trying).
fn exec_errno(error_pipe: i32) -> Option<i32> {
    let mut errno = 0i32;
    // SAFETY: reads at most 4 bytes into a local.
    let read = unsafe { libc::read(error_pipe, (&mut errno as *mut i32).cast(), 4) };
    (read == 4).then_some(errno)
}

fn exec_failure(errno: i32, path: &Path) -> Error {
    let display = path.display().to_string();
    match Errno::from_raw(errno) {
        Errno::ENOENT => Error::CommandNotFound(display),
        errno => Error::NotExecutable {
            path: display,
            source: errno,
        },
    }
}

impl Tracer<'_> {
    /// Takes over a process `launch` left stopped at its exec event.
    pub fn adopt_launched(&mut self, pid: i32) -> Result<()> {
        let process = self.new_process(pid, false);
        self.processes.start(process);
        self.threads.start(pid, Thread::new(pid));
        let start = EventKind::ProcessStart {
            parent_pid: None,
            cause: StartCause::Launch,
        };
        self.send(pid, pid, start);
        self.record_exec(pid);
        self.snapshot_at_start(pid, SnapshotReason::Start);
        match self.setup_image(pid).and_then(|()| self.resume(pid)) {
            // Killed while its probes went in: the event loop collects how it ended.
            Err(Error::ProcessGone(_)) => Ok(()),
            outcome => outcome,
        }
    }
}
