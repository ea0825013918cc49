//! Creating the profile file without ever writing through a link someone else planted.
//!
//! Profiles hold command lines, paths and host names, and memsup often runs as root in shared
//! directories, so the file is opened with `O_NOFOLLOW`, a default name only ever names a file
//! memsup created itself (`O_EXCL`), and every profile is made mode 0600 whatever the umask.
//! A profile is locked (`flock`) while memsup writes it, and appears at its name already
//! locked, so a second memsup given the same name is told so instead of sharing the file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::output_lock::{create_linked, in_use, is_locked, lock};
use crate::error::TraceError;

/// Names tried for a default profile before giving up: `NAME.msup`, then `NAME.1.msup` up to
/// `NAME.99.msup`.
pub const DEFAULT_NAME_TRIES: u32 = 100;

/// Where the profile goes, as the user asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputRequest {
    /// `-o PATH`: exactly that file; an existing one only with `force`.
    Explicit { path: PathBuf, force: bool },
    /// No `-o`: `STEM.msup`, or `STEM.N.msup` for the first N that names no existing file.
    Default { stem: PathBuf },
    /// `-o DIR/`: as `Default` with stem `DIR/NAME`, DIR created (mode 0700) when missing.
    InDirectory { directory: PathBuf, name: String },
}

impl OutputRequest {
    /// The name the user expects (the first default name), for messages.
    pub fn first_path(&self) -> PathBuf {
        match self {
            OutputRequest::Explicit { path, .. } => path.clone(),
            OutputRequest::Default { stem } => with_suffix(stem, 0),
            OutputRequest::InDirectory { directory, name } => with_suffix(&directory.join(name), 0),
        }
    }
}

/// A profile file opened for writing, and the path it was opened at.
#[derive(Debug)]
pub struct OutputFile {
    pub path: PathBuf,
    pub file: File,
}

/// Opens the profile file as `request` says, mode 0600, never through a symbolic link.
pub fn open_output(request: &OutputRequest) -> Result<OutputFile, TraceError> {
    match request {
        OutputRequest::Explicit { path, force: false } => create_new(path)
            .map_err(|error| explain_existing(path, error))
            .map(|file| OutputFile {
                path: path.clone(),
                file,
            }),
        OutputRequest::Explicit { path, force: true } => open_forced(path)
            .map_err(|error| explain_existing(path, error))
            .map(|file| OutputFile {
                path: path.clone(),
                file,
            }),
        OutputRequest::Default { stem } => create_default(stem),
        OutputRequest::InDirectory { directory, name } => {
            make_directory(directory)?;
            create_default(&directory.join(name))
        }
    }
}

/// The directory of `-o DIR/`, made if missing (by this memsup or by another rank's at the
/// same moment).
fn make_directory(directory: &Path) -> Result<(), TraceError> {
    match std::fs::DirBuilder::new().mode(0o700).create(directory) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists && directory.is_dir() => Ok(()),
        Err(source) => Err(TraceError::Io {
            path: directory.to_path_buf(),
            source,
        }),
    }
}

/// `STEM.msup` for attempt 0, `STEM.N.msup` for attempt N.
fn with_suffix(stem: &Path, attempt: u32) -> PathBuf {
    let mut name = stem.as_os_str().to_owned();
    if attempt > 0 {
        name.push(format!(".{attempt}"));
    }
    name.push(".msup");
    PathBuf::from(name)
}

/// A file that did not exist, locked from the moment it has its name: made unnamed
/// (O_TMPFILE), locked, then linked to `path` (which fails when anything, a link included,
/// is there). Where the file system has no O_TMPFILE: `create_exclusive`.
fn create_new(path: &Path) -> io::Result<File> {
    match create_linked(path) {
        Err(error) if error.kind() != io::ErrorKind::AlreadyExists => create_exclusive(path),
        result => result,
    }
}

/// O_CREAT|O_EXCL (which never follows a link) and O_NOFOLLOW, then the lock: another memsup
/// may see the file unlocked for that instant.
fn create_exclusive(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    lock(&file)?;
    make_private(&file)?;
    Ok(file)
}

