//! The profile's lock: a profile is `flock`ed while memsup writes it, and appears at its name
//! already locked, so that a second memsup given the same name (an `-o` template that does not
//! tell two ranks apart) is refused instead of sharing or truncating the file.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::output_file::make_private;

/// Why a profile was refused when another memsup holds it (inside an `io::Error`, so that
/// `main` can give it an exit code of its own).
#[derive(Debug)]
pub struct ProfileInUse;

impl std::fmt::Display for ProfileInUse {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(
            "another memsup is writing it now; give each memsup a file of its own \
             (%r, %p or %h in -o, or -o DIR/)",
        )
    }
}

impl std::error::Error for ProfileInUse {}

impl ProfileInUse {
    /// True when `error` is this refusal.
    pub fn is(error: &io::Error) -> bool {
        error
            .get_ref()
            .is_some_and(|inner| inner.is::<ProfileInUse>())
    }
}

pub(super) fn in_use() -> io::Error {
    io::Error::other(ProfileInUse)
}

/// Takes the profile's lock for as long as the file is open. A file system without locks
/// (some network ones) goes unlocked: O_EXCL still keeps two memsups out of one new file.
pub(super) fn lock(file: &File) -> io::Result<()> {
    // SAFETY: flock on a descriptor this function borrows.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Err(in_use()),
        _ => Ok(()),
    }
}

/// True when a memsup holds the profile at `path` now.
pub(super) fn is_locked(path: &Path) -> bool {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    // SAFETY: as in `lock`; the probe's lock goes with `file`.
    let probed = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    probed != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// A new file at `path`: made unnamed (O_TMPFILE) in its directory, locked, made 0600,
/// then linked to `path`, which fails when anything, a link included, is there.
pub(super) fn create_linked(path: &Path) -> io::Result<File> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file = OpenOptions::new()
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(directory)?;
    lock(&file)?;
    make_private(&file)?;
    let source = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let target = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: both strings are NUL-terminated and live across the call.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            source.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}
