//! Errors, grouped by what failed. `main` maps each to a one-line message and an exit code.

use std::path::PathBuf;

use nix::errno::Errno;

/// Exit codes of memsup itself. When the program under memsup runs to its end, memsup exits
/// with the program's own status instead (128+N when it died of signal N).
pub mod exit_code {
    /// Command-line usage error (clap's own code).
    pub const USAGE: i32 = 2;
    /// The profile is not a memsup profile, or is of a newer format version.
    pub const BAD_PROFILE: i32 = 65;
    /// The profile file does not exist or cannot be read.
    pub const NO_INPUT: i32 = 66;
    /// The executable is 32-bit or not x86-64.
    pub const UNSUPPORTED_EXECUTABLE: i32 = 69;
    /// memsup failed in a way that is its own fault.
    pub const INTERNAL: i32 = 70;
    /// The PID does not exist.
    pub const NO_SUCH_PROCESS: i32 = 71;
    /// The process is already traced by another tracer.
    pub const ALREADY_TRACED: i32 = 72;
    /// The output file cannot be created: unwritable, an existing file without --force, a
    /// symbolic link, or every default name taken.
    pub const OUTPUT_NOT_WRITABLE: i32 = 73;
    /// The PID is memsup's own process or one of its threads (the kernel refuses ptrace
    /// within a thread group).
    pub const OWN_PROCESS: i32 = 74;
    /// The PID is a kernel thread: no user memory, and the kernel refuses to trace it.
    pub const KERNEL_THREAD: i32 = 75;
    /// The process exited while `memsup snapshot` held it, or while `memsup attach` joined it.
    pub const PROCESS_EXITED: i32 = 76;
    /// ptrace was refused (ptrace_scope, capabilities, containers; for PID 1, init's owner).
    pub const PERMISSION_DENIED: i32 = 77;
    /// The profile named by -o is being written by another memsup (an -o template that gives
    /// two memsups of a job one name).
    pub const OUTPUT_IN_USE: i32 = 78;
    /// `memsup report --rank N`: no image of the profile is rank N.
    pub const NO_SUCH_RANK: i32 = 80;
    /// `memsup attach --job PID`: PID is no rank or launcher of an MPI job.
    pub const NOT_IN_MPI_JOB: i32 = 81;
    /// `memsup diff`: no process image of one profile matches one of the other.
    pub const NOTHING_TO_COMPARE: i32 = 82;
    /// `memsup report --pid`/`--exe`: no image of the profiles is one of those asked for.
    pub const NO_MATCHING_IMAGE: i32 = 83;
    /// `memsup report` without a PROFILE: the current directory holds no `*.msup` file.
    pub const NO_PROFILE_HERE: i32 = 84;
    /// `memsup report --suppressions FILE`: FILE cannot be read or has a bad line.
    pub const BAD_SUPPRESSIONS: i32 = 85;
    /// A seccomp filter of the program might punish it for the system calls memsup would
    /// have to run in it to attach.
    pub const SECCOMP_FORBIDS: i32 = 86;
    /// The command exists but cannot be executed.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The command was not found.
    pub const COMMAND_NOT_FOUND: i32 = 127;
}

/// Errors of the profile file format.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: not a memsup profile")]
    NotAProfile { path: PathBuf },
    #[error("{path}: profile format version {found} is newer than this memsup reads ({supported}); use a newer memsup")]
    NewerVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path}: profile format version {found} was written by an older memsup; this one reads versions {supported} and later: record the program again")]
    OlderVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path}: the profile's header is damaged")]
    DamagedHeader { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding a record: {0}")]
    Encode(String),
}