/// `--force`: a new file, or an existing regular file truncated; never a link, FIFO or device.
fn open_forced(path: &Path) -> io::Result<File> {
    // O_NONBLOCK: opening a FIFO without a reader fails (ENXIO) instead of waiting for one.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::other(
            "not a regular file; memsup writes profiles to regular files only",
        ));
    }
    // A file of another user, or one with a second name, may be someone's trap for a memsup
    // run by root in a shared directory: the owner could read the profile, or the other name
    // be a file that matters.
    // SAFETY: geteuid has no side effects.
    if metadata.uid() != unsafe { libc::geteuid() } {
        return Err(io::Error::other(
            "it belongs to another user; memsup overwrites only its user's own files",
        ));
    }
    if metadata.nlink() > 1 {
        return Err(io::Error::other(
            "it has other hard links; memsup does not overwrite a file with several names",
        ));
    }
    lock(&file)?;
    file.set_len(0)?;
    make_private(&file)?;
    Ok(file)
}

/// Mode 0600 exactly: the umask may have taken bits away (0400 under umask 0277).
pub(super) fn make_private(file: &File) -> io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

fn create_default(stem: &Path) -> Result<OutputFile, TraceError> {
    for attempt in 0..DEFAULT_NAME_TRIES {
        let path = with_suffix(stem, attempt);
        match create_new(&path) {
            Ok(file) => return Ok(OutputFile { path, file }),
            // Taken (a file, or a link someone planted): the next name.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(TraceError::Io { path, source }),
        }
    }
    Err(TraceError::Io {
        path: with_suffix(stem, 0),
        source: io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "it and {} to {} exist already; choose a name with -o",
                with_suffix(stem, 1).display(),
                with_suffix(stem, DEFAULT_NAME_TRIES - 1).display()
            ),
        ),
    })
}

