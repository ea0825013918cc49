//! Opening a file as a traced process resolves its path: in its own root and mount
//! namespace (a container's), through /proc/PID/root.

use std::ffi::CString;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;

/// How often an open that raced a rename or mount is made.
const OPEN_ATTEMPTS: usize = 3;

/// A regular file opened for reading in a process's root.
pub struct RootFile {
    pub file: File,
    pub metadata: Metadata,
    /// Its path was resolved inside the process's root. When not (the fallback below), a
    /// link in it may have led into memsup's root: only a file whose device and inode are
    /// the mapped one's is then to be trusted.
    pub confined: bool,
    /// The process's root directory (O_PATH), where more files are looked up as the
    /// process sees them (`ProcessRoot::keep`).
    pub root: File,
}

/// A process's root directory (O_PATH) and its mount namespace: lookups beneath the
/// directory see the namespace's mounts after the process is gone too, since the open
/// namespace keeps them (the last process of a namespace leaving would unmount them all).
pub struct ProcessRoot {
    pub directory: File,
    /// None where /proc/PID/ns/mnt cannot be opened: the mounts last as the namespace does.
    namespace: Option<File>,
}

/// A mount namespace's inode and a root directory's device and inode.
pub type RootKey = (u64, u64, u64);

impl ProcessRoot {
    /// Keeps process `pid`'s root `directory`, with its mount namespace opened now.
    pub fn keep(pid: i32, directory: File) -> ProcessRoot {
        ProcessRoot {
            directory,
            namespace: File::open(format!("/proc/{pid}/ns/mnt")).ok(),
        }
    }

    /// What tells this root from another's: None without its namespace.
    pub fn key(&self) -> Option<RootKey> {
        use std::os::unix::fs::MetadataExt;
        let namespace = self.namespace.as_ref()?.metadata().ok()?;
        let directory = self.directory.metadata().ok()?;
        Some((namespace.ino(), directory.dev(), directory.ino()))
    }
}

/// Opens `path` for reading as process `pid` sees it, if it is a regular file. Symbolic
/// links, absolute ones and `..` included, resolve inside the process's root
/// (RESOLVE_IN_ROOT), so a program cannot point memsup at one of memsup's files. Where
/// openat2 is missing (kernels before 5.6) or refused (a seccomp filter of memsup's own
/// container), the path is looked up through /proc/PID/root without following a last
/// link, and a link higher up resolves in memsup's root.
pub fn open_in_root(pid: i32, path: &str) -> io::Result<RootFile> {
    let root = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(format!("/proc/{pid}/root"))?;
    let (located, confined) = match locate_beneath(&root, path) {
        Ok(located) => (located, true),
        Err(error) if matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
            let located = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(format!("/proc/{pid}/root/{}", path.trim_start_matches('/')))?;
            (located, false)
        }
        Err(error) => return Err(error),
    };
    let (file, metadata) = reopen_regular(&located)?;
    Ok(RootFile {
        file,
        metadata,
        confined,
        root,
    })
}

/// The regular file at `path` beneath the directory `root` (links resolved inside it), read
/// whole: the size `stat` gives, up to `READ_BENEATH_LIMIT`. None where it is not one, is
/// empty, lies on procfs or sysfs (a link there reads no file), or where openat2 cannot
/// confine the lookup.
pub fn read_beneath(root: &File, path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let located = locate_beneath(root, path.to_str()?).ok()?;
    let (mut file, metadata) = reopen_regular(&located).ok()?;
    let size = metadata.len();
    if size == 0 || size > READ_BENEATH_LIMIT || on_kernel_filesystem(&file) {
        return None;
    }
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).ok()?;
    bytes.resize(size as usize, 0);
    file.read_exact(&mut bytes).ok()?;
    Some(bytes)
}

/// The largest file `read_beneath` reads: larger than any debug file (libc's is 5 MiB, a
/// large C++ program's a few GiB).
const READ_BENEATH_LIMIT: u64 = 16 << 30;

