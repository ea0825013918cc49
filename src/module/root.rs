//! Opening a file as a traced process resolves its path: in its own root and mount
//! namespace (a container's), through /proc/PID/root.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;

/// How often an open that raced a rename or mount is made.
const OPEN_ATTEMPTS: usize = 3;

/// Opens `path` for reading as process `pid` sees it. Symbolic links, absolute ones and `..`
/// included, resolve inside the process's root (RESOLVE_IN_ROOT), so a program cannot point
/// memsup at a file of memsup's own; and nothing opened blocks or becomes memsup's terminal
/// (a FIFO, a device). Where openat2 is missing (kernels before 5.6) or refused (a seccomp
/// filter of memsup's own container), the path is opened through /proc/PID/root without
/// following a last-component link: a link higher up then resolves in memsup's root, and
/// only the device and inode check the caller makes tells the file apart.
pub fn open_in_root(pid: i32, path: &str) -> io::Result<File> {
    let root = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(format!("/proc/{pid}/root"))?;
    let error = match open_beneath(&root, path) {
        Ok(file) => return Ok(file),
        Err(error) => error,
    };
    if !matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
        return Err(error);
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FLAGS | libc::O_NOFOLLOW)
        .open(format!("/proc/{pid}/root/{}", path.trim_start_matches('/')))
}

/// Read-only, not inherited, and neither blocking on nor becoming the terminal of what is
/// opened.
const FLAGS: libc::c_int = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;

/// Opens `path` with the directory `root` as its root, with openat2.
fn open_beneath(root: &File, path: &str) -> io::Result<File> {
    let relative = CString::new(path.trim_start_matches('/')).map_err(io::Error::other)?;
    // SAFETY: open_how is plain data; all-zero is its empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = FLAGS as u64;
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
            open_beneath(&directory, &path)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            assert_eq!(text, "inside", "{path}");
        }
    }

    #[test]
    fn links_resolve_inside_the_process_s_root() {
        let pid = std::process::id() as i32;
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join("file");
        std::fs::write(&file, "mine").unwrap();
        let mut text = String::new();
        open_in_root(pid, file.to_str().unwrap())
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "mine");
        // This process's root is /: an absolute link and `..` stay in it, and so reach
        // the file; what matters is that they are resolved, not refused.
        let link = directory.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_in_root(pid, link.to_str().unwrap()).is_ok());
        // A magic link (/proc/self/exe) is refused.
        let magic = directory.path().join("magic");
        std::os::unix::fs::symlink("/proc/self/exe", &magic).unwrap();
        let refused = open_in_root(pid, magic.to_str().unwrap()).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::ELOOP));
        // A FIFO opens without blocking.
        let fifo = directory.path().join("fifo");
        let name = CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(open_in_root(pid, fifo.to_str().unwrap()).is_ok());
    }
}
