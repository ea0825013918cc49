//! memsup's own signal handling. Signals that must reach the tracer thread interrupt its
//! blocking waitpid (handlers are installed without SA_RESTART) and set a flag.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// Signals memsup handles itself; the launched program gets them back at their defaults.
pub const HANDLED_BY_MEMSUP: [i32; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGALRM,
    // Asks for a smaps snapshot of every supervised process.
    libc::SIGUSR1,
    // Sent by memsup to its own tracer thread when another of its threads failed or left
    // it work (a rendezvous to serve).
    libc::SIGUSR2,
];

/// Signals memsup ignores: SIGXFSZ, so that a profile growing past memsup's own file-size
/// limit (RLIMIT_FSIZE) fails its write (EFBIG) instead of killing memsup, and with it a
/// launched program. The launched program gets them back as memsup inherited them.
const IGNORED_BY_MEMSUP: [i32; 1] = [libc::SIGXFSZ];

/// Signals that end an attach recording (bit N-1 for signal N).
const ENDING: u64 = 1 << (libc::SIGINT - 1)
    | 1 << (libc::SIGTERM - 1)
    | 1 << (libc::SIGHUP - 1)
    | 1 << (libc::SIGALRM - 1);

/// The thread that handles memsup's signals (set by `install`).
static TRACER_THREAD: AtomicI32 = AtomicI32::new(0);

/// A memsup thread failed (panicked): the tracer must detach and memsup exit with an error.
static FAILED: AtomicBool = AtomicBool::new(false);

/// The signals memsup received and has not yet acted on (bit N-1 for signal N): a set, so
/// that a SIGUSR1 arriving meanwhile does not wipe out a pending SIGINT or SIGTERM.
static PENDING: AtomicU64 = AtomicU64::new(0);

extern "C" fn note_signal(signal: i32) {
    PENDING.fetch_or(1 << (signal - 1), Ordering::SeqCst);
}

/// Signals (bit N-1 for signal N) that were ignored when memsup started handling them: a
/// launched program inherits them ignored, as it would without memsup (nohup, `&` in scripts).
static ORIGINALLY_IGNORED: AtomicU64 = AtomicU64::new(0);

/// Installs the handlers, once: `main` calls it first thing for `run` and `attach`, so a
/// signal that arrives during setup is kept for the tracer loop like a later one. Call on the
/// tracer thread before other threads are spawned, then call `block_in_this_thread` in every
/// other thread so only the tracer is interrupted.
pub fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(install_handlers);
}

fn install_handlers() {
    // SAFETY: gettid has no memory effects.
    let tracer_thread = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    TRACER_THREAD.store(tracer_thread, Ordering::SeqCst);
    for signal in HANDLED_BY_MEMSUP.into_iter().chain(IGNORED_BY_MEMSUP) {
        // SAFETY: queries the current disposition into a local.
        let ignored = unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut current);
            current.sa_sigaction == libc::SIG_IGN
        };
        if ignored {
            ORIGINALLY_IGNORED.fetch_or(1 << (signal - 1), Ordering::SeqCst);
        }
    }
    for signal in HANDLED_BY_MEMSUP {
        // SAFETY: installs an async-signal-safe handler that only stores an atomic.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as extern "C" fn(i32) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = 0; // no SA_RESTART: waitpid returns EINTR
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    for signal in IGNORED_BY_MEMSUP {
        // SAFETY: changes this process's disposition of one signal.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
}

/// Blocks memsup's handled signals in the calling thread.
pub fn block_in_this_thread() {
    // SAFETY: manipulates the calling thread's signal mask only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in HANDLED_BY_MEMSUP {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Takes a pending signal, if any: those that end or pass on the recording before SIGUSR1,
/// which only asks for a snapshot.
pub fn take_pending() -> Option<i32> {
    let snapshot_bit = 1u64 << (libc::SIGUSR1 - 1);
    loop {
        let pending = PENDING.load(Ordering::SeqCst);
        if pending == 0 {
            return None;
        }
        let others = pending & !snapshot_bit;
        let bit = if others != 0 {
            others & others.wrapping_neg()
        } else {
            snapshot_bit
        };
        if PENDING
            .compare_exchange(pending, pending & !bit, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Some(bit.trailing_zeros() as i32 + 1);
        }
    }
}

/// A pending SIGINT, SIGTERM, SIGHUP or SIGQUIT (left pending): before a launch, each means
/// the user wants memsup to stop rather than start the program.
pub fn pending_interruption() -> Option<i32> {
    let pending = PENDING.load(Ordering::SeqCst);
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT]
        .into_iter()
        .find(|signal| pending & (1 << (signal - 1)) != 0)
}

/// Whether a signal that ends the recording is pending (it stays pending), or a memsup
/// thread failed.
pub fn ending_requested() -> bool {
    PENDING.load(Ordering::SeqCst) & ENDING != 0 || failure_reported()
}

/// Records that a memsup thread failed and interrupts the tracer thread's wait so that it
/// detaches. Async-signal-safe (called from the panic hook).
pub fn report_failure() {
    FAILED.store(true, Ordering::SeqCst);
    let tracer_thread = TRACER_THREAD.load(Ordering::SeqCst);
    // SAFETY: gettid has no memory effects.
    let this_thread = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    if tracer_thread != 0 && tracer_thread != this_thread {
        // SAFETY: tgkill has no memory effects; the tracer thread handles SIGUSR2.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                tracer_thread,
                libc::SIGUSR2,
            )
        };
    }
}

