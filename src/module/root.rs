//! Opening a file as a traced process resolves its path: in its own root and mount
//! namespace (a container's), through /proc/PID/root.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;

/// Opens `path` for reading as process `pid` sees it. Symbolic links, absolute ones and `..`
/// included, resolve inside the process's root (RESOLVE_IN_ROOT), so a program cannot point
/// memsup at a file of memsup's own; and nothing opened blocks or becomes memsup's terminal
/// (a FIFO, a device). On kernels before 5.6 (no openat2) the path is opened through
/// /proc/PID/root without following a last-component link.
pub fn open_in_root(pid: i32, path: &str) -> io::Result<File> {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    let root = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(format!("/proc/{pid}/root"))?;
    let relative = CString::new(path.trim_start_matches('/')).map_err(io::Error::other)?;
    // SAFETY: open_how is plain data; all-zero is its empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: the descriptor, the NUL-terminated path and `how` live across the call; the
    // size passed is `how`'s.
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
    let error = io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::ENOSYS) {
        return Err(error);
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_NOFOLLOW)
        .open(format!("/proc/{pid}/root/{}", relative.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

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
