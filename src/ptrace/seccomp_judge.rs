//! Whether memsup may run a system call in a tracee thread (`inject::remote_syscall`: the
//! scratch page, the hook engine's pages and rings, their removal at detach). The thread's
//! seccomp filters judge that call as if the program had made it, and a filter the program
//! installed may kill the process for it, send it a SIGSYS it never caused, or hand the
//! call to a supervisor. Filters memsup can read (PTRACE_SECCOMP_GET_FILTER, which needs
//! CAP_SYS_ADMIN) are run on the very call (`bpf`); filters it cannot read are trusted only
//! up to the number it expects: those memsup runs under itself (a container's, inherited by
//! what it launches) and, in run mode, its own mapping filter.

use std::sync::atomic::{AtomicBool, Ordering};

use super::bpf::{self, SeccompData};
use super::inject::RemoteSyscall;
use crate::error::{Error, Result};
use crate::proc::status::{read_status, Status};

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;
/// The kernel's bound on a thread's filters' total length (MAX_INSNS_PER_PATH).
const MAX_TOTAL_INSTRUCTIONS: usize = 32768;

/// memsup's launched program got memsup's mapping filter (`seccomp::install`).
static LAUNCHED_WITH_FILTER: AtomicBool = AtomicBool::new(false);

/// Counts memsup's own mapping filter among those it trusts in what it launches.
pub fn trust_launch_filter() {
    LAUNCHED_WITH_FILTER.store(true, Ordering::Relaxed);
}

/// What the strictest of a thread's filters does with a call, as far as memsup cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Allowed, logged, reported to a tracer, or failed with an errno: memsup sees the
    /// result, the program sees nothing.
    Harmless,
    /// Kills the thread or the process, raises SIGSYS, or waits for a supervisor.
    Harmful(&'static str),
}

/// The actions of a filter's return value (`SECCOMP_RET_ACTION_FULL`).
const ACTION: u32 = 0xffff_0000;
const KILL_PROCESS: u32 = 0x8000_0000;
const KILL_THREAD: u32 = 0x0000_0000;
const TRAP: u32 = 0x0003_0000;
const ERRNO: u32 = 0x0005_0000;
const USER_NOTIF: u32 = 0x7fc0_0000;
const TRACE: u32 = 0x7ff0_0000;
const LOG: u32 = 0x7ffc_0000;
const ALLOW: u32 = 0x7fff_0000;
/// `Seccomp` in /proc/PID/status.
const MODE_STRICT: u32 = 1;
const MODE_FILTER: u32 = 2;

/// The action of a filter's return value.
fn action(value: u32) -> Action {
    match value & ACTION {
        KILL_PROCESS => Action::Harmful("kill the process"),
        KILL_THREAD => Action::Harmful("kill the thread"),
        TRAP => Action::Harmful("raise SIGSYS"),
        USER_NOTIF => Action::Harmful("wait for a supervisor"),
        ERRNO | TRACE | LOG | ALLOW => Action::Harmless,
        // An action this kernel's successors may add: the kernel treats it as a kill.
        _ => Action::Harmful("kill the process"),
    }
}

/// The kernel's answer to a call over all of a thread's filters: the return value whose
/// action comes first (the lowest, as a signed number).
fn strictest(filters: &[Vec<libc::sock_filter>], data: &SeccompData) -> u32 {
    filters
        .iter()
        .map(|program| bpf::run(program, data))
        .min_by_key(|&value| (value & ACTION) as i32)
        .unwrap_or(ALLOW)
}

/// Refuses `call` (run at `syscall_address`) in stopped thread `tid` when its filters might
/// harm the program for it.
pub fn check(tid: i32, call: &RemoteSyscall, syscall_address: u64) -> Result<()> {
    let Ok(status) = read_status(tid) else {
        // Gone: the call fails on its own.
        return Ok(());
    };
    let data = SeccompData {
        number: call.number as u32,
        arch: AUDIT_ARCH_X86_64,
        instruction_pointer: syscall_address + 2,
        args: call.args,
    };
    // Filters are read only where there are some.
    let filters = match status.seccomp_mode {
        MODE_FILTER => read_filters(tid),
        _ => Ok(Vec::new()),
    };
    judge(&status, filters, trusted_count, &data).map_err(|reason| Error::SeccompForbids {
        tid,
        call: call_name(call.number),
        reason,
    })
}

