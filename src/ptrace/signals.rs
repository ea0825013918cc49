//! memsup's own signal handling. Signals that must reach the tracer thread interrupt its
//! blocking waitpid (handlers are installed without SA_RESTART) and set a flag.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Signals memsup handles itself; the launched program gets them back at their defaults.
pub const HANDLED_BY_MEMSUP: [i32; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGALRM,
    // Asks for a smaps snapshot of every supervised process.
    libc::SIGUSR1,
];

/// The last signal memsup received and has not yet acted on (0 for none).
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(signal: i32) {
    PENDING.store(signal, Ordering::SeqCst);
}

/// Signals (bit N-1 for signal N) that were ignored when memsup started handling them: a
/// launched program inherits them ignored, as it would without memsup (nohup, `&` in scripts).
static ORIGINALLY_IGNORED: AtomicU64 = AtomicU64::new(0);

/// Installs the handlers. Call on the tracer thread before other threads are spawned, then
/// call `block_in_this_thread` in every other thread so only the tracer is interrupted.
pub fn install() {
    for signal in HANDLED_BY_MEMSUP {
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

/// Takes the pending signal, if any.
pub fn take_pending() -> Option<i32> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Arranges for SIGALRM after `seconds` (attach --duration).
pub fn alarm_after(seconds: u32) {
    // SAFETY: alarm has no memory effects.
    unsafe { libc::alarm(seconds) };
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
/// signals return to what memsup inherited; SIGPIPE, ignored by the Rust runtime before
/// `main`, returns to its default as `std::process::Command` does. Only raw system calls.
///
/// # Safety
/// Call only in the child between fork and exec.
pub unsafe fn restore_inherited_dispositions() {
    let ignored = ORIGINALLY_IGNORED.load(Ordering::SeqCst);
    for signal in HANDLED_BY_MEMSUP {
        let disposition = if ignored & (1 << (signal - 1)) != 0 {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        };
        libc::signal(signal, disposition);
    }
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
}