/// Everything else memsup can fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{op} on thread {tid} failed: {source}")]
    Ptrace {
        op: &'static str,
        tid: i32,
        source: Errno,
    },
    /// ESRCH: expected at any moment, the thread or process exited.
    #[error("process or thread {0} is gone")]
    ProcessGone(i32),
    #[error("accessing memory of process {pid} at {address:#x}: {source}")]
    Memory {
        pid: i32,
        address: u64,
        source: Errno,
    },
    #[error("{path}: {message}")]
    Elf { path: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: command not found")]
    CommandNotFound(String),
    #[error("{path}: cannot execute: {source}")]
    NotExecutable { path: String, source: Errno },
    #[error("{path}: {reason}; memsup supports x86-64 ELF programs only")]
    UnsupportedExecutable { path: String, reason: String },
    #[error("no process with PID {0}")]
    NoSuchProcess(i32),
    #[error("process {0} exited during the snapshot; nothing was written")]
    ProcessExited(i32),
    #[error("process {0} ended while memsup was joining it; nothing was recorded")]
    EndedWhileJoining(i32),
    #[error(
        "process {pid} is already traced by PID {tracer} ({tracer_name}); detach that tracer first"
    )]
    AlreadyTraced {
        pid: i32,
        tracer: i32,
        tracer_name: String,
    },
    #[error("not permitted to trace process {pid}")]
    PermissionDenied { pid: i32 },
    #[error(
        "process {pid} is memsup itself; the kernel does not let a process trace its own threads"
    )]
    OwnProcess { pid: i32 },
    #[error("process {pid} ({name}) is a kernel thread: it has no user memory to record, and the kernel refuses to trace kernel threads")]
    KernelThread { pid: i32, name: String },
    #[error("cannot write the profile {path}: {source}")]
    OutputNotWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    InputNotReadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A bounded wait for a thread's stop (attach, detach, a remote system call) expired.
    #[error("waitpid: thread {tid} did not stop within {seconds} s while {during}")]
    ThreadDidNotStop {
        tid: i32,
        seconds: u64,
        during: &'static str,
    },
    /// A system call memsup would run in a tracee thread that the thread's seccomp filters
    /// might punish the program for (`ptrace::seccomp_judge`).
    #[error("thread {tid}'s seccomp filters {reason}: memsup runs no {call} in it")]
    SeccompForbids {
        tid: i32,
        call: String,
        reason: String,
    },
    /// memsup was asked to end (Ctrl-C, SIGTERM) before it had joined process `0`.
    #[error("interrupted while attaching to process {0}")]
    AttachInterrupted(i32),
    #[error("no process image of the profile is MPI rank {rank} ({})", ranks_present(.ranks))]
    NoSuchRank { rank: u32, ranks: Vec<u32> },
    #[error("process {pid} is in no MPI job: {reason}")]
    NotInMpiJob { pid: i32, reason: String },
    #[error("{0}")]
    NothingToCompare(String),
    #[error("no process image matches --pid/--exe (images recorded: {})", .images.join(", "))]
    NoMatchingImage { images: Vec<String> },
    #[error("no PROFILE given, and {} holds no *.msup profile", if .directory.as_os_str() == "." { "the current directory".to_string() } else { .directory.display().to_string() })]
    NoProfileHere { directory: PathBuf },
    #[error("suppressions {}: {message}", .path.display())]
    BadSuppressions { path: PathBuf, message: String },
    #[error("cannot write the report {path}: {source}")]
    ReportNotWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// Wraps a failed ptrace request; ESRCH becomes `ProcessGone`.
    pub fn ptrace(op: &'static str, tid: i32, source: Errno) -> Error {
        if source == Errno::ESRCH {
            Error::ProcessGone(tid)
        } else {
            Error::Ptrace { op, tid, source }
        }
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// A failed read of /proc/`pid`/maps: `ProcessGone` when the process is (killed and
    /// reaped meanwhile, or its memory already released), else an I/O error.
    pub fn maps_read(pid: i32, source: std::io::Error) -> Error {
        let gone = source.kind() == std::io::ErrorKind::NotFound
            || source.raw_os_error() == Some(libc::ESRCH);
        match gone {
            true => Error::ProcessGone(pid),
            false => Error::io(format!("/proc/{pid}/maps"), source),
        }
    }

    /// The exit code `main` uses for this error.
    pub fn exit_code(&self) -> i32 {
        use exit_code::*;
        match self {
            Error::CommandNotFound(_) => COMMAND_NOT_FOUND,
            Error::NotExecutable { .. } => NOT_EXECUTABLE,
            Error::UnsupportedExecutable { .. } => UNSUPPORTED_EXECUTABLE,
            Error::NoSuchProcess(_) => NO_SUCH_PROCESS,
            Error::ProcessExited(_) | Error::EndedWhileJoining(_) => PROCESS_EXITED,
            Error::AlreadyTraced { .. } => ALREADY_TRACED,
            Error::PermissionDenied { .. } => PERMISSION_DENIED,
            Error::OwnProcess { .. } => OWN_PROCESS,
            Error::KernelThread { .. } => KERNEL_THREAD,
            Error::Ptrace {
                source: Errno::EPERM,
                ..
            } => PERMISSION_DENIED,
            Error::OutputNotWritable { source, .. }
                if crate::trace::output_lock::ProfileInUse::is(source) =>
            {
                OUTPUT_IN_USE
            }
            Error::OutputNotWritable { .. } => OUTPUT_NOT_WRITABLE,
            Error::ReportNotWritable { source, .. }
                if crate::trace::output_lock::ProfileInUse::is(source) =>
            {
                OUTPUT_IN_USE
            }
            Error::ReportNotWritable { .. } => OUTPUT_NOT_WRITABLE,
            Error::NoMatchingImage { .. } => NO_MATCHING_IMAGE,
            Error::NoProfileHere { .. } => NO_PROFILE_HERE,
            Error::BadSuppressions { .. } => BAD_SUPPRESSIONS,
            Error::InputNotReadable { .. } => NO_INPUT,
            Error::NoSuchRank { .. } => NO_SUCH_RANK,
            Error::NotInMpiJob { .. } => NOT_IN_MPI_JOB,
            Error::NothingToCompare(_) => NOTHING_TO_COMPARE,
            Error::SeccompForbids { .. } => SECCOMP_FORBIDS,
            Error::Trace(TraceError::Io { .. }) => NO_INPUT,
            Error::Trace(_) => BAD_PROFILE,
            _ => INTERNAL,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// "ranks recorded: 0, 1, 2" or "no image has a rank".
fn ranks_present(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        return "no image has a rank".to_string();
    }
    let ranks: Vec<String> = ranks.iter().map(u32::to_string).collect();
    format!("ranks recorded: {}", ranks.join(", "))
}