/// Why a thread of `status`, whose filters are `filters` (or could not be read), must not
/// make the call `data`, if it must not; `trusted` gives how many unread filters memsup
/// trusts.
fn judge(
    status: &Status,
    filters: std::io::Result<Vec<Vec<libc::sock_filter>>>,
    trusted: impl FnOnce() -> u32,
    data: &SeccompData,
) -> std::result::Result<(), String> {
    match status.seccomp_mode {
        MODE_FILTER => {}
        // Only read, write, exit and sigreturn: anything else kills the process.
        MODE_STRICT => return Err("are strict mode's".to_string()),
        _ => return Ok(()),
    }
    match filters {
        Ok(filters) => match action(strictest(&filters, data)) {
            Action::Harmless => Ok(()),
            Action::Harmful(what) => Err(format!("would {what} for it")),
        },
        Err(error) => {
            // A kernel before 5.9 does not count them: at least one, so what memsup launched
            // under its own filter cannot be told from a program that added one (README).
            let filters = status.seccomp_filters.unwrap_or(1);
            let trusted = trusted();
            match filters <= trusted {
                true => Ok(()),
                false => Err(format!(
                    "are {filters}, memsup expects {trusted} and cannot read them ({error})"
                )),
            }
        }
    }
}

/// Filters memsup trusts unread: its own (the ones what it launches inherits from it) and
/// its mapping filter in what it launched.
fn trusted_count() -> u32 {
    let own = read_status(std::process::id() as i32)
        .ok()
        .and_then(|status| status.seccomp_filters)
        .unwrap_or(0);
    own + u32::from(LAUNCHED_WITH_FILTER.load(Ordering::Relaxed))
}