/// Says why an explicit path was refused when it exists or is a link.
fn explain_existing(path: &Path, error: io::Error) -> TraceError {
    let is_link = std::fs::symlink_metadata(path)
        .map(|metadata| metadata.file_type().is_symlink())
        .unwrap_or(false);
    let source = if is_link {
        // EEXIST from O_EXCL, or ELOOP from O_NOFOLLOW under --force.
        io::Error::new(
            error.kind(),
            "it is a symbolic link; memsup never writes a profile through one",
        )
    } else if error.kind() == io::ErrorKind::AlreadyExists && is_locked(path) {
        in_use()
    } else if error.kind() == io::ErrorKind::AlreadyExists {
        io::Error::new(error.kind(), "the file exists; -f/--force overwrites it")
    } else {
        error
    };
    TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::symlink;

    fn message(error: TraceError) -> String {
        error.to_string()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn an_explicit_symbolic_link_is_refused_and_its_target_untouched() {
        let directory = tempfile::tempdir().unwrap();
        let victim = directory.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let link = directory.path().join("p.msup");
        symlink(&victim, &link).unwrap();
        for force in [false, true] {
            let request = OutputRequest::Explicit {
                path: link.clone(),
                force,
            };
            let error = message(open_output(&request).unwrap_err());
            assert_eq!(
                error,
                format!(
                    "{}: it is a symbolic link; memsup never writes a profile through one",
                    link.display()
                ),
                "force: {force}"
            );
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        }
    }

    #[test]
    fn a_dangling_symbolic_link_is_refused_and_nothing_is_created() {
        let directory = tempfile::tempdir().unwrap();
        let target = directory.path().join("would-be-created");
        let link = directory.path().join("p.msup");
        symlink(&target, &link).unwrap();
        for force in [false, true] {
            let request = OutputRequest::Explicit {
                path: link.clone(),
                force,
            };
            assert!(open_output(&request).is_err(), "force: {force}");
            assert!(!target.exists(), "force: {force}");
        }
    }

    #[test]
    fn an_existing_file_is_refused_without_force() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        std::fs::write(&path, "old profile\n").unwrap();
        let request = OutputRequest::Explicit {
            path: path.clone(),
            force: false,
        };
        let error = message(open_output(&request).unwrap_err());
        assert_eq!(
            error,
            format!(
                "{}: the file exists; -f/--force overwrites it",
                path.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old profile\n");
    }

    #[test]
    fn force_truncates_an_existing_file_and_makes_it_private() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("p.msup");
        std::fs::write(&path, "an old profile, longer than the new one\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let request = OutputRequest::Explicit {
            path: path.clone(),
            force: true,
        };
        let mut output = open_output(&request).unwrap();
        assert_eq!(output.path, path);
        output.file.write_all(b"new\n").unwrap();
        drop(output);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn force_refuses_a_file_with_a_second_name_or_another_owner() {
        let directory = tempfile::tempdir().unwrap();
        let victim = directory.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let path = directory.path().join("p.msup");
        std::fs::hard_link(&victim, &path).unwrap();
        let request = OutputRequest::Explicit {
            path: path.clone(),
            force: true,
        };
        let error = open_output(&request).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{}: it has other hard links; memsup does not overwrite a file with several names",
                path.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "someone else's\n").unwrap();
        // Only root can give a file away; as another user the check is not reachable here.
        // SAFETY: geteuid has no side effects.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let error = open_output(&request).unwrap_err().to_string();
            assert_eq!(
                error,
                format!(
                    "{}: it belongs to another user; memsup overwrites only its user's own files",
                    path.display()
                )
            );
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "someone else's\n");
        }
    }

    #[test]
    fn force_refuses_what_is_not_a_regular_file() {
        let directory = tempfile::tempdir().unwrap();
        let fifo = directory.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let request = OutputRequest::Explicit {
            path: fifo.clone(),
            force: true,
        };
        // No reader: ENXIO at once rather than a wait for one.
        assert!(open_output(&request).is_err());
    }

    #[test]
    fn a_taken_default_name_gives_the_next_suffix() {
        let directory = tempfile::tempdir().unwrap();
        let stem = directory.path().join("memsup.true.42");
        let victim = directory.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        symlink(&victim, directory.path().join("memsup.true.42.msup")).unwrap();
        std::fs::write(directory.path().join("memsup.true.42.1.msup"), "").unwrap();
        let request = OutputRequest::Default { stem: stem.clone() };
        let output = open_output(&request).unwrap();
        assert_eq!(output.path, directory.path().join("memsup.true.42.2.msup"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(
            request.first_path(),
            directory.path().join("memsup.true.42.msup")
        );
    }

    #[test]
    fn default_names_give_up_after_a_bounded_number_of_tries() {
        let directory = tempfile::tempdir().unwrap();
        let stem = directory.path().join("memsup.attach.7");
        for attempt in 0..DEFAULT_NAME_TRIES {
            std::fs::write(with_suffix(&stem, attempt), "").unwrap();
        }
        let error =
            message(open_output(&OutputRequest::Default { stem: stem.clone() }).unwrap_err());
        assert_eq!(
            error,
            format!(
                "{0}.msup: it and {0}.1.msup to {0}.99.msup exist already; choose a name with -o",
                stem.display()
            )
        );
    }

    #[test]
    fn profiles_are_created_mode_0600_under_umask_022() {
        let directory = tempfile::tempdir().unwrap();
        // SAFETY: umask only changes this process's file creation mask.
        let previous = unsafe { libc::umask(0o022) };
        let explicit = directory.path().join("explicit.msup");
        let forced = directory.path().join("forced.msup");
        let stem = directory.path().join("memsup.app.1");
        let requests = [
            OutputRequest::Explicit {
                path: explicit.clone(),
                force: false,
            },
            OutputRequest::Explicit {
                path: forced.clone(),
                force: true,
            },
            OutputRequest::Default { stem: stem.clone() },
        ];
        let paths: Vec<PathBuf> = requests
            .iter()
            .map(|request| open_output(request).map(|output| output.path))
            .collect::<Result<_, _>>()
            .unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(previous) };
        assert_eq!(paths, [explicit, forced, with_suffix(&stem, 0)]);
        for path in paths {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
}