/// Interrupts the tracer thread's wait (SIGUSR2, no failure reported): another memsup
/// thread left it work. Async-signal-safe.
pub fn wake_tracer() {
    let tracer_thread = TRACER_THREAD.load(Ordering::SeqCst);
    if tracer_thread != 0 {
        // SAFETY: tgkill has no memory effects; the tracer thread handles SIGUSR2.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                tracer_thread,
                libc::SIGUSR2,
            )
        };
    }
}

/// Whether a signal waits for the tracer loop: any but SIGUSR2, the wake itself, which
/// counts only while it carries a failure not yet taken (`report_failure`'s).
pub fn work_pending() -> bool {
    let wake = 1 << (libc::SIGUSR2 - 1);
    let pending = PENDING.load(Ordering::SeqCst);
    pending & !wake != 0 || (pending & wake != 0 && failure_reported())
}

/// Whether a memsup thread failed.
pub fn failure_reported() -> bool {
    FAILED.load(Ordering::SeqCst)
}

/// Arranges for SIGALRM after `duration` (attach --duration), to the microsecond: alarm(2)
/// counts whole seconds only. A zero duration would disarm the timer, so it is at least 1 µs.
pub fn alarm_after(duration: std::time::Duration) {
    let duration = duration.max(std::time::Duration::from_micros(1));
    let timer = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: libc::time_t::try_from(duration.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_usec: libc::suseconds_t::from(duration.subsec_micros() as i32),
        },
    };
    // SAFETY: setitimer reads the local timer and writes nothing (null old value). It fails
    // only on a bad pointer or microseconds out of range, neither possible here.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
}

/// Unblocks memsup's handled signals in the calling thread (the tracer thread).
pub fn unblock_in_this_thread() {
    // SAFETY: manipulates the calling thread's signal mask only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in HANDLED_BY_MEMSUP {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// In a forked child before exec: gives back the dispositions memsup changed. memsup's own
/// signals (handled or ignored) return to what memsup inherited; SIGPIPE, ignored by the Rust runtime before
/// `main`, returns to its default as `std::process::Command` does. Only raw system calls.
///
/// # Safety
/// Call only in the child between fork and exec.
pub unsafe fn restore_inherited_dispositions() {
    let ignored = ORIGINALLY_IGNORED.load(Ordering::SeqCst);
    for signal in HANDLED_BY_MEMSUP.into_iter().chain(IGNORED_BY_MEMSUP) {
        let disposition = if ignored & (1 << (signal - 1)) != 0 {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        };
        libc::signal(signal, disposition);
    }
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_request_does_not_hide_a_signal_that_ends_the_recording() {
        note_signal(libc::SIGUSR1);
        note_signal(libc::SIGTERM);
        note_signal(libc::SIGUSR1);
        note_signal(libc::SIGINT);
        assert_eq!(take_pending(), Some(libc::SIGINT));
        assert_eq!(take_pending(), Some(libc::SIGTERM));
        assert_eq!(take_pending(), Some(libc::SIGUSR1));
        assert_eq!(take_pending(), None);
    }
}