/// Every filter of stopped thread `tid`, or why memsup cannot read them: EACCES without
/// CAP_SYS_ADMIN or when memsup itself runs under seccomp, EINVAL on a kernel built without
/// CONFIG_CHECKPOINT_RESTORE.
fn read_filters(tid: i32) -> std::io::Result<Vec<Vec<libc::sock_filter>>> {
    let mut filters = Vec::new();
    let mut total = 0usize;
    loop {
        let index = filters.len();
        // SAFETY: a null buffer asks only for the filter's length.
        let length = unsafe {
            libc::ptrace(
                PTRACE_SECCOMP_GET_FILTER,
                tid,
                index as *mut libc::c_void,
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        if length < 0 {
            let error = std::io::Error::last_os_error();
            // ENOENT: past the last filter.
            return match error.raw_os_error() {
                Some(libc::ENOENT) if index > 0 => Ok(filters),
                _ => Err(error),
            };
        }
        total += length as usize;
        if length == 0 || total > MAX_TOTAL_INSTRUCTIONS {
            return Err(std::io::Error::other(
                "more instructions than the kernel allows",
            ));
        }
        let mut program = vec![
            libc::sock_filter {
                code: 0,
                jt: 0,
                jf: 0,
                k: 0
            };
            length as usize
        ];
        // SAFETY: the buffer holds `length` instructions, the count the kernel just gave.
        let copied = unsafe {
            libc::ptrace(
                PTRACE_SECCOMP_GET_FILTER,
                tid,
                index as *mut libc::c_void,
                program.as_mut_ptr() as *mut libc::c_void,
            )
        };
        if copied != length {
            return Err(std::io::Error::last_os_error());
        }
        filters.push(program);
    }
}

/// The name of a call memsup runs in tracees, for its messages.
fn call_name(number: u64) -> String {
    let name = match number as i64 {
        libc::SYS_mmap => "mmap",
        libc::SYS_munmap => "munmap",
        libc::SYS_memfd_create => "memfd_create",
        libc::SYS_ftruncate => "ftruncate",
        libc::SYS_madvise => "madvise",
        libc::SYS_close => "close",
        _ => return format!("system call {number}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ret(k: u32) -> Vec<libc::sock_filter> {
        vec![libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k,
        }]
    }

    fn data() -> SeccompData {
        SeccompData {
            number: libc::SYS_memfd_create as u32,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0,
            args: [0; 6],
        }
    }

    #[test]
    fn the_strictest_filter_decides_kill_process_first() {
        let allow = ret(ALLOW);
        let errno = ret(ERRNO | 1);
        let trace = ret(TRACE);
        let kill_process = ret(KILL_PROCESS);
        let trap = ret(TRAP);
        let filters = [allow.clone(), trace.clone(), errno.clone()];
        assert_eq!(strictest(&filters, &data()), ERRNO | 1);
        assert_eq!(action(strictest(&filters, &data())), Action::Harmless);
        let filters = [trap.clone(), kill_process, allow.clone()];
        assert_eq!(
            action(strictest(&filters, &data())),
            Action::Harmful("kill the process")
        );
        let filters = [errno, trap];
        assert_eq!(
            action(strictest(&filters, &data())),
            Action::Harmful("raise SIGSYS")
        );
        assert_eq!(action(strictest(&[], &data())), Action::Harmless);
    }

    #[test]
    fn every_action_is_sorted_harmless_or_harmful() {
        for (value, expected) in [
            (0x7fff_0000, Action::Harmless),
            (0x7ffc_0000, Action::Harmless),
            (0x7ff0_1234, Action::Harmless),
            (0x0005_000c, Action::Harmless),
            (0x7fc0_0000, Action::Harmful("wait for a supervisor")),
            (0x0003_0007, Action::Harmful("raise SIGSYS")),
            (0x0000_0000, Action::Harmful("kill the thread")),
            (0x8000_0000, Action::Harmful("kill the process")),
            (0x1234_0000, Action::Harmful("kill the process")),
        ] {
            assert_eq!(action(value), expected, "{value:#x}");
        }
    }

    fn status(mode: u32, filters: Option<u32>) -> Status {
        Status {
            seccomp_mode: mode,
            seccomp_filters: filters,
            ..Status::default()
        }
    }

    fn unreadable() -> std::io::Result<Vec<Vec<libc::sock_filter>>> {
        Err(std::io::Error::from_raw_os_error(libc::EACCES))
    }

    #[test]
    fn each_mode_and_reading_of_the_filters_is_judged() {
        let trusting = |count: u32| move || count;
        let call = data();
        // No filter: anything goes, the filters are not looked at.
        assert_eq!(
            judge(&status(0, Some(0)), unreadable(), trusting(0), &call),
            Ok(())
        );
        // Strict mode: nothing but read, write, exit and sigreturn.
        assert_eq!(
            judge(&status(1, Some(0)), Ok(Vec::new()), trusting(9), &call),
            Err("are strict mode's".to_string())
        );
        // Readable: their answer to the very call decides, whatever their number.
        let kill_process = vec![ret(KILL_PROCESS)];
        assert_eq!(
            judge(&status(2, Some(1)), Ok(kill_process), trusting(9), &call),
            Err("would kill the process for it".to_string())
        );
        let errno = vec![ret(ERRNO | 1), ret(TRACE)];
        assert_eq!(
            judge(&status(2, Some(5)), Ok(errno), trusting(0), &call),
            Ok(())
        );
        // Unreadable: as many as memsup expects, no more.
        assert_eq!(
            judge(&status(2, Some(2)), unreadable(), trusting(2), &call),
            Ok(())
        );
        assert_eq!(
            judge(&status(2, Some(3)), unreadable(), trusting(2), &call),
            Err(
                "are 3, memsup expects 2 and cannot read them (Permission denied (os error 13))"
                    .to_string()
            )
        );
        // Uncounted (before Linux 5.9): taken as one.
        assert_eq!(
            judge(&status(2, None), unreadable(), trusting(1), &call),
            Ok(())
        );
        assert_eq!(
            judge(&status(2, None), unreadable(), trusting(0), &call),
            Err(
                "are 1, memsup expects 0 and cannot read them (Permission denied (os error 13))"
                    .to_string()
            )
        );
    }
}