/// Whether `file` lies on procfs or sysfs, whose files are the kernel's, not a program's.
fn on_kernel_filesystem(file: &File) -> bool {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    // SAFETY: statfs is plain data; all-zero is a valid value for fstatfs to overwrite.
    let mut status: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a statfs the call may write.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut status) } != 0 {
        return true;
    }
    [PROC_SUPER_MAGIC, SYSFS_MAGIC].contains(&(status.f_type as i64))
}

/// The file `located` (an O_PATH descriptor, which opens nothing) opened for reading, if it
/// is a regular file: a device's driver is never asked to open, and a FIFO never blocks.
pub fn reopen_regular(located: &File) -> io::Result<(File, Metadata)> {
    if !located.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", located.as_raw_fd()))?;
    let metadata = file.metadata()?;
    Ok((file, metadata))
}

/// Looks `path` up with the directory `root` as its root, with openat2: an O_PATH
/// descriptor.
fn locate_beneath(root: &File, path: &str) -> io::Result<File> {
    let relative = CString::new(path.trim_start_matches('/')).map_err(io::Error::other)?;
    // SAFETY: open_how is plain data; all-zero is its empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    let mut error = io::Error::from_raw_os_error(libc::EAGAIN);
    // RESOLVE_IN_ROOT answers EAGAIN when a rename or mount raced the walk: tried again.
    for _ in 0..OPEN_ATTEMPTS {
        // SAFETY: the descriptor, the NUL-terminated path and `how` live across the call;
        // the size passed is `how`'s.
        let descriptor = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.as_raw_fd(),
                relative.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if descriptor >= 0 {
            // SAFETY: the kernel just returned this descriptor to this process alone.
            return Ok(unsafe { File::from_raw_fd(descriptor as i32) });
        }
        error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EAGAIN) {
            break;
        }
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// An absolute link and `..` resolve inside the root given, not in this process's.
    #[test]
    fn links_resolve_beneath_the_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("etc")).unwrap();
        let inside = format!("memsup-root-test-{}", std::process::id());
        std::fs::write(root.path().join("etc").join(&inside), "inside").unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(format!("/etc/{inside}"), &link).unwrap();
        let directory = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(root.path())
            .unwrap();
        for path in ["/link".to_string(), format!("/../../etc/{inside}")] {
            let mut text = String::new();
            let located = locate_beneath(&directory, &path).unwrap();
            let (mut file, _) = reopen_regular(&located).unwrap();
            file.read_to_string(&mut text).unwrap();
            assert_eq!(text, "inside", "{path}");
            let read = read_beneath(&directory, std::path::Path::new(&path));
            assert_eq!(read.as_deref(), Some(&b"inside"[..]), "{path}");
        }
        // A directory is not read.
        assert_eq!(read_beneath(&directory, std::path::Path::new("/etc")), None);
    }

    /// A regular file is opened and confined; a magic link, a FIFO and a device are not
    /// opened.
    #[test]
    fn only_regular_files_are_opened() {
        let pid = std::process::id() as i32;
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join("file");
        std::fs::write(&file, "mine").unwrap();
        let mut text = String::new();
        let opened = open_in_root(pid, file.to_str().unwrap()).unwrap();
        assert!(opened.confined && opened.metadata.is_file());
        let mut file_opened = opened.file;
        file_opened.read_to_string(&mut text).unwrap();
        assert_eq!(text, "mine");
        // This process's root is /: an absolute link and `..` stay in it, and so reach
        // the file; what matters is that they are resolved, not refused.
        let link = directory.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_in_root(pid, link.to_str().unwrap()).is_ok());
        // A magic link (/proc/self/exe) is refused.
        let magic = directory.path().join("magic");
        std::os::unix::fs::symlink("/proc/self/exe", &magic).unwrap();
        let refused = open_in_root(pid, magic.to_str().unwrap()).err().unwrap();
        assert_eq!(refused.raw_os_error(), Some(libc::ELOOP));
        // A FIFO (opening it would block) and a device are refused, not opened.
        let fifo = directory.path().join("fifo");
        let name = CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for path in [fifo.to_str().unwrap(), "/dev/null"] {
            let refused = open_in_root(pid, path).err().expect(path);
            assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{path}");
        }
    }
}
